"""`vmsched reproduce`: every built-in scenario with a [paper] table is a registered
experiment. Its runs go through the sweep engine (several seeds each); each claim of the
table becomes a row with the paper's value beside the simulated mean and its 95%
interval, and whether the simulated effect has the paper's direction. Also the
composition matrix: a standard mix of workloads under every host x guest policy."""
from __future__ import annotations

import hashlib
import html
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from . import api, planner_claims, scoring
from .atomic import write_atomic
from .errors import UserError
from .sweeps import PlannedRun, ProgressCallback, Store, SweepSpec, execute_runs, mean_ci95, plan

# Paper names a [paper] table may give (the `PaperName` enum of scenario/paper.rs).
PAPERS = ("vsched", "irs", "uvf", "anubis", "tableau", "phenomena")
FULL_SEEDS = [1, 2, 3, 4, 5]
QUICK_SEEDS = [1, 2, 3]
QUICK_DURATION = "300ms"  # for CI: long enough for tens of requests, pings and slices
ROW_KEYS = ("paper", "figure", "metric", "variant", "paper_value", "sim_mean", "sim_ci95",
            "direction", "direction_ok", "id", "kind", "verdict", "effect_ratio", "within_2x", "extension",
            "underpowered")
_SEGMENT = re.compile(r"([A-Za-z0-9_]+)(?:\[([^\]]*)\])?")


@dataclass(frozen=True)
class Experiment:
    """A built-in scenario with a [paper] table."""
    name: str
    scenario: api.Scenario
    paper: dict

    def variants(self) -> list[str]:
        """The variants its claims read, in the order they are first named."""
        names = []
        for claim in self.paper["claim"]:
            for term in claim_terms(claim):
                names.append(term["variant"])
                if term["versus"]:
                    names.append(term["versus"]["variant"])
        return list(dict.fromkeys(names))

    def peak_sweep(self) -> dict | None:
        """The sweep of a table of peak claims (the schema makes them share one), or None."""
        return self.paper["claim"][0].get("peak")

    def grid(self) -> dict[str, list]:
        """The override grid its runs sweep: a peak table's `set` over its values."""
        sweep = self.peak_sweep()
        if sweep is None:
            return {}
        return {sweep["set"]: [_sweep_value(v) for v in sweep["values"]]}


def _sweep_value(value: float) -> int | float:
    """A swept number as the override gives it: integral values as integers, so that
    integer fields take them (`sweep_literal` in scenario/paper.rs)."""
    return int(value) if float(value).is_integer() else value


def registry() -> list[Experiment]:
    """Every built-in scenario whose normalized form has a [paper] table."""
    experiments = []
    for info in api.scenarios():
        scenario = api.Scenario(info.toml, f"builtin:{info.name}")
        paper = api.normalize(scenario).get("paper")
        if paper:
            experiments.append(Experiment(info.name, scenario, paper))
    return experiments


def check_registry(experiments: list[Experiment]) -> None:
    """One claim per paper statement: ids unique, every `refers` naming a registered id,
    no two claims reading the same runs and metrics (a figure that shows a statement
    registered elsewhere refers to it), and every claim but an extension stating
    something to score (a direction, a value or a limit)."""
    where: dict[str, str] = {}
    seen: dict[tuple, tuple[str, str]] = {}
    for e in experiments:
        for index, claim in enumerate(e.paper["claim"]):
            label = f"{e.scenario.source}: paper.claim[{index}] ({claim['name']!r})"
            cid = claim_id(e.paper, claim)
            if cid in where:
                raise UserError(f"{label}: id `{cid}` is already the id of {where[cid]}")
            where[cid] = label
            states = (claim.get("direction") or claim.get("paper_value") is not None
                      or claim_kind(claim) in ("bound", "order"))
            if not (states or claim["extension"]):
                raise UserError(f"{label}: states no direction, value or limit, so it cannot be scored; "
                                f"register what the paper says, or mark a row the paper did not measure "
                                f"`extension = true`")
            key = _statement_key(e, claim)
            if key in seen:
                other_id, other_label = seen[key]
                raise UserError(f"{label} (`{cid}`) and {other_label} (`{other_id}`) read the same runs and "
                                f"metrics: register the statement once and give the other [paper] table "
                                f"`refers = ['{other_id}']`")
            seen[key] = (cid, label)
    for e in experiments:
        for ref in e.paper.get("refers") or []:
            if ref not in where:
                raise UserError(f"{e.scenario.source}: paper.refers: no registered claim has id `{ref}`")


def _statement_key(experiment: Experiment, claim: dict) -> tuple:
    """What a claim reads: per term, the run (its normalized setup, whatever scenario
    file holds it) and metric, and the reference's; with the claim's `per` and kind."""
    def run(variant: str) -> str:
        return _setup_digest(experiment, variant)

    terms = tuple((run(t["variant"]), t["metric"],
                   None if t["versus"] is None else (run(t["versus"]["variant"]),
                                                     t["versus"].get("metric") or t["metric"]))
                  for t in claim_terms(claim))
    return terms, tuple(claim.get("mean_of") or ()), claim.get("per"), bool(claim.get("peak"))


_SETUP_DIGESTS: dict[tuple[str, str], str] = {}


def _setup_digest(experiment: Experiment, variant: str) -> str:
    """A digest of the run a variant makes, without what only names it (the scenario's
    name and description, its [variants] and [paper] tables) or does nothing (a disabled
    workload)."""
    key = (experiment.scenario.source, variant)
    if key not in _SETUP_DIGESTS:
        from .sweeps import variant_overrides
        config = api.normalize(experiment.scenario)
        _, overrides = variant_overrides(experiment.scenario, config, variant, experiment.scenario.source)
        applied = api.normalize(experiment.scenario, overrides)
        material = {k: v for k, v in applied.items() if k not in ("name", "description", "variants", "paper", "seed")}
        # A disabled workload runs nothing: setups that differ by one are the same runs.
        material["vm"] = [vm | {"workload": [w for w in vm.get("workload", []) if w.get("enabled", True)]}
                          for vm in material.get("vm", [])]
        _SETUP_DIGESTS[key] = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
    return _SETUP_DIGESTS[key]


