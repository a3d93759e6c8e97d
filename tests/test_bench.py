"""`bench --quick`: the output's structure and the agreement of the engine's model of the
SimPy baseline with SimPy itself (timings are reported, never asserted)."""
from __future__ import annotations

import json

from vmsched.bench import MIXED, SIMPY_MODEL


def test_quick_bench(cli):
    result = cli("bench", "--quick", "--json", "--repeat", "2")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    for measured in (*figures["engine"].values(), figures["simpy"]):
        assert measured["events"] > 0 and measured["wall_s"] > 0 and measured["peak_rss_mb"] > 0
        assert measured["sim_s_per_wall_s"] > 0 and measured["events_per_s"] > 0
        assert measured["repeats"] == 2 and measured["wall_s_min"] <= measured["wall_s"] <= measured["wall_s_max"]
    assert set(figures["engine"]) == {MIXED, SIMPY_MODEL}
    assert figures["speed_ratio"] > 0 and figures["speed_ratio_wall"] > 0
    for measured in (figures["engine"][SIMPY_MODEL], figures["simpy"]):
        assert measured["cpu_s"] > 0
    for key in ("slices", "wakeups"):
        check = figures["agreement"][key]
        assert check["pass"], check
    assert figures["agreement_pass"]
    assert [point["pcpus"] for point in figures["scale"]] == [64, 256]
    for point in figures["scale"]:
        # The VM mix is repeated with the host: 2x overcommitted eight-vCPU VMs.
        assert point["vcpus"] == 2 * point["pcpus"]
        assert 0 < point["setup_s"] <= point["first_instant_s"] and point["events"] > 0 and point["peak_rss_mb"] > 0
    for measured in (*figures["engine"].values(), figures["simpy"], *figures["scale"], *figures["memory"]):
        # What is resident at the end, anonymous plus mapped files, is at most the peak.
        assert 0 < measured["rss_anon_mb"] and 0 < measured["rss_file_mb"]
        assert measured["rss_anon_mb"] + measured["rss_file_mb"] <= measured["peak_rss_mb"] + 0.01
    default, longer, overloaded = figures["memory"]
    assert default["sim_s"] < longer["sim_s"] == overloaded["sim_s"]
    assert 0 < default["output_mb"] < longer["output_mb"]
    server = overloaded["workloads"]["web/nginx-like"]
    # Offered twice what it can serve: about half the requests are dropped at the backlog bound.
    assert server["backlog_max"] == 4096 and server["dropped"] > 0.1 * (server["completed"] + server["dropped"])
    assert longer["workloads"]["web/nginx-like"]["dropped"] == 0


def test_the_training_of_the_profile_guided_build_runs_every_builtin_and_variant():
    """`tools/build-extension.sh` trains on `training_runs`: every built-in and each of
    its variants must run (one whose timed changes come later runs its full length), or
    the profile-guided set-up fails on a fresh machine."""
    from vmsched.bench import training_runs
    from vmsched.comparison import builtin_cases
    cases = len(builtin_cases())
    assert cases > 300
    assert training_runs(duration_ns=1_000_000) == cases


def test_the_simpy_model_is_deterministic_and_slices_at_the_rate_round_robin_gives():
    """The project's own SimPy model of bench-simpy-rr: the same seed gives the same
    counts; every wakeup ends a sleep that followed a finished burst, so wakeups never
    outnumber slices. Eight tasks per CPU, each asking for half a CPU, keep every CPU
    busy, so a CPU finishes 1 / (1 ms mean burst) bursts a second, and a burst of
    Exp(1 ms) runs past k whole 3 ms slices with probability e^(-3k): slices per
    CPU-second are 1000 x (1 + e^-3 / (1 - e^-3)) = 1052.4."""
    import math
    from vmsched import simpy_model
    first, again = simpy_model.run(2.0, 7), simpy_model.run(2.0, 7)
    assert (first["slices"], first["wakeups"], first["events"]) == (again["slices"], again["wakeups"], again["events"])
    assert 0 < first["wakeups"] <= first["slices"]
    expiry = math.exp(-simpy_model.SLICE_S / simpy_model.MEAN_BURST_S)
    expected = (1 + expiry / (1 - expiry)) / simpy_model.MEAN_BURST_S
    per_cpu_s = first["slices"] / (simpy_model.CPUS * 2.0)
    # About 16,800 slices: a Poisson count's relative spread is under 1%.
    assert abs(per_cpu_s / expected - 1) < 0.03, (per_cpu_s, expected)
    assert simpy_model.run(2.0, 8)["slices"] != first["slices"]


def test_bench_without_simpy_names_the_extra(cli, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "simpy", None)  # `import simpy` now raises ImportError
    result = cli("bench", "--quick")
    assert result.exit_code == 2
    assert "vmsched[bench]" in result.output


