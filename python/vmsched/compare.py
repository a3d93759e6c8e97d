"""Side-by-side runs of one scenario and seed under several variants (sets of dotted-key
overrides): a long data frame of metrics with ratios to the first variant, an aligned
table for the terminal and an HTML report that overlays the variants."""
from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl
from rich.table import Table

from . import api
from .errors import UserError
from .metrics import change, format_value, headline_metrics, ratio
from .overrides import parse_variant, toml_literal
from .tables import write_tables


@dataclass
class Variant:
    name: str
    overrides: list[str]


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


def scenario_variants(scenario: api.Scenario, config: dict) -> list[Variant]:
    """The `[variants.NAME]` tables of the normalized scenario, in the order the file
    lists them (the normalized form sorts them by name; the first is the reference)."""
    normalized = config.get("variants") or {}
    try:
        file_order = list(tomllib.loads(scenario.text).get("variants", {}))
    except tomllib.TOMLDecodeError:
        file_order = []
    names = [name for name in file_order if name in normalized]
    names += [name for name in normalized if name not in names]
    return [Variant(name, [f"{key}={toml_literal(value)}" for key, value in normalized[name].items()])
            for name in names]


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


def rich_table(comparison: Comparison) -> Table:
    names = [variant.name for variant in comparison.variants]
    frame = comparison.frame
    table = Table(title=f"{comparison.results[0].summary['scenario']}, seed {comparison.results[0].summary['seed']}",
                  title_justify="left")
    table.add_column("metric")
    table.add_column("unit")
    table.add_column("better", justify="center")
    for index, name in enumerate(names):
        table.add_column(name, justify="right")
        if index:
            table.add_column("change", justify="right")
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
                cells.append(f"[{_VERDICT_STYLE[verdict]}]{text}[/]" if verdict else text)
        table.add_row(*cells)
    return table


# Green where the variant is better than the first one, red where worse.
_VERDICT_STYLE = {"better": "green", "worse": "red"}


def write_comparison(comparison: Comparison, out_dir: Path) -> Path:
    """OUT/NAME/ per variant (as `vmsched run` writes it), OUT/compare.parquet (the long
    frame) and OUT/report.html overlaying the variants; returns the report's path."""
    from .report import RunData, write_report  # plotly loads only when a report is written

    for variant, result in zip(comparison.variants, comparison.results):
        result.save(out_dir / variant.name, tables=api.RECORD_TABLES)
    write_tables({"compare": comparison.frame}, out_dir)
    from . import __version__
    runs = [RunData(variant.name, result.summary, result.config, result.recorded_tables(),
                    {**result.meta(), "vmsched_version": __version__})
            for variant, result in zip(comparison.variants, comparison.results)]
    scenario = comparison.results[0].summary["scenario"]
    return write_report(out_dir, runs, title=f"vmsched compare: {scenario}")