def select(experiments: list[Experiment], paper: str) -> list[Experiment]:
    if paper != "all" and paper not in PAPERS:
        raise UserError(f"{paper}: unknown paper; choose one of {', '.join(PAPERS)} or all")
    return [e for e in experiments if paper == "all" or e.paper["paper"] == paper]


def resolve_metric(summary: dict, path: str) -> float:
    """The number at a metric path (`workloads[NAME].latency_ns.p95`) of summary.json;
    KeyError says which step is missing and what is there instead."""
    value: object = summary
    walked = ""
    for key, selector in _SEGMENT.findall(path):
        if not isinstance(value, dict) or key not in value:
            there = ", ".join(sorted(value)) if isinstance(value, dict) else "a number"
            raise KeyError(f"no `{key}` at `{walked or 'the top'}` (there: {there})")
        value = value[key]
        walked = f"{walked}.{key}" if walked else key
        if selector:
            entries = value if isinstance(value, list) else []
            names = [entry.get("name") for entry in entries if isinstance(entry, dict)]
            if selector in names:
                value = entries[names.index(selector)]
            elif selector.isdigit() and int(selector) < len(entries):
                value = entries[int(selector)]
            else:
                raise KeyError(f"no entry `{selector}` in `{walked}` (there: {', '.join(map(str, names))})")
            walked += f"[{selector}]"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KeyError(f"`{path}` is not a number")
    return float(value)


def claim_kind(claim: dict) -> str:
    """The claim's kind as given, or as its fields make it (the schema's default)."""
    return claim.get("kind") or ("peak" if claim.get("peak") else "ratio" if claim["ratio"] else "point")


def claim_direction(claim: dict) -> str | None:
    """The side of no effect the statement puts the claim on: its `direction`, or for a
    ratio the side its paper value lies on (none for a value of 1, no effect)."""
    if claim.get("direction"):
        return claim["direction"]
    value = claim.get("paper_value")
    if claim["ratio"] and value is not None and value != 1:
        return "higher" if value > 1 else "lower"
    return None


def claim_terms(claim: dict) -> list[dict]:
    """The runs a claim reads: its own (variant, metric, versus), then its `terms`."""
    own = {"variant": claim["variant"], "metric": claim["metric"], "versus": claim.get("versus")}
    return [own] + [{"variant": t["variant"], "metric": t.get("metric") or claim["metric"],
                     "versus": t.get("versus")} for t in claim.get("terms") or []]


def _support(summary: dict, path: str) -> float | None:
    """How many completions or events the metric at `path` rests on in one run: a
    workload's completed requests or phases, a VM's interrupts, or the metric itself when
    it is a count; None for a time-integrated metric (a share, a CPU time)."""
    segments = _SEGMENT.findall(path)
    root = segments[0][0]
    head = "".join(f".{key}[{sel}]" if sel else f".{key}" for key, sel in segments[:1])[1:]
    keys = [key for key, _ in segments]
    try:
        if root == "workloads":
            return resolve_metric(summary, f"{head}.completed")
        if root == "vms" and len(keys) > 1 and keys[1] == "interrupts":
            return resolve_metric(summary, f"{head}.interrupts.count")
        if (root == "locks" and keys[-1].endswith("_count")) or (
                root == "vms" and len(keys) > 1 and keys[1] in ("exits", "ipis", "barrier_waits")):
            return resolve_metric(summary, path)
    except KeyError:
        return None
    return None


def _term_values(experiment: Experiment, index: int, claim: dict, term: dict, summaries: dict,
                 seeds: list[int]) -> dict[int, tuple[float, float | None, float | None, float | None]]:
    """Per seed whose runs all succeeded: (the term's value; its own metric over the
    reference's, or None; the fewest completions its runs rest on, or None; its own
    metric minus the reference's, or None). The value is the ratio for a ratio claim,
    else the metric times `scale`."""
    value_of = _metric if claim.get("peak") is None else _peak_metric(claim["peak"])
    versus = term["versus"]
    values = {}
    for seed in seeds:
        try:
            run = summaries[term["variant"], seed]
            reference = summaries[versus["variant"], seed] if versus else None
            # (own, reference's) per metric: the claim's, and a weighted speedup's others.
            pairs, support = [], []
            for metric in [term["metric"]] + list(claim.get("mean_of") or []):
                own = _per_work(experiment, index, claim, run, value_of(experiment, index, "metric", run, metric))
                other = None
                if versus:
                    other = _per_work(experiment, index, claim, reference,
                                      value_of(experiment, index, "versus.metric", reference,
                                               versus.get("metric") or metric))
                pairs.append((own, other))
                if claim.get("peak") is None:
                    support += [_support(run, metric)] + ([_support(reference, versus.get("metric") or metric)]
                                                          if versus else [])
        except _RunFailed:
            continue
        if any(own is None or (versus and other is None) for own, other in pairs):
            continue
        if claim["ratio"] and any(not other for _, other in pairs):
            continue  # a ratio to nothing
        own, other = pairs[0]
        effect = None
        if versus and all(other for _, other in pairs):
            effect = sum(own / other for own, other in pairs) / len(pairs)
        value = effect if claim["ratio"] else own * claim["scale"]
        counts = [c for c in support if c is not None]
        values[seed] = (value, effect, min(counts) if counts else None, own - other if versus else None)
    return values


