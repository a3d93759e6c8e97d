"""The `vmsched` command line."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from . import plan_cmd, probe_cmd, sweep_cmd
from .errors import UserError, fail
from .overrides import parse_duration_ns, parse_window_ns

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="vmsched: CPU scheduling in virtualized clouds, simulated and probed.")
plan_cmd.register(app)
probe_cmd.register(app)
sweep_cmd.register(app)

console = Console()
status = Console(stderr=True)
# The engine clips trace rows to the window; this end means "until the run ends".
WHOLE_RUN = (0, 2**62)

Scenario = Annotated[str, typer.Argument(help="Built-in scenario name or path to a .toml file.")]
SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override a scenario field: dotted.key=value (value parsed as TOML). Repeatable.")]
SeedOption = Annotated[Optional[int], typer.Option(help="Random seed (default: the scenario's).")]
DurationOption = Annotated[Optional[str], typer.Option(help="Simulated time: 2s, 500ms, 250us or N ns.")]


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
            # Redrawn from these callbacks only, so the bar moves with simulated time.
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn(),
                                console=status, auto_refresh=False, transient=True)
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


@app.command()
def run(
    scenario: Scenario = "default",
    seed: SeedOption = None,
    out: Annotated[Optional[Path], typer.Option(help="Output directory (default runs/SCENARIO-SEED).")] = None,
    set_: SetOption = None,
    duration: DurationOption = None,
    validate: Annotated[bool, typer.Option(help="Check the engine's invariants after every event (slow).")] = False,
    record: Annotated[bool, typer.Option(help="Record per-request, per-interval and per-task tables (Parquet).")] = True,
    trace: Annotated[bool, typer.Option(help="Write trace.json for the Perfetto UI.")] = False,
    trace_window: Annotated[Optional[str], typer.Option(help="Trace only START:END, e.g. 0.1s:0.3s (implies --trace).")] = None,
    force: Annotated[bool, typer.Option(help="Write the trace even beyond the size limit.")] = False,
    trace_limit_mb: Annotated[float, typer.Option(help="Largest trace written without --force.")] = 256,
    report: Annotated[bool, typer.Option(help="Write report.html.")] = False,
) -> None:
    """Run a scenario, print its summary and write DIR/summary.json (plus tables, trace, report)."""
    from . import api
    from .summary_table import print_summary

    overrides = set_ or []
    window = _window(trace_window) if trace_window else None
    if report and not record:
        raise fail("--report needs the recorded tables; drop --no-record")
    duration_ns = _user_input(lambda: parse_duration_ns(duration)) if duration else None
    source = _user_input(lambda: api.load_scenario(scenario))
    progress = LateProgress(scenario)
    try:
        result = api.run(source, seed=seed, set=overrides, duration=duration_ns, validate=validate,
                         record=record, trace_window=window or (WHOLE_RUN if trace else None),
                         progress=progress)
    except UserError as err:
        raise fail(str(err)) from err
    except RuntimeError as err:  # an invariant violated in validation mode
        raise fail(str(err), code=1) from err
    finally:
        progress.close()

    summary = result.summary
    out_dir = out or Path("runs") / f"{summary['scenario']}-{summary['seed']}"
    print_summary(summary, console)
    result.save(out_dir, tables=api.RECORD_TABLES)
    status.print(f"wrote {out_dir / 'summary.json'}" + (" and Parquet tables" if record else ""))
    if trace or window:
        _write_trace(result, out_dir, window, force, trace_limit_mb)
    if report:
        from .report import write_report
        status.print(f"wrote {write_report(out_dir)}")


def _window(text: str) -> tuple[int, int]:
    return _user_input(lambda: parse_window_ns(text))


def _write_trace(result, out_dir: Path, window: tuple[int, int] | None, force: bool,
                 limit_mb: float) -> None:
    """trace.json plus the trace tables as Parquet, after a size check: a trace past the
    limit is refused unless forced (the summary and tables are already written)."""
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
    if estimate > limit_mb * 2**20 and not force:
        raise fail(f"{out_dir / 'trace.json'}: a trace of about {estimate / 2**20:.0f} MB exceeds "
                   f"{limit_mb:g} MB; narrow it with --trace-window START:END or pass --force")
    write_tables({name: frames[name] for name in api.TRACE_TABLES if name in frames}, out_dir)
    write_atomic(out_dir / "trace.json", builder.to_json())
    status.print(f"wrote {out_dir / 'trace.json'} (open it in ui.perfetto.dev)")


@app.command(name="validate")
def validate_cmd(scenario: Scenario, set_: SetOption = None) -> None:
    """Check a scenario against the schema (with any --set overrides applied)."""
    from . import api
    source = _user_input(lambda: api.load_scenario(scenario))
    config = _user_input(lambda: api.normalize(source, set_ or []))
    console.print(f"ok: {source.source}: scenario {config.get('name', scenario)!r} is valid")


@app.command()
def scenarios(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of {name, description}.")] = False,
    show: Annotated[Optional[str], typer.Option(help="Print the TOML of the named built-in.")] = None,
) -> None:
    """List the built-in scenarios."""
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


@app.command()
def policies(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of {name, level, description, params}.")] = False,
) -> None:
    """List the host and guest scheduling policies a scenario can name."""
    from . import _native
    listed = json.loads(_native.policies())
    if as_json:
        print(json.dumps(listed, indent=2))
        return
    table = Table("name", "level", "description", "parameters")
    for p in listed:
        table.add_row(p["name"], p["level"], p["description"], ", ".join(p["params"]) or "-")
    console.print(table)


@app.command()
def kernels(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of {name, description, sets}.")] = False,
) -> None:
    """List the kernel profiles (`host.kernel`, `vm.guest.kernel`) and what each sets."""
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


@app.command(name="report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A directory written by `vmsched run`.")],
    window: Annotated[Optional[str], typer.Option(help="vCPU timeline window START:END (re-runs the scenario).")] = None,
) -> None:
    """Write RUN_DIR/report.html: one self-contained page with the run's plots."""
    from .report import write_report
    if not (run_dir / "summary.json").is_file():
        raise fail(f"{run_dir}: no summary.json; pass a directory written by `vmsched run`")
    chosen = _window(window) if window else None
    status.print(f"wrote {_user_input(lambda: write_report(run_dir, window=chosen))}")


