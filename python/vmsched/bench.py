"""`vmsched bench`: speed and memory of the engine on two built-in scenarios, the SimPy
baseline run in the same session, and a statistical check that the engine's model of the
baseline produces the same slice and wakeup rates. Two series follow: the scale series
(the `bench-mixed-64` host and its VM mix repeated to 256, 1,024 and 4,096 pCPUs: set-up
time, events per second, peak memory) and the memory series (peak memory of the default
scenario with recording on, written to a run directory, for growing run lengths, and of an
overloaded open-loop server). With `--peer`, a third: the same two-level model on vmsched
(recording and not) and on tailtamer, per size (`peer.py`).

Each measurement runs in a fresh child process (`python -m vmsched.bench ...`) so that
the peak resident memory it reports belongs to that one scenario."""
from __future__ import annotations

import json
import math
import re
import resource
import subprocess
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .errors import UserError

MIXED, SIMPY_MODEL = "bench-mixed-64", "bench-simpy-rr"
SIMPY_SEED = 1
FULL_SIMPY_S = 60.0
# Simulated time of the --quick runs: long enough for thousands of slices, so that the
# agreement check still has power, short enough for a test.
QUICK_NS = {MIXED: 200_000_000, SIMPY_MODEL: 3_000_000_000}
# |z| above this fails the agreement check: two-sided p of about 5e-4 per count, so a
# correct model fails one of the two checks about once in a thousand runs.
Z_LIMIT = 3.5

# The scale series: bench-mixed-64 (64 pCPUs, 16 eight-vCPU VMs, 2x overcommitted) with its
# sockets and VMs repeated, so every size has the same mix and the same overcommitment.
SCALE_BASE_PCPUS = 64
SCALE_PCPUS = (64, 256, 1024, 4096)
QUICK_SCALE_PCPUS = (64, 256)
# Simulated time per size: events grow with the host, so the largest runs shorter.
SCALE_NS = {64: 2_000_000_000, 256: 2_000_000_000, 1024: 2_000_000_000, 4096: 500_000_000}
QUICK_SCALE_NS = 50_000_000
# The memory series: the default scenario with recording on, for these run lengths.
MEMORY_SCENARIO = "default"
MEMORY_NS = (10_000_000_000, 100_000_000_000, 1_000_000_000_000)
QUICK_MEMORY_NS = (200_000_000, 2_000_000_000)
# Simulated time of each training run of the profile-guided build (see `training_runs`).
TRAINING_NS = 1_000_000_000
# An open-loop server offered twice what its one vCPU can serve (10,000 requests/s of
# 200 µs each; the batch VM shares the host): its queue of requests
# only grows, up to the server's backlog bound.
OVERLOAD_SET = ["vm[0].workload[0].rate_per_s=10000", "vm[0].vcpus=1", "vm[0].workload[0].threads=1",
                "vm[0].workload[0].irq_vcpu=0"]


def _status_mb(*fields: str) -> dict[str, float | None]:
    """Memory figures of /proc/self/status (kB there), in MB, read at one instant; None
    for a field that is not there."""
    found: dict[str, float | None] = dict.fromkeys(fields)
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            field, _, value = line.partition(":")
            if field in found:
                found[field] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return found


def _memory_figures() -> dict:
    """Peak resident memory of this process, and what is resident at the end split into
    anonymous memory (the engine's and Python's heaps) and mapped files (the interpreter's
    and the libraries' code, polars and pyarrow the largest). How much of a library file is
    mapped depends on the page cache: files just written, as by a fresh install, are mapped
    in larger pieces, tens of MB more for the same run; the anonymous part does not move.
    The peak is VmHWM, which belongs to the process's own address space: Linux carries
    getrusage's ru_maxrss across exec, so a child started by a large parent would report
    the parent's peak (ru_maxrss stands in only where there is no /proc)."""
    status = _status_mb("VmHWM", "RssAnon", "RssFile")
    peak = status["VmHWM"]
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"peak_rss_mb": peak, "rss_anon_mb": status["RssAnon"], "rss_file_mb": status["RssFile"]}