def _claim_values(experiment: Experiment, index: int, claim: dict, summaries: dict) -> dict:
    """Per seed, from the runs every term of the claim needs: `value` (the claim's value:
    its own term's, or the largest term's for a max claim), `effect` (own metric over the
    reference's, likewise), `steps` (an order claim's term-over-previous-term ratios) and
    `support` (the fewest completions any of its runs rests on). `summaries` maps
    (variant, seed) to the run's summary, or None where the run failed; for a peak claim,
    to {swept value: summary}."""
    seeds = sorted({seed for _, seed in summaries})
    per_term = [_term_values(experiment, index, claim, term, summaries, seeds) for term in claim_terms(claim)]
    kind = claim_kind(claim)
    per_seed = {}
    for seed in seeds:
        if kind == "max":
            # "Up to" over the terms measured on this seed (a run with no completions has
            # no ratio), with the claim's own among them.
            terms = [values[seed] for values in per_term if seed in values] if seed in per_term[0] else []
        else:
            terms = [values[seed] for values in per_term] if all(seed in values for values in per_term) else []
        if not terms:
            continue
        pick = 0
        if kind == "max":  # "up to": the term farthest in the statement's direction
            sign = -1 if claim_direction(claim) == "lower" else 1
            pick = max(range(len(terms)), key=lambda i: sign * terms[i][0])
        supports = [t[2] for t in terms if t[2] is not None]
        per_seed[seed] = {
            "value": terms[pick][0], "effect": terms[pick][1], "difference": terms[pick][3],
            "steps": [b[0] / a[0] if a[0] else None for a, b in zip(terms, terms[1:])] if kind == "order" else [],
            "support": min(supports) if supports else None,
        }
    return per_seed


class _RunFailed(Exception):
    pass


def peak_value(sweep: dict, metric_at: dict[float, float]) -> float:
    """The highest swept value at which the metric stays at or below `at_most`; 0 when it
    holds at none. `metric_at` maps each swept value to the run's metric there."""
    holding = [value for value, metric in metric_at.items() if metric <= sweep["at_most"]]
    return max(holding, default=0.0)


def _peak_metric(sweep: dict):
    """A `_metric` for peak claims: reads the metric of every run of the sweep (a failed
    run fails the seed) and returns the peak."""
    def value_of(experiment: Experiment, index: int, field: str, by_value: dict | None, path: str) -> float:
        if by_value is None or set(by_value) != {float(v) for v in sweep["values"]}:
            raise _RunFailed
        return peak_value(sweep, {value: _metric(experiment, index, field, summary, path)
                                  for value, summary in by_value.items()})
    return value_of


def _per_work(experiment: Experiment, index: int, claim: dict, summary: dict, value: float) -> float | None:
    """`value` divided by the claim's `per` metric of the same run (None where that run
    did no work), or `value` itself when the claim has no `per`."""
    per = claim.get("per")
    if per is None:
        return value
    work = _metric(experiment, index, "per", summary, per)
    return value / work if work else None


def _metric(experiment: Experiment, index: int, field: str, summary: dict | None, path: str) -> float:
    if summary is None:
        raise _RunFailed
    try:
        return resolve_metric(summary, path)
    except KeyError as err:
        raise UserError(f"{experiment.scenario.source}: paper.claim[{index}].{field}: `{path}`: "
                        f"{err.args[0]}") from err


def claim_id(paper: dict, claim: dict) -> str:
    """The claim's stable id, or the one its paper, figure and name make."""
    if claim.get("id"):
        return claim["id"]
    return "/".join(_slug(part) for part in (paper["paper"], paper["figure"], claim["name"]))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def score(kind: str, claim: dict, per_seed: dict) -> dict:
    """The scored fields of a claim from its per-seed values (see scoring.py and docs/sweep.md)."""
    values = [v["value"] for v in per_seed.values()]
    mean, lower, upper, seeds = scoring.interval(values)
    effects = [v["effect"] for v in per_seed.values()]
    effect, effect_lower, effect_upper, _ = (scoring.interval(effects) if None not in effects
                                             else (None, None, None, 0))
    paper_value = claim.get("paper_value")
    direction = claim_direction(claim)
    ratio_like = claim["ratio"]
    steps = []
    if kind == "order":
        for i in range(len(claim["terms"])):
            step, step_lower, step_upper, _ = scoring.interval(
                [v["steps"][i] for v in per_seed.values() if v["steps"][i] is not None])
            steps.append({"mean": step, "lower": step_lower, "upper": step_upper,
                          "verdict": scoring.side_verdict(step_lower, step_upper, claim["direction"] == "higher")})
        verdict = scoring.order_verdict([step["verdict"] for step in steps])
    elif kind == "bound":
        verdict = scoring.bound_verdict(lower, upper, claim.get("at_least"), claim.get("at_most"))
    elif direction is not None and ratio_like:
        verdict = scoring.side_verdict(effect_lower, effect_upper, direction == "higher")
    elif direction is not None:
        # A value above or below the reference's: the interval of the per-seed difference
        # (a reference of 0, say no lock-holder preemption alone, has no ratio).
        _, difference_lower, difference_upper, _ = scoring.interval(
            [v["difference"] for v in per_seed.values() if v["difference"] is not None])
        verdict = scoring.side_verdict(difference_lower, difference_upper, direction == "higher", at=0.0)
    elif paper_value is not None:
        verdict = scoring.band_verdict(lower, upper, paper_value)
    else:
        verdict = "inconclusive"  # a row that states nothing (only an extension may)
    magnitude = None
    if kind not in ("bound", "order"):
        # A ratio of no effect (1) is scored as the value it is: its log is 0.
        magnitude = scoring.effect_ratio(ratio_like and paper_value != 1, mean, paper_value)
    supports = [v["support"] for v in per_seed.values() if v["support"] is not None]
    return {"sim_mean": mean, "sim_ci95": None if upper is None else upper - mean, "seeds": seeds,
            "effect": effect, "effect_ci95": None if effect_upper is None else effect_upper - effect,
            "verdict": verdict, "effect_ratio": magnitude, "within_2x": scoring.within_factor(magnitude),
            "support": min(supports) if supports else None,
            "underpowered": bool(supports) and min(supports) < scoring.MIN_SUPPORT,
            "steps": steps, "scored_direction": direction}


