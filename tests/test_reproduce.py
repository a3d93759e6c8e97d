"""`vmsched reproduce`: the registry of built-ins with a [paper] table, claim rows computed
from the stored runs, errors in [paper] tables, the HTML page in Chromium, and the
composition matrix."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from test_report import assert_charts_drawn
from vmsched import api
from vmsched import reproduce as registry
from vmsched import scoring
from vmsched.errors import UserError
from vmsched.sweeps import mean_ci95

PHENOMENA = {"lock-holder-preemption", "vcpu-stacking", "stalled-running-task", "two-vms-one-pcpu",
             "eevdf-wakeup-latency"}
CONTRACT_KEYS = ["paper", "figure", "metric", "variant", "paper_value", "sim_mean", "sim_ci95",
                 "direction", "direction_ok"]


# The paper whose quick run CI checks end to end (the shortest to run).
CI_PAPER = "phenomena"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    from typer.testing import CliRunner
    from vmsched.cli import app
    out = tmp_path_factory.mktemp("reproduce")
    result = CliRunner().invoke(app, ["reproduce", CI_PAPER, "--quick", "--json", "--out", str(out), "--workers", "2"])
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def test_every_builtin_with_a_paper_table_is_registered():
    registered = {e.name: e.paper["paper"] for e in registry.registry()}
    with_paper = {info.name for info in api.scenarios() if "\n[paper]" in info.toml}
    assert set(registered) == with_paper
    assert {name for name, paper in registered.items() if paper == "phenomena"} == PHENOMENA
    assert registered["anubis-table1-rows"] == "anubis" and "anubis-table1" not in registered
    assert {name for name, paper in registered.items() if paper == "vsched"} >= {"vsched-fig2", "vsched-fig3"}


def test_builtin_claims_are_one_per_statement_and_each_states_something():
    experiments = registry.registry()
    registry.check_registry(experiments)
    claims = {registry.claim_id(e.paper, c): (e, c) for e in experiments for c in e.paper["claim"]}
    assert all(c.get("id") for _, c in claims.values()), "every built-in claim names its id"
    # Rows the papers never measured are extensions (the paper ran IRS on Xen only, ...).
    extensions = {cid for cid, (_, c) in claims.items() if c["extension"]}
    assert {cid for cid in claims if cid.startswith("irs/") and "/kvm-" in cid} <= extensions
    assert {"anubis/fig5/redirection-and-boosting-of-device-interrupts-alone",
            "anubis/fig9c/long-run-share-of-the-web-vm-without-vs-with-debt",
            "anubis/table1/anubis-ping-cpu-bound-overcommit-vs-vanilla"} <= extensions
    # The five statements the simulation contradicts are registered with the paper's values.
    assert claims["anubis/fig3/io-only-2-1-vs-non-overcommit"][1]["paper_value"] == 1.0
    assert registry.claim_kind(claims["irs/fig1/raytrace-resilient-vs-blocking"][1]) == "order"
    background = claims["irs/fig9/background-speedup-irs-over-vanilla"][1]
    assert (background["at_least"], background["at_most"]) == (0.95, 1.06)
    assert claims["irs/fig10/gain-diminishes-with-interfered-vcpus"][1]["direction"] == "lower"
    # The trends the IRS paper states are order claims: relaxed-Co "destructive, especially
    # in the 4-inter cases" (section 5.2).
    relaxed = claims["irs/fig5/relaxed-co-worse-at-4-inter"][1]
    assert (registry.claim_kind(relaxed), relaxed["direction"]) == ("order", "lower")
    rtds = claims["tableau/sec7-4/capped-rtds-sla-aware-peak-throughput"][1]
    assert (rtds["paper_value"], rtds["direction"], rtds["versus"]["variant"]) == (1000, "lower", "credit-capped")
    assert claims["irs/fig7/weighted-speedup-irs-over-vanilla"][1]["mean_of"]
    # The runs of an experiment are those of every term of its claims.
    fig10 = claims["irs/fig10/gain-diminishes-with-interfered-vcpus"][0]
    assert {f"{policy}-{n}inter" for policy in ("irs", "vanilla") for n in (1, 2, 4, 8)} <= set(fig10.variants())


def test_a_quick_run_lasts_the_experiment_timeline_where_it_names_one():
    experiments = {e.name: e for e in registry.registry()}
    phases = experiments["vsched-fig16"]
    assert phases.paper["quick_ms"] == 12000
    planned = registry.plan_experiments([phases, experiments["vsched-fig2"]], [1], registry.QUICK_DURATION)
    assert {run.task.duration_ns for run in planned["vsched-fig16"]} == {12_000_000_000}
    assert {run.task.duration_ns for run in planned["vsched-fig2"]} == {300_000_000}
    # An experiment naming quick_seeds runs seeds 1..N quick: IRS's quick run has the full
    # run's seeds, for a tenth of its 30 s.
    irs = experiments["irs-fig10"]
    quick = registry.plan_experiments([irs], registry.QUICK_SEEDS, registry.QUICK_DURATION)["irs-fig10"]
    full = registry.plan_experiments([irs], registry.FULL_SEEDS, None)["irs-fig10"]
    assert {run.seed for run in quick} == set(registry.FULL_SEEDS) == {run.seed for run in full}
    assert {run.task.duration_ns for run in quick} == {3_000_000_000}
    # The full run lasts the scenario's own 30 s.
    assert {run.task.duration_ns for run in full} == {None}
    assert "\nduration_ms = 30000\n" in api.load_scenario("irs-fig10").text


def test_quick_rows_follow_the_contract(quick_run):
    out, rows = quick_run
    claims = [(e.name, claim) for e in registry.registry() if e.paper["paper"] == CI_PAPER
              for claim in e.paper["claim"]]
    assert len(rows) == len(claims)
    for row, (scenario, claim) in zip(rows, claims):
        assert list(row)[:len(CONTRACT_KEYS)] == CONTRACT_KEYS
        assert (row["scenario"], row["metric"], row["variant"]) == (scenario, claim["metric"], claim["variant"])
        assert row["paper"] == CI_PAPER and row["id"] == claim["id"]
        assert row["sim_mean"] is not None and row["seeds"] == len(registry.QUICK_SEEDS)
        assert row["verdict"] in scoring.VERDICTS
        assert isinstance(row["extension"], bool) and isinstance(row["underpowered"], bool)
        assert (row["effect_ratio"] is None) == (row["within_2x"] is None)
    assert json.loads((out / "reproduce.json").read_text()) == rows
    summary = json.loads((out / "reproduce-summary.json").read_text())
    assert set(summary) == {"papers", "overall"} and set(summary["papers"]) == {CI_PAPER}
    scored = [row for row in rows if not row["extension"]]
    assert summary["overall"] == summary["papers"][CI_PAPER] == {
        "claims": len(scored), "agrees": sum(r["verdict"] == "agrees" for r in scored),
        "disagrees": sum(r["verdict"] == "disagrees" for r in scored),
        "inconclusive": sum(r["verdict"] == "inconclusive" for r in scored),
        "underpowered": sum(r["underpowered"] for r in scored),
        "with_value": sum(r["within_2x"] is not None for r in scored), "within_2x": sum(bool(r["within_2x"]) for r in scored)}


def test_a_ratio_row_is_the_mean_of_per_seed_ratios_of_the_stored_runs(quick_run):
    out, rows = quick_run
    row = next(r for r in rows if r["id"] == "phenomena/two-vms-one-pcpu/vm-a-s-pcpu-share-shared-over-alone")
    shares = {}
    for path in (out / "runs").glob("*.json"):
        summary = json.loads(path.read_text())["summary"]
        if summary["scenario"] != "two-vms-one-pcpu":
            continue
        vms = {vm["name"]: vm for vm in summary["vms"]}
        # The `alone` variant disables b's hog (b's kernel still runs its kworkers).
        busy = any(w["name"].startswith("b/hog") for w in summary["workloads"])
        shares[busy, summary["seed"]] = vms["a"]["share"]
    ratios = [shares[True, seed] / shares[False, seed] for seed in registry.QUICK_SEEDS]
    mean, ci95, _ = mean_ci95(ratios)
    assert row["sim_mean"] == pytest.approx(mean) and row["sim_ci95"] == pytest.approx(ci95)
    expected = scoring.side_verdict(mean - ci95, mean + ci95, higher=False)
    assert row["verdict"] == expected


def test_reproduce_page_renders_in_chromium(quick_run, browser_load):
    out, rows = quick_run
    page = (out / "reproduce.html").read_text()
    assert "<script src=" not in page
    # The tally first, then one forest plot per paper.
    assert page.index("<h2>Tally</h2>") < page.index('class="chart"')
    papers = {r["paper"] for r in rows if not r["extension"]}
    assert_charts_drawn(browser_load(out / "reproduce.html"), expected_charts=len(papers))


def test_markdown_tables_come_from_the_stored_runs(cli, quick_run):
    out, rows = quick_run
    result = cli("reproduce", CI_PAPER, "--quick", "--markdown", "--out", out)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("### Tally") and f"### {CI_PAPER}" in text
    for row in rows:
        assert f"`{row['id']}`" in text


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
        assert (row["versus_mean"], row["versus_verdict"]) == (other["sim_mean"], other["verdict"])
        assert row["kernel_verdict"] == registry.kernel_verdict(row, other)
        assert (row["kernel_verdict"] is None) == (registry.claim_direction(row) is None)
    result = cli("reproduce", "phenomena", "--quick", "--kernel", "linux-9", "--out", tmp_path / "bad")
    assert result.exit_code == 2 and "linux-9" in result.stderr
    result = cli("reproduce", "phenomena", "--quick", "--versus-kernel", "linux-6.6", "--out", tmp_path / "bad")
    assert result.exit_code == 2 and "--kernel" in result.stderr


def _kernel_row(verdict: str, effect: float, ci95: float, direction: str = "lower") -> dict:
    return {"verdict": verdict, "effect": effect, "effect_ci95": ci95, "scored_direction": direction, "kind": "ratio"}


def test_kernel_verdicts_read_both_intervals():
    """Each kernel's interval verdict decides; where the claim holds on both, this kernel's
    log-effect interval must lie wholly below half (weakens) or above twice (strengthens)
    the other's."""
    verdict = registry.kernel_verdict
    row = _kernel_row
    assert verdict(row("agrees", 0.5, 0.05), row("agrees", 0.5, 0.05)) == "holds"
    assert verdict(row("agrees", 0.9, 0.02), row("agrees", 0.5, 0.05)) == "weakens"      # 0.15 of the effect
    assert verdict(row("agrees", 0.15, 0.01), row("agrees", 0.5, 0.05)) == "strengthens"  # 2.7 times
    assert verdict(row("agrees", 5.0, 0.5, "higher"), row("agrees", 2.0, 0.1, "higher")) == "strengthens"
    # An interval that reaches across the factor does not weaken, whatever the means.
    assert verdict(row("agrees", 0.8, 0.08), row("agrees", 0.5, 0.05)) == "holds"
    assert verdict(row("disagrees", 1.1, 0.02), row("agrees", 0.5, 0.05)) == "reverses"
    assert verdict(row("agrees", 0.5, 0.05), row("disagrees", 1.1, 0.02)) == "appears"
    assert verdict(row("disagrees", 1.1, 0.02), row("disagrees", 1.2, 0.02)) == "absent on both"
    # An interval spanning no effect on either kernel says nothing: 0.98 +- 0.14 does not reverse.
    assert verdict(row("inconclusive", 0.98, 0.14), row("agrees", 0.5, 0.05)) == "inconclusive"
    assert verdict(row("agrees", 0.5, 0.05), row("inconclusive", 1.24, 0.99)) == "inconclusive"
    assert verdict(row("agrees", 0.5, 0.05) | {"scored_direction": None}, row("agrees", 0.5, 0.05)) is None


