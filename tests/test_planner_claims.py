"""The Tableau planner's claims of `vmsched reproduce tableau` (Figs. 3 and 4, section 7.1):
the input is the paper's, every row is a scored `bound`, and the verdict follows the
measured runs against the paper's limit."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from vmsched import planner_claims, reproduce
from vmsched.errors import UserError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plan" / "tableau-fig3-176-vms.toml"


def test_the_claims_plan_the_shipped_example_of_the_papers_case() -> None:
    assert tomllib.loads(planner_claims.paper_input(1)) == tomllib.loads(EXAMPLE.read_text())
    thirty = tomllib.loads(planner_claims.paper_input(30))
    assert thirty["host"]["default_latency_ms"] == 30 and len(thirty["vm"]) == 176


def test_rows_are_bounds_with_the_planners_own_table_sizes() -> None:
    rows = reproduce.public_rows(planner_claims.rows(quick=True))
    assert [tuple(row)[:len(reproduce.ROW_KEYS)] for row in rows] == [reproduce.ROW_KEYS] * 8
    assert len({row["id"] for row in rows}) == 8
    assert {row["kind"] for row in rows} == {"bound"} and {row["paper"] for row in rows} == {"tableau"}
    for goal in planner_claims.GOALS_MS:
        [size] = [row for row in rows if row["metric"] == "table_size_mib" and row["variant"] == f"goal-{goal}ms"]
        _, size_bytes = planner_claims.plan_once(planner_claims.paper_input(goal))
        # The table is a pure function of the input: every run gives the same size.
        assert size["sim_mean"] == pytest.approx(size_bytes / 2**20) and size["sim_ci95"] == pytest.approx(0)
        assert size["seeds"] == planner_claims.QUICK_RUNS and size["at_most"] == 1.2


@pytest.mark.parametrize(("times", "verdict"), [
    ([0.01, 0.02, 0.015], "agrees"),
    ([2.5, 2.6, 2.55], "disagrees"),
    ([1.0, 3.0, 2.0], "inconclusive"),
])
def test_planning_time_verdict_follows_the_runs_against_two_seconds(monkeypatch, times, verdict) -> None:
    samples = iter(times * len(planner_claims.GOALS_MS))
    monkeypatch.setattr(planner_claims, "QUICK_RUNS", len(times))
    monkeypatch.setattr(planner_claims, "plan_once", lambda text: (next(samples), 1000))
    rows = [row for row in planner_claims.rows(quick=True) if row["metric"] == "planning_time_s"]
    assert len(rows) == 4 and {row["verdict"] for row in rows} == {verdict}


def test_a_planner_id_taken_by_a_scenario_claim_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(planner_claims, "plan_once", lambda text: (0.01, 1000))
    with pytest.raises(UserError, match="tableau/fig4/table-size-176-vms-1ms"):
        reproduce.planner_rows(True, {"tableau/fig4/table-size-176-vms-1ms"})