def claim_rows(experiment: Experiment, summaries: dict) -> list[dict]:
    rows = []
    paper = experiment.paper
    for index, claim in enumerate(paper["claim"]):
        kind = claim_kind(claim)
        scored = score(kind, claim, _claim_values(experiment, index, claim, summaries))
        direction = claim.get("direction")
        direction_ok = None
        if direction and scored["effect"] is not None and kind != "order":
            direction_ok = scored["effect"] > 1 if direction == "higher" else scored["effect"] < 1
        versus = claim.get("versus")
        paper_value = claim.get("paper_value")
        mean = scored.pop("sim_mean")
        rows.append({
            "paper": paper["paper"], "figure": paper["figure"], "metric": claim["metric"],
            "variant": claim["variant"], "paper_value": paper_value, "sim_mean": mean,
            "sim_ci95": scored.pop("sim_ci95"), "direction": direction, "direction_ok": direction_ok,
            "id": claim_id(paper, claim), "kind": kind, "verdict": scored.pop("verdict"),
            "effect_ratio": scored.pop("effect_ratio"), "within_2x": scored.pop("within_2x"),
            "extension": claim["extension"], "underpowered": scored.pop("underpowered"),
            "name": claim["name"], "scenario": experiment.name, "unit": "ratio" if claim["ratio"] else claim["unit"],
            "versus": None if versus is None else {"variant": versus["variant"],
                                                   "metric": versus.get("metric") or claim["metric"]},
            "ratio": claim["ratio"], "at_most": claim.get("at_most"), "at_least": claim.get("at_least"),
            "terms": claim_terms(claim)[1:],
            "sim_over_paper": mean / paper_value if mean is not None and paper_value else None,
        } | scored)
    return rows


# The kernel a `--kernel` rerun is compared with unless told otherwise: Linux 6.5, the last
# release whose fair class is CFS, with today's paravirtual features (docs/eevdf.md).
VERSUS_KERNEL = "linux-6.5"


def kernel_verdict(row: dict, versus: dict) -> str | None:
    """How a directional claim fares on one kernel (`row`) against another (`versus`),
    from each one's interval verdict: `reverses` (agrees there, disagrees here),
    `appears` (the converse), `absent on both` (disagrees on both); where it agrees on
    both, the size of the effect in log terms decides: `weakens` when this kernel's whole
    interval lies below half the other's, `strengthens` when it lies above twice the
    other's, else `holds`; any other pair (an interval spanning no effect) is
    `inconclusive`. None for a claim without a direction."""
    if not row["scored_direction"] or row["kind"] in ("order", "bound"):
        return None
    here, there = row["verdict"], versus["verdict"]
    if here == "agrees" and there == "agrees":
        sign = 1 if row["scored_direction"] == "higher" else -1
        low, high = _log_interval(row, sign)
        other_low, other_high = _log_interval(versus, sign)
        if None not in (low, high, other_low, other_high):
            if high < other_low / 2:
                return "weakens"
            if low > 2 * other_high:
                return "strengthens"
        return "holds"
    return {("disagrees", "agrees"): "reverses", ("agrees", "disagrees"): "appears",
            ("disagrees", "disagrees"): "absent on both"}.get((here, there), "inconclusive")


def _log_interval(row: dict, sign: int) -> tuple[float | None, float | None]:
    """The interval of the claim's effect in log terms, oriented so that the claim's
    direction is positive (None where an end is not positive)."""
    mean, ci95 = row["effect"], row["effect_ci95"]
    if mean is None or ci95 is None or mean - ci95 <= 0:
        return None, None
    ends = sorted(sign * math.log(v) for v in (mean - ci95, mean + ci95))
    return ends[0], ends[1]


def compare_kernels(rows: list[dict], versus_rows: list[dict], kernel: str, versus_kernel: str) -> list[dict]:
    """`rows` (on `kernel`) with the same claims' results on `versus_kernel` beside them and
    the verdict of each directional claim."""
    versus = {(row["scenario"], row["name"]): row for row in versus_rows}
    compared = []
    for row in rows:
        other = versus[row["scenario"], row["name"]]
        compared.append(row | {
            "kernel": kernel, "versus_kernel": versus_kernel, "versus_mean": other["sim_mean"],
            "versus_ci95": other["sim_ci95"], "versus_direction_ok": other["direction_ok"],
            "versus_verdict": other["verdict"], "versus_effect": other["effect"],
            "versus_effect_ci95": other["effect_ci95"], "kernel_verdict": kernel_verdict(row, other),
        })
    return compared


@dataclass
class Reproduction:
    rows: list[dict]
    experiments: list[Experiment]
    out: Path
    quick: bool
    failures: list[str]  # "scenario variant seed: error" of each failed run (left out of the rows)
    summary: dict  # scoring.summarize(rows): the tally per paper and overall


