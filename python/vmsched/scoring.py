"""How `vmsched reproduce` scores a paper statement against the simulation: a verdict
from the 95% interval of the simulated effect, and the magnitude of that effect over the
paper's. docs/sweep.md ("Scoring") defines each rule; these functions are those rules."""
from __future__ import annotations

import math

from .sweeps import mean_ci95

VERDICTS = ("agrees", "disagrees", "inconclusive")
# A claim whose metric rests on fewer completions (or events) than this in one of its
# runs is flagged `underpowered` (docs/sweep.md): below it a mean, and more so a p95 or a
# maximum, moves with a handful of samples.
MIN_SUPPORT = 200
# The magnitude goal: the simulated effect within a factor of two of the paper's.
MAGNITUDE_FACTOR = 2.0


def interval(values: list[float]) -> tuple[float | None, float | None, float | None, int]:
    """(mean, lower, upper, n): the 95% interval over seeds; lower/upper None below two values."""
    mean, ci95, n = mean_ci95(values)
    if mean is None or ci95 is None:
        return mean, None, None, n
    return mean, mean - ci95, mean + ci95, n


def side_verdict(lower: float | None, upper: float | None, higher: bool, at: float = 1.0) -> str:
    """An effect stated as above (`higher`) or below `at` (no effect): agrees when the
    whole interval lies on that side, disagrees when it lies wholly on the other,
    inconclusive when it spans `at` (or there is no interval)."""
    if lower is None or upper is None:
        return "inconclusive"
    above, below = lower > at, upper < at
    if above or below:
        return "agrees" if above == higher else "disagrees"
    return "inconclusive"


def band_verdict(lower: float | None, upper: float | None, paper: float) -> str:
    """A value the paper reports, without a direction: agrees when the interval lies
    within MAGNITUDE_FACTOR of it, disagrees when it lies wholly outside."""
    if lower is None or upper is None or paper <= 0:
        return "inconclusive"
    low, high = paper / MAGNITUDE_FACTOR, paper * MAGNITUDE_FACTOR
    if low <= lower and upper <= high:
        return "agrees"
    if upper < low or lower > high:
        return "disagrees"
    return "inconclusive"


def bound_verdict(lower: float | None, upper: float | None, at_least: float | None,
                  at_most: float | None) -> str:
    """"At most / at least": agrees when the whole interval lies within the limits,
    disagrees when it lies wholly beyond one of them."""
    if lower is None or upper is None:
        return "inconclusive"
    if (at_most is not None and lower > at_most) or (at_least is not None and upper < at_least):
        return "disagrees"
    if (at_most is None or upper <= at_most) and (at_least is None or lower >= at_least):
        return "agrees"
    return "inconclusive"


def order_verdict(steps: list[str]) -> str:
    """An order A < B < C from the side verdicts of its steps (B over A, C over B): agrees
    when every step agrees, disagrees when any step disagrees."""
    if any(step == "disagrees" for step in steps):
        return "disagrees"
    return "agrees" if steps and all(step == "agrees" for step in steps) else "inconclusive"


def effect_ratio(kind_is_ratio: bool, sim: float | None, paper: float | None) -> float | None:
    """The simulated effect over the paper's: for a ratio, log(sim) / log(paper), so 1 is
    the paper's effect, 0 none and a negative value the opposite; for a value, sim /
    paper. None without both numbers, or for a ratio of no effect (paper = 1), whose
    log is 0."""
    if sim is None or paper is None:
        return None
    if kind_is_ratio:
        if sim <= 0 or paper <= 0 or paper == 1:
            return None
        return math.log(sim) / math.log(paper)
    return sim / paper if paper else None


def within_factor(ratio: float | None) -> bool | None:
    """Whether an effect ratio lies within MAGNITUDE_FACTOR of 1 (None without one)."""
    if ratio is None:
        return None
    return 1 / MAGNITUDE_FACTOR <= ratio <= MAGNITUDE_FACTOR


def summary_counts(rows: list[dict]) -> dict:
    """The tally of scored rows (extensions are left out by the caller)."""
    return {
        "claims": len(rows),
        "agrees": sum(row["verdict"] == "agrees" for row in rows),
        "disagrees": sum(row["verdict"] == "disagrees" for row in rows),
        "inconclusive": sum(row["verdict"] == "inconclusive" for row in rows),
        "underpowered": sum(bool(row["underpowered"]) for row in rows),
        "with_value": sum(row["within_2x"] is not None for row in rows),
        "within_2x": sum(bool(row["within_2x"]) for row in rows),
    }


def summarize(rows: list[dict]) -> dict:
    """`{"papers": {paper: counts}, "overall": counts}` over the rows that are not extensions."""
    scored = [row for row in rows if not row["extension"]]
    papers = list(dict.fromkeys(row["paper"] for row in scored))
    return {"papers": {paper: summary_counts([row for row in scored if row["paper"] == paper]) for paper in papers},
            "overall": summary_counts(scored)}
