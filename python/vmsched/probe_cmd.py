"""`vmsched probe`: vSched's vProbers (vcap, vact, vtop) on the Linux machine it
runs on, with JSON output, a watch mode, a benchmark and the opt-in,
reversible RWC cpuset action. See docs/probe.md."""
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from .atomic import write_atomic
from .errors import fail
from .terminal import make_console, styled

DEFAULT_RWC_STATE_DIR = Path("/run/vmsched/rwc")


def _native():
    from . import _native as native

    return native


def _config(**options) -> str:
    return json.dumps({k: v for k, v in options.items() if v is not None})


def _state_file(state_dir: Path, cgroup: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", cgroup.strip("/")) or "root"
    return state_dir / f"{slug}.json"


def _print_table(report: dict) -> None:
    from rich.table import Table
    from rich.text import Text

    console = make_console()
    table = Table(title="vCPUs")
    for column in ("cpu", "capacity", "share", "inactive avg (us)", "active avg (us)", "preemptions", "steal check"):
        table.add_column(column, justify="right")
    for cpu in report["cpus"]:
        key = str(cpu)
        cap = report["capacity"].get(key)
        detail = report["capacity_detail"].get(key, {})
        lat = report["latency"].get(key, {})
        table.add_row(
            key,
            f"{cap:.0f}" if cap is not None else "-",
            f"{detail['share']:.2f}" if detail.get("share") is not None else "-",
            f"{lat['inactive_avg_us']:.0f}" if lat else "-",
            f"{lat['active_avg_us']:.0f}" if lat else "-",
            str(lat.get("preemptions", "-")),
            str(lat.get("steal_check", "-")),
        )
    console.print(table)
    topo = report.get("topology")
    if topo:
        pairs = Table(title=f"topology ({report['mode']}, {report['probe_ms']:.1f} ms)")
        for column in ("a", "b", "class", "min ns", "median ns", "source"):
            pairs.add_column(column, justify="right")
        index = {c: i for i, c in enumerate(topo["cpus"])}
        for p in topo["pairs"]:
            i, j = index[p["a"]], index[p["b"]]
            lo, med = topo["matrix_ns"][i][j], topo["median_ns"][i][j]
            pairs.add_row(str(p["a"]), str(p["b"]), p["class"],
                          "-" if lo is None else f"{lo:.1f}", "-" if med is None else f"{med:.1f}", p["source"])
        console.print(pairs)
    for note in report.get("fallbacks", []):
        console.print(Text.assemble(styled("fallback:", "yellow"), f" {note}"))


def _check_rwc_target(native, cgroup: str, only: str | None) -> None:
    """What --apply-rwc needs, checked before the probe runs for seconds: capacities and
    the cgroup's cpuset (root is checked after the probe, whose report is of use without it)."""
    if only not in (None, "capacity"):
        raise fail(f"RWC needs capacities: do not combine --apply-rwc with --only {only}")
    try:
        native.cpuset_locate(cgroup)
        native.cpuset_read(cgroup)
    except OSError as err:
        raise fail(f"--apply-rwc {cgroup}: {err}")


def _apply_rwc(report: dict, cgroup: str, dry_run: bool, state_dir: Path) -> None:
    native = _native()
    plan = report.get("rwc")
    if plan is None:
        raise fail("RWC needs capacities: do not combine --apply-rwc with --only topology")
    try:
        version, directory, cpus_file = native.cpuset_locate(cgroup)
        current = native.cpuset_read(cgroup)
    except OSError as err:
        raise fail(f"--apply-rwc {cgroup}: {err}")
    wanted = native.cpu_list(plan["keep"])
    print(f"rwc: cgroup {directory} ({version} cpuset) cpuset.cpus {current!r} -> {wanted!r}", file=sys.stderr)
    for hidden in plan["hide"]:
        print(f"rwc: hide CPU {hidden['cpu']}: {hidden['reason']}", file=sys.stderr)
    if dry_run:
        print("rwc: dry run, nothing changed (pass --no-dry-run to apply)", file=sys.stderr)
        return
    if os.geteuid() != 0:
        raise fail("--apply-rwc refuses to change a cgroup without root; the probe results above are unaffected")
    state = _state_file(state_dir, cgroup)
    if state.exists():
        raise fail(f"{state} already records an RWC change for {cgroup}: run --revert first")
    write_atomic(state, json.dumps({"cgroup": cgroup, "cpus_file": cpus_file, "previous": current,
                                    "applied": wanted, "timestamp": time.time()}, indent=2))
    try:
        native.cpuset_write(cgroup, wanted)
    except OSError as err:
        state.unlink(missing_ok=True)
        raise fail(f"--apply-rwc {cgroup}: {err}")
    print(f"rwc: applied; --revert restores {current!r} (state in {state})", file=sys.stderr)


def _revert_rwc(cgroup: str, state_dir: Path) -> None:
    native = _native()
    state = _state_file(state_dir, cgroup)
    if not state.exists():
        raise fail(f"no RWC change recorded for {cgroup} in {state_dir}")
    saved = json.loads(state.read_text())
    if os.geteuid() != 0:
        raise fail("--revert needs root to write the cgroup's cpuset")
    try:
        current = native.cpuset_read(cgroup)
        if current != saved["applied"]:
            print(f"rwc: warning: cpuset.cpus is {current!r}, not the {saved['applied']!r} RWC wrote; restoring anyway",
                  file=sys.stderr)
        native.cpuset_write(cgroup, saved["previous"])
    except OSError as err:
        raise fail(f"--revert {cgroup}: {err}")
    state.unlink()
    print(f"rwc: restored cpuset.cpus {saved['previous']!r} for {cgroup}", file=sys.stderr)


def _write_twin(report: dict, path: Path) -> None:
    """Writes the twin scenario after the engine's schema accepted it."""
    from .api import Scenario, normalize
    from .errors import UserError
    from .twin import TwinError, twin_toml

    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem) or "twin"
    try:
        text = twin_toml(report, name)
        normalize(Scenario(text, str(path)))
    except (TwinError, UserError) as err:
        raise fail(f"--scenario {path}: {err}")
    write_atomic(path, text)
    print(f"twin: wrote {path} (vmsched run {path})", file=sys.stderr)