def kernel_overrides(experiment: Experiment, kernel: str) -> dict[str, list[str]]:
    """The settings that rerun an experiment on kernel profile `kernel`: every guest, and
    the host when it runs Linux (a Xen host stays Xen). The experiment's variants are
    applied after them, so a variant that names its own kernel keeps it; VM cgroups
    (`host.cfs.vm_groups`) stay as the scenario sets them, on either fair class."""
    config = api.normalize(experiment.scenario)
    keys = [f"vm[{i}].guest.kernel" for i in range(len(config["vm"]))]
    grid = {key: [kernel] for key in keys}
    if config["host"]["kernel"].startswith("linux"):
        grid = {"host.kernel": [kernel]} | grid
    return grid


def plan_experiments(experiments: Iterable[Experiment], seeds: list[int], duration: str | None,
                     kernel: str | None = None) -> dict:
    """Planned runs per experiment: its claims' variants x the seeds (on `kernel` if given).
    A quick run (`duration` given) lasts the experiment's own `quick_ms` and runs seeds
    1..`quick_seeds` if it names them (docs/sweep.md, quick runs and power)."""
    def run_duration(e: Experiment) -> str | None:
        return f"{e.paper['quick_ms']:g}ms" if duration and e.paper.get("quick_ms") else duration

    def run_seeds(e: Experiment) -> list[int]:
        return list(range(1, e.paper["quick_seeds"] + 1)) if duration and e.paper.get("quick_seeds") else seeds

    return {e.name: plan(SweepSpec([e.scenario.source.removeprefix("builtin:")], run_seeds(e), e.variants(),
                                   grid=(kernel_overrides(e, kernel) if kernel else {}) | e.grid(),
                                   duration=run_duration(e), source=e.scenario.source))
            for e in experiments}


def reproduce(paper: str = "all", quick: bool = False, out: str | Path | None = None,
              backend: str = "local", workers: int | None = None, address: str | None = None,
              progress: ProgressCallback | None = None, kernel: str | None = None,
              versus_kernel: str | None = None) -> Reproduction:
    """With `kernel`, every experiment reruns with that kernel profile at both levels (see
    `kernel_overrides`) and each row says so in `kernel`; the same runs on `versus_kernel`
    (default VERSUS_KERNEL; none when it is `kernel` itself) go beside them, with a verdict
    per directional claim (`kernel_verdict`)."""
    every = registry()
    check_registry(every)
    experiments = select(every, paper)
    if not experiments:
        raise UserError(f"{paper}: no registered experiments yet (built-in scenarios with a [paper] table)")
    if versus_kernel and not kernel:
        raise UserError("--versus-kernel: compares with a --kernel rerun; give --kernel too")
    versus_kernel = (versus_kernel or VERSUS_KERNEL) if kernel else None
    if versus_kernel == kernel:
        versus_kernel = None
    default_out = "runs/reproduce" + (f"-{kernel}" if kernel else "") + ("-quick" if quick else "")
    out = Path(out or default_out)
    seeds, duration = (QUICK_SEEDS, QUICK_DURATION) if quick else (FULL_SEEDS, None)
    planned = plan_experiments(experiments, seeds, duration, kernel)
    versus_planned = plan_experiments(experiments, seeds, duration, versus_kernel) if versus_kernel else {}
    # Each run with the kernel it was planned on (None: the experiment's own profiles).
    every_run = [(on, run) for on, plans in ((kernel, planned), (versus_kernel, versus_planned))
                 for runs in plans.values() for run in runs]
    store = execute_runs([run for _, run in every_run], out, backend, workers, address, progress)
    rows = []
    for experiment in experiments:
        rows += claim_rows(experiment, _summaries(experiment, planned[experiment.name], store))
    if versus_kernel:
        versus_rows = [row for experiment in experiments
                       for row in claim_rows(experiment, _summaries(experiment, versus_planned[experiment.name], store))]
        rows = compare_kernels(rows, versus_rows, kernel, versus_kernel)
    elif kernel:
        rows = [row | {"kernel": kernel} for row in rows]
    if paper in (planner_claims.PAPER, "all") and not kernel:
        # The planner's claims (Figs. 3 and 4) run no simulation and no kernel.
        rows += planner_rows(quick, {row["id"] for row in rows})
    failures = []
    for on, run in every_run:
        record = store.load(run.task.key)
        if record["status"] != "ok":
            failures.append(f"{run.scenario} {run.variant or '(as written)'}{f' on {on}' if on else ''} "
                            f"seed {run.seed}: {record['error']}")
    result = Reproduction(rows, experiments, out, quick, failures, scoring.summarize(rows))
    write_atomic(out / "reproduce.json", json.dumps(public_rows(rows), indent=1) + "\n")
    write_atomic(out / "reproduce-summary.json", json.dumps(result.summary, indent=1) + "\n")
    write_atomic(out / "reproduce.html", reproduce_html(result))
    return result


def planner_rows(quick: bool, taken_ids: set[str]) -> list[dict]:
    """The Tableau planner's scored rows (planner_claims.py), whose ids must not be
    those of registered scenario claims."""
    rows = planner_claims.rows(quick)
    clash = sorted(taken_ids & {row["id"] for row in rows})
    if clash:
        raise UserError(f"planner claims: id `{clash[0]}` is also the id of a scenario's [paper] claim")
    return rows


def _summaries(experiment: Experiment, runs: list[PlannedRun], store: Store) -> dict:
    """(variant, seed) -> the run's summary (None if it failed); for a peak table,
    (variant, seed) -> {swept value: summary}."""
    sweep = experiment.peak_sweep()
    summaries: dict = {}
    for run in runs:
        record = store.load(run.task.key)
        summary = record["summary"] if record["status"] == "ok" else None
        if sweep is None:
            summaries[run.variant, run.seed] = summary
        else:
            value = float(dict(run.point)[sweep["set"]])
            summaries.setdefault((run.variant, run.seed), {})[value] = summary
    return summaries