def test_kernel_comparison_table_lists_claims_with_a_direction_on_both_kernels():
    """docs/eevdf.md's table: one line per claim with a direction, the kernel compared with
    first, extensions marked; a claim without a direction, or a run without --kernel, gives
    no line."""
    base = {"paper": "anubis", "scenario": "s", "extension": False, "kernel": "linux-6.12",
            "versus_kernel": "linux-6.5", "sim_mean": 0.25, "sim_ci95": 0.01, "versus_mean": 0.5,
            "versus_ci95": None, "scored_direction": "lower", "kernel_verdict": "strengthens"}
    rows = [base | {"name": "a"},
            base | {"name": "b", "extension": True, "kernel_verdict": "appears"},
            base | {"name": "c", "scored_direction": None, "kernel_verdict": None}]
    table = registry.markdown_kernel_comparison(rows).splitlines()
    assert table[0] == "| paper | scenario | claim | direction | linux-6.5 | linux-6.12 | on linux-6.12 |"
    assert table[2:] == ["| anubis | s | a | lower | 0.5 | 0.25 ± 0.01 | strengthens |",
                         "| anubis | s | b (extension) | lower | 0.5 | 0.25 ± 0.01 | appears |"]
    assert registry.markdown_kernel_comparison([base | {"versus_kernel": None}]) == ""