def _engine_child(name: str, duration_ns: int | None) -> dict:
    from . import _native
    text = next(toml for builtin, _, toml in _native.builtin_scenarios() if builtin == name)
    started, cpu = time.perf_counter(), time.process_time()
    summary_json, _ = _native.run_scenario(text, f"builtin:{name}", [], None, duration_ns,
                                           False, False, None, None)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    summary = json.loads(summary_json)
    return {"wall_s": wall, "cpu_s": cpu, "events": summary["events"],
            "events_per_pcpu_s": events_per_pcpu_s(summary), "sim_s": summary["duration_ns"] / 1e9,
            "slices": sum(vm["task_slices"] for vm in summary["vms"]),
            "wakeups": sum(vm["wakeups"] for vm in summary["vms"]), **_memory_figures()}


def events_per_pcpu_s(summary: dict) -> dict[str, float]:
    """A run's events by kind per simulated pCPU-second: where the engine's work goes,
    comparable across sizes and run lengths."""
    pcpu_s = summary["duration_ns"] / 1e9 * summary["host"]["pcpus"]
    return {kind: count / pcpu_s for kind, count in summary["events_by_kind"].items()}


def scaled_mixed(pcpus: int) -> tuple[str, list[str]]:
    """bench-mixed-64 grown to `pcpus` pCPUs: its VM list repeated (VM names suffixed with
    the copy's number) and its sockets multiplied, as scenario text plus overrides."""
    if pcpus % SCALE_BASE_PCPUS:
        raise UserError(f"{pcpus} pCPUs: the scale series grows in steps of {SCALE_BASE_PCPUS}")
    from . import _native
    text = next(toml for builtin, _, toml in _native.builtin_scenarios() if builtin == MIXED)
    head, marker, vms = text.partition("\n[[vm]]")
    copies = pcpus // SCALE_BASE_PCPUS
    repeated = "".join(re.sub(r'(?m)^name = "(vm\d+)"$', rf'name = "\1-{copy}"', marker + vms)
                       for copy in range(copies))
    sockets = int(re.search(r"(?m)^sockets = (\d+)$", head).group(1))
    return head + repeated, [f"host.sockets={sockets * copies}", f"name=bench-mixed-{pcpus}"]


def _scale_child(pcpus: int, duration_ns: int) -> dict:
    """Set-up time (parse and build, no event), the wall time of a 1 ns run (set-up,
    the events at time 0: every workload starting, and the summary), then the timed
    run, all without recording, in this one process."""
    from . import _native
    text, overrides = scaled_mixed(pcpus)
    setup = _native.setup_seconds(text, f"scale:{pcpus}", overrides)
    started = time.perf_counter()
    _native.run_scenario(text, f"scale:{pcpus}", overrides, None, 1, False, False, None, None, True)
    first_instant = time.perf_counter() - started
    started = time.perf_counter()
    summary_json, _ = _native.run_scenario(text, f"scale:{pcpus}", overrides, None, duration_ns,
                                           False, False, None, None, True)
    wall = time.perf_counter() - started
    summary = json.loads(summary_json)
    return {"pcpus": pcpus, "vcpus": sum(len(vm["vcpus"]) for vm in summary["vms"]),
            "setup_s": setup, "first_instant_s": first_instant, "wall_s": wall, "events": summary["events"],
            "sim_s": summary["duration_ns"] / 1e9, **_memory_figures()}


