"""The `vmsched` command line."""
import gc

# Loading the command line (the standard modules it uses, typer, the command modules)
# makes tens of thousands of objects and no garbage: the cyclic collector, which would
# walk them over and over while they load, waits until the module is loaded (the end of
# this file).
gc.disable()

import copy
import json
import math
import re
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_TERMINATED, Interrupted, UserError, fail, shorten
from .overrides import parse_duration_ns, parse_window_ns
from .terminal import make_console

# The command line's own options and the commands of this module; `app` is the whole
# command line, with the commands the other modules register (`command_line`).
# Help texts are printed as written: rich markup would read "[variants]" as a style tag.
commands = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                       context_settings={"help_option_names": ["-h", "--help"]},
                       help="vmsched: CPU scheduling in virtualized clouds, simulated and probed.")
# The modules holding the other commands, in the order their commands are listed, and
# the commands each registers.
COMMAND_MODULES = {"plan_cmd": ("plan",), "probe_cmd": ("probe",), "real_cmd": ("real",),
                   "sweep_cmd": ("sweep", "reproduce")}

console = make_console()
status = make_console(stderr=True)
# The engine clips trace rows to the window; this end means "until the run ends".
WHOLE_RUN = (0, 2**62)
# A run estimated at this many events or more (tens of seconds at the engine's few
# million events per second, see `vmsched bench`) prints its estimated size first.
LONG_RUN_EVENTS = 1e8

Scenario = Annotated[str, typer.Argument(help="Built-in scenario name or path to a .toml file.")]
SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override a scenario field: dotted.key=value (value parsed as TOML). Repeatable.")]
SeedOption = Annotated[Optional[int], typer.Option(help="Random seed, 0 to 2^64-1 (default: the scenario's).")]
DurationOption = Annotated[Optional[str], typer.Option(help="Simulated time with its unit: 2s, 500ms, 250us, 100ns.")]
CheckInvariantsOption = Annotated[bool, typer.Option(
    "--check-invariants", help="Check the engine's invariants after every event (slow).")]
ForceOption = Annotated[bool, typer.Option("--force", help="Replace the earlier run at --out.")]
AllowLargeOption = Annotated[bool, typer.Option(
    "--allow-large", help="Run even when the estimated size (events, memory, trace MB) is beyond the limits.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on standard output.")]


def _version(value: bool) -> None:
    if value:
        from . import __version__
        print(f"vmsched {__version__}")
        raise typer.Exit()


@commands.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False) -> None:
    """vmsched: CPU scheduling in virtualized clouds, simulated and probed."""


class LateProgress:
    """A progress bar that appears only once a run has taken a second of wall time, so
    short runs print nothing but their result."""

    def __init__(self, label: str, delay_s: float = 1.0):
        self.label = label
        self.started = time.monotonic()
        self.delay_s = delay_s
        self.bar: Progress | None = None
        self.task = None

    def __call__(self, now_ns: int, duration_ns: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < self.delay_s:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
            # Redrawn from these callbacks only, so the bar moves with simulated time.
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn(),
                                console=status.real, auto_refresh=False, transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=duration_ns)
        self.bar.update(self.task, completed=now_ns)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _user_input(action):
    """Run `action`, turning an input problem into `error: ...` and exit 2."""
    try:
        return action()
    except UserError as err:
        raise fail(str(err)) from err