def test_peer_figures_are_ratios_of_medians_taken_one_measure_at_a_time():
    """Hand-worked: each kind's CPU time, wall time and peak RSS have their own median
    (the run with the median CPU time need not be the one with the median wall time),
    and the ratios tailtamer / vmsched and recording's share are taken of those."""
    from vmsched.bench import peer_case_figures

    def run(cpu_s, wall_s, rss=30.0):
        return {"cpu_s": cpu_s, "wall_s": wall_s, "peak_rss_mb": rss, "events": 100,
                "events_per_pcpu_s": {"progress": 25.0}}

    figures = peer_case_figures({
        "record": [run(1.2, 3.0), run(1.0, 1.5), run(1.4, 2.0, 40.0)],
        "tailtamer": [run(30.0, 33.0), run(36.0, 31.0), run(24.0, 32.0)],
        "no_record": [run(0.9, 1.0), run(1.0, 4.0), run(0.6, 2.0)],
    })
    assert figures["record_cpu_s"] == 1.2 and figures["record_wall_s"] == 2.0 and figures["record_peak_rss_mb"] == 30.0
    assert figures["tailtamer_cpu_s"] == 30.0 and figures["tailtamer_wall_s"] == 32.0
    assert figures["no_record_cpu_s"] == 0.9 and figures["no_record_wall_s"] == 2.0
    assert figures["cpu_ratio_record"] == 25.0 and figures["ratio_record"] == 16.0
    assert abs(figures["cpu_ratio_no_record"] - 30.0 / 0.9) < 1e-12 and figures["ratio_no_record"] == 16.0
    assert abs(figures["record_cpu_overhead"] - (1.2 / 0.9 - 1)) < 1e-12
    assert figures["events"] == 100 and figures["events_per_pcpu_s"] == {"progress": 25.0}
    # An even number of runs: the mean of the middle two.
    two = peer_case_figures({kind: [run(1.0, 1.0), run(2.0, 3.0)] for kind in ("record", "tailtamer", "no_record")})
    assert two["record_cpu_s"] == 1.5 and two["record_wall_s"] == 2.0 and two["cpu_ratio_record"] == 1.0


def test_simpy_ratio_is_of_cpu_time_medians_and_wall_time_medians_each_on_its_own():
    """Hand-worked: the median CPU time of a kind need not be the median-wall run's, and
    the ratio of simulated seconds per CPU second uses each side's own median."""
    from vmsched.bench import _speed, median_run, simpy_speed_ratios

    def run(cpu_s, wall_s, sim_s):
        return {"cpu_s": cpu_s, "wall_s": wall_s, "sim_s": sim_s, "events": 1000}

    engine = _speed(median_run([run(0.10, 0.30, 60.0), run(0.12, 0.11, 60.0), run(0.20, 0.20, 60.0)]))
    simpy = _speed(median_run([run(2.0, 2.5, 30.0), run(1.5, 2.0, 30.0), run(3.0, 1.0, 30.0)]))
    assert engine["wall_s"] == 0.20 and engine["cpu_s"] == 0.12 and engine["repeats"] == 3
    assert engine["wall_s_min"] == 0.11 and engine["wall_s_max"] == 0.30
    assert simpy["wall_s"] == 2.0 and simpy["cpu_s"] == 2.0
    ratios = simpy_speed_ratios(engine, simpy)
    # (60 / 0.12) / (30 / 2.0) = 500 / 15; per wall second (60 / 0.2) / (30 / 2.0) = 300 / 15.
    assert abs(ratios["speed_ratio"] - 500 / 15) < 1e-9 and abs(ratios["speed_ratio_wall"] - 20.0) < 1e-9


def test_the_peer_vmsched_child_runs_the_command_line():
    """The vmsched side of the peer series is `vmsched run` itself, start-up included:
    its child loads the command line's libraries, and recording writes the tables."""
    import subprocess
    import sys
    measured = {}
    for record in ("1", "0"):
        done = subprocess.run([sys.executable, "-c", PEER_CHILD_THEN_MODULES, record],
                              capture_output=True, text=True, timeout=120, check=True)
        figures, modules = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
        # The command line ran (typer), and wrote its summary to /dev/null without rich.
        assert "typer" in modules and "rich" not in modules, sorted(modules)
        assert figures["peak_rss_mb"] > 0
        measured[record] = figures
    # Recording adds the sampling events to the run's own.
    assert 0 < measured["0"]["events"] < measured["1"]["events"]


PEER_CHILD_THEN_MODULES = """
import json, sys
from vmsched.bench import _peer_vm_child
print(json.dumps(_peer_vm_child(4, 3, 200, sys.argv[1] == "1")))
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
"""
