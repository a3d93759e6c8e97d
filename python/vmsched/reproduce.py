"""`vmsched reproduce`: every built-in scenario with a [paper] table is a registered
experiment. Its runs go through the sweep engine (several seeds each); each claim of the
table becomes a row with the paper's value beside the simulated mean and its 95%
interval, and whether the simulated effect has the paper's direction. Also the
composition matrix: a standard mix of workloads under every host x guest policy."""
from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from . import api
from .atomic import write_atomic
from .errors import UserError
from .sweeps import PlannedRun, ProgressCallback, Store, SweepSpec, execute_runs, mean_ci95, plan

# Paper names a [paper] table may give (the `PaperName` enum of scenario.rs).
PAPERS = ("vsched", "irs", "uvf", "anubis", "tableau", "phenomena")
FULL_SEEDS = [1, 2, 3, 4, 5]
QUICK_SEEDS = [1, 2, 3]
QUICK_DURATION = "300ms"  # for CI: long enough for tens of requests, pings and slices
ROW_KEYS = ("paper", "figure", "metric", "variant", "paper_value", "sim_mean", "sim_ci95",
            "direction", "direction_ok")
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
            names.append(claim["variant"])
            if claim.get("versus"):
                names.append(claim["versus"]["variant"])
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
    integer fields take them (`sweep_literal` in scenario.rs)."""
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


def _claim_values(experiment: Experiment, index: int, claim: dict, summaries: dict) -> tuple[list, list, list]:
    """Per seed: the reported value (scaled, or the ratio), the claim's raw metric and the
    reference's raw metric (for the direction). `summaries` maps (variant, seed) to the
    run's summary, or to None where that run failed; for a peak claim, to a mapping from
    each swept value to the summary of the run there, and the claim's raw value is the
    peak (see `peak_value`)."""
    versus = claim.get("versus")
    reported, own, reference = [], [], []
    seeds = sorted({seed for _, seed in summaries})
    value_of = _metric if claim.get("peak") is None else _peak_metric(claim["peak"])
    for seed in seeds:
        try:
            run = summaries[claim["variant"], seed]
            value = _per_work(experiment, index, claim, run,
                              value_of(experiment, index, "metric", run, claim["metric"]))
            other = None
            if versus:
                run = summaries[versus["variant"], seed]
                other = _per_work(experiment, index, claim, run,
                                  value_of(experiment, index, "versus.metric", run, versus.get("metric") or claim["metric"]))
        except _RunFailed:
            continue
        if value is None or (versus and other is None):
            continue
        own.append(value)
        if other is not None:
            reference.append(other)
        if claim["ratio"]:
            if other:
                reported.append(value / other)
        else:
            reported.append(value * claim["scale"])
    return reported, own, reference


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


def claim_rows(experiment: Experiment, summaries: dict) -> list[dict]:
    rows = []
    paper = experiment.paper
    for index, claim in enumerate(paper["claim"]):
        reported, own, reference = _claim_values(experiment, index, claim, summaries)
        mean, ci95, seeds = mean_ci95(reported)
        direction = claim.get("direction")
        direction_ok = effect = None
        if direction and own and reference:
            own_mean, reference_mean = sum(own) / len(own), sum(reference) / len(reference)
            direction_ok = own_mean > reference_mean if direction == "higher" else own_mean < reference_mean
            effect = own_mean / reference_mean if own_mean > 0 and reference_mean > 0 else None
        versus = claim.get("versus")
        paper_value = claim.get("paper_value")
        rows.append({
            "paper": paper["paper"], "figure": paper["figure"], "metric": claim["metric"],
            "variant": claim["variant"], "paper_value": paper_value, "sim_mean": mean, "sim_ci95": ci95,
            "direction": direction, "direction_ok": direction_ok,
            "name": claim["name"], "scenario": experiment.name, "unit": "ratio" if claim["ratio"] else claim["unit"],
            "versus": None if versus is None else {"variant": versus["variant"],
                                                   "metric": versus.get("metric") or claim["metric"]},
            "ratio": claim["ratio"], "seeds": seeds,
            "sim_over_paper": mean / paper_value if mean is not None and paper_value else None,
            "effect": effect,
        })
    return rows


# The kernel a `--kernel` rerun is compared with unless told otherwise: Linux 6.5, the last
# release whose fair class is CFS, with today's paravirtual features (docs/eevdf.md).
VERSUS_KERNEL = "linux-6.5"


def kernel_verdict(direction_ok: bool | None, versus_ok: bool | None,
                   effect: float | None, versus_effect: float | None) -> str | None:
    """How a directional claim fares on one kernel against another: `reverses` when the
    effect had the claim's direction on the other kernel and has not on this one,
    `appears` the converse, `absent on both`; where it holds on both, the size of the
    effect (the claim's mean over its reference's, in log terms) decides: `weakens` below
    half the other kernel's, `strengthens` above twice, else `holds`."""
    if direction_ok is None or versus_ok is None:
        return None
    if not versus_ok:
        return "appears" if direction_ok else "absent on both"
    if not direction_ok:
        return "reverses"
    if not effect or not versus_effect or math.log(versus_effect) == 0:
        return "holds"  # no size to compare (a mean of zero, or a ratio that rounds to 1)
    size = abs(math.log(effect)) / abs(math.log(versus_effect))
    return "weakens" if size < 0.5 else "strengthens" if size > 2 else "holds"


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
            "versus_effect": other["effect"],
            "verdict": kernel_verdict(row["direction_ok"], other["direction_ok"], row["effect"], other["effect"]),
        })
    return compared