@commands.command()
def run(
    scenario: Scenario = "default",
    seed: SeedOption = None,
    out: Annotated[Optional[str], typer.Option(help="Output directory (default runs/SCENARIO-SEED).")] = None,
    force: ForceOption = False,
    set_: SetOption = None,
    variant: Annotated[Optional[str], typer.Option(
        help="Run one of the scenario's [variants.NAME] (or NAME=key=value,...); --set applies after it.")] = None,
    duration: DurationOption = None,
    check_invariants: CheckInvariantsOption = False,
    record: Annotated[bool, typer.Option(help="Record per-request, per-interval and per-task tables (Parquet).")] = True,
    trace: Annotated[bool, typer.Option(help="Write trace.json for the Perfetto UI.")] = False,
    trace_window: Annotated[Optional[str], typer.Option(help="Trace only START:END, e.g. 0.1s:0.3s (implies --trace).")] = None,
    allow_large: AllowLargeOption = False,
    trace_limit_mb: Annotated[float, typer.Option(help="Largest trace written without --allow-large.")] = 256,
    report: Annotated[bool, typer.Option(help="Write report.html.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Run a scenario, print its summary and write DIR/summary.json (plus tables, trace, report)."""
    from . import api
    from .rundir import OutputDir
    from .summary_table import print_summary

    window = _window(trace_window, "--trace-window") if trace_window else None
    if report and not record:
        raise fail("--report needs the recorded tables; drop --no-record")
    if not (math.isfinite(trace_limit_mb) and trace_limit_mb > 0):
        raise fail(f"--trace-limit-mb {trace_limit_mb:g}: must be a positive number of MB")
    duration_ns = _duration(duration) if duration else None
    source = _user_input(lambda: api.load_scenario(scenario))
    label, overrides = "", []
    if variant is not None:
        from .sweeps import variant_overrides  # imported here: the sweep module brings polars with it
        label, overrides = _user_input(lambda: variant_overrides(source, api.normalize(source), variant,
                                                                 "--variant"))
    overrides = [*overrides, *(set_ or [])]
    config = _user_input(lambda: api.normalize(source, overrides))
    _user_input(lambda: api.check_seed(seed))
    run_ns = duration_ns or round(config["duration_ms"] * 1e6)
    if window:
        _check_window_starts_in_run(window, trace_window, "--trace-window", run_ns)
    name = f"{config['name']}-{label}" if label else config["name"]
    out_dir = out if out is not None else str(_default_out(name, seed if seed is not None else config["seed"]))
    output = _user_input(lambda: OutputDir(out_dir, force))
    size = _user_input(lambda: api.estimate(source, overrides, duration_ns, record))
    if size.events >= LONG_RUN_EVENTS and (size.refusal is None or allow_large):
        status.print(f"a long run: about {size.events:.1e} events"
                     + (f", {size.output_bytes / 2**20:,.0f} MB of Parquet tables" if record else ""))
    trace_refusal = None
    with output as staging:
        progress = LateProgress(scenario)
        try:
            result = api.run(source, seed=seed, set=overrides, duration=duration_ns, validate=check_invariants,
                             record=record, trace_window=window or (WHOLE_RUN if trace else None),
                             progress=progress, allow_large=allow_large, stream_to=staging if record else None,
                             config=config)
        except UserError as err:
            raise fail(str(err)) from err
        except RuntimeError as err:  # an invariant violated in validation mode: a bug
            raise fail(str(err), code=EXIT_INTERNAL) from err
        finally:
            progress.close()
        summary = result.summary
        if not as_json:
            print_summary(summary, console)
        result.save(staging, tables=api.RECORD_TABLES if record else ())
        if trace or window:
            trace_refusal = _write_trace(result, staging, Path(out_dir), window, allow_large, trace_limit_mb)
        if report:
            from .report import write_report
            write_report(staging)
    written = ["summary.json"] + (["Parquet tables"] if record else []) + (["report.html"] if report else [])
    if (trace or window) and trace_refusal is None:
        written.append("trace.json (open it in ui.perfetto.dev)")
    status.print(f"wrote {out_dir}: {', '.join(written)}")
    if as_json:
        print(json.dumps({"out": out_dir, "summary": summary}, indent=2))
    if trace_refusal:
        raise fail(trace_refusal)


def _default_out(name: str, seed: int) -> Path:
    """runs/NAME-SEED, with the scenario name reduced to a safe directory name."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).lstrip(".") or "scenario"
    return Path("runs") / f"{safe}-{seed}"


def _option_value(option: str, parse):
    """`parse()` of an option's value; a bad value is `error: OPTION: reason`, exit 2."""
    try:
        return parse()
    except UserError as err:
        raise fail(f"{option}: {err}") from err


def _duration(text: str) -> int:
    """--duration in ns: a positive simulated time with its unit."""
    duration_ns = _option_value("--duration", lambda: parse_duration_ns(text))
    if duration_ns == 0:
        raise fail(f"--duration: {text!r}: a run needs a positive simulated time")
    return duration_ns


def _window(text: str, option: str) -> tuple[int, int]:
    return _option_value(option, lambda: parse_window_ns(text))


def _check_window_starts_in_run(window: tuple[int, int], text: str, option: str, run_ns: int) -> None:
    if window[0] >= run_ns:
        raise fail(f"{option} {text}: starts after the run's end at {run_ns / 1e6:g} ms")


def _write_trace(result, out_dir: Path, shown_dir: Path, window: tuple[int, int] | None,
                 allow_large: bool, limit_mb: float) -> str | None:
    """trace.json plus the trace tables as Parquet into `out_dir`, after a size check: a
    trace past the limit is left out unless allowed, and the reason returned (the run
    itself is still written)."""
    from . import api
    from .atomic import write_atomic
    from .tables import write_tables
    from .trace import TraceBuilder

    summary = result.summary
    frames = result.recorded_tables()
    start, end = window or (0, summary["duration_ns"])
    builder = TraceBuilder(summary, frames, (start, min(end, summary["duration_ns"])))
    estimate = builder.estimated_bytes()
    status.print(f"trace: about {builder.event_count():,} events, {estimate / 2**20:.1f} MB")
    if estimate > limit_mb * 2**20 and not allow_large:
        return (f"{shown_dir / 'trace.json'}: a trace of about {estimate / 2**20:.0f} MB exceeds "
                f"{limit_mb:g} MB, not written; narrow it with --trace-window START:END or pass --allow-large")
    write_tables({name: frames[name] for name in api.TRACE_TABLES if name in frames}, out_dir)
    write_atomic(out_dir / "trace.json", builder.to_json())
    return None


@commands.command(name="validate")
def validate_cmd(scenario: Scenario, set_: SetOption = None, as_json: Annotated[bool, typer.Option(
        "--json", help="Print the normalized scenario (defaults filled in) as JSON.")] = False) -> None:
    """Check a scenario and its [variants] against the schema (with any --set overrides applied)."""
    from . import api
    source = _user_input(lambda: api.load_scenario(scenario))
    config = _user_input(lambda: api.normalize(source, set_ or []))
    if as_json:
        print(json.dumps(config, indent=2))
    else:
        console.print(f"ok: {source.source}: scenario {config.get('name', scenario)!r} is valid")


@commands.command()
def scenarios(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of {name, description}.")] = False,
    show: Annotated[Optional[str], typer.Option(help="Print the TOML of the named built-in.")] = None,
) -> None:
    """List the built-in scenarios."""
    from rich.table import Table

    from . import api
    builtins = api.scenarios()
    if show is not None:
        match = next((info for info in builtins if info.name == show), None)
        if match is None:
            raise fail(f"{show}: unknown scenario; built-ins are {', '.join(i.name for i in builtins)}")
        print(match.toml, end="" if match.toml.endswith("\n") else "\n")
    elif as_json:
        print(json.dumps([{"name": i.name, "description": i.description} for i in builtins], indent=2))
    else:
        table = Table("name", "description")
        for info in builtins:
            table.add_row(info.name, info.description)
        console.print(table)


@commands.command()
def policies(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of {name, level, description, params}.")] = False,
) -> None:
    """List the host and guest scheduling policies a scenario can name."""
    from rich.table import Table

    from . import _native
    listed = json.loads(_native.policies())
    if as_json:
        print(json.dumps(listed, indent=2))
        return
    table = Table("name", "level", "description", "parameters")
    for p in listed:
        table.add_row(p["name"], p["level"], p["description"], ", ".join(p["params"]) or "-")
    console.print(table)


@commands.command()
def kernels(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of {name, description, sets}.")] = False,
) -> None:
    """List the kernel profiles (`host.kernel`, `vm.guest.kernel`) and what each sets."""
    from rich.table import Table

    from . import _native
    listed = json.loads(_native.kernels())
    if as_json:
        print(json.dumps(listed, indent=2))
        return
    table = Table("name", "description", "sets")
    for k in listed:
        sets = [f"{level}.{key}={json.dumps(value)}" for level, kv in k["sets"].items() for key, value in kv.items()]
        table.add_row(k["name"], k["description"], "\n".join(sets) or "-")
    console.print(table)


@commands.command(name="report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A directory written by `vmsched run`.")],
    window: Annotated[Optional[str], typer.Option(help="vCPU timeline window START:END (re-runs the scenario).")] = None,
    vm: Annotated[Optional[str], typer.Option(help="VM whose guest task lanes are drawn (default: the first).")] = None,
) -> None:
    """Write RUN_DIR/report.html: one self-contained page with the run's plots."""
    from .report import write_report
    if not (run_dir / "summary.json").is_file():
        raise fail(f"{run_dir}: no summary.json; pass a directory written by `vmsched run`")
    chosen = _window(window, "--window") if window else None
    status.print(f"wrote {_user_input(lambda: write_report(run_dir, window=chosen, task_vm=vm))}")


@commands.command(name="compare")
def compare_cmd(
    scenario: Scenario = "default",
    variant: Annotated[Optional[list[str]], typer.Option(
        help="NAME=key=value,key=value (repeatable; default: the scenario's [variants.NAME] tables).")] = None,
    seed: SeedOption = None,
    set_: SetOption = None,
    duration: DurationOption = None,
    out: Annotated[Optional[str], typer.Option(help="Output directory (default runs/compare-SCENARIO-SEED).")] = None,
    force: ForceOption = False,
    check_invariants: CheckInvariantsOption = False,
    allow_large: AllowLargeOption = False,
    window: Annotated[str, typer.Option(help="Window of the vCPU timelines in the report.")] = "0ms:50ms",
    as_json: JsonOption = False,
    seeds: Annotated[Optional[str], typer.Option(
        help="Run every variant on N seeds (from --seed on) or on a list such as 1,2,3, and report the mean "
             "and 95% CI of each metric, difference and ratio.")] = None,
    workers: Annotated[Optional[int], typer.Option(
        help="Worker processes for the runs of --seeds (default: one per CPU).")] = None,
) -> None:
    """Run one scenario and seed under each variant; print metrics with ratios to the first."""
    from . import api
    from .comparison import (parse_seeds, resolve_variants, rich_tables, run_comparison, run_seed_comparison,
                          seed_rich_tables, write_comparison)
    from .rundir import OutputDir
    chosen_window = _window(window, "--window")
    duration_ns = _duration(duration) if duration else None
    source = _user_input(lambda: api.load_scenario(scenario))
    config = _user_input(lambda: api.normalize(source, set_ or []))
    _check_window_starts_in_run(chosen_window, window, "--window",
                                duration_ns or round(config["duration_ms"] * 1e6))
    _user_input(lambda: api.check_seed(seed))
    _user_input(lambda: resolve_variants(source, config, variant or []))
    seed_list = _user_input(lambda: parse_seeds(seeds, seed if seed is not None else config["seed"])) if seeds else None
    if seed_list:
        seed = seed_list[0]
    if workers is not None and workers < 1:
        raise fail(f"--workers: {workers} must be at least 1")
    out_dir = out if out is not None else str(
        _default_out(f"compare-{config['name']}", seed if seed is not None else config["seed"]))
    output = _user_input(lambda: OutputDir(out_dir, force))
    with output as staging:
        comparison = _user_input(lambda: run_comparison(
            source, variant or [], seed=seed, set=set_ or [], duration=duration_ns, validate=check_invariants,
            trace_window=chosen_window, allow_large=allow_large,
            on_start=lambda v: status.print(f"running variant {v.name}")))
        across_seeds = None
        if seed_list:
            status.print(f"running the other seeds: {', '.join(map(str, seed_list[1:]))}")
            across_seeds = _user_input(lambda: run_seed_comparison(
                source, seeds=seed_list, set=set_ or [], duration=duration_ns, store_dir=staging / "seeds",
                first=comparison, workers=workers))
        if not as_json:
            for table in rich_tables(comparison):
                console.print(table)
            if across_seeds:
                for table in seed_rich_tables(across_seeds):
                    console.print(table)
        write_comparison(comparison, staging, across_seeds)
    status.print(f"wrote {Path(out_dir) / 'report.html'}")
    if as_json:
        document = {"out": out_dir, "metrics": comparison.frame.to_dicts()}
        if across_seeds:
            document |= {"seeds": across_seeds.seeds, "across_seeds": across_seeds.frame.to_dicts()}
        print(json.dumps(document, indent=2))


@commands.command()
def bench(
    quick: Annotated[bool, typer.Option(help="Short runs (for tests); figures are not representative.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    repeat: Annotated[int, typer.Option(help="Runs per measurement, each in a fresh process; the median is reported.")] = 3,
    peer: Annotated[bool, typer.Option(
        "--peer", help="Also run the peer series: one two-level model on vmsched and on tailtamer, three sizes "
                       "(skipped when tailtamer is not importable).")] = False,
    peer_path: Annotated[Optional[str], typer.Option(
        help="A tailtamer checkout for --peer (default: $TAILTAMER_DIR, else an installed tailtamer).")] = None,
) -> None:
    """Measure the engine's speed and memory, and compare it with a SimPy model of bench-simpy-rr
    (needs the bench extra: pip install 'vmsched[bench]')."""
    from .bench import print_bench, run_bench
    from .peer import tailtamer_path_from_env
    figures = _user_input(lambda: run_bench(quick=quick, repeat=repeat,
                                            on_step=None if as_json else status.print, peer=peer,
                                            peer_path=peer_path or tailtamer_path_from_env()))
    if as_json:
        print(json.dumps(figures, indent=2))
    else:
        print_bench(figures, console)


def command_line(args: list[str]) -> typer.Typer:
    """The command line that `args` (the arguments after the program's name) reach: where
    the first names a command, that command alone, the other modules neither imported
    nor their commands built (typer makes every command's parameters from its signature
    each time the command line starts: for all 14 commands, about 30 ms of a short run's
    start-up); otherwise every command (help, --version, a name to correct)."""
    from importlib import import_module

    from typer.main import get_command_name

    app = copy.copy(commands)
    app.registered_commands, app.registered_groups = [], []
    named = args[0] if args else None
    own = [info for info in commands.registered_commands
           if (info.name or get_command_name(info.callback.__name__)) == named]
    if own:
        app.registered_commands += own
        return app
    modules = [module for module, names in COMMAND_MODULES.items() if named in names]
    for module in modules or COMMAND_MODULES:
        import_module(f".{module}", __package__).register(app)
    if not modules:
        app.registered_commands += commands.registered_commands
    return app


def __getattr__(name: str):
    # `app`, the whole command line (for typer's test runner and scripts), made on first use.
    if name == "app":
        global app
        app = command_line([])
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _interrupt(signum, frame):
    raise Interrupted(signum=signum)


def main() -> None:
    """Exit codes: 0 ok, 2 input problem, 3 plan verification failed, 4 internal error,
    130 interrupted (Ctrl-C), 143 terminated (SIGTERM) (see docs/cli.md)."""
    # What is loaded by now (the modules of the command line and of typer) lives until
    # the process ends: frozen, the cyclic collector no longer walks it at each of its
    # collections during the command, nor in the full collection at the interpreter's
    # exit. With the pause while loading, 12% of `vmsched --help`'s instructions.
    gc.freeze()
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        command_line(sys.argv[1:])()
    except Interrupted as stop:
        # Output directories are discarded on the way out; a sweep keeps its finished runs.
        terminated = stop.signum == signal.SIGTERM
        print(f"error: {'terminated' if terminated else 'interrupted'}; {str(stop) or 'nothing was written'}",
              file=sys.stderr)
        sys.exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)
    except Exception as err:  # a bug: one line, and the traceback only on request
        import os
        import traceback
        where = traceback.extract_tb(err.__traceback__)[-1]
        print(f"internal error: {type(err).__name__}: {shorten(str(err))} (at {Path(where.filename).name}:{where.lineno}; "
              "set VMSCHED_TRACEBACK=1 for the traceback)", file=sys.stderr)
        if os.environ.get("VMSCHED_TRACEBACK"):
            traceback.print_exc()
        sys.exit(EXIT_INTERNAL)


gc.enable()

if __name__ == "__main__":
    main()