def register(app: typer.Typer) -> None:
    @app.command()
    def probe(
        json_out: bool = typer.Option(False, "--json", help="Print the report as one JSON document."),
        only: Optional[str] = typer.Option(None, help="Run one part only: topology, capacity or latency."),
        cpus: Optional[str] = typer.Option(None, help="CPUs to probe, as a list like 0-3,6 (default: all usable)."),
        period_ms: float = typer.Option(100.0, help="Sampling period (vSched 3.1: 100 ms)."),
        periods: int = typer.Option(5, help="Periods sampled by a one-shot probe."),
        heavy_every: int = typer.Option(10, help="One heavy (high-priority) period every N periods."),
        heavy_ms: float = typer.Option(10.0, help="Length of the heavy phase at the start of a heavy period."),
        ema_decay: float = typer.Option(0.5, help="Weight kept by the capacity EMA's history at each period."),
        preemption_threshold_us: float = typer.Option(100.0, help="Gaps shorter than this are not preemptions."),
        straggler_share: float = typer.Option(0.2, help="RWC: a vCPU whose smoothed share of its core is below this is a straggler (the public vSched prober's straggler_cutoff)."),
        vtop_round_trips: int = typer.Option(1000, help="vtop: round trips after which a pair is done."),
        vtop_timeout_ms: float = typer.Option(5.0, help="vtop: first time budget per pair."),
        vtop_max_timeout_ms: float = typer.Option(40.0, help="vtop: budget bound when few transfers complete."),
        validate: Optional[Path] = typer.Option(None, help="Validate the topology of a previous --json report instead of a full probe."),
        watch: bool = typer.Option(False, "--watch", help="Stream one JSON line per period until interrupted."),
        count: int = typer.Option(0, help="With --watch: stop after this many periods (0: never)."),
        topology_every: int = typer.Option(10, help="With --watch: validate the topology every N periods."),
        bench: bool = typer.Option(False, "--bench", help="Time full and validation probes and the per-period CPU cost."),
        repeat: int = typer.Option(5, help="With --bench: repetitions of each topology probe."),
        out: Optional[Path] = typer.Option(None, help="Also write the JSON report to this file."),
        scenario: Optional[Path] = typer.Option(None, "--scenario", metavar="OUT.toml",
                                                help="Also write the probed VM's twin: a scenario for `vmsched run` (docs/vsched.md)."),
        apply_rwc: Optional[str] = typer.Option(None, "--apply-rwc", metavar="CGROUP", help="Confine CGROUP's cpuset to the vCPUs RWC keeps."),
        dry_run: bool = typer.Option(True, "--dry-run/--no-dry-run", help="With --apply-rwc: only print what would change."),
        revert: bool = typer.Option(False, "--revert", help="With --apply-rwc: restore the cpuset recorded when RWC was applied."),
        rwc_state_dir: Path = typer.Option(DEFAULT_RWC_STATE_DIR, help="Where RWC records what it changed."),
    ) -> None:
        """Probe vCPU capacity, activity and topology (vSched's vProbers)."""
        if revert:
            if apply_rwc is None:
                raise fail("--revert needs --apply-rwc CGROUP to name the cgroup to restore")
            _revert_rwc(apply_rwc, rwc_state_dir)
            return
        if sys.platform != "linux":
            raise fail("vmsched probe needs Linux: it reads /proc/stat steal time and pins threads to CPUs")
        if scenario is not None and (only is not None or watch or bench):
            raise fail("--scenario needs a full one-shot probe: do not combine it with --only, --watch or --bench")
        native = _native()
        if apply_rwc is not None:
            _check_rwc_target(native, apply_rwc, only)
        try:
            cpu_ids = native.parse_cpu_list(cpus) if cpus is not None else None
        except ValueError as err:
            raise fail(f"--cpus: {err}")
        previous = None
        if validate is not None:
            try:
                previous = json.loads(validate.read_text())["topology"]
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise fail(f"--validate {validate}: not a probe report with a topology ({err})")
        config = _config(cpus=cpu_ids, period_ms=period_ms, periods=periods, heavy_every=heavy_every,
                         heavy_ms=heavy_ms, ema_decay=ema_decay, preemption_threshold_us=preemption_threshold_us,
                         straggler_share=straggler_share, only=only, vtop_round_trips=vtop_round_trips,
                         vtop_timeout_ms=vtop_timeout_ms, vtop_max_timeout_ms=vtop_max_timeout_ms,
                         topology_every=topology_every, previous_topology=previous)
        try:
            if bench:
                result = json.loads(native.probe_bench(config, repeat))
                text = json.dumps(result, indent=2)
                print(text)
                if out is not None:
                    write_atomic(out, text + "\n")
                return
            if watch:
                watcher = native.ProbeWatcher(config)
                done = 0
                try:
                    while count == 0 or done < count:
                        print(watcher.next_period(), flush=True)
                        done += 1
                except KeyboardInterrupt:
                    pass
                return
            report = json.loads(native.probe_run(config))
        except (ValueError, OSError) as err:
            raise fail(str(err))
        text = json.dumps(report, indent=2)
        if out is not None:
            write_atomic(out, text + "\n")
        if scenario is not None:
            _write_twin(report, scenario)
        if json_out:
            print(text)
        else:
            _print_table(report)
        if apply_rwc is not None:
            _apply_rwc(report, apply_rwc, dry_run, rwc_state_dir)
