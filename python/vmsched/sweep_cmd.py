"""`vmsched sweep` and `vmsched reproduce`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from .errors import UserError, fail

console = Console()
status = Console(stderr=True)

BackendOption = Annotated[str, typer.Option(help="local (worker processes on this machine) or ray.")]
WorkersOption = Annotated[Optional[int], typer.Option(
    help="Parallel runs (default: all cores; with ray, the CPUs of a local Ray instance).")]
AddressOption = Annotated[Optional[str], typer.Option(
    help="Ray cluster to join (e.g. ray://head:10001 or auto); default: a local Ray instance.")]


def _guarded(action):
    """Run `action`; an input problem is `error: ...` and exit 2."""
    try:
        return action()
    except UserError as err:
        raise fail(str(err)) from err


def register(app: typer.Typer) -> None:
    app.command()(sweep)
    app.command()(reproduce)


def sweep(
    spec: Annotated[Optional[Path], typer.Argument(help="Sweep spec (TOML): scenarios, seeds, variants, grid of overrides.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Sweep directory: run records and results/.")] = None,
    backend: BackendOption = "local",
    workers: WorkersOption = None,
    address: AddressOption = None,
    summary: Annotated[Optional[Path], typer.Option(
        help="Print mean and 95% CI per scenario, variant, grid point and metric of the sweep in DIR.")] = None,
    metric: Annotated[Optional[str], typer.Option(help="With --summary: only metrics whose path contains this.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="With --summary: print JSON rows.")] = False,
) -> None:
    """Run every combination of a spec's scenarios, variants, grid and seeds; resumable."""
    from . import sweeps as engine

    if summary is not None:
        stats = _guarded(lambda: engine.summarize(engine.read_results(summary), metric))
        if as_json:
            print(json.dumps(stats.to_dicts(), indent=1))
        else:
            _print_stats(stats)
        return
    if spec is None or out is None:
        raise fail("give a spec and --out DIR (or --summary DIR)")
    bar = engine.ProgressBar(status, f"sweep {spec}")
    try:
        results = _guarded(lambda: engine.sweep(spec, out, backend, workers, address, progress=bar))
    finally:
        bar.close()
    failed = results.filter(results["status"] != "ok").height
    status.print(f"{results.height} runs ({failed} failed) -> {out / 'results' / 'runs.parquet'}")
    if failed:
        for row in results.filter(results["status"] != "ok").head(5).iter_rows(named=True):
            status.print(f"failed: {row['scenario']} {row['variant']} seed {row['seed']} {row['point']}: {row['error']}")


def _print_stats(stats) -> None:
    table = Table(title="mean ± 95% CI over seeds", title_justify="left")
    for column in ("scenario", "variant", "point", "metric", "n", "mean", "± ci95"):
        table.add_column(column, justify="right" if column in ("n", "mean", "± ci95") else "left")
    for row in stats.iter_rows(named=True):
        ci = "–" if row["ci95"] is None else f"{row['ci95']:.4g}"
        table.add_row(row["scenario"], row["variant"], row["point"], row["metric"], str(row["n"]),
                      f"{row['mean']:.6g}", ci)
    console.print(table)


def reproduce(
    paper: Annotated[str, typer.Argument(help="vsched, irs, uvf, anubis, tableau, phenomena or all.")] = "all",
    quick: Annotated[bool, typer.Option(help="Short runs and fewer seeds (for CI); not the figures to quote.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    markdown: Annotated[bool, typer.Option(
        help="Print the tally and each paper's claims as Markdown tables (the docs' tables).")] = False,
    out: Annotated[Optional[Path], typer.Option(
        help="Directory for the runs, reproduce.json, reproduce-summary.json and reproduce.html "
             "(default runs/reproduce[-quick]).")] = None,
    matrix: Annotated[bool, typer.Option(
        help="Instead: the standard workload mix under every host x guest policy.")] = False,
    backend: BackendOption = "local",
    workers: WorkersOption = None,
    address: AddressOption = None,
    kernel: Annotated[Optional[str], typer.Option(
        help="Rerun every experiment on this kernel profile (`vmsched kernels`) at both levels, "
             "e.g. linux-6.12; a Xen host stays Xen. Each row gets `kernel`, the same claim on "
             "--versus-kernel beside it and a verdict.")] = None,
    versus_kernel: Annotated[Optional[str], typer.Option(
        help="With --kernel: the kernel profile to compare with (default linux-6.5, the last CFS release).")] = None,
) -> None:
    """Run the registered experiments of a paper (built-in scenarios with a paper table) and
    print the paper's values beside the simulation's, with an HTML page."""
    from . import reproduce as registry
    from .sweeps import ProgressBar

    bar = ProgressBar(status, "matrix" if matrix else f"reproduce {paper}")
    try:
        if matrix:
            frame = _guarded(lambda: registry.matrix(quick, out, backend, workers, address, progress=bar))
        else:
            result = _guarded(lambda: registry.reproduce(paper, quick, out, backend, workers, address, progress=bar,
                                                         kernel=kernel, versus_kernel=versus_kernel))
    finally:
        bar.close()
    if matrix:
        if as_json:
            print(json.dumps(frame.to_dicts(), indent=1))
        else:
            _print_matrix(frame)
        return
    if as_json:
        print(json.dumps(registry.public_rows(result.rows), indent=1))
    elif markdown:
        print(registry.markdown_tables(result.rows, result.summary), end="")
    else:
        for table in registry.rich_tables(result.rows, result.summary):
            console.print(table)
    for failure in result.failures:
        status.print(f"failed run (left out of the means): {failure}")
    status.print(f"wrote {result.out / 'reproduce.html'}, {result.out / 'reproduce.json'} and "
                 f"{result.out / 'reproduce-summary.json'}")


def _print_matrix(frame) -> None:
    """One row per workload and metric, one column per host x guest combination."""
    combos = list(dict.fromkeys(zip(frame["host"], frame["guest"])))
    table = Table(title="composition matrix: mean ± 95% CI over seeds", title_justify="left")
    for column in ("scenario", "workload", "metric"):
        table.add_column(column)
    for host, guest in combos:
        table.add_column(f"host {host}\nguest {guest}", justify="right")
    for (scenario, workload, metric), rows in frame.group_by(["scenario", "workload", "metric"], maintain_order=True):
        cells = {(r["host"], r["guest"]): r for r in rows.iter_rows(named=True)}
        table.add_row(scenario, workload, metric, *[
            "–" if (cell := cells.get(combo)) is None else
            f"{cell['mean']:.4g}" + ("" if cell["ci95"] is None else f" ± {cell['ci95']:.2g}")
            for combo in combos])
    console.print(table)
