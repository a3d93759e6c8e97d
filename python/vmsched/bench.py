"""`vmsched bench`: speed and memory of the engine on two built-in scenarios, the SimPy
baseline run in the same session, and a statistical check that the engine's model of the
baseline produces the same slice and wakeup rates.

Each measurement runs in a fresh child process (`python -m vmsched.bench ...`) so that
the peak resident memory it reports belongs to that one scenario."""
from __future__ import annotations

import json
import math
import resource
import subprocess
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


def default_simpy_script() -> Path:
    repo_root = Path(__file__).resolve().parents[2]
    return repo_root.parent / "shared" / "bench" / "simpy_baseline.py"


def _peak_rss_mb() -> float:
    """Peak resident memory of this process. Linux carries getrusage's ru_maxrss across
    exec, so a child started by a large parent would report the parent's peak; VmHWM
    belongs to the process's own address space."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _engine_child(name: str, duration_ns: int | None) -> dict:
    from . import _native
    text = next(toml for builtin, _, toml in _native.builtin_scenarios() if builtin == name)
    started = time.perf_counter()
    summary_json, _ = _native.run_scenario(text, f"builtin:{name}", [], None, duration_ns,
                                           False, False, None, None)
    wall = time.perf_counter() - started
    summary = json.loads(summary_json)
    return {"wall_s": wall, "events": summary["events"], "sim_s": summary["duration_ns"] / 1e9,
            "slices": sum(vm["task_slices"] for vm in summary["vms"]),
            "wakeups": sum(vm["wakeups"] for vm in summary["vms"]), "peak_rss_mb": _peak_rss_mb()}


def _simpy_child(script: str, sim_s: float) -> dict:
    import importlib.util
    spec = importlib.util.spec_from_file_location("simpy_baseline", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    figures = module.main(sim_s, SIMPY_SEED)
    return {"wall_s": figures["wall"], "events": figures["kernel_events"], "sim_s": sim_s,
            "slices": figures["slices"], "wakeups": figures["wakeups"], "peak_rss_mb": _peak_rss_mb()}


def _in_child(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "vmsched.bench", *args],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench child {' '.join(args)} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)


def _repeated(repeat: int, *args: str) -> dict:
    """The run with the median wall time of `repeat` fresh-process runs, with the spread
    of all of them: one run on a shared machine can be slowed by its neighbours."""
    runs = sorted((_in_child(*args) for _ in range(repeat)), key=lambda r: r["wall_s"])
    median = runs[len(runs) // 2]
    return {**median, "repeats": repeat, "wall_s_min": runs[0]["wall_s"], "wall_s_max": runs[-1]["wall_s"]}


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
    return {**measured, "events_per_s": measured["events"] / measured["wall_s"],
            "sim_s_per_wall_s": measured["sim_s"] / measured["wall_s"]}


def run_bench(quick: bool = False, simpy_script: Path | None = None,
              on_step: Callable[[str], None] | None = None, repeat: int = 3) -> dict:
    script = simpy_script or default_simpy_script()
    if not script.is_file():
        raise UserError(f"{script}: SimPy baseline not found; pass --simpy PATH")
    if repeat < 1:
        raise UserError(f"--repeat {repeat}: must be at least 1")
    step = on_step or (lambda _: None)
    figures: dict = {"quick": quick, "repeat": repeat, "engine": {}}
    for name in (MIXED, SIMPY_MODEL):
        step(f"running {name}")
        duration = QUICK_NS[name] if quick else None
        figures["engine"][name] = _speed(_repeated(repeat, "engine", name, "" if duration is None else str(duration)))
    simpy_s = QUICK_NS[SIMPY_MODEL] / 1e9 if quick else FULL_SIMPY_S
    step(f"running SimPy baseline ({simpy_s:g} simulated s)")
    figures["simpy"] = _speed(_repeated(repeat, "simpy", str(script), str(simpy_s)))
    model = figures["engine"][SIMPY_MODEL]
    figures["speed_ratio"] = model["sim_s_per_wall_s"] / figures["simpy"]["sim_s_per_wall_s"]
    figures["agreement"] = {key: agreement(model, figures["simpy"], key) for key in ("slices", "wakeups")}
    figures["agreement_pass"] = all(check["pass"] for check in figures["agreement"].values())
    return figures


def print_bench(figures: dict, console) -> None:
    from rich.table import Table

    table = Table(title="speed and memory: median wall time of the runs, their range, simulated s per wall s,"
                        " peak resident memory" + (" (--quick: not representative)" if figures["quick"] else ""),
                  title_justify="left")
    for header in ("run", "sim s", "wall s", "range", "events/s", "sim/wall", "RSS MB"):
        table.add_column(header, justify="left" if header == "run" else "right", no_wrap=True)
    rows = [*figures["engine"].items(), ("SimPy", figures["simpy"])]
    for name, measured in rows:
        table.add_row(name, f"{measured['sim_s']:g}", f"{measured['wall_s']:.3f}",
                      f"{measured['wall_s_min']:.2f}–{measured['wall_s_max']:.2f}",
                      f"{measured['events_per_s'] / 1e6:.2f} M", f"{measured['sim_s_per_wall_s']:,.1f}",
                      f"{measured['peak_rss_mb']:.1f}")
    console.print(table)
    console.print(f"vmsched / SimPy, simulated seconds per wall second on the same model "
                  f"(medians of {figures['repeat']} runs each): [bold]{figures['speed_ratio']:.1f}x[/]")
    checks = Table(title="agreement with the SimPy model (z-test on per-second rates)", title_justify="left")
    for header in ("count", "vmsched /s", "SimPy /s", "difference", "z", "result"):
        checks.add_column(header, justify="left" if header == "count" else "right")
    for key, check in figures["agreement"].items():
        checks.add_row(key, f"{check['vmsched_per_s']:,.1f}", f"{check['simpy_per_s']:,.1f}",
                       f"{check['relative_difference']:+.2%}", f"{check['z']:+.2f}",
                       "[green]pass[/]" if check["pass"] else f"[red]fail (|z| > {check['z_limit']})[/]")
    console.print(checks)


if __name__ == "__main__":
    kind, *rest = sys.argv[1:]
    if kind == "engine":
        name, duration = rest
        print(json.dumps(_engine_child(name, int(duration) if duration else None)))
    else:
        script, sim_s = rest
        print(json.dumps(_simpy_child(script, float(sim_s))))