def _experiment(paper: dict) -> registry.Experiment:
    """An experiment of hand-made claims over hand-made summaries (the scenario only names it)."""
    return registry.Experiment("hand", api.Scenario(PAPER_SCENARIO, "hand.toml"), paper)


def _summary(**shares: float) -> dict:
    return {"vms": [{"name": name, "share": share} for name, share in shares.items()], "workloads": []}


def _claim(**fields) -> dict:
    claim = {"name": "c", "metric": "vms[a].share", "variant": "", "paper_value": None, "unit": "", "scale": 1.0,
             "versus": None, "ratio": False, "direction": None, "peak": None, "per": None, "kind": None,
             "extension": False, "at_most": None, "at_least": None, "terms": [], "mean_of": []}
    return claim | fields


def _rows(claims: list[dict], summaries: dict) -> list[dict]:
    return registry.claim_rows(_experiment({"paper": "phenomena", "figure": "hand", "claim": claims}), summaries)


def test_an_interval_spanning_no_effect_is_inconclusive_whatever_the_mean():
    # Per seed the claim's share over the reference's: 0.5, 3.0, 2.9 (mean 2.13, above 1).
    summaries = {}
    for seed, (own, ref) in enumerate([(0.5, 1.0), (3.0, 1.0), (2.9, 1.0)], start=1):
        summaries["", seed], summaries["ref", seed] = _summary(a=own), _summary(a=ref)
    ratio = _claim(versus={"variant": "ref"}, ratio=True, direction="higher", paper_value=2.0)
    [row] = _rows([ratio], summaries)
    assert row["sim_mean"] == pytest.approx(6.4 / 3) and row["direction_ok"] is True
    assert row["verdict"] == "inconclusive"
    assert row["effect_ratio"] == pytest.approx(math.log(6.4 / 3) / math.log(2.0)) and row["within_2x"] is True
    # The same ratios without the low seed: the interval lies above 1.
    tight = {key: value for key, value in summaries.items() if key[1] != 1}
    [row] = _rows([ratio], tight)
    assert row["verdict"] == "agrees"
    [row] = _rows([ratio | {"direction": "lower", "paper_value": None}], tight)
    assert row["verdict"] == "disagrees" and row["effect_ratio"] is None and row["within_2x"] is None