def _peer_vm_child(pcpus: int, vms: int, duration_ms: int, record: bool) -> dict:
    """A peer case run by the command line, as a user runs it: `vmsched run FILE --out DIR`
    (recorded tables streamed to Parquet files there) or with `--no-record` only the
    summary, in this process, so that its whole cost is measured: the command line's
    start-up (typer), the run, the printed summary (to /dev/null) and the files."""
    import contextlib
    import os
    import tempfile
    from .cli import main
    from .peer import case_name, scenario_text
    with tempfile.TemporaryDirectory() as work:
        scenario = Path(work) / f"{case_name(pcpus, vms)}.toml"
        scenario.write_text(scenario_text(pcpus, vms, duration_ms))
        out = Path(work) / "run"
        sys.argv = ["vmsched", "run", str(scenario), "--out", str(out), *([] if record else ["--no-record"])]
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            try:
                main()
            except SystemExit as done:
                if done.code:
                    raise RuntimeError(f"vmsched {' '.join(sys.argv[1:])} exited with {done.code}") from None
        summary = json.loads((out / "summary.json").read_text())
    return {"events": summary["events"], "events_per_pcpu_s": events_per_pcpu_s(summary), **_memory_figures()}


def _peer_tt_child(pcpus: int, vms: int, duration_ms: int, path: str) -> dict:
    from .peer import run_tailtamer, scenario_text
    return {**run_tailtamer(scenario_text(pcpus, vms, duration_ms), path or None), **_memory_figures()}


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed_child(*args: str) -> dict:
    """A child's figures with its wall time from start to exit, start-up included: a
    command's whole cost, as a user who runs either simulator sees it; and its CPU time
    (user and system, all its threads), which a machine shared with other work does not
    stretch as it stretches the wall time."""
    started, cpu = time.perf_counter(), _children_cpu_s()
    measured = _in_child(*args)
    return {**measured, "wall_s": time.perf_counter() - started, "cpu_s": _children_cpu_s() - cpu}


def peer_series(quick: bool, repeat: int, path: str | None, step: Callable[[str], None]) -> list[dict]:
    """Per size: vmsched recording, tailtamer, vmsched without recording, `repeat` times in
    turn (alternated, so that a change in the machine's speed reaches all three alike),
    summarised by `peer_case_figures`."""
    from .peer import CASES, QUICK_DIVISOR, case_name
    series = []
    for pcpus, vms, duration_ms in CASES:
        ms = duration_ms // QUICK_DIVISOR if quick else duration_ms
        step(f"peer: {case_name(pcpus, vms)}, {ms / 1000:g} simulated s, on vmsched and tailtamer")
        runs: dict[str, list[dict]] = {"record": [], "tailtamer": [], "no_record": []}
        for _ in range(repeat):
            runs["record"].append(_timed_child("peer-vm", str(pcpus), str(vms), str(ms), "1"))
            runs["tailtamer"].append(_timed_child("peer-tt", str(pcpus), str(vms), str(ms), path or ""))
            runs["no_record"].append(_timed_child("peer-vm", str(pcpus), str(vms), str(ms), "0"))
        series.append({"case": case_name(pcpus, vms), "pcpus": pcpus, "sim_s": ms / 1000,
                       **peer_case_figures(runs)})
    return series


def peer_case_figures(runs: dict[str, list[dict]]) -> dict:
    """One size's figures from its runs ({"record", "tailtamer", "no_record"}: lists of
    `_timed_child` results): the medians of each kind's whole-process CPU time (user and
    system, every thread), wall time and peak RSS, each taken on its own; the ratios
    tailtamer / vmsched of the CPU-time medians and of the wall-time medians, with
    recording and without (the issue's goals are stated as these ratios, CPU time first:
    a machine shared with other work stretches wall time, not CPU time); and what
    recording adds to vmsched's CPU time, record / no_record - 1."""
    from statistics import median as median_of
    median = {kind: {key: median_of([run[key] for run in done]) for key in ("cpu_s", "wall_s", "peak_rss_mb")}
              for kind, done in runs.items()}
    tailtamer, record, no_record = median["tailtamer"], median["record"], median["no_record"]
    return {"events": runs["no_record"][0]["events"],
            "events_per_pcpu_s": runs["no_record"][0]["events_per_pcpu_s"],
            **{f"{kind}_{key}": value for kind, m in median.items() for key, value in m.items()},
            "cpu_ratio_record": tailtamer["cpu_s"] / record["cpu_s"],
            "cpu_ratio_no_record": tailtamer["cpu_s"] / no_record["cpu_s"],
            "ratio_record": tailtamer["wall_s"] / record["wall_s"],
            "ratio_no_record": tailtamer["wall_s"] / no_record["wall_s"],
            "record_cpu_overhead": record["cpu_s"] / no_record["cpu_s"] - 1}


