"""`vmsched real`: a scenario's workloads run by real threads on this Linux machine
(`real run`), and set beside the simulation of this machine's twin (`real compare`).
See docs/groundtruth.md."""
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .atomic import write_atomic
from .errors import UserError, fail

real_app = typer.Typer(help="Run a scenario's workloads on this machine, and compare them with the simulator.",
                       no_args_is_help=True)

# The twin's stand-in for the machine's other runnable threads (not compared).
BACKGROUND = "background"
SUITES = ("groundtruth",)

# The tolerances of the comparison (issue "Ground truth", goals): CPU shares within 5%,
# throughput within 10%, latencies within 2x, event rates within 25%.
GOALS = {
    "share_5pct": lambda r: abs(r - 1.0) <= 0.05,
    "throughput_10pct": lambda r: abs(r - 1.0) <= 0.10,
    "latency_2x": lambda r: 0.5 <= r <= 2.0,
    "rate_25pct": lambda r: abs(r - 1.0) <= 0.25,
}


def _native():
    from . import _native as native

    return native


def groundtruth_cases():
    """The ground-truth suite's cases, embedded in the extension: [(name, Scenario)]."""
    from . import api

    return [(name, api.Scenario(text, f"groundtruth:{name}")) for name, _, text in _native().groundtruth_scenarios()]


def _load(spec: str):
    """A ground-truth case's name, a built-in name, or a scenario file."""
    from . import api

    if not Path(spec).exists():
        for name, source in groundtruth_cases():
            if name == spec:
                return source
    try:
        return api.load_scenario(spec)
    except UserError as err:
        raise fail(str(err)) from err


def real_run(source, vm: str | None = None, overrides: list[str] | None = None) -> tuple[dict, dict]:
    """One real run: (summary, tasks columns). ValueError: the scenario cannot run here;
    OSError: a thread could not take its attributes."""
    summary_json, tasks = _native().real_run(source.text, source.source, list(overrides or []), vm)
    return json.loads(summary_json), tasks