def public_rows(rows: list[dict]) -> list[dict]:
    """The rows in the documented JSON form: the contract's keys first, then the rest."""
    return [{key: row[key] for key in ROW_KEYS} | {k: v for k, v in row.items() if k not in ROW_KEYS}
            for row in rows]


def format_number(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3g}"


def format_mean(mean: float | None, ci95: float | None) -> str:
    return format_number(mean) + (f" ± {format_number(ci95)}" if ci95 is not None else "")


def paper_statement(row: dict) -> str:
    """What the paper states, in a few characters: its value, its limits or its direction."""
    parts = []
    if row["kind"] == "bound":
        parts += [f"≥ {row['at_least']:g}"] if row["at_least"] is not None else []
        parts += [f"≤ {row['at_most']:g}"] if row["at_most"] is not None else []
    elif row["paper_value"] is not None:
        parts.append(("up to " if row["kind"] == "max" else "") + f"{row['paper_value']:g}")
    if row["direction"]:
        parts.append(("increasing" if row["direction"] == "higher" else "decreasing") if row["kind"] == "order"
                     else row["direction"])
    return ", ".join(parts) or "–"


def verdict_mark(row: dict) -> str:
    return row["verdict"] + (" (underpowered)" if row["underpowered"] else "")


SUMMARY_COLUMNS = ("claims", "agrees", "disagrees", "inconclusive", "underpowered", "with_value", "within_2x")


def summary_lines(summary: dict) -> list[list[str]]:
    """The tally as table rows: one per paper, then the overall."""
    rows = [[paper] + [str(counts[key]) for key in SUMMARY_COLUMNS] for paper, counts in summary["papers"].items()]
    return rows + [["overall"] + [str(summary["overall"][key]) for key in SUMMARY_COLUMNS]]


def rich_tables(rows: list[dict], summary: dict | None = None) -> list:
    """One terminal table per paper and figure, then the tally."""
    from rich.table import Table
    from rich.text import Text

    from . import terminal
    tables = []
    for (paper, figure), group in _groups(rows, ("paper", "figure")).items():
        table = Table(title=f"{paper} {figure}: paper vs simulation (mean ± 95% CI over seeds)",
                      title_justify="left")
        versus = group[0].get("versus_kernel")
        columns = [("id", "left"), ("claim", "left"), ("kind", "left"), ("unit", "left"), ("paper", "right"),
                   ("sim", "right"), ("effect ratio", "right"), ("verdict", "left")]
        if versus:
            columns += [(f"on {versus}", "right"), (f"{group[0]['kernel']} vs {versus}", "left")]
        for column, justify in columns:
            table.add_column(column, justify=justify)
        for row in group:
            colour = {"agrees": "green", "disagrees": "red"}.get(row["verdict"], "yellow")
            mark = Text.assemble(terminal.styled(verdict_mark(row), colour),
                                 terminal.styled(" (extension)", "dim") if row["extension"] else "")
            cells = [row["id"], row["name"], row["kind"], row["unit"], paper_statement(row),
                     format_mean(row["sim_mean"], row["sim_ci95"]), format_number(row["effect_ratio"]), mark]
            if versus:
                cells += [format_mean(row["versus_mean"], row["versus_ci95"]), row["kernel_verdict"] or "–"]
            table.add_row(*cells)
        tables.append(table)
    if summary is not None:
        table = Table(title="tally (extensions left out; within_2x among claims with a paper value)",
                      title_justify="left")
        for column in ("paper",) + SUMMARY_COLUMNS:
            table.add_column(column, justify="left" if column == "paper" else "right")
        for line in summary_lines(summary):
            table.add_row(*line)
        tables.append(table)
    return tables


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict:
    groups: dict = {}
    for row in rows:
        groups.setdefault(tuple(row[key] for key in keys), []).append(row)
    return groups


def forest_point(row: dict) -> tuple[float, float, float, float | None] | None:
    """(effect, lower, upper, paper marker) that the forest plot draws for a row, on a log
    axis where 1 is no effect: a ratio or a directional claim's effect (the paper's ratio
    as marker); a value over the paper's (marker 1); a bound's value over its limit; an
    order's weakest step. None where nothing positive can be drawn."""
    kind, mean, ci95 = row["kind"], row["sim_mean"], row["sim_ci95"] or 0.0
    marker = None
    if kind == "order":
        steps = [step for step in row["steps"] if step["mean"] is not None]
        if not steps:
            return None
        higher = row["direction"] == "higher"
        weakest = min(steps, key=lambda st: (st["lower"] if higher else -st["upper"]) if st["lower"] is not None
                      else (st["mean"] if higher else -st["mean"]))
        mean, ci95 = weakest["mean"], (weakest["upper"] - weakest["mean"]) if weakest["upper"] is not None else 0.0
    elif kind == "bound":
        limit = row["at_most"] if row["at_most"] is not None else row["at_least"]
        if mean is None or not limit:
            return None
        mean, ci95, marker = mean / limit, ci95 / limit, 1.0
    elif row["ratio"]:
        marker = row["paper_value"]
    elif row["scored_direction"] and row["effect"] is not None:
        mean, ci95 = row["effect"], row["effect_ci95"] or 0.0
    elif row["paper_value"]:
        if mean is None:
            return None
        mean, ci95, marker = mean / row["paper_value"], ci95 / row["paper_value"], 1.0
    if mean is None or mean <= 0:
        return None
    return mean, max(mean - ci95, mean / 1e3), mean + ci95, marker


VERDICT_COLOURS = {"agrees": "#1a7f37", "disagrees": "#cf222e", "inconclusive": "#9a6700"}