def test_a_bound_agrees_only_when_the_whole_interval_lies_on_its_side():
    def rows_for(values):
        return {("", seed): _summary(a=value) for seed, value in enumerate(values, start=1)}
    bound = _claim(kind="bound", at_most=1.0)
    assert _rows([bound], rows_for([0.5, 0.6, 0.55]))[0]["verdict"] == "agrees"
    assert _rows([bound], rows_for([0.5, 1.4, 0.9]))[0]["verdict"] == "inconclusive"  # mean 0.93, interval past 1
    assert _rows([bound], rows_for([1.5, 1.6, 1.55]))[0]["verdict"] == "disagrees"
    both = _claim(kind="bound", at_least=0.95, at_most=1.06)
    assert _rows([both], rows_for([0.78, 0.79, 0.80]))[0]["verdict"] == "disagrees"
    [row] = _rows([both], rows_for([1.0, 1.01, 0.99]))
    assert row["verdict"] == "agrees" and row["effect_ratio"] is None and row["within_2x"] is None
    assert scoring.bound_verdict(None, None, None, 1.0) == "inconclusive"


def test_a_max_claim_takes_the_largest_term_per_seed():
    summaries = {}
    for seed, (x, y) in enumerate([(1.1, 1.5), (1.2, 1.4), (1.15, 1.45)], start=1):
        summaries["x", seed], summaries["y", seed] = _summary(a=x), _summary(a=y)
        summaries["ref", seed] = _summary(a=1.0)
    up_to = _claim(variant="x", versus={"variant": "ref"}, ratio=True, kind="max", paper_value=1.5,
                   terms=[{"variant": "y", "versus": {"variant": "ref"}}])
    [row] = _rows([up_to], summaries)
    assert row["sim_mean"] == pytest.approx(1.45) and row["verdict"] == "agrees"
    assert row["effect_ratio"] == pytest.approx(math.log(1.45) / math.log(1.5))
    # "up to -46%": the farthest below 1.
    down_to = up_to | {"paper_value": 0.5, "direction": "lower"}
    [row] = _rows([down_to], summaries)
    assert row["sim_mean"] == pytest.approx(1.15) and row["verdict"] == "disagrees"