def _write_run(out_dir: Path, summary: dict, tasks: dict) -> None:
    import polars as pl

    from .tables import write_tables

    write_atomic(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    write_tables({"tasks": pl.DataFrame(tasks)}, out_dir)


# ---- the twin ---------------------------------------------------------------------

def nearest_kernel_profile(release: str, profiles: list[str]) -> str:
    """The newest `linux-X.Y` profile not newer than `release` (e.g. 6.18.44 -> linux-6.14)."""
    def version(text: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", text)[:2])

    wanted = version(release)
    known = sorted((version(p), p) for p in profiles if re.fullmatch(r"linux-\d+\.\d+", p))
    older = [p for v, p in known if v <= wanted]
    return older[-1] if older else known[0][1]


def machine_hz() -> int | None:
    """CONFIG_HZ of the running kernel, from /proc/config.gz or /boot/config-RELEASE."""
    import gzip

    release = os.uname().release
    for path, opener in ((Path("/proc/config.gz"), gzip.open), (Path(f"/boot/config-{release}"), open)):
        try:
            with opener(path, "rt") as handle:
                for line in handle:
                    if line.startswith("CONFIG_HZ="):
                        return int(line.split("=", 1)[1])
        except OSError:
            continue
    return None


def twin_case(case_text: str, vm_name: str | None, report: dict, kernel: str, hz: int | None,
              background: int = 0) -> dict:
    """The twin of the probed machine (python/vmsched/twin.py) carrying the case's VM's
    workloads: the probed VM takes the case VM's name and guest settings, runs Linux
    with the kernel profile nearest this machine's, and every workload without an
    affinity keeps to the first `vcpus` vCPUs, as the real run keeps to the first
    `vcpus` CPUs while the kernel balances over all of them. `background` nice-0 hog
    threads, free to run on any vCPU, stand for the scheduling groups of the machine's
    other runnable threads, which the real runs counted (the probers see the host's
    contention, not the guest's own)."""
    from .twin import twin_scenario

    import tomllib
    case = tomllib.loads(case_text)
    vms = case.get("vm", [])
    chosen = [v for v in vms if v.get("name") == vm_name] if vm_name else [v for v in vms if v.get("workload")]
    if len(chosen) != 1:
        raise UserError("the case needs exactly one VM with workloads (or --vm)")
    vm = chosen[0]
    twin = twin_scenario(report, name=f"{case['name']}-twin", duration_ms=case["duration_ms"])
    probed = twin["vm"][0]
    vcpus = int(vm.get("vcpus", 1))
    workloads = []
    for w in vm.get("workload", []):
        w = dict(w)
        if not w.get("affinity") and vcpus < probed["vcpus"]:
            w["affinity"] = list(range(vcpus))
        workloads.append(w)
    guest = dict(vm.get("guest", {}))
    guest.update({"policy": "linux", "kernel": kernel})
    if hz is not None:
        guest["hz"] = hz
    if background > 0:
        workloads.append({"kind": "hog", "name": BACKGROUND, "threads": background})
    probed.update({"name": vm["name"], "guest": guest, "workload": workloads})
    twin["seed"] = case.get("seed", 1)
    twin["description"] = f"{case.get('description', case['name'])} -- on the twin of this machine"
    return twin


def probe_report(cached: Path | None) -> dict:
    if cached is not None:
        try:
            return json.loads(cached.read_text())
        except (OSError, ValueError) as err:
            raise fail(f"--probe-report {cached}: not a probe report ({err})") from err
    return json.loads(_native().probe_run(json.dumps({})))


# ---- the comparison ----------------------------------------------------------------

def _sim_task_sums(tasks) -> dict[str, dict[str, float]]:
    sums: dict[str, dict[str, float]] = {}
    for row in tasks.iter_rows(named=True):
        entry = sums.setdefault(row["workload"], {"context_switches": 0.0, "migrations": 0.0})
        entry["context_switches"] += row["context_switches"]
        entry["migrations"] += row["migrations"]
    return sums


def figures(summary: dict, task_sums: dict | None = None) -> dict[tuple[str, str], tuple[float, str]]:
    """(workload, metric) -> (value, goal) for every figure both sides can give."""
    out: dict[tuple[str, str], tuple[float, str]] = {}
    seconds = summary["duration_ns"] / 1e9
    # The twin's guest kworkers (OS noise) are its kernel's, as on the real machine,
    # where they are no workload of the case either.
    workloads = [w for w in summary["workloads"] if w["name"] != BACKGROUND and w["kind"] != "os_noise"]
    case_cpu = sum(w["cpu_time_ns"] for w in workloads)
    for w in workloads:
        name = w["name"]
        out[(name, "cpu share")] = (w["cpu_time_ns"] / summary["duration_ns"], "share_5pct")
        if len(workloads) > 1 and case_cpu:
            # Its part of the case's own CPU time: what the guest scheduler decides
            # between the case's threads, whatever else the machine runs.
            out[(name, "part of case cpu")] = (w["cpu_time_ns"] / case_cpu, "share_5pct")
        if w["kind"] not in ("hog", "filler", "latency_probe"):
            out[(name, "throughput /s")] = (w["throughput_per_s"], "throughput_10pct")
        lat = w.get("latency_ns")
        if lat and lat.get("count"):
            out[(name, "latency p50 us")] = (lat["p50"] / 1e3, "latency_2x")
            out[(name, "latency p99 us")] = (lat["p99"] / 1e3, "latency_2x")
        counts = task_sums.get(name) if task_sums is not None else w
        if counts is not None and "context_switches" in counts:
            out[(name, "context switches /s")] = (counts["context_switches"] / seconds, "rate_25pct")
            out[(name, "migrations /s")] = (counts["migrations"] / seconds, "rate_25pct")
    return out


def compare_rows(case: str, real: list[dict], sim: dict, sim_tasks) -> list[dict]:
    """The interface rows: real mean and spread (sample standard deviation over the
    repetitions), simulated value, their ratio sim/real and whether it is within goal."""
    import statistics
    sim_figs = figures(sim, _sim_task_sums(sim_tasks))
    real_figs = [figures(r) for r in real]
    rows = []
    for key, (sim_value, goal) in sim_figs.items():
        values = [f[key][0] for f in real_figs if key in f]
        if not values:
            continue
        mean = statistics.fmean(values)
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        ratio = sim_value / mean if mean else None
        within = GOALS[goal](ratio) if ratio is not None else sim_value == 0
        rows.append({"case": case, "metric": f"{key[0]}: {key[1]}", "real_mean": mean, "real_spread": spread,
                     "sim_mean": sim_value, "ratio": ratio, "goal": goal, "within_goal": within})
    return rows


def run_case(spec: str, vm: str | None, repeat: int, report: dict, quiet: bool,
             with_background: bool = True) -> tuple[list[dict], dict]:
    """Runs the case for real `repeat` times, then simulates the twin, with one
    background hog per scheduling group (autogroup) of the machine's other runnable
    threads the real runs saw, on average, unless `with_background` is off."""
    import statistics

    from . import api

    source = _load(spec)
    real, loads, others = [], [], []
    for i in range(repeat):
        if not quiet:
            print(f"{source.source}: real run {i + 1}/{repeat}", file=sys.stderr)
        try:
            summary, _ = real_run(source, vm)
        except (ValueError, OSError) as err:
            raise fail(str(err)) from err
        real.append(summary)
        loads.append(summary["real"]["loadavg_1m_before"])
        if summary["real"].get("background_groups_mean") is not None:
            others.append(summary["real"]["background_groups_mean"])
    background = round(statistics.fmean(others)) if with_background and others else 0
    kernel = nearest_kernel_profile(os.uname().release, [k["name"] for k in json.loads(_native().kernels())])
    twin = twin_case(source.text, vm, report, kernel, machine_hz(), background)
    import tomli_w

    twin_source = api.Scenario(tomli_w.dumps(twin), f"{source.source} (twin)")
    try:
        sim = api.run(twin_source, record=True)
    except UserError as err:
        raise fail(str(err)) from err
    name = json.loads(_native().validate_scenario(source.text, source.source, []))["name"]
    rows = compare_rows(name, real, sim.summary, sim.tasks)
    context = {"case": name, "source": source.source, "kernel": os.uname().release, "guest_profile": kernel,
               "repetitions": repeat, "loadavg_1m": loads, "background_groups": others,
               "background_threads": background, "twin": twin}
    return rows, context


def _print_rows(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="real vs simulated (ratio = sim / real)")
    for column in ("case", "metric", "real", "± sd", "sim", "ratio", "goal", "ok"):
        table.add_column(column, justify="right" if column not in ("case", "metric", "goal") else "left")
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        table.add_row(r["case"], r["metric"], f"{r['real_mean']:.4g}", f"{r['real_spread']:.2g}",
                      f"{r['sim_mean']:.4g}", ratio, r["goal"], "yes" if r["within_goal"] else "NO")
    Console().print(table)


def _html(rows: list[dict], contexts: list[dict]) -> str:
    import html

    head = "<tr>" + "".join(f"<th>{c}</th>" for c in ("case", "metric", "real mean", "real sd", "sim", "ratio", "goal", "within")) + "</tr>"
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            r["case"], r["metric"], f"{r['real_mean']:.4g}", f"{r['real_spread']:.2g}", f"{r['sim_mean']:.4g}",
            "-" if r["ratio"] is None else f"{r['ratio']:.2f}", r["goal"], "yes" if r["within_goal"] else "NO")) + "</tr>"
        for r in rows)
    notes = "".join(f"<li>{html.escape(c['case'])}: kernel {html.escape(c['kernel'])}, guest profile "
                    f"{html.escape(c['guest_profile'])}, {c['repetitions']} real runs, load average "
                    f"{html.escape(str(c['loadavg_1m']))}, other runnable groups "
                    f"{html.escape(str(c['background_groups']))} (twin: {c['background_threads']} background hogs)</li>" for c in contexts)
    return ("<!doctype html><meta charset='utf-8'><title>vmsched real compare</title>"
            "<style>body{font-family:sans-serif}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
            "td{text-align:right}</style><h1>Real vs simulated</h1>"
            f"<ul>{notes}</ul><table>{head}{body}</table>")