def forest_figure(paper: str, rows: list[dict]):
    """Each claim of a paper as a row: its simulated effect with the 95% interval on a
    log axis (1 is no effect), the paper's value as a diamond, coloured by verdict."""
    import plotly.graph_objects as go

    drawn = [(row, point) for row in rows if (point := forest_point(row)) is not None]
    labels = [f"{row['id']}{' (underpowered)' if row['underpowered'] else ''}" for row, _ in drawn]
    fig = go.Figure()
    for verdict, colour in VERDICT_COLOURS.items():
        chosen = [(label, row, point) for label, (row, point) in zip(labels, drawn) if row["verdict"] == verdict]
        if not chosen:
            continue
        fig.add_scatter(
            name=verdict, mode="markers", marker=dict(color=colour, size=9),
            x=[point[0] for _, _, point in chosen], y=[label for label, _, _ in chosen],
            error_x=dict(type="data", symmetric=False, array=[point[2] - point[0] for _, _, point in chosen],
                         arrayminus=[point[0] - point[1] for _, _, point in chosen], color=colour),
            hovertext=[row["name"] for _, row, _ in chosen])
    markers = [(label, point[3]) for label, (_, point) in zip(labels, drawn) if point[3] and point[3] > 0]
    if markers:
        fig.add_scatter(name="paper", mode="markers", marker=dict(symbol="diamond-open", color="#222", size=10),
                        x=[value for _, value in markers], y=[label for label, _ in markers])
    fig.add_vline(x=1, line_dash="dot", line_color="#888")
    fig.update_layout(title=f"{paper}: simulated effect (95% CI), paper value ◇; 1 = no effect",
                      xaxis_type="log", xaxis_title="effect (ratio; a value over the paper's; a bound's value over its limit)",
                      yaxis=dict(autorange="reversed", categoryorder="array", categoryarray=labels, type="category",
                                 automargin=True),
                      height=max(260, 120 + 22 * len(labels)))
    return fig


def reproduce_html(result: Reproduction) -> str:
    """The tally at the top; per paper, its scoreboard (claims, paper statement, simulation,
    verdict, effect ratio) and its forest plot; then the extensions, and each experiment's
    note."""
    from .report import _STYLE, _figure_html, _table

    tally = _table(["paper", *SUMMARY_COLUMNS], summary_lines(result.summary), numeric_from=1)
    kernel_headers: list[str] = []
    if result.rows and result.rows[0].get("versus_kernel"):
        kernel_headers = [f"on {result.rows[0]['versus_kernel']}",
                          f"{result.rows[0]['kernel']} vs {result.rows[0]['versus_kernel']}"]
    headers = ["id", "figure", "claim", "kind", "unit", "paper", "sim mean ± 95% CI", "effect ratio",
               "within 2x", "verdict", *kernel_headers]

    def cells(row: dict) -> list:
        within = {None: "–", True: "yes", False: "no"}[row["within_2x"]]
        verdict_class = {"agrees": "better", "disagrees": "worse"}.get(row["verdict"], "")
        line = [row["id"], row["figure"], row["name"], row["kind"], row["unit"], paper_statement(row),
                format_mean(row["sim_mean"], row["sim_ci95"]), format_number(row["effect_ratio"]), within,
                (verdict_mark(row), verdict_class)]
        if kernel_headers:
            line += [format_mean(row["versus_mean"], row["versus_ci95"]), row["kernel_verdict"] or "–"]
        return line

    sections = []
    first = True
    for paper, rows in _groups([r for r in result.rows if not r["extension"]], ("paper",)).items():
        fig = forest_figure(paper[0], rows)
        chart = f'<div class="chart">{_figure_html(fig, first=first)}</div>'
        first = False
        sections.append(f"<h2>{html.escape(paper[0])}</h2>{chart}{_table(headers, [cells(r) for r in rows], numeric_from=6)}")
    extensions = [row for row in result.rows if row["extension"]]
    if extensions:
        sections.append("<h2>Extensions (rows the papers did not measure; not in any tally)</h2>"
                        + _table(headers, [cells(r) for r in extensions], numeric_from=6))
    notes = "".join(f"<li><b>{html.escape(e.name)}</b> ({html.escape(e.paper['paper'])} "
                    f"{html.escape(e.paper['figure'])}): {html.escape(e.paper['note'])}"
                    + (f" Also shows: {html.escape(', '.join(e.paper['refers']))}." if e.paper.get("refers") else "")
                    + "</li>" for e in result.experiments)
    seeds = QUICK_SEEDS if result.quick else FULL_SEEDS
    mode = (f"quick: {QUICK_DURATION} of simulated time per run, or an experiment's quick_ms and quick_seeds"
            if result.quick else "each scenario's full duration")
    kernels = ""
    if kernel_headers:
        kernels = (f"<p>Every experiment ran on {html.escape(result.rows[0]['kernel'])} at both levels (a Xen host "
                   f"stays Xen), and again on {html.escape(result.rows[0]['versus_kernel'])}; the last column says "
                   f"how each directional claim fares (docs/eevdf.md).</p>")
    title = "vmsched reproduce"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{_STYLE}</style></head><body>