def test_an_order_claim_needs_every_step_in_its_direction():
    summaries = {}
    for seed, (x, y, z) in enumerate([(1.0, 2.0, 3.0), (1.1, 2.1, 2.9), (0.9, 1.9, 3.1)], start=1):
        for name, value in (("x", x), ("y", y), ("z", z)):
            summaries[name, seed] = _summary(a=value)
    order = _claim(variant="x", kind="order", direction="higher",
                   terms=[{"variant": "y", "versus": None}, {"variant": "z", "versus": None}])
    [row] = _rows([order], summaries)
    assert row["verdict"] == "agrees" and [step["verdict"] for step in row["steps"]] == ["agrees", "agrees"]
    [row] = _rows([order | {"direction": "lower"}], summaries)
    assert row["verdict"] == "disagrees" and row["effect_ratio"] is None
    swapped = order | {"terms": [{"variant": "z", "versus": None}, {"variant": "y", "versus": None}]}
    assert _rows([swapped], summaries)[0]["verdict"] == "disagrees"  # z then y falls


def test_a_value_without_a_direction_is_scored_within_a_factor_two():
    summaries = {("", seed): _summary(a=value) for seed, value in enumerate([0.30, 0.32, 0.31], start=1)}
    [row] = _rows([_claim(paper_value=0.25)], summaries)
    assert row["verdict"] == "agrees" and row["effect_ratio"] == pytest.approx(0.31 / 0.25)
    [row] = _rows([_claim(paper_value=2.0)], summaries)
    assert row["verdict"] == "disagrees" and row["within_2x"] is False
    # A ratio of no effect (the paper's 1.0) is a value: 0.09 is far outside.
    for seed in (1, 2, 3):
        summaries["ref", seed] = _summary(a=3.4)
    [row] = _rows([_claim(versus={"variant": "ref"}, ratio=True, paper_value=1.0)], summaries)
    assert row["verdict"] == "disagrees" and row["effect_ratio"] == pytest.approx(0.31 / 3.4)


def test_a_metric_on_few_completions_is_underpowered():
    def summary(completed: int) -> dict:
        return {"vms": [], "workloads": [{"name": "w", "completed": completed, "latency_ns": {"p95": 5.0}}]}
    claim = _claim(metric="workloads[w].latency_ns.p95", paper_value=5.0)
    assert _rows([claim], {("", 1): summary(150), ("", 2): summary(900)})[0]["underpowered"] is True
    assert _rows([claim], {("", 1): summary(200), ("", 2): summary(900)})[0]["underpowered"] is False
    # A share integrates time: no count to fall short.
    assert _rows([_claim(paper_value=0.5)], {("", 1): _summary(a=0.5)})[0]["underpowered"] is False


DUPLICATE = PAPER_SCENARIO.replace('name = "mini"', 'name = "mini-copy"').replace('figure = "mini"', 'figure = "copy"')


def test_a_statement_registered_twice_is_refused_naming_both_claims():
    first = registry.Experiment("mini", api.Scenario(PAPER_SCENARIO, "mini.toml"),
                                api.normalize(api.Scenario(PAPER_SCENARIO, "mini.toml"))["paper"])
    # Another file with the same setup under another name: the same runs and metric.
    copy = registry.Experiment("mini-copy", api.Scenario(DUPLICATE, "mini-copy.toml"),
                               api.normalize(api.Scenario(DUPLICATE, "mini-copy.toml"))["paper"])
    with pytest.raises(UserError) as err:
        registry.check_registry([first, copy])
    message = str(err.value)
    assert "mini-copy.toml: paper.claim[0]" in message and "mini.toml: paper.claim[0]" in message
    assert "`phenomena/copy/share`" in message and "`phenomena/mini/share`" in message and "refers" in message
    # Referring to it instead is accepted; a reference to no claim is not.
    referring = registry.Experiment("mini-copy", copy.scenario, copy.paper | {
        "claim": [copy.paper["claim"][0] | {"direction": None, "extension": True, "metric": "vms[b].share"}],
        "refers": ["phenomena/mini/share"]})
    registry.check_registry([first, referring])
    with pytest.raises(UserError, match="paper.refers: no registered claim has id `phenomena/mini/nothing`"):
        registry.check_registry([first, dataclasses.replace(referring, paper=referring.paper | {
            "refers": ["phenomena/mini/nothing"]})])
    with pytest.raises(UserError, match="id `phenomena/mini/share` is already the id of"):
        registry.check_registry([first, registry.Experiment("mini-copy", copy.scenario, referring.paper | {
            "claim": [referring.paper["claim"][0] | {"id": "phenomena/mini/share"}], "refers": []})])
    with pytest.raises(UserError, match="states no direction, value or limit"):
        registry.check_registry([registry.Experiment("mini", first.scenario, first.paper | {
            "claim": [first.paper["claim"][0] | {"direction": None}]})])


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
