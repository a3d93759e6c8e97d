"""`vmsched sweep` and `vmsched reproduce`."""
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import Interrupted, UserError, fail
from .terminal import make_console

console = make_console()
status = make_console(stderr=True)

BackendOption = Annotated[str, typer.Option(help="local (worker processes on this machine) or ray.")]
WorkersOption = Annotated[Optional[int], typer.Option(
    help="Parallel runs (default: all cores; with ray, the CPUs of a local Ray instance).")]
AddressOption = Annotated[Optional[str], typer.Option(
    help="With --backend ray: local (the default: a private Ray instance on this machine, ended after the "
         "sweep), auto (the cluster RAY_ADDRESS or `ray start` names), HOST:PORT or ray://HOST:10001.")]


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
        results = _guarded(lambda: engine.read_results(summary))
        if metric is None:
            lines = engine.headline(results)
            if as_json:
                print(json.dumps(lines, indent=1))
            else:
                _print_headline(lines, summary)
            return
        stats = _guarded(lambda: engine.summarize(results, metric))
        if as_json:
            print(json.dumps(stats.to_dicts(), indent=1))
        else:
            _print_stats(stats, summary)
        return
    if spec is None or out is None:
        raise fail("give a spec and --out DIR (or --summary DIR)")
    bar = engine.ProgressBar(status, f"sweep {spec}")
    try:
        results = _guarded(lambda: engine.sweep(spec, out, backend, workers, address, progress=bar))
    except Interrupted as stop:
        bar.close()
        kept = len(engine.Store(out).finished_keys())
        raise Interrupted(f"{kept} finished run{'s' * (kept != 1)} kept in {out / 'runs'}; the same command "
                          "resumes the sweep, running only the missing ones", stop.signum) from None
    finally:
        bar.close()
    # The bar counts distinct runs; a row per planned run can repeat one (two variants or
    # grid points that resolve to the same scenario and seed share its run).
    runs, failed = results["key"].n_unique(), results.filter(results["status"] != "ok")["key"].n_unique()
    rows = "" if results.height == runs else f", {results.height} rows: some points share a run"
    status.print(f"{runs} run{'s' * (runs != 1)} ({failed} failed{rows}) -> {out / 'results' / 'runs.parquet'}")
    if failed:
        for row in results.filter(results["status"] != "ok").head(5).iter_rows(named=True):
            status.print(f"failed: {row['scenario']} {row['variant']} seed {row['seed']} {row['point']}: {row['error']}")


def _figure(mean: float, ci95: float | None) -> str:
    return f"{mean:.4g}" + ("" if ci95 is None else f" ± {ci95:.2g}")


def _print_headline(lines: list[dict], out: Path) -> None:
    """One line per scenario, variant and grid point: the headline figures, mean ± 95% CI
    over the seeds."""
    console.print(f"mean ± 95% CI over seeds; every metric: --metric PATH (part of a path, e.g. latency_ns.p95), "
                  f"--json, or {out / 'results' / 'runs.parquet'}")
    for line in lines:
        label = " ".join(part for part in (line["scenario"], line["variant"], line["point"]) if part)
        figures = ", ".join(f"{figure['metric']} {_figure(figure['mean'], figure['ci95'])} {figure['unit']}"
                            for figure in line["figures"])
        console.print(f"{label} (n={line['n']}): {figures}")


def _print_stats(stats, out: Path) -> None:
    """One block per scenario, variant and grid point, one metric a row: metric paths are
    long, so they get the width and wrap rather than being cut."""
    from rich import box
    from rich.table import Table

    console.print(f"mean ± 95% CI over seeds (all digits: --json, or {out / 'results' / 'runs.parquet'})")
    for (scenario, variant, point), rows in stats.group_by(["scenario", "variant", "point"], maintain_order=True):
        table = Table(title=" ".join(part for part in (scenario, variant, point) if part), title_justify="left",
                      box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("metric", overflow="fold", ratio=1)
        table.add_column("n", justify="right", no_wrap=True)
        table.add_column("mean ± ci95", justify="right", no_wrap=True)
        for row in rows.iter_rows(named=True):
            table.add_row(row["metric"], str(row["n"]), _figure(row["mean"], row["ci95"]))
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
            _print_matrix(frame, Path(out or ("runs/matrix-quick" if quick else "runs/matrix")))
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


def _print_matrix(frame, out: Path) -> None:
    """One block per workload and metric: a row per host policy, a column per guest
    policy, so that the table keeps to 80 columns however many host policies there are."""
    from rich import box
    from rich.table import Table

    guests = list(dict.fromkeys(frame["guest"]))
    console.print(f"composition matrix: mean ± 95% CI over seeds (all digits: --json, or {out / 'matrix.json'})")
    for (scenario, workload, metric), rows in frame.group_by(["scenario", "workload", "metric"], maintain_order=True):
        cells = {(r["host"], r["guest"]): r for r in rows.iter_rows(named=True)}
        table = Table(title=f"{scenario}: {workload} {metric}", title_justify="left", box=box.SIMPLE_HEAD,
                      pad_edge=False)
        table.add_column("host \\ guest", no_wrap=True)
        for guest in guests:
            table.add_column(guest, justify="right", no_wrap=True)
        for host in dict.fromkeys(rows["host"]):
            table.add_row(host, *["–" if (cell := cells.get((host, guest))) is None else
                                  _figure(cell["mean"], cell["ci95"]) for guest in guests])
        console.print(table)