<h1>{title}</h1>
<p>Each paper statement is one claim, scored from the 95% interval of its simulated effect over seeds
{", ".join(map(str, seeds))} ({html.escape(mode)}): agrees, disagrees or inconclusive; the effect ratio is the
simulated effect over the paper's (log effect for ratios). Rules: docs/sweep.md.</p>{kernels}
<h2>Tally</h2>{tally}
{"".join(sections)}
<h2>Experiments</h2><ul>{notes}</ul>
</body></html>
"""


def markdown_table(headers: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell.replace("|", "/") for cell in line) + " |" for line in lines]
    return "\n".join(out) + "\n"


def markdown_tally(summary: dict) -> str:
    return markdown_table(["paper", *SUMMARY_COLUMNS], summary_lines(summary))


def markdown_claims(rows: list[dict]) -> str:
    """One paper's claims as a Markdown table, extensions last."""
    ordered = [r for r in rows if not r["extension"]] + [r for r in rows if r["extension"]]
    headers = ["id", "figure", "claim", "kind", "paper", "simulation", "effect ratio", "verdict"]
    versus = rows[0].get("versus_kernel") if rows else None
    if versus:
        headers += [f"on {versus}", f"{rows[0]['kernel']} vs {versus}"]
    lines = []
    for r in ordered:
        line = [f"`{r['id']}`", r["figure"], r["name"], r["kind"], paper_statement(r),
                format_mean(r["sim_mean"], r["sim_ci95"]) + ("" if r["unit"] in ("", "ratio") else f" {r['unit']}"),
                format_number(r["effect_ratio"]), verdict_mark(r) + (" (extension)" if r["extension"] else "")]
        if versus:
            line += [format_mean(r["versus_mean"], r["versus_ci95"]) + f" ({r['versus_verdict']})",
                     r["kernel_verdict"] or "–"]
        lines.append(line)
    return markdown_table(headers, lines)


def markdown_kernel_comparison(rows: list[dict]) -> str:
    """The claims with a direction of a `--kernel` run, each on the kernel compared with
    (`versus_kernel`) and on the kernel run, with the direction between them
    (`kernel_verdict`): docs/eevdf.md's table (tools/reproduce-docs.py puts it there)."""
    rows = [r for r in rows if r.get("versus_kernel") and r["scored_direction"]]
    if not rows:
        return ""
    kernel, versus = rows[0]["kernel"], rows[0]["versus_kernel"]
    headers = ["paper", "scenario", "claim", "direction", versus, kernel, f"on {kernel}"]
    lines = [[r["paper"], r["scenario"], r["name"] + (" (extension)" if r["extension"] else ""), r["scored_direction"],
              format_mean(r["versus_mean"], r["versus_ci95"]), format_mean(r["sim_mean"], r["sim_ci95"]),
              r["kernel_verdict"] or "–"] for r in rows]
    return markdown_table(headers, lines)


def markdown_tables(rows: list[dict], summary: dict) -> str:
    """The tally and, per paper, its claims as Markdown (tools/reproduce-docs.py puts them
    in docs/<paper>.md and the README)."""
    parts = ["### Tally\n", markdown_tally(summary)]
    for (paper,), group in _groups(rows, ("paper",)).items():
        parts += [f"\n### {paper}\n", markdown_claims(group)]
    return "\n".join(parts)


# --- the composition matrix ---------------------------------------------------------

# A standard mix: a server, a barrier program, a lock-heavy program, ping beside a
# CPU-bound task and a throttled single thread, each already a built-in.
MATRIX_SCENARIOS = ("default", "anubis-table1", "vcpu-stacking", "lock-holder-preemption", "stalled-running-task")


def _registered(level: str) -> list[str]:
    """The policies of one level (`host` or `guest`) in the engine's registry."""
    from . import _native
    return [p["name"] for p in json.loads(_native.policies()) if p["level"] == level]


def host_policies() -> list[str]:
    return _registered("host")


def guest_policies() -> list[str]:
    return _registered("guest")


def matrix(quick: bool = False, out: str | Path | None = None, backend: str = "local",
           workers: int | None = None, address: str | None = None,
           progress: ProgressCallback | None = None) -> pl.DataFrame:
    """Every workload of the standard mix under every host x guest policy: per workload,
    throughput and (where it has latencies) p95 latency, mean and 95% CI over seeds."""
    hosts, guests = host_policies(), guest_policies()
    seeds = QUICK_SEEDS if quick else FULL_SEEDS
    duration = QUICK_DURATION if quick else None
    out = Path(out or ("runs/matrix-quick" if quick else "runs/matrix"))
    planned: list[tuple[str, str, PlannedRun]] = []
    for name in MATRIX_SCENARIOS:
        vm_count = len(api.normalize(api.load_scenario(name))["vm"])
        for host in hosts:
            for guest in guests:
                overrides = [f"host.policy={host}"] + [f"vm[{i}].guest.policy={guest}" for i in range(vm_count)]
                variant = ",".join(overrides)
                spec = SweepSpec([name], seeds, [f"{host}-{guest}={variant}"], duration=duration)
                planned += [(host, guest, run) for run in plan(spec)]
    store = execute_runs([run for _, _, run in planned], out, backend, workers, address, progress)
    samples: dict = {}
    for host, guest, run in planned:
        record = store.load(run.task.key)
        if record["status"] != "ok":
            continue
        for workload in record["summary"]["workloads"]:
            metrics = {"throughput_per_s": workload["throughput_per_s"]}
            if "latency_ns" in workload:
                metrics["latency_p95_ms"] = workload["latency_ns"]["p95"] / 1e6
            for metric, value in metrics.items():
                samples.setdefault((run.scenario, workload["name"], metric, host, guest), []).append(value)
    rows = []
    for (scenario, workload, metric, host, guest), values in samples.items():
        mean, ci95, n = mean_ci95(values)
        rows.append({"scenario": scenario, "workload": workload, "metric": metric, "host": host,
                     "guest": guest, "n": n, "mean": mean, "ci95": ci95})
    frame = pl.DataFrame(rows, schema={"scenario": pl.String, "workload": pl.String, "metric": pl.String,
                                       "host": pl.String, "guest": pl.String, "n": pl.Int64,
                                       "mean": pl.Float64, "ci95": pl.Float64})
    write_atomic(out / "matrix.json", json.dumps(frame.to_dicts(), indent=1) + "\n")
    return frame