@app.command(name="compare")
def compare_cmd(
    scenario: Scenario = "default",
    variant: Annotated[Optional[list[str]], typer.Option(
        help="NAME=key=value,key=value (repeatable; default: the scenario's [variants]).")] = None,
    seed: SeedOption = None,
    set_: SetOption = None,
    duration: DurationOption = None,
    out: Annotated[Optional[Path], typer.Option(help="Output directory (default runs/compare-SCENARIO-SEED).")] = None,
    validate: Annotated[bool, typer.Option(help="Check the engine's invariants after every event (slow).")] = False,
    timeline: Annotated[str, typer.Option(help="Window of the vCPU timelines in the report.")] = "0:50ms",
) -> None:
    """Run one scenario and seed under each variant; print metrics with ratios to the first."""
    from .compare import rich_table, run_comparison, write_comparison
    window = _window(timeline)
    comparison = _user_input(lambda: run_comparison(
        scenario, variant or [], seed=seed, set=set_ or [], duration=duration, validate=validate,
        trace_window=window, on_start=lambda v: status.print(f"running variant {v.name}")))
    console.print(rich_table(comparison))
    first = comparison.results[0].summary
    out_dir = out or Path("runs") / f"compare-{first['scenario']}-{first['seed']}"
    status.print(f"wrote {write_comparison(comparison, out_dir)}")


@app.command()
def bench(
    quick: Annotated[bool, typer.Option(help="Short runs (for tests); figures are not representative.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    simpy: Annotated[Optional[Path], typer.Option(help="SimPy baseline script (default ../shared/bench/simpy_baseline.py).")] = None,
    repeat: Annotated[int, typer.Option(help="Runs per measurement, each in a fresh process; the median is reported.")] = 3,
) -> None:
    """Measure the engine's speed and memory, and compare it with the SimPy baseline model."""
    from .bench import print_bench, run_bench
    figures = _user_input(lambda: run_bench(quick=quick, simpy_script=simpy, repeat=repeat,
                                            on_step=None if as_json else status.print))
    if as_json:
        print(json.dumps(figures, indent=2))
    else:
        print_bench(figures, console)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