def _memory_child(name: str, duration_ns: int, overrides: list[str]) -> dict:
    """A run written to a run directory as `vmsched run --out` writes it (recording on),
    so that the peak memory is the one a user sees."""
    import tempfile
    from . import api
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        result = api.run(name, set=overrides, duration=duration_ns, record=True, allow_large=True, stream_to=out)
        result.save(out, tables=api.RECORD_TABLES)
        written = sum(path.stat().st_size for path in Path(out).iterdir())
    summary = result.summary
    return {"scenario": name, "overrides": overrides, "sim_s": summary["duration_ns"] / 1e9,
            "wall_s": time.perf_counter() - started, "events": summary["events"],
            "output_mb": written / 2**20, **_memory_figures(),
            "workloads": {w["name"]: {key: w[key] for key in ("completed", "dropped", "backlog_max") if key in w}
                          for w in summary["workloads"]}}


def training_runs(duration_ns: int = TRAINING_NS) -> int:
    """Runs every built-in scenario and each of its variants for `duration_ns` without
    recording: the workload a profile-guided build of the extension is trained on
    (`tools/build-extension.sh`). Every policy, guest kernel and workload kind of the
    built-ins has its paths profiled; bench-simpy-rr is one case of several hundred. A
    case the engine refuses to cut short (a timed change, such as a capacity, a pinning
    or a workload's start, would fall after the end) runs its full length. Returns the
    number of runs."""
    from . import api
    from .comparison import builtin_cases
    runs = 0
    for _, scenario, overrides in builtin_cases():
        try:
            api.run(scenario, set=overrides, duration=duration_ns, record=False, allow_large=True)
        except UserError:
            api.run(scenario, set=overrides, record=False, allow_large=True)
        runs += 1
    return runs


def _simpy_child(sim_s: float) -> dict:
    from . import simpy_model
    return {**simpy_model.run(sim_s, SIMPY_SEED), **_memory_figures()}


def require_simpy() -> None:
    """SimPy is an optional dependency: say which extra brings it."""
    try:
        import simpy  # noqa: F401
    except ImportError:
        raise UserError("the SimPy baseline needs simpy: pip install 'vmsched[bench]' "
                        "(in a checkout: .venv/bin/pip install -e '.[bench]', or make bench)") from None


def _in_child(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "vmsched.bench", *args],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench child {' '.join(args)} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)


def _repeated(repeat: int, *args: str) -> dict:
    """The run with the median wall time of `repeat` fresh-process runs, with the spread
    of all of them: one run on a shared machine can be slowed by its neighbours."""
    return median_run([_in_child(*args) for _ in range(repeat)])