def register(app: typer.Typer) -> None:
    app.add_typer(real_app, name="real")


@real_app.command("run")
def run_cmd(
    scenario: Annotated[str, typer.Argument(help="Ground-truth case, built-in scenario name, or path to a .toml file.")],
    out: Annotated[Path, typer.Option(help="Output directory: summary.json and tasks.parquet.")],
    vm: Annotated[Optional[str], typer.Option(help="The VM whose workloads run (default: the only one with workloads).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the earlier run at --out.")] = False,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Override a scenario field: dotted.key=value.")] = None,
) -> None:
    """Run one VM's workloads of SCENARIO on this machine for the scenario's duration."""
    from .rundir import OutputDir

    if sys.platform != "linux":
        raise fail("vmsched real needs Linux: it pins threads and reads /proc")
    source = _load(scenario)
    try:
        output = OutputDir(out, force)
    except UserError as err:
        raise fail(str(err)) from err
    with output as staging:
        try:
            summary, tasks = real_run(source, vm, set_ or [])
        except (ValueError, OSError) as err:
            raise fail(str(err)) from err
        _write_run(staging, summary, tasks)
    print(f"wrote {out}: summary.json, tasks.parquet", file=sys.stderr)


@real_app.command("compare")
def compare_cmd(
    scenario: Annotated[Optional[str], typer.Argument(help="Ground-truth case, built-in scenario name, or .toml file.")] = None,
    suite: Annotated[Optional[str], typer.Option(help="Compare every case of a suite: groundtruth.")] = None,
    vm: Annotated[Optional[str], typer.Option(help="The VM whose workloads run.")] = None,
    repeat: Annotated[int, typer.Option(help="Real runs per case (their spread is reported).")] = 3,
    probe_report_path: Annotated[Optional[Path], typer.Option("--probe-report", help="Use this `vmsched probe --json` report instead of probing now.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Write compare.json and compare.html here.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the earlier comparison at --out.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    background: Annotated[bool, typer.Option(help="Give the twin a background hog per scheduling group of the machine's other runnable threads during the real runs.")] = True,
) -> None:
    """Probe this VM, simulate its twin with the case's workloads, run them for real, and
    print each figure side by side."""
    from .rundir import OutputDir

    if sys.platform != "linux":
        raise fail("vmsched real needs Linux: it pins threads and reads /proc")
    if (scenario is None) == (suite is None):
        raise fail("give a SCENARIO or --suite, not both or neither")
    if suite is not None and suite not in SUITES:
        raise fail(f"--suite {suite}: unknown suite; suites are {', '.join(SUITES)}")
    if repeat < 1:
        raise fail(f"--repeat {repeat}: must be at least 1")
    cases = [scenario] if scenario is not None else [name for name, _ in groundtruth_cases()]
    output = None
    if out is not None:
        try:
            output = OutputDir(out, force)
        except UserError as err:
            raise fail(str(err)) from err
    report = probe_report(probe_report_path)
    rows, contexts = [], []
    try:
        for case in cases:
            case_rows, context = run_case(case, vm, repeat, report, as_json, background)
            rows += case_rows
            contexts.append(context)
    except BaseException:
        if output is not None:
            output.discard()
        raise
    if output is not None:
        with output as staging:
            write_atomic(staging / "compare.json", json.dumps({"rows": rows, "cases": contexts, "probe": report}, indent=2) + "\n")
            write_atomic(staging / "compare.html", _html(rows, contexts))
    if as_json:
        print(json.dumps(rows, indent=2))
    else:
        _print_rows(rows)
