"""`vmsched real`: a scenario's workloads run by real threads on this machine. The runs
are short (well under a few seconds each) and assert what the kernel guarantees however
loaded the machine is: the summary speaks the simulator's schema, nice levels share one
pinned CPU by weight, refusals exit 2 with nothing written, Ctrl-C leaves nothing half."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import tomli_w

from vmsched import api
from vmsched.real_cmd import GOALS, compare_rows, figures, groundtruth_cases, nearest_kernel_profile, twin_case

from conftest import assert_user_error, interrupt

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="real runs need Linux")

NICE = """name = "nice"
duration_ms = 1000
[[vm]]
name = "guest"
vcpus = 1
[[vm.workload]]
kind = "hog"
name = "nice0"
[[vm.workload]]
kind = "hog"
name = "nice5"
nice = 5
"""

# sched_prio_to_weight[20] / sched_prio_to_weight[25] (kernel/sched/core.c).
NICE_0_OVER_5 = 1024 / 335
# How far an always-runnable thread's CPU time may stray from its fair share: EEVDF's
# lag bound, a base slice of at most 3 ms plus a tick of at most 10 ms (as
# LAG_BOUND_NS in crates/real/tests/real.rs, which gives the sources).
LAG_BOUND_NS = 13e6


def _flat_report(cpus: int) -> dict:
    """A probe report of `cpus` dedicated vCPUs of equal speed in one socket: the twin
    of an uncontended machine, so the comparison does not wait for a real probe."""
    return {
        "schema": "vmsched.probe/1",
        "timestamp": 0.0,
        "cpus": list(range(cpus)),
        "capacity_detail": {str(c): {"core_rate_units_per_us": 1.0, "share": 1.0} for c in range(cpus)},
        "latency": {str(c): {"observed_ms": 100.0, "gap_steal_ms": 0.0, "inactive_avg_us": 0.0, "preemptions": 0}
                    for c in range(cpus)},
        "topology": {"cpus": list(range(cpus)),
                     "groups": {"stacked": [[c] for c in range(cpus)], "smt": [[c] for c in range(cpus)],
                                "socket": [list(range(cpus))]}},
    }


def test_real_run_writes_the_simulators_schema(cli, tmp_path):
    case = tmp_path / "nice.toml"
    case.write_text(NICE)
    result = cli("real", "run", str(case), "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    real = json.loads((tmp_path / "run" / "summary.json").read_text())
    sim = api.run(api.Scenario(NICE, "nice"), record=False).summary
    assert set(real) - {"real"} <= set(sim), set(real) - set(sim)
    real_extra = {"context_switches", "migrations", "runnable_ns"}
    for r, s in zip(real["workloads"], sim["workloads"]):
        assert set(r) - real_extra <= set(s), set(r) - set(s)
        assert r["name"] == s["name"] and r["kind"] == s["kind"] and r["threads"] == s["threads"]
    assert set(real["vms"][0]) <= set(sim["vms"][0]) | {"vcpus"}
    # The kernel's weights: nice 0 gets 3.06x nice 5's CPU on the one pinned CPU, up to
    # each one's lag bound whatever else shares the CPU.
    cpu = {w["name"]: w["cpu_time_ns"] for w in real["workloads"]}
    assert abs(cpu["nice0"] - NICE_0_OVER_5 * cpu["nice5"]) <= (1 + NICE_0_OVER_5) * LAG_BOUND_NS, cpu
    assert real["real"]["cpus"] == [real["real"]["cpus"][0]] and real["real"]["loadavg_1m_before"] is not None
    tasks = pl.read_parquet(tmp_path / "run" / "tasks.parquet")
    assert tasks["workload"].to_list() == ["nice0", "nice5"]
    assert (tasks["vcpu_last"] == 0).all()


def test_real_run_refuses_what_it_cannot_run(cli, tmp_path):
    cpus = len(os.sched_getaffinity(0))
    big = tmp_path / "big.toml"
    big.write_text(f"name='big'\nduration_ms=100\n[[vm]]\nname='g'\nvcpus={cpus + 1}\n[[vm.workload]]\nkind='hog'\n")
    assert_user_error(cli("real", "run", str(big), "--out", str(tmp_path / "a")), "big.toml", f"needs {cpus + 1} vCPUs")
    ping = tmp_path / "ping.toml"
    ping.write_text("name='p'\nduration_ms=100\n[[vm]]\nname='g'\n[[vm.workload]]\nkind='ping'\n")
    assert_user_error(cli("real", "run", str(ping), "--out", str(tmp_path / "b")), "ping")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.toml", "ping.toml"]


def _wait_for_thread(proc: subprocess.Popen, name: str, limit_s: float = 60) -> None:
    """Until `proc` has a thread called `name`: a workload thread exists once the run is
    under way, long after the interpreter's start-up installed the signal handlers (a
    fixed sleep would race that start-up, seconds on a loaded machine)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        names = set()
        for comm in Path(f"/proc/{proc.pid}/task").glob("*/comm"):
            try:
                names.add(comm.read_text().strip())
            except OSError:
                pass  # a thread that ended meanwhile
        if name in names:
            return
        time.sleep(0.05)
    raise AssertionError(f"no thread {name!r} in the real run after {limit_s} s")


