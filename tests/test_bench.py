"""`bench --quick`: the output's structure and the agreement of the engine's model of the
SimPy baseline with SimPy itself (timings are reported, never asserted)."""
from __future__ import annotations

import json

from vmsched.bench import MIXED, SIMPY_MODEL, default_simpy_script


def test_quick_bench(cli):
    assert default_simpy_script().is_file()
    result = cli("bench", "--quick", "--json", "--repeat", "2")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    for measured in (*figures["engine"].values(), figures["simpy"]):
        assert measured["events"] > 0 and measured["wall_s"] > 0 and measured["peak_rss_mb"] > 0
        assert measured["sim_s_per_wall_s"] > 0 and measured["events_per_s"] > 0
        assert measured["repeats"] == 2 and measured["wall_s_min"] <= measured["wall_s"] <= measured["wall_s_max"]
    assert set(figures["engine"]) == {MIXED, SIMPY_MODEL}
    for measured in (*figures["engine"].values(), *figures["scale"]):
        # Superseded progress events are a part of the events, on any busy host.
        assert 0 < measured["events_superseded"] < measured["events"]
        assert 0 < measured["live_events_per_s"] < measured["events_per_s"]
    assert "live_events_per_s" not in figures["simpy"]
    assert figures["speed_ratio"] > 0
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