@dataclass
class Reproduction:
    rows: list[dict]
    experiments: list[Experiment]
    out: Path
    quick: bool
    failures: list[str]  # "scenario variant seed: error" of each failed run (left out of the rows)


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
    A quick run (`duration` given) lasts the experiment's own `quick_ms` if it names one."""
    def run_duration(e: Experiment) -> str | None:
        return f"{e.paper['quick_ms']:g}ms" if duration and e.paper.get("quick_ms") else duration

    return {e.name: plan(SweepSpec([e.scenario.source.removeprefix("builtin:")], seeds, e.variants(),
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
    experiments = select(registry(), paper)
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
    failures = []
    for on, run in every_run:
        record = store.load(run.task.key)
        if record["status"] != "ok":
            failures.append(f"{run.scenario} {run.variant or '(as written)'}{f' on {on}' if on else ''} "
                            f"seed {run.seed}: {record['error']}")
    result = Reproduction(rows, experiments, out, quick, failures)
    write_atomic(out / "reproduce.json", json.dumps(rows, indent=1) + "\n")
    write_atomic(out / "reproduce.html", reproduce_html(result))
    return result


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


def direction_mark(row: dict) -> str:
    if row["direction_ok"] is None:
        return "–"
    return "agrees" if row["direction_ok"] else "DISAGREES"


def rich_tables(rows: list[dict]) -> list:
    """One terminal table per paper and figure."""
    from rich.table import Table
    from rich.text import Text

    from . import terminal
    tables = []
    for (paper, figure), group in _groups(rows, ("paper", "figure")).items():
        table = Table(title=f"{paper} {figure}: paper vs simulation (mean ± 95% CI over seeds)",
                      title_justify="left")
        versus = group[0].get("versus_kernel")
        columns = [("claim", "left"), ("unit", "left"), ("paper", "right"), ("sim", "right"),
                   ("sim/paper", "right"), ("direction", "left")]
        if versus:
            columns += [(f"on {versus}", "right"), (f"{group[0]['kernel']} vs {versus}", "left")]
        for column, justify in columns:
            table.add_column(column, justify=justify)
        for row in group:
            mark = direction_mark(row)
            styled = terminal.styled(mark, {"agrees": "green", "DISAGREES": "red"}.get(mark))
            cells = [row["name"], row["unit"], format_number(row["paper_value"]),
                     format_mean(row["sim_mean"], row["sim_ci95"]), format_number(row["sim_over_paper"]),
                     Text.assemble(f"{row['direction']} ", styled) if row["direction"] else styled]
            if versus:
                cells += [format_mean(row["versus_mean"], row["versus_ci95"]), row["verdict"] or "–"]
            table.add_row(*cells)
        tables.append(table)
    return tables


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict:
    groups: dict = {}
    for row in rows:
        groups.setdefault(tuple(row[key] for key in keys), []).append(row)
    return groups


def reproduce_html(result: Reproduction) -> str:
    """One bar chart per paper, figure and unit (paper value beside the simulated mean with
    its interval), then the table of every claim and each experiment's note."""
    import plotly.graph_objects as go

    from .report import _STYLE, _figure_html, _table

    charts = []
    for (paper, figure, unit), rows in _groups(result.rows, ("paper", "figure", "unit")).items():
        names = [row["name"] for row in rows]
        fig = go.Figure()
        fig.add_bar(name="paper", x=names, y=[row["paper_value"] for row in rows], marker_color="#7f7f7f")
        fig.add_bar(name="simulation", x=names, y=[row["sim_mean"] for row in rows], marker_color="#1f77b4",
                    error_y=dict(type="data", array=[row["sim_ci95"] or 0 for row in rows], visible=True))
        values = [v for row in rows for v in (row["paper_value"], row["sim_mean"]) if v is not None]
        # Ratios spread over orders of magnitude (x0.1 to x100): a log axis keeps both legible.
        logarithmic = unit == "ratio" and values and min(values) > 0
        fig.update_layout(title=f"{paper} {figure}" + (" (log scale)" if logarithmic else ""),
                          yaxis_title=unit or "value", yaxis_type="log" if logarithmic else "linear",
                          barmode="group")
        charts.append(fig)
    charts_html = "".join(f'<div class="chart">{_figure_html(fig, first=(i == 0))}</div>'
                          for i, fig in enumerate(charts))
    headers = ["paper", "figure", "claim", "variant", "versus", "unit", "paper value", "sim mean", "95% CI ±",
               "sim/paper", "direction", "agrees"]
    table_rows = [[row["paper"], row["figure"], row["name"], row["variant"] or "(as written)",
                   "" if row["versus"] is None else f"{row['versus']['variant'] or '(as written)'}: {row['versus']['metric']}",
                   row["unit"], format_number(row["paper_value"]), format_number(row["sim_mean"]),
                   format_number(row["sim_ci95"]), format_number(row["sim_over_paper"]),
                   row["direction"] or "", direction_mark(row)] for row in result.rows]
    kernels = ""
    if result.rows and result.rows[0].get("versus_kernel"):
        kernel, versus = result.rows[0]["kernel"], result.rows[0]["versus_kernel"]
        headers += [f"mean on {versus}", "95% CI ±", f"{kernel} vs {versus}"]
        for cells, row in zip(table_rows, result.rows):
            cells += [format_number(row["versus_mean"]), format_number(row["versus_ci95"]), row["verdict"] or "–"]
        kernels = (f"<p>Every experiment ran on {html.escape(kernel)} at both levels (a Xen host stays Xen), "
                   f"and again on {html.escape(versus)}; the last column says how each directional claim "
                   f"fares on {html.escape(kernel)}: holds, weakens or strengthens (its effect below half or "
                   f"above twice the other kernel's, in log terms), reverses, appears, or absent on both.</p>")
    notes = "".join(f"<li><b>{html.escape(e.name)}</b> ({html.escape(e.paper['paper'])} "
                    f"{html.escape(e.paper['figure'])}): {html.escape(e.paper['note'])}</li>"
                    for e in result.experiments)
    seeds = QUICK_SEEDS if result.quick else FULL_SEEDS
    mode = f"quick: {QUICK_DURATION} of simulated time per run" if result.quick else "each scenario's full duration"
    title = "vmsched reproduce"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{_STYLE}</style></head><body>
<h1>{title}</h1>
<p>Published values beside the simulation: mean over seeds {", ".join(map(str, seeds))} with the 95%
confidence interval, {html.escape(mode)}.</p>{kernels}
<h2>Charts</h2>{charts_html}
<h2>Claims</h2>{_table(headers, table_rows, numeric_from=6)}
<h2>Experiments</h2><ul>{notes}</ul>
</body></html>
"""


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