def median_run(runs: list[dict]) -> dict:
    """The run with the median wall time, with the range of all runs' wall times, and,
    where the runs measured it, the median of their CPU times taken on its own."""
    by_wall = sorted(runs, key=lambda r: r["wall_s"])
    cpu = {"cpu_s": statistics.median(r["cpu_s"] for r in runs)} if all("cpu_s" in r for r in runs) else {}
    return {**by_wall[len(runs) // 2], **cpu, "repeats": len(runs),
            "wall_s_min": by_wall[0]["wall_s"], "wall_s_max": by_wall[-1]["wall_s"]}


def simpy_speed_ratios(engine: dict, simpy: dict) -> dict:
    """vmsched / SimPy on the same model (`median_run` results): simulated seconds per CPU
    second of the run, the goal's measure (a machine shared with other work stretches wall
    time, not CPU time), and simulated seconds per wall second."""
    return {"speed_ratio": (engine["sim_s"] / engine["cpu_s"]) / (simpy["sim_s"] / simpy["cpu_s"]),
            "speed_ratio_wall": engine["sim_s_per_wall_s"] / simpy["sim_s_per_wall_s"]}


def agreement(engine: dict, simpy: dict, key: str) -> dict:
    """z-test on per-simulated-second rates, treating each count as Poisson: the variance
    of a count is about its mean, so the rate's is count / T^2."""
    rate_engine, rate_simpy = engine[key] / engine["sim_s"], simpy[key] / simpy["sim_s"]
    stderr = math.sqrt(engine[key] / engine["sim_s"] ** 2 + simpy[key] / simpy["sim_s"] ** 2)
    z = (rate_engine - rate_simpy) / stderr if stderr else math.inf
    return {"vmsched_per_s": rate_engine, "simpy_per_s": rate_simpy,
            "relative_difference": rate_engine / rate_simpy - 1 if rate_simpy else math.inf,
            "z": z, "z_limit": Z_LIMIT, "pass": abs(z) <= Z_LIMIT}


def _speed(measured: dict) -> dict:
    """Events and simulated seconds per wall second."""
    return {**measured, "events_per_s": measured["events"] / measured["wall_s"],
            "sim_s_per_wall_s": measured["sim_s"] / measured["wall_s"]}


def run_bench(quick: bool = False, on_step: Callable[[str], None] | None = None, repeat: int = 3,
              peer: bool = False, peer_path: str | None = None) -> dict:
    """The figures of `vmsched bench`; with `peer`, the peer series too when tailtamer is
    importable (from `peer_path`, a checkout, when given), else a note that it was skipped."""
    require_simpy()
    if repeat < 1:
        raise UserError(f"--repeat {repeat}: must be at least 1")
    step = on_step or (lambda _: None)
    figures: dict = {"quick": quick, "repeat": repeat, "engine": {}}
    step(f"running {MIXED}")
    figures["engine"][MIXED] = _speed(_repeated(repeat, "engine", MIXED, str(QUICK_NS[MIXED]) if quick else ""))
    simpy_s = QUICK_NS[SIMPY_MODEL] / 1e9 if quick else FULL_SIMPY_S
    step(f"running {SIMPY_MODEL} and the SimPy model of it ({simpy_s:g} simulated s), in turn")
    # Alternated, so that a change in the machine's speed reaches both alike.
    runs: dict[str, list[dict]] = {"engine": [], "simpy": []}
    for _ in range(repeat):
        runs["engine"].append(_in_child("engine", SIMPY_MODEL, str(QUICK_NS[SIMPY_MODEL]) if quick else ""))
        runs["simpy"].append(_in_child("simpy", str(simpy_s)))
    model = figures["engine"][SIMPY_MODEL] = _speed(median_run(runs["engine"]))
    figures["simpy"] = _speed(median_run(runs["simpy"]))
    figures.update(simpy_speed_ratios(model, figures["simpy"]))
    figures["agreement"] = {key: agreement(model, figures["simpy"], key) for key in ("slices", "wakeups")}
    figures["agreement_pass"] = all(check["pass"] for check in figures["agreement"].values())
    figures["scale"] = scale_series(quick, step)
    figures["memory"] = memory_series(quick, step)
    if peer:
        from .peer import import_tailtamer
        if import_tailtamer(peer_path) is None:
            figures["peer_skipped"] = ("tailtamer is not importable: give its checkout with --peer-path "
                                       "(or TAILTAMER_DIR), or install it")
            step(f"peer: skipped, {figures['peer_skipped']}")
        else:
            figures["peer"] = peer_series(quick, repeat, peer_path, step)
    return figures


def scale_series(quick: bool, step: Callable[[str], None]) -> list[dict]:
    """One fresh process per size (run once each: the sizes above 1,024 pCPUs take
    minutes), without recording, as the engine's cost per event is the question."""
    series = []
    for pcpus in QUICK_SCALE_PCPUS if quick else SCALE_PCPUS:
        duration = QUICK_SCALE_NS if quick else SCALE_NS[pcpus]
        step(f"scale: {pcpus} pCPUs, {duration / 1e9:g} simulated s")
        measured = _speed(_in_child("scale", str(pcpus), str(duration)))
        series.append({**measured, "setup_s_per_pcpu": measured["setup_s"] / pcpus})
    return series


def memory_series(quick: bool, step: Callable[[str], None]) -> list[dict]:
    """Peak memory of the default scenario with recording on, for growing run lengths,
    then of an overloaded open-loop server for the longest of them."""
    lengths = QUICK_MEMORY_NS if quick else MEMORY_NS
    runs = [(MEMORY_SCENARIO, ns, []) for ns in lengths] + [(MEMORY_SCENARIO, lengths[-1], OVERLOAD_SET)]
    series = []
    for name, ns, overrides in runs:
        step(f"memory: {name} {'(overloaded server) ' if overrides else ''}for {ns / 1e9:g} simulated s")
        series.append(_in_child("memory", name, str(ns), json.dumps(overrides)))
    return series


def _millions(per_s: float) -> str:
    return f"{per_s / 1e6:.2f} M"


def print_bench(figures: dict, console) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="speed and memory: median wall time of the runs, their range, simulated s per wall s,"
                        " peak resident memory" + (" (--quick: not representative)" if figures["quick"] else ""),
                  title_justify="left")
    for header in ("run", "sim s", "wall s", "range", "events/s", "sim/wall", "RSS MB"):
        table.add_column(header, justify="left" if header == "run" else "right", no_wrap=True)
    rows = [*figures["engine"].items(), ("SimPy", figures["simpy"])]
    for name, measured in rows:
        table.add_row(name, f"{measured['sim_s']:g}", f"{measured['wall_s']:.3f}",
                      f"{measured['wall_s_min']:.2f}–{measured['wall_s_max']:.2f}",
                      _millions(measured["events_per_s"]), f"{measured['sim_s_per_wall_s']:,.1f}", f"{measured['peak_rss_mb']:.1f}")
    console.print(table)
    console.print(Text.assemble("vmsched / SimPy, simulated seconds per CPU second of the run on the same model "
                                f"(medians of {figures['repeat']} alternated runs each): ",
                                (f"{figures['speed_ratio']:.1f}x", "bold"),
                                f"; per wall second: {figures['speed_ratio_wall']:.1f}x"))
    checks = Table(title="agreement with the SimPy model (z-test on per-second rates)", title_justify="left")
    for header in ("count", "vmsched /s", "SimPy /s", "difference", "z", "result"):
        checks.add_column(header, justify="left" if header == "count" else "right")
    for key, check in figures["agreement"].items():
        checks.add_row(key, f"{check['vmsched_per_s']:,.1f}", f"{check['simpy_per_s']:,.1f}",
                       f"{check['relative_difference']:+.2%}", f"{check['z']:+.2f}",
                       Text("pass", style="green") if check["pass"] else Text(f"fail (|z| > {check['z_limit']})", style="red"))
    console.print(checks)
    scale = Table(title="scale: bench-mixed-64 repeated, no recording (set-up: parse and build; "
                        "1 ns run: set-up, every workload starting, summary)", title_justify="left")
    for header in ("pCPUs", "vCPUs", "set-up s", "set-up µs/pCPU", "1 ns run s", "sim s", "wall s", "events/s",
                   "sim/wall", "RSS MB"):
        scale.add_column(header, justify="right", no_wrap=True)
    for measured in figures["scale"]:
        scale.add_row(str(measured["pcpus"]), str(measured["vcpus"]), f"{measured['setup_s']:.3f}",
                      f"{measured['setup_s_per_pcpu'] * 1e6:.0f}", f"{measured['first_instant_s']:.3f}",
                      f"{measured['sim_s']:g}", f"{measured['wall_s']:.2f}",
                      _millions(measured["events_per_s"]), f"{measured['sim_s_per_wall_s']:.3f}", f"{measured['peak_rss_mb']:.0f}")
    console.print(scale)
    memory = Table(title="memory: runs written to a run directory with recording on (peak RSS; at the end, "
                         "anonymous and mapped-file MB: the file part varies with the page cache)", title_justify="left")
    for header in ("run", "sim s", "wall s", "events", "output MB", "RSS MB", "anon MB", "file MB"):
        memory.add_column(header, justify="left" if header == "run" else "right", no_wrap=True)
    for measured in figures["memory"]:
        label = measured["scenario"] + (" (overloaded server)" if measured["overrides"] else "")
        memory.add_row(label, f"{measured['sim_s']:g}", f"{measured['wall_s']:.1f}", f"{measured['events']:,}",
                       f"{measured['output_mb']:.1f}", f"{measured['peak_rss_mb']:.0f}",
                       *(("–" if measured[key] is None else f"{measured[key]:.0f}") for key in ("rss_anon_mb", "rss_file_mb")))
    console.print(memory)
    if "peer_skipped" in figures:
        console.print(f"peer series skipped: {figures['peer_skipped']}")
    if "peer" in figures:
        peer = Table(title="peer: the same two-level model on tailtamer and vmsched (`vmsched run`, recording / "
                           "--no-record), each whole process from start to exit, medians of "
                           f"{figures['repeat']} alternated runs: CPU s (user + system), ratios tailtamer / vmsched "
                           "of CPU time and of wall time, what recording adds to vmsched's CPU time, peak RSS",
                     title_justify="left")
        for header in ("case", "sim s", "events", "CPU s: tailtamer / rec / no-rec", "CPU ratio: rec / no-rec",
                       "wall ratio: rec / no-rec", "recording +CPU", "RSS MB: rec / no-rec / tailtamer"):
            peer.add_column(header, justify="left" if header == "case" else "right", no_wrap=True)
        for m in figures["peer"]:
            peer.add_row(m["case"], f"{m['sim_s']:g}", f"{m['events']:,}",
                         f"{m['tailtamer_cpu_s']:.2f} / {m['record_cpu_s']:.2f} / {m['no_record_cpu_s']:.2f}",
                         f"{m['cpu_ratio_record']:.1f}x / {m['cpu_ratio_no_record']:.1f}x",
                         f"{m['ratio_record']:.1f}x / {m['ratio_no_record']:.1f}x",
                         f"{m['record_cpu_overhead']:+.0%}",
                         f"{m['record_peak_rss_mb']:.0f} / {m['no_record_peak_rss_mb']:.0f} / {m['tailtamer_peak_rss_mb']:.0f}")
        console.print(peer)
    runs = [*figures["engine"].items(), *((m["case"], m) for m in figures.get("peer", []))]
    kinds = list(runs[0][1]["events_per_pcpu_s"]) if runs else []
    by_kind = Table(title="events per simulated pCPU-second, by kind (summary events_by_kind)", title_justify="left")
    for header in ("run", *kinds):
        by_kind.add_column(header, justify="left" if header == "run" else "right", no_wrap=True)
    for name, measured in runs:
        by_kind.add_row(name, *(f"{measured['events_per_pcpu_s'][kind]:,.0f}" for kind in kinds))
    console.print(by_kind)


if __name__ == "__main__":
    kind, *rest = sys.argv[1:]
    if kind == "engine":
        name, duration = rest
        print(json.dumps(_engine_child(name, int(duration) if duration else None)))
    elif kind == "scale":
        pcpus, duration = rest
        print(json.dumps(_scale_child(int(pcpus), int(duration))))
    elif kind == "peer-vm":
        pcpus, vms, duration_ms, record = map(int, rest)
        print(json.dumps(_peer_vm_child(pcpus, vms, duration_ms, bool(record))))
    elif kind == "peer-tt":
        pcpus, vms, duration_ms, path = rest
        print(json.dumps(_peer_tt_child(int(pcpus), int(vms), int(duration_ms), path)))
    elif kind == "train":
        print(json.dumps({"runs": training_runs()}))
    elif kind == "memory":
        name, duration, overrides = rest
        print(json.dumps(_memory_child(name, int(duration), json.loads(overrides))))
    else:
        (sim_s,) = rest
        print(json.dumps(_simpy_child(float(sim_s))))