def test_ctrl_c_stops_the_threads_and_writes_nothing(tmp_path):
    case = tmp_path / "long.toml"
    case.write_text("name='long'\nduration_ms=60000\n[[vm]]\nname='g'\n[[vm.workload]]\nkind='hog'\nname='spin'\n"
                    "[[vm.workload]]\nkind='server'\nrate_per_s=500\nwork_us=100\n")
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "vmsched.cli", "real", "run", str(case), "--out", str(out)],
                            stderr=subprocess.PIPE, text=True)
    _wait_for_thread(proc, "spin/0")
    # The message comes once the threads are joined and the output is discarded.
    answered, lines = interrupt(proc)
    assert proc.wait(timeout=30) == 130, lines
    assert answered < 5, f"the threads did not stop at once: {answered:.2f} s"
    assert "error: interrupted; nothing was written\n" in lines, lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.toml"]


def test_compare_nice_share_end_to_end(tmp_path):
    """One short `real compare`: the share of the case's CPU nice 0 takes is the
    kernel's 1024 / (1024 + 335) on both sides, within the 20% this test allows
    a shared machine."""
    case = tmp_path / "nice.toml"
    case.write_text(NICE)
    report = tmp_path / "probe.json"
    report.write_text(json.dumps(_flat_report(len(os.sched_getaffinity(0)))))
    proc = subprocess.run([sys.executable, "-m", "vmsched.cli", "real", "compare", str(case), "--repeat", "1",
                           "--probe-report", str(report), "--json", "--out", str(tmp_path / "cmp")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    keys = {"case", "metric", "real_mean", "real_spread", "sim_mean", "ratio", "goal", "within_goal"}
    assert rows and all(set(r) == keys for r in rows)
    part = {r["metric"]: r for r in rows if r["metric"].endswith("part of case cpu")}
    expected = 1024 / (1024 + 335)
    for side in ("real_mean", "sim_mean"):
        assert abs(part["nice0: part of case cpu"][side] / expected - 1) < 0.2, part
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert saved["rows"] == rows and saved["cases"][0]["guest_profile"].startswith("linux-")
    assert (tmp_path / "cmp" / "compare.html").read_text().count("<tr>") == len(rows) + 1


def test_compare_rows_ratio_spread_and_goals():
    def summary(values):
        return {"duration_ns": 1e9, "workloads": [
            {"name": "s", "kind": "server", "cpu_time_ns": values[0], "throughput_per_s": values[1],
             "latency_ns": {"count": 10, "p50": values[2], "p99": values[3]}, "context_switches": 100,
             "migrations": 0}]}
    real = [summary([5e8, 100.0, 1000.0, 4000.0]), summary([5e8, 110.0, 3000.0, 4000.0])]
    sim = summary([5.2e8, 100.0, 4500.0, 4000.0])
    sim_tasks = pl.DataFrame({"workload": ["s", "s"], "context_switches": [70, 60],
                                                "migrations": [0, 0]})
    rows = {r["metric"]: r for r in compare_rows("c", real, sim, sim_tasks)}
    share = rows["s: cpu share"]
    assert share["real_mean"] == 0.5 and share["real_spread"] == 0 and abs(share["ratio"] - 1.04) < 1e-9
    assert share["within_goal"] and share["goal"] == "share_5pct"
    tput = rows["s: throughput /s"]
    assert tput["real_mean"] == 105 and abs(tput["real_spread"] - 7.0710678) < 1e-6 and tput["within_goal"]
    assert not rows["s: latency p50 us"]["within_goal"]  # 4.5 / 2 = 2.25x
    assert rows["s: latency p99 us"]["ratio"] == 1.0
    ctx = rows["s: context switches /s"]
    assert ctx["sim_mean"] == 130 and abs(ctx["ratio"] - 1.3) < 1e-9 and not ctx["within_goal"]
    assert rows["s: migrations /s"]["ratio"] is None and rows["s: migrations /s"]["within_goal"]
    assert set(GOALS) == {r["goal"] for r in rows.values()}


def test_twin_case_keeps_the_case_vm_on_its_cpus():
    twin = twin_case(NICE, None, _flat_report(2), "linux-6.14", 250)
    vm = twin["vm"][0]
    assert vm["name"] == "guest" and vm["vcpus"] == 2
    assert vm["guest"] == {"policy": "linux", "kernel": "linux-6.14", "hz": 250}
    assert [w["affinity"] for w in vm["workload"]] == [[0], [0]]
    assert api.run(api.Scenario(tomli_w.dumps(twin), "twin"), record=False).summary["workloads"]
    # The machine's other runnable groups as background hogs, free on every vCPU, and
    # left out of the compared figures (the part of the case's CPU included).
    busy = twin_case(NICE, None, _flat_report(2), "linux-6.14", 250, background=3)
    assert busy["vm"][0]["workload"][-1] == {"kind": "hog", "name": "background", "threads": 3}
    sim = api.run(api.Scenario(tomli_w.dumps(busy), "twin"), record=False).summary
    figs = figures(sim, {})
    assert {name for name, _ in figs} == {"nice0", "nice5"}
    assert abs(figs[("nice0", "part of case cpu")][0] + figs[("nice5", "part of case cpu")][0] - 1) < 1e-9


def test_the_suite_is_embedded_and_each_case_has_a_real_executor():
    names = [name for name, _ in groundtruth_cases()]
    assert len(names) >= 8 and len(set(names)) == len(names)
    for name, source in groundtruth_cases():
        config = api.normalize(source)
        assert config["name"] == name
        # One VM of at most two vCPUs: the suite runs on a 2-vCPU machine.
        assert len(config["vm"]) == 1 and config["vm"][0]["vcpus"] <= 2
        assert all(w["kind"] not in ("ping", "disk_read") for w in config["vm"][0]["workload"])


def test_nearest_kernel_profile():
    profiles = ["linux-3.2", "linux-6.5", "linux-6.12", "linux-6.14", "xen-4.9"]
    assert nearest_kernel_profile("6.18.44-fc-v657", profiles) == "linux-6.14"
    assert nearest_kernel_profile("6.13.1", profiles) == "linux-6.12"
    assert nearest_kernel_profile("6.5.0-generic", profiles) == "linux-6.5"
    assert nearest_kernel_profile("2.6.32", profiles) == "linux-3.2"
