"""`vmsched reproduce`: the registry of built-ins with a [paper] table, claim rows computed
from the stored runs, errors in [paper] tables, the HTML page in Chromium, and the
composition matrix."""
from __future__ import annotations

import json

import pytest

from test_report import assert_charts_drawn
from vmsched import api
from vmsched import reproduce as registry
from vmsched.errors import UserError
from vmsched.sweeps import mean_ci95

PHENOMENA = {"lock-holder-preemption", "vcpu-stacking", "stalled-running-task", "two-vms-one-pcpu",
             "eevdf-wakeup-latency"}
CONTRACT_KEYS = ["paper", "figure", "metric", "variant", "paper_value", "sim_mean", "sim_ci95",
                 "direction", "direction_ok"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    from typer.testing import CliRunner
    from vmsched.cli import app
    out = tmp_path_factory.mktemp("reproduce")
    result = CliRunner().invoke(app, ["reproduce", "all", "--quick", "--json", "--out", str(out), "--workers", "2"])
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def test_every_builtin_with_a_paper_table_is_registered():
    registered = {e.name: e.paper["paper"] for e in registry.registry()}
    with_paper = {info.name for info in api.scenarios() if "\n[paper]" in info.toml}
    assert set(registered) == with_paper
    assert {name for name, paper in registered.items() if paper == "phenomena"} == PHENOMENA
    assert registered["anubis-table1"] == "anubis"
    assert {name for name, paper in registered.items() if paper == "vsched"} >= {"vsched-fig2", "vsched-fig3"}


def test_a_quick_run_lasts_the_experiment_timeline_where_it_names_one():
    experiments = {e.name: e for e in registry.registry()}
    phases = experiments["vsched-fig16"]
    assert phases.paper["quick_ms"] == 12000
    planned = registry.plan_experiments([phases, experiments["vsched-fig2"]], [1], registry.QUICK_DURATION)
    assert {run.task.duration_ns for run in planned["vsched-fig16"]} == {12_000_000_000}
    assert {run.task.duration_ns for run in planned["vsched-fig2"]} == {300_000_000}


def test_quick_rows_follow_the_contract(quick_run):
    _, rows = quick_run
    claims = [(e.name, claim) for e in registry.registry() for claim in e.paper["claim"]]
    assert len(rows) == len(claims)
    for row, (scenario, claim) in zip(rows, claims):
        assert list(row)[:len(CONTRACT_KEYS)] == CONTRACT_KEYS
        assert (row["scenario"], row["metric"], row["variant"]) == (scenario, claim["metric"], claim["variant"])
        assert row["paper"] in registry.PAPERS
        assert row["sim_mean"] is not None and row["seeds"] == len(registry.QUICK_SEEDS)
        assert (row["direction_ok"] is None) == (row["direction"] is None)
    anubis = {row["name"]: row for row in rows if row["paper"] == "anubis"}
    # Table 1's four ping rows, in ms.
    assert anubis["ping + CPU-bound (overcommit)"]["paper_value"] == 2.159
    assert anubis["ping (non-overcommit)"]["paper_value"] == 0.253


def test_a_ratio_row_is_the_mean_of_per_seed_ratios_of_the_stored_runs(quick_run):
    out, rows = quick_run
    row = next(r for r in rows if r["name"] == "overcommit: ping + CPU-bound / ping")
    records = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")]
    latency = {}
    for record in records:
        summary = record["summary"]
        if summary["scenario"] != "anubis-table1":
            continue
        ping = next(w for w in summary["workloads"] if w["name"] == "io/ping")
        has_hog = any(w["name"] == "io/cpu-bound" for w in summary["workloads"])
        has_bg = any(w["name"] == "bg/cpu-bound" for w in summary["workloads"])
        if has_bg:
            latency[has_hog, summary["seed"]] = ping["latency_ns"]["mean"]
    ratios = [latency[True, seed] / latency[False, seed] for seed in registry.QUICK_SEEDS]
    mean, ci95, _ = mean_ci95(ratios)
    assert row["sim_mean"] == pytest.approx(mean) and row["sim_ci95"] == pytest.approx(ci95)
    assert row["direction_ok"] == (sum(latency[True, s] for s in registry.QUICK_SEEDS)
                                   > sum(latency[False, s] for s in registry.QUICK_SEEDS))


def test_reproduce_page_renders_in_chromium(quick_run, browser_load):
    out, rows = quick_run
    page = (out / "reproduce.html").read_text()
    assert "<script src=" not in page
    figures = {(r["paper"], r["figure"], r["unit"]) for r in rows}
    assert_charts_drawn(browser_load(out / "reproduce.html"), expected_charts=len(figures))


def test_unknown_paper_is_an_error(cli):
    result = cli("reproduce", "xen", "--quick")
    assert result.exit_code == 2 and "xen: unknown paper" in result.stderr


PAPER_SCENARIO = """name = "mini"
description = "two hogs on one pCPU"
duration_ms = 50
[[vm]]
name = "a"
pin = [0]
[[vm.workload]]
kind = "hog"
[[vm]]
name = "b"
pin = [0]
[[vm.workload]]
kind = "hog"
[variants.alone]
"vm[1].workload[0].enabled" = false
[paper]
paper = "phenomena"
figure = "mini"
[[paper.claim]]
name = "share"
metric = "vms[a].share"
versus = { variant = "alone" }
ratio = true
direction = "lower"
"""


@pytest.mark.parametrize("override, message", [
    ('paper.claim[0].variant="lonely"', "paper.claim[0].variant: no variant `lonely` in [variants] (the scenario has: alone)"),
    ('paper.claim[0].versus.variant="x"', "paper.claim[0].versus.variant: no variant `x`"),
    ('paper.claim[0].metric="vms[c].share"', "paper.claim[0].metric: `vms[c].share`: no vms entry `c`"),
    ('paper.claim[0].metric="vcpus[0].share"', "paper.claim[0].metric: `vcpus[0].share`: summary.json has no `vcpus`"),
    ('paper.paper="xen"', "paper.paper: unknown variant `xen`"),
    ('paper.claim[0].direction="up"', "paper.claim[0].direction: unknown variant `up`"),
    ('paper.claim[0].per="vms[c].share"', "paper.claim[0].per: `vms[c].share`: no vms entry `c`"),
])
def test_paper_table_errors_name_the_field(cli, tmp_path, override, message):
    path = tmp_path / "mini.toml"
    path.write_text(PAPER_SCENARIO)
    result = cli("validate", path, "--set", override)
    assert result.exit_code == 2
    assert f"{path}: {message}" in result.stderr


def test_a_metric_missing_from_the_summary_is_an_error_naming_the_claim():
    scenario = api.Scenario(PAPER_SCENARIO.replace("vms[a].share", "vms[a].shares"), "mini.toml")
    experiment = registry.Experiment("mini", scenario, api.normalize(scenario)["paper"])
    summaries = {(variant, 1): json.loads(api.run(scenario, seed=1, set=overrides, record=False).summary_json)
                 for variant, overrides in (("", []), ("alone", ["vm[1].workload[0].enabled=false"]))}
    with pytest.raises(UserError, match=r"mini.toml: paper.claim\[0\].metric: `vms\[a\].shares`: no `shares`"):
        registry.claim_rows(experiment, summaries)
    good = registry.Experiment("mini", api.Scenario(PAPER_SCENARIO, "mini.toml"), experiment.paper | {
        "claim": [experiment.paper["claim"][0] | {"metric": "vms[a].share"}]})
    [row] = registry.claim_rows(good, summaries)
    assert row["sim_mean"] == pytest.approx(summaries["", 1]["vms"][0]["share"] / summaries["alone", 1]["vms"][0]["share"])
    assert row["direction_ok"] is True


def test_a_claim_per_unit_of_work_divides_each_run_by_its_own_work():
    # Two hogs share a pCPU: with `per` the count of completed units per unit of CPU
    # time is the same in both runs, where the raw counts differ by the share.
    scenario = api.Scenario(PAPER_SCENARIO, "mini.toml")
    paper = api.normalize(scenario)["paper"]
    summaries = {(variant, 1): json.loads(api.run(scenario, seed=1, set=overrides, record=False).summary_json)
                 for variant, overrides in (("", []), ("alone", ["vm[1].workload[0].enabled=false"]))}
    claim = paper["claim"][0] | {"metric": "workloads[0].completed", "direction": None}
    raw = registry.Experiment("mini", scenario, paper | {"claim": [claim]})
    per = registry.Experiment("mini", scenario, paper | {"claim": [claim | {"per": "workloads[0].cpu_time_ns"}]})
    [raw_row], [per_row] = registry.claim_rows(raw, summaries), registry.claim_rows(per, summaries)
    assert raw_row["sim_mean"] < 0.6
    own, alone = summaries["", 1]["workloads"][0], summaries["alone", 1]["workloads"][0]
    assert per_row["sim_mean"] == pytest.approx((own["completed"] / own["cpu_time_ns"])
                                                / (alone["completed"] / alone["cpu_time_ns"]))
    assert per_row["sim_mean"] == pytest.approx(1.0, rel=0.05)


def test_policies_come_from_the_registry(cli):
    listed = json.loads(cli("policies", "--json").output)
    assert registry.host_policies() == [p["name"] for p in listed if p["level"] == "host"]
    assert registry.guest_policies() == [p["name"] for p in listed if p["level"] == "guest"]
    assert {"cfs", "anubis", "irs"} <= set(registry.host_policies())


def test_matrix_covers_every_host_and_guest_policy(cli, tmp_path):
    result = cli("reproduce", "--matrix", "--quick", "--json", "--out", tmp_path, "--workers", "2")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    guests = registry.guest_policies()
    combos = {(r["host"], r["guest"]) for r in rows}
    assert combos == {(h, g) for h in registry.host_policies() for g in guests}
    workloads = {(r["scenario"], r["workload"]) for r in rows}
    for name in registry.MATRIX_SCENARIOS:
        assert any(scenario == name for scenario, _ in workloads)
    assert all(r["n"] == len(registry.QUICK_SEEDS) for r in rows)


def test_kernel_reruns_both_levels_and_labels_rows(cli, tmp_path):
    """`--kernel` moves the Linux host and every guest to the profile and labels each row;
    a Xen host stays Xen."""
    by_name = {e.name: e for e in registry.registry()}
    overrides = registry.kernel_overrides(by_name["vcpu-stacking"], "linux-6.12")
    vm_count = len(api.normalize(by_name["vcpu-stacking"].scenario)["vm"])
    assert overrides == {"host.kernel": ["linux-6.12"]} | {f"vm[{i}].guest.kernel": ["linux-6.12"] for i in range(vm_count)}
    xen = next(e for e in by_name.values() if e.paper["paper"] == "tableau")
    assert "host.kernel" not in registry.kernel_overrides(xen, "linux-6.12")
    result = cli("reproduce", "phenomena", "--quick", "--json", "--kernel", "linux-6.12", "--out", tmp_path,
                 "--workers", "2")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows and {row["kernel"] for row in rows} == {"linux-6.12"}
    assert {row["scenario"] for row in rows} == PHENOMENA
    # Beside each claim: the same claim on linux-6.5, as a rerun on 6.5 alone gives it (its
    # runs are already in the store), and a verdict wherever the claim has a direction.
    assert {row["versus_kernel"] for row in rows} == {"linux-6.5"}
    alone = cli("reproduce", "phenomena", "--quick", "--json", "--kernel", "linux-6.5", "--out", tmp_path)
    on_65 = {(row["scenario"], row["name"]): row for row in json.loads(alone.stdout)}
    assert all("versus_kernel" not in row for row in on_65.values())
    for row in rows:
        other = on_65[row["scenario"], row["name"]]
        assert (row["versus_mean"], row["versus_direction_ok"]) == (other["sim_mean"], other["direction_ok"])
        expected = registry.kernel_verdict(row["direction_ok"], other["direction_ok"], row["effect"], other["effect"])
        assert row["verdict"] == expected and (row["verdict"] is None) == (row["direction"] is None)
    result = cli("reproduce", "phenomena", "--quick", "--kernel", "linux-9", "--out", tmp_path / "bad")
    assert result.exit_code == 2 and "linux-9" in result.stderr
    result = cli("reproduce", "phenomena", "--quick", "--versus-kernel", "linux-6.6", "--out", tmp_path / "bad")
    assert result.exit_code == 2 and "--kernel" in result.stderr


def test_kernel_verdicts():
    """Effects are a claim's mean over its reference's; `holds` within a factor 2 of the
    other kernel's effect in log terms."""
    verdict = registry.kernel_verdict
    assert verdict(True, True, 0.5, 0.5) == "holds"
    assert verdict(True, True, 0.6, 0.5) == "holds"          # log 0.6 / log 0.5 = 0.74
    assert verdict(True, True, 0.9, 0.5) == "weakens"        # 0.15
    assert verdict(True, True, 0.2, 0.5) == "strengthens"    # 2.32
    assert verdict(True, True, 5.0, 2.0) == "strengthens"    # an effect above 1 is sized alike
    assert verdict(False, True, 1.1, 0.5) == "reverses"
    assert verdict(True, False, 0.5, 1.1) == "appears"
    assert verdict(False, False, 1.1, 1.2) == "absent on both"
    assert verdict(True, True, None, 0.5) == "holds"         # a non-positive mean has no log size
    assert verdict(True, True, 0.5, 1.0) == "holds"          # nor a ratio that rounds to 1
    assert verdict(None, True, 0.5, 0.5) is None


PEAK_SCENARIO = """name = "mini-peak"
description = "a server beside a hog on one pCPU"
duration_ms = 200
[[vm]]
name = "web"
pin = [0]
[[vm.workload]]
kind = "server"
rate_per_s = 100
work_us = 1000
work_dist = "constant"
[[vm]]
name = "bg"
pin = [0]
[[vm.workload]]
kind = "hog"
[variants.alone]
"vm[1].workload[0].enabled" = false
[paper]
paper = "phenomena"
figure = "mini"
[[paper.claim]]
name = "peak beside a hog"
metric = "workloads[web/server0].latency_ns.p99"
paper_value = 300
unit = "requests/s"
peak = { set = "vm[0].workload[0].rate_per_s", values = [100, 300, 600, 900, 1200], at_most = 20e6 }
versus = { variant = "alone" }
direction = "lower"
[[paper.claim]]
name = "peak alone"
metric = "workloads[web/server0].latency_ns.p99"
variant = "alone"
peak = { set = "vm[0].workload[0].rate_per_s", values = [100, 300, 600, 900, 1200], at_most = 20e6 }
"""


def test_peak_value_is_the_highest_swept_value_within_the_limit():
    sweep = {"at_most": 10.0}
    assert registry.peak_value(sweep, {100.0: 1.0, 200.0: 10.0, 300.0: 11.0, 400.0: 9.0}) == 400.0
    assert registry.peak_value(sweep, {100.0: 12.0, 200.0: 30.0}) == 0.0


def test_a_peak_claim_sweeps_its_setting_and_reports_the_peak_per_seed(tmp_path):
    """A 1 ms request served beside a hog on one pCPU (half of it, with CFS's slices)
    keeps its p99 within 20 ms at a lower rate than alone; each row's value is the
    highest swept rate whose run kept p99 within the limit, recomputed here from the
    stored runs."""
    scenario = api.Scenario(PEAK_SCENARIO, "mini-peak.toml")
    experiment = registry.Experiment("mini-peak", scenario, api.normalize(scenario)["paper"])
    assert experiment.grid() == {"vm[0].workload[0].rate_per_s": [100, 300, 600, 900, 1200]}
    seeds = [1, 2]
    sweep = experiment.peak_sweep()
    summaries, expected = {}, {}
    for variant, extra in (("", []), ("alone", ["vm[1].workload[0].enabled=false"])):
        for seed in seeds:
            by_rate = {}
            for rate in sweep["values"]:
                by_rate[rate] = json.loads(api.run(scenario, seed=seed, set=[f"vm[0].workload[0].rate_per_s={rate:g}", *extra],
                                                   record=False).summary_json)
            summaries[variant, seed] = by_rate
            p99 = {rate: registry.resolve_metric(s, "workloads[web/server0].latency_ns.p99") for rate, s in by_rate.items()}
            expected[variant, seed] = max((r for r, v in p99.items() if v <= 20e6), default=0.0)
    beside, alone = registry.claim_rows(experiment, summaries)
    assert beside["sim_mean"] == pytest.approx(sum(expected["", s] for s in seeds) / 2)
    assert alone["sim_mean"] == pytest.approx(sum(expected["alone", s] for s in seeds) / 2)
    assert 0 < beside["sim_mean"] < alone["sim_mean"] and beside["direction_ok"] is True
    # The sweep is neither trivially all-in nor all-out of the limit.
    assert alone["sim_mean"] < 1200 or beside["sim_mean"] > 100


@pytest.mark.parametrize("override, message", [
    ('peak.at_most=1e6', "paper.claim[1].peak: every claim of a table with a peak sweep is a peak claim over the same `set` and `values`"),
    ('peak.values=[300, 100]', "paper.claim[0].peak.values: must be finite numbers in ascending order"),
    ('peak.set="vm[0].workload[0].rate"', "paper.claim[0].peak.set: `vm[0].workload[0].rate=100`: vm[0].workload[0].rate"),
])
def test_peak_sweep_errors_name_the_field(cli, tmp_path, override, message):
    path = tmp_path / "mini-peak.toml"
    path.write_text(PEAK_SCENARIO)
    # The at_most case changes the second claim only; the others change both alike.
    claims = [1] if "at_most" in override else [0, 1]
    result = cli("validate", path, *[a for i in claims for a in ("--set", f"paper.claim[{i}].{override}")])
    assert result.exit_code == 2, result.output
    assert f"{path}: {message}" in result.stderr
