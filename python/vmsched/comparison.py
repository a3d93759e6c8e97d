"""Side-by-side runs of one scenario and seed under several variants (sets of dotted-key
overrides): a long data frame of metrics with ratios to the first variant, an aligned
table for the terminal and an HTML report that overlays the variants."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl
from rich.table import Table

from . import api
from .errors import UserError
from .metrics import change, format_value, headline_metrics, ratio
from .overrides import parse_variant
from .tables import write_tables
from .terminal import styled
from .variants import Variant, scenario_variants


@dataclass
class Comparison:
    variants: list[Variant]
    results: list[api.Result]

    @cached_property
    def frame(self) -> pl.DataFrame:
        """Long form: one row per (metric, variant) with its ratio to the first variant."""
        base = {m.name: m.value for m in headline_metrics(self.results[0].summary)}
        rows = []
        for variant, result in zip(self.variants, self.results):
            for metric in headline_metrics(result.summary):
                rows.append({"metric": metric.name, "unit": metric.unit, "better": metric.better,
                             "variant": variant.name, "value": metric.value,
                             "ratio": ratio(metric.value, base.get(metric.name))})
        return pl.DataFrame(rows, schema={"metric": pl.String, "unit": pl.String, "better": pl.String,
                                          "variant": pl.String, "value": pl.Float64, "ratio": pl.Float64})


def builtin_cases() -> list[tuple[str, api.Scenario, list[str]]]:
    """Every built-in scenario and each of its variants, in the engine's order: (case
    name, NAME or NAME@VARIANT as the golden files name them; the scenario; the variant's
    overrides)."""
    cases = []
    for info in api.scenarios():
        scenario = api.load_scenario(info.name)
        cases.append((info.name, scenario, []))
        cases += [(f"{info.name}@{v.name}", scenario, v.overrides) for v in scenario_variants(scenario, api.normalize(scenario))]
    return cases


def resolve_variants(scenario: api.Scenario, config: dict, specs: Iterable[str]) -> list[Variant]:
    """Variants given on the command line replace those of the scenario file."""
    given = [Variant(*parse_variant(spec, scenario.source)) for spec in specs]
    variants = given or scenario_variants(scenario, config)
    if not variants:
        raise UserError(f"{scenario.source}: variants: none given; add [variants.NAME] tables "
                        "or --variant NAME=key=value,...")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise UserError(f"{scenario.source}: variants: duplicate variant names in {names}")
    return variants


def run_comparison(scenario: str | Path | api.Scenario, variants: Iterable[str] = (),
                   seed: int | None = None, set: Iterable[str] | None = None,
                   duration: int | str | None = None, validate: bool = False,
                   trace_window: tuple[int, int] | None = None,
                   on_start: Callable[[Variant], None] | None = None,
                   allow_large: bool = False) -> Comparison:
    source = scenario if isinstance(scenario, api.Scenario) else api.load_scenario(scenario)
    common = list(set or [])
    chosen = resolve_variants(source, api.normalize(source, common), variants)
    for variant in chosen:  # every variant is checked before the first one runs
        api.normalize(source, [*common, *variant.overrides])
    results = []
    for variant in chosen:
        if on_start:
            on_start(variant)
        results.append(api.run(source, seed=seed, set=[*common, *variant.overrides],
                               duration=duration, validate=validate, trace_window=trace_window,
                               allow_large=allow_large))
    return Comparison(chosen, results)


def compare(scenario: str | Path = api.DEFAULT_SCENARIO, variants: Iterable[str] = (),
            seed: int | None = None, set: Iterable[str] | None = None,
            duration: int | str | None = None, validate: bool = False) -> pl.DataFrame:
    """Run each variant (`NAME=key=value,...`; default: the scenario's [variants]) on the
    same seed and return metric, unit, better, variant, value and ratio to the first."""
    return run_comparison(scenario, variants, seed, set, duration, validate).frame


def parse_seeds(spec: str, first_seed: int) -> list[int]:
    """`--seeds N`: N consecutive seeds from `first_seed`; `--seeds 3,7,11`: those seeds."""
    try:
        if "," in spec:
            seeds = [int(part) for part in spec.split(",")]
        else:
            seeds = list(range(first_seed, first_seed + int(spec)))
    except ValueError:
        raise UserError(f"--seeds: {spec!r}: expected a count such as 5 or a list such as 1,2,3") from None
    if len(set(seeds)) != len(seeds):
        raise UserError(f"--seeds: {spec!r}: a seed is repeated")
    if len(seeds) < 2:
        raise UserError(f"--seeds: {spec!r}: a confidence interval needs at least 2 seeds")
    for seed in seeds:
        if not 0 <= seed < 2**64:
            raise UserError(f"--seeds: {seed}: a seed must be an integer from 0 to 2^64-1")
    return seeds


@dataclass
class SeedComparison:
    """Every variant run on the same seeds; statistics are paired by seed."""
    variants: list[Variant]
    seeds: list[int]
    summaries: dict[tuple[str, int], dict]  # (variant, seed) -> summary

    @cached_property
    def frame(self) -> pl.DataFrame:
        """One row per (metric, variant): over the seeds, the mean of the value and the
        half-width of its 95% CI; for the later variants, the mean and CI of the per-seed
        difference to the first variant and of the per-seed ratio (seeds where the first
        is 0 left out), `significant` where the difference's CI excludes zero, and the
        verdict (better/worse) of a significant difference."""
        from .sweeps import mean_ci95
        by_run = {run: {m.name: m for m in headline_metrics(summary)} for run, summary in self.summaries.items()}
        base = self.variants[0].name
        names = list(dict.fromkeys(name for variant in self.variants for seed in self.seeds
                                   for name in by_run[(variant.name, seed)]))
        rows = []
        for name in names:
            for index, variant in enumerate(self.variants):
                own = [by_run[(variant.name, seed)].get(name) for seed in self.seeds]
                known = [m for m in own if m is not None]
                if not known:
                    continue
                mean, ci95, n = mean_ci95(m.value for m in known)
                row = {"metric": name, "unit": known[0].unit, "better": known[0].better, "variant": variant.name,
                       "n": n, "mean": mean, "ci95": ci95, "diff_mean": None, "diff_ci95": None,
                       "ratio_mean": None, "ratio_ci95": None, "significant": False, "verdict": ""}
                if index:
                    pairs = [(m.value, reference.value) for seed, m in zip(self.seeds, own)
                             if m is not None and m.value is not None
                             and (reference := by_run[(base, seed)].get(name)) is not None
                             and reference.value is not None]
                    diff_mean, diff_ci95, _ = mean_ci95(value - reference for value, reference in pairs)
                    ratio_mean, ratio_ci95, _ = mean_ci95(value / reference for value, reference in pairs if reference)
                    significant = diff_ci95 is not None and abs(diff_mean) > diff_ci95
                    verdict = ""
                    if significant and row["better"]:
                        verdict = "better" if (diff_mean > 0) == (row["better"] == "↑") else "worse"
                    row.update(diff_mean=diff_mean, diff_ci95=diff_ci95, ratio_mean=ratio_mean,
                               ratio_ci95=ratio_ci95, significant=significant, verdict=verdict)
                rows.append(row)
        return pl.DataFrame(rows, schema=SEED_FRAME_SCHEMA)


SEED_FRAME_SCHEMA = {"metric": pl.String, "unit": pl.String, "better": pl.String, "variant": pl.String,
                     "n": pl.Int64, "mean": pl.Float64, "ci95": pl.Float64, "diff_mean": pl.Float64,
                     "diff_ci95": pl.Float64, "ratio_mean": pl.Float64, "ratio_ci95": pl.Float64,
                     "significant": pl.Boolean, "verdict": pl.String}


def run_seed_comparison(scenario: str | Path | api.Scenario, variants: Iterable[str] = (),
                        seeds: Iterable[int] = (), set: Iterable[str] | None = None,
                        duration: int | str | None = None, store_dir: str | Path = "compare-seeds",
                        first: Comparison | None = None, workers: int | None = None,
                        progress: Callable[[int, int, int], None] | None = None) -> SeedComparison:
    """Each variant on each seed, through the sweep engine (a resumable store in
    `store_dir`, runs in parallel worker processes). The runs of `first` (a Comparison
    of the same variants on the first seed) are reused, not repeated."""
    from .overrides import parse_duration_ns
    from .sweeps import PlannedRun, RunTask, execute_runs, run_key
    source = scenario if isinstance(scenario, api.Scenario) else api.load_scenario(scenario)
    common = list(set or [])
    chosen = first.variants if first else resolve_variants(source, api.normalize(source, common), variants)
    seeds = list(seeds)
    duration_ns = parse_duration_ns(duration) if isinstance(duration, str) else duration
    summaries: dict[tuple[str, int], dict] = {}
    if first:
        summaries.update({(variant.name, seeds[0]): result.summary
                          for variant, result in zip(first.variants, first.results)})
    planned = []
    for variant in chosen:
        overrides = tuple([*common, *variant.overrides])
        config = api.normalize(source, overrides)
        effective_ns = duration_ns if duration_ns is not None else round(config["duration_ms"] * 1e6)
        for seed in seeds:
            if (variant.name, seed) not in summaries:
                task = RunTask(run_key(config, seed, effective_ns), source.text, source.source, overrides, seed,
                               duration_ns)
                planned.append(PlannedRun(config["name"], variant.name, seed, (), task))
    store = execute_runs(planned, store_dir, workers=workers, progress=progress)
    for run in planned:
        record = store.load(run.task.key)
        if record["status"] != "ok":
            raise UserError(f"{source.source}: variant {run.variant}, seed {run.seed}: {record['error']}")
        summaries[(run.variant, run.seed)] = record["summary"]
    return SeedComparison(chosen, seeds, summaries)


def _plus_minus(mean: float | None, ci95: float | None) -> str:
    if ci95 is None:
        return format_value(mean)
    return f"{format_value(mean)} ± {format_value(ci95)}"


def _signed(mean: float | None, ci95: float | None) -> str:
    if mean is None:
        return "–"
    text = f"{mean:+,.4g}" if abs(mean) < 1e4 else f"{mean:+,.0f}"
    return text if ci95 is None else f"{text} ± {format_value(ci95)}"


def seed_rows(comparison: SeedComparison) -> tuple[list[str], list[list[str | tuple[str, str]]]]:
    """Headers and cells of the across-seeds table (terminal and HTML): per variant its
    mean ± CI; for later variants the difference and ratio to the first, with ± CI, a
    significant difference starred and tagged better/worse."""
    names = [variant.name for variant in comparison.variants]
    headers = ["metric", "unit", "better"]
    for index, name in enumerate(names):
        headers += [name] if index == 0 else [name, "difference", "ratio"]
    rows = []
    for (metric,), group in comparison.frame.group_by("metric", maintain_order=True):
        by_variant = {row["variant"]: row for row in group.iter_rows(named=True)}
        first = group.row(0, named=True)
        cells: list[str | tuple[str, str]] = [metric, first["unit"], first["better"]]
        for index, name in enumerate(names):
            row = by_variant.get(name)
            cells.append(_plus_minus(row["mean"], row["ci95"]) if row else "–")
            if index:
                if row is None:
                    cells += ["–", "–"]
                    continue
                difference = _signed(row["diff_mean"], row["diff_ci95"]) + (" *" if row["significant"] else "")
                cells.append((difference, row["verdict"]))
                ratio_text = "–" if row["ratio_mean"] is None else (
                    f"×{row['ratio_mean']:.3f}" + ("" if row["ratio_ci95"] is None else f" ± {row['ratio_ci95']:.3f}"))
                cells.append(ratio_text)
        rows.append(cells)
    return headers, rows


def seed_rich_tables(comparison: SeedComparison) -> list[Table]:
    """The across-seeds table for the terminal: the unit and better direction beside the
    metric's name, and the first variant beside each later one, a table per pair, so
    that it reads at 80 columns (all columns together are in report.html and
    compare_seeds.parquet)."""
    from rich import box

    headers, rows = seed_rows(comparison)
    scenario = comparison.summaries[(comparison.variants[0].name, comparison.seeds[0])]["scenario"]
    # Columns of seed_rows: metric, unit, better, the first variant, then three per later one.
    later = range(4, len(headers), 3)
    tables = []
    for start in later or [None]:
        picked = [3] + ([] if start is None else [start, start + 1, start + 2])
        title = " vs ".join(headers[i] for i in picked if i in (3, start))
        table = Table(title=f"{scenario}, {title}: mean ± 95% CI over seeds {', '.join(map(str, comparison.seeds))} "
                            "(* the difference's CI excludes zero)", title_justify="left", box=box.SIMPLE_HEAD,
                      caption="all columns: report.html, or OUT/compare_seeds.parquet", caption_justify="left")
        table.add_column("metric (unit, better)", overflow="fold", min_width=14)
        for index in picked:
            table.add_column(headers[index], justify="right", overflow="fold")
        for cells in rows:
            unit, better = cells[1], cells[2]
            label = f"{cells[0]} ({unit}{', ' + better if better else ''})"
            table.add_row(styled(label, None), *(styled(cells[i][0], _VERDICT_STYLE.get(cells[i][1]))
                                                 if isinstance(cells[i], tuple) else styled(cells[i], None)
                                                 for i in picked))
        tables.append(table)
    return tables


def rich_tables(comparison: Comparison) -> list[Table]:
    """The first variant beside each later one, a table per pair: any number of variants
    then reads at 80 columns."""
    names = [variant.name for variant in comparison.variants]
    pairs = [names[:1]] if len(names) == 1 else [[names[0], other] for other in names[1:]]
    return [_pair_table(comparison, pair) for pair in pairs]


def _pair_table(comparison: Comparison, names: list[str]) -> Table:
    frame = comparison.frame
    summary = comparison.results[0].summary
    table = Table(title=f"{summary['scenario']}, seed {summary['seed']}: {' vs '.join(names)}",
                  title_justify="left", caption="all digits: --json, or OUT/compare.parquet", caption_justify="left")
    # The metric's name wraps (never cut); the figures keep whole.
    table.add_column("metric", overflow="fold", min_width=12)
    table.add_column("unit", no_wrap=True)
    table.add_column("better", justify="center", no_wrap=True)
    for index, name in enumerate(names):
        table.add_column(name, justify="right", overflow="fold")
        if index:
            table.add_column("change", justify="right", no_wrap=True)
    for (metric,), rows in frame.group_by("metric", maintain_order=True):
        by_variant = {row["variant"]: row for row in rows.iter_rows(named=True)}
        first = rows.row(0, named=True)
        cells = [metric, first["unit"], first["better"]]
        base = by_variant.get(names[0])
        for index, name in enumerate(names):
            row = by_variant.get(name)
            cells.append(format_value(row["value"] if row else None))
            if index:
                text, verdict = change(row["value"] if row else None, base["value"] if base else None,
                                       first["better"])
                cells.append(styled(text, _VERDICT_STYLE.get(verdict)))
        table.add_row(*cells)
    return table


# Green where the variant is better than the first one, red where worse.
_VERDICT_STYLE = {"better": "green", "worse": "red"}


def write_comparison(comparison: Comparison, out_dir: Path, across_seeds: SeedComparison | None = None) -> Path:
    """OUT/NAME/ per variant (as `vmsched run` writes it), OUT/compare.parquet (the long
    frame), with seeds OUT/compare_seeds.parquet (the statistics), and OUT/report.html
    overlaying the variants; returns the report's path."""
    from .report import RunData, _table, write_report  # plotly loads only when a report is written

    for variant, result in zip(comparison.variants, comparison.results):
        result.save(out_dir / variant.name, tables=api.RECORD_TABLES)
    write_tables({"compare": comparison.frame}, out_dir)
    seeds_html = ""
    if across_seeds is not None:
        write_tables({"compare_seeds": across_seeds.frame}, out_dir)
        headers, rows = seed_rows(across_seeds)
        seeds_html = (f"<p>Mean ± 95% confidence interval over seeds {', '.join(map(str, across_seeds.seeds))}; "
                      "differences and ratios to the first variant are paired by seed, and * marks a "
                      "difference whose interval excludes zero. The charts show the first seed.</p>"
                      + _table(headers, rows, numeric_from=3))
    from . import __version__
    runs = [RunData(variant.name, result.summary, result.config, result.recorded_tables(),
                    {**result.meta(), "vmsched_version": __version__})
            for variant, result in zip(comparison.variants, comparison.results)]
    scenario = comparison.results[0].summary["scenario"]
    return write_report(out_dir, runs, title=f"vmsched compare: {scenario}", across_seeds_html=seeds_html)
