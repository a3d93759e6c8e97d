"""Sweeps: many independent runs (scenarios x variants x a grid of overrides x seeds),
each a pure function of its scenario, overrides and seed, keyed by a content hash of
them, executed by a local process pool or by Ray, and kept in a resumable store.

Store layout under OUT:
  runs/KEY.json            one record per finished run (status, error, summary), written
                           atomically by the driver as each run completes; a run whose
                           record exists is never run again, so a killed sweep resumes
                           with exactly the missing runs
  results/runs.parquet     one row per run of the last spec (labels + flattened summary),
                           rows sorted by key, rewritten atomically at the end of a sweep
  tables/KEY/NAME.parquet  the recorded tables of each run, when the spec asks for them
  spec.json                the last spec, as resolved
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import queue
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import polars as pl

from . import api
from .atomic import write_atomic
from .errors import UserError
from .overrides import parse_duration_ns, parse_variant, toml_literal
from .tables import write_tables
from .variants import scenario_variants
from .sweep_worker import RunOutcome, RunTask, execute

BACKENDS = ("local", "ray")
# Columns of a results row before the flattened summary; `point` is the grid point as
# `key=value` overrides separated by spaces, and each grid key also has a `set.KEY` column.
LABEL_COLUMNS = ("key", "scenario", "variant", "seed", "point", "status", "error")
SPEC_FIELDS = {"scenarios", "seeds", "variants", "grid", "duration", "tables"}
# Summary fields that repeat the labels, or another part of the summary.
_SUMMARY_SKIP = {"scenario", "description", "seed"}


@dataclass(frozen=True)
class SweepSpec:
    scenarios: list[str]
    seeds: list[int]
    variants: list[str] = field(default_factory=lambda: [""])
    grid: dict[str, list] = field(default_factory=dict)
    duration: str | None = None
    tables: tuple[str, ...] = ()
    source: str = "<spec>"
    base_dir: Path = Path(".")


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its labels and the task that computes it."""
    scenario: str
    variant: str
    seed: int
    point: tuple[tuple[str, str], ...]
    task: RunTask

    @property
    def labels(self) -> tuple:
        return self.scenario, self.variant, self.seed, self.point


def _field_error(source: str, name: str, reason: str) -> UserError:
    return UserError(f"{source}: {name}: {reason}")


def spec_from_mapping(data: Mapping, source: str = "<spec>", base_dir: Path = Path(".")) -> SweepSpec:
    """A spec from its TOML/dict form, each field checked with a message naming it."""
    unknown = sorted(set(data) - SPEC_FIELDS)
    if unknown:
        raise _field_error(source, unknown[0], f"unknown field (a spec has {', '.join(sorted(SPEC_FIELDS))})")
    scenarios = data.get("scenarios")
    if not (isinstance(scenarios, list) and scenarios and all(isinstance(s, str) and s for s in scenarios)):
        raise _field_error(source, "scenarios", "expected a non-empty list of scenario names or paths")
    seeds = data.get("seeds")
    if not (isinstance(seeds, list) and seeds
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise _field_error(source, "seeds", "expected a non-empty list of non-negative integers")
    variants = data.get("variants", [""])
    if not (isinstance(variants, list) and variants and all(isinstance(v, str) for v in variants)):
        raise _field_error(source, "variants", 'expected a list of variant names ("" is the scenario as written)')
    grid = data.get("grid", {})
    if not isinstance(grid, Mapping):
        raise _field_error(source, "grid", "expected a table of dotted.key = [values]")
    for key, values in grid.items():
        if not (isinstance(values, list) and values):
            raise _field_error(source, f"grid.{key}", "expected a non-empty list of values")
    duration = data.get("duration")
    if duration is not None:
        if not isinstance(duration, str):
            raise _field_error(source, "duration", "expected a string such as '200ms'")
        try:
            parse_duration_ns(duration)
        except UserError as err:
            raise _field_error(source, "duration", str(err)) from err
    tables = data.get("tables", [])
    if tables is True:
        tables = list(api.RECORD_TABLES)
    if not (isinstance(tables, list) and all(name in api.RECORD_TABLES for name in tables)):
        raise _field_error(source, "tables", f"expected true or a list of {', '.join(api.RECORD_TABLES)}")
    return SweepSpec(list(dict.fromkeys(scenarios)), list(dict.fromkeys(seeds)), list(dict.fromkeys(variants)),
                     dict(grid), duration, tuple(dict.fromkeys(tables)), source, base_dir)


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as err:
        raise UserError(f"{path}: cannot read: {err}") from err
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path}: {err}") from err
    return spec_from_mapping(data, str(path), path.parent)


@cache
def engine_digest() -> str:
    """Hash of the native engine's binary: results of another build are other runs."""
    from . import _native
    return hashlib.sha256(Path(_native.__file__).read_bytes()).hexdigest()


def run_key(config: dict, seed: int, duration_ns: int, tables: tuple[str, ...] = ()) -> str:
    """Content hash of what determines a run's stored output: the normalized scenario
    (defaults filled, overrides applied), the seed, the simulated time, the engine, and
    the tables kept (recording adds the sampling events to the summary's event count).
    The scenario's [variants] and [paper] tables do not change a run and are left out."""
    material = {key: value for key, value in config.items()
                if key not in ("variants", "paper", "seed", "duration_ms")}
    canonical = json.dumps({"scenario": material, "seed": seed, "duration_ns": duration_ns,
                            "tables": sorted(tables), "engine": engine_digest()},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _resolve_scenario(name: str, index: int, spec: SweepSpec) -> api.Scenario:
    """A path relative to the spec's folder (TOML or JSON), else a built-in name or a path
    as given; a scenario that cannot be found or read is an error naming the spec's entry."""
    beside_spec = spec.base_dir / name
    try:
        found_beside = beside_spec.is_file()
    except OSError:  # a name longer than the file system allows: load_scenario says so
        found_beside = False
    try:
        return api.load_scenario(beside_spec if found_beside else name)
    except UserError as err:
        raise _field_error(spec.source, f"scenarios[{index}]", str(err)) from err


def variant_overrides(scenario: api.Scenario, config: dict, variant: str, source: str) -> tuple[str, list[str]]:
    """(label, overrides) of a variant: "" (as written), a name from the scenario's
    [variants], or an inline NAME=key=value,... spec."""
    if variant == "":
        return "", []
    if "=" in variant:
        return parse_variant(variant, source)
    known = {v.name: v.overrides for v in scenario_variants(scenario, config)}
    if variant not in known:
        raise UserError(f"{source}: variants: {scenario.source} has no variant {variant!r} "
                        f"(it has: {', '.join(known) or 'none'})")
    return variant, known[variant]


def plan(spec: SweepSpec) -> list[PlannedRun]:
    """Every run of the spec, each validated by the engine's schema before any runs."""
    duration_ns = parse_duration_ns(spec.duration) if spec.duration else None
    grid_keys = list(spec.grid)
    points = [tuple(zip(grid_keys, (toml_literal(v) for v in values)))
              for values in itertools.product(*spec.grid.values())]
    runs: list[PlannedRun] = []
    for index, name in enumerate(spec.scenarios):
        scenario = _resolve_scenario(name, index, spec)
        base_config = api.normalize(scenario)
        for variant in spec.variants:
            label, variant_settings = variant_overrides(scenario, base_config, variant, spec.source)
            for point in points:
                # Variant overrides come last: a variant means the same thing at every point.
                overrides = tuple([f"{key}={value}" for key, value in point] + variant_settings)
                config = api.normalize(scenario, overrides)
                effective_ns = duration_ns or round(config["duration_ms"] * 1e6)
                for seed in spec.seeds:
                    task = RunTask(run_key(config, seed, effective_ns, spec.tables), scenario.text, scenario.source,
                                   overrides, seed, duration_ns, spec.tables)
                    runs.append(PlannedRun(name, label, seed, point, task))
    unique = {run.labels: run for run in runs}
    return list(unique.values())


class Store:
    """The run records of a sweep directory (see the module docstring)."""

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.runs_dir = self.out / "runs"
        self.results_path = self.out / "results" / "runs.parquet"

    def record_path(self, key: str) -> Path:
        return self.runs_dir / f"{key}.json"

    def tables_dir(self, key: str) -> Path:
        return self.out / "tables" / key

    def remove_leftovers(self) -> None:
        """Temp files of writes that a kill interrupted."""
        for pattern in ("runs/.*", "tables/*/.*"):
            for leftover in self.out.glob(pattern):
                leftover.unlink(missing_ok=True)

    def finished_keys(self) -> set[str]:
        return {path.stem for path in self.runs_dir.glob("*.json")} if self.runs_dir.is_dir() else set()

    def save(self, outcome: RunOutcome) -> None:
        """The tables first, then the record: a record means its run is complete."""
        if outcome.tables:
            write_tables(outcome.tables, self.tables_dir(outcome.key))
        record = {"key": outcome.key, "status": outcome.status, "error": outcome.error,
                  "summary": json.loads(outcome.summary_json) if outcome.summary_json else None}
        write_atomic(self.record_path(outcome.key), json.dumps(record, indent=1, sort_keys=True) + "\n")

    def load(self, key: str) -> dict:
        return json.loads(self.record_path(key).read_text())


def flatten_summary(summary: dict) -> dict:
    """summary.json as one flat row, columns named by the metric paths of [paper] claims:
    `host.busy_ns`, `vms[web].share`, `vms[web].vcpus[0].steal_ns`,
    `workloads[web/nginx-like].latency_ns.p95`, `locks.batch.lhp_count`. List entries
    are selected by their name, or by position where they have none."""
    flat: dict = {}

    def walk(value, path: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if path == "" and key in _SUMMARY_SKIP:
                    continue
                if path.startswith("vms[") and path.count(".") == 0 and key == "locks":
                    continue  # the top-level `locks` table holds the same numbers
                walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, list):
            for position, item in enumerate(value):
                label = item.get("name", position) if isinstance(item, dict) else position
                walk(item, f"{path}[{label}]")
        else:
            flat[path] = value

    walk(summary, "")
    return flat


def results_frame(runs: list[PlannedRun], store: Store) -> pl.DataFrame:
    """One row per planned run that has a record, sorted by key then labels."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.task.key, r.scenario, r.variant, r.seed, r.point)):
        path = store.record_path(run.task.key)
        if not path.is_file():
            continue
        record = store.load(run.task.key)
        row = {"key": run.task.key, "scenario": run.scenario, "variant": run.variant, "seed": run.seed,
               "point": " ".join(f"{k}={v}" for k, v in run.point), "status": record["status"],
               "error": record["error"]}
        row.update({f"set.{key}": value for key, value in run.point})
        if record["summary"] is not None:
            row.update(flatten_summary(record["summary"]))
        rows.append(row)
    schema_overrides = {"key": pl.String, "scenario": pl.String, "variant": pl.String, "seed": pl.Int64,
                        "point": pl.String, "status": pl.String, "error": pl.String}
    if not rows:
        return pl.DataFrame(schema=schema_overrides)
    # Columns in order of first appearance over the runs taken by their labels, not by key:
    # runs differ in which metrics they have (a histogram's CDF has as many points as it
    # has distinct values), and keys change with anything hashed into them (kept tables,
    # the engine), so the same runs must give the same columns in the same order.
    columns: dict[str, None] = {}
    for row in sorted(rows, key=lambda r: (r["scenario"], r["variant"], r["seed"], r["point"])):
        columns.update(dict.fromkeys(row))
    return pl.from_dicts(rows, infer_schema_length=None, schema_overrides=schema_overrides).select(list(columns))


class _WorkerDied(Exception):
    pass


class _WorkerProcess:
    """A `python -m vmsched.sweep_worker` child: a fresh interpreter that imports only the
    engine (no re-import of the caller's main module, so scripts and notebooks need no
    `if __name__ == "__main__"` guard), and that exits when the driver closes its stdin
    or dies."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-m", "vmsched.sweep_worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, task: RunTask) -> RunOutcome:
        try:
            self.process.stdin.write(json.dumps(task._asdict()) + "\n")
            self.process.stdin.flush()
            reply = self.process.stdout.readline()
        except BrokenPipeError:
            reply = ""
        if not reply:
            raise _WorkerDied(f"the worker process exited with status {self.process.wait()}")
        return RunOutcome(**json.loads(reply))

    def close(self, stop: bool) -> None:
        """End the worker: after its current run, or at once (`stop`: the sweep was interrupted)."""
        if stop:
            self.process.kill()
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        self.process.wait()


def _local_outcomes(tasks: list[RunTask], workers: int) -> Iterator[RunOutcome]:
    """A pool of worker processes, each fed by one driver thread, one run at a time."""
    idle: queue.SimpleQueue[_WorkerProcess] = queue.SimpleQueue()
    started = [_WorkerProcess() for _ in range(workers)]
    for worker in started:
        idle.put(worker)

    def run(task: RunTask) -> RunOutcome:
        worker = idle.get()
        try:
            return worker.run(task)
        except _WorkerDied as died:  # a crash takes one run, not the sweep
            worker = _WorkerProcess()
            started.append(worker)
            return RunOutcome(task.key, "failed", None, str(died))
        finally:
            idle.put(worker)

    pool = ThreadPoolExecutor(max_workers=workers)
    finished = False
    try:
        for future in as_completed([pool.submit(run, task) for task in tasks]):
            yield future.result()
        finished = True
    finally:
        pool.shutdown(wait=finished, cancel_futures=True)
        for worker in started:
            worker.close(stop=not finished)


ProgressCallback = Callable[[int, int, int], None]  # (finished, failed, total)


def execute_runs(runs: list[PlannedRun], out: str | Path, backend: str = "local", workers: int | None = None,
                 address: str | None = None, progress: ProgressCallback | None = None) -> Store:
    """Run every planned run whose record is missing and store each as it finishes."""
    if backend not in BACKENDS:
        raise UserError(f"--backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if workers is not None and workers < 1:
        raise UserError(f"--workers: {workers} must be at least 1")
    store = Store(out)
    store.remove_leftovers()
    finished = store.finished_keys()
    tasks = list({run.task.key: run.task for run in runs if run.task.key not in finished}.values())
    total = len({run.task.key for run in runs})
    done, failed = total - len(tasks), 0
    outcomes: Iterator[RunOutcome] = iter(())
    if tasks and backend == "local":
        outcomes = _local_outcomes(tasks, min(workers or os.cpu_count() or 1, len(tasks)))
    elif tasks:  # joined before anything is shown or written: a failed connection leaves nothing behind
        from . import ray_backend
        owned = ray_backend.connect(workers, address, lambda line: print(line, file=sys.stderr))
        outcomes = ray_backend.outcomes(tasks, owned)
    if progress:
        progress(done, failed, total)
    if tasks:
        store.runs_dir.mkdir(parents=True, exist_ok=True)
        for outcome in outcomes:
            store.save(outcome)
            done += 1
            failed += outcome.status != "ok"
            if progress:
                progress(done, failed, total)
    return store


def sweep(spec: str | Path | Mapping | SweepSpec, out: str | Path, backend: str = "local",
          workers: int | None = None, address: str | None = None,
          progress: ProgressCallback | None = None) -> pl.DataFrame:
    """Run a sweep (a spec file, a dict of the same fields, or a SweepSpec) into OUT and
    return its results: one row per run with `key`, `scenario`, `variant`, `seed`,
    `point`, `status`, `error`, `set.KEY` per grid key and the flattened summary."""
    if isinstance(spec, SweepSpec):
        resolved = spec
    elif isinstance(spec, Mapping):
        resolved = spec_from_mapping(spec)
    else:
        resolved = load_spec(spec)
    runs = plan(resolved)
    store = execute_runs(runs, out, backend, workers, address, progress)
    frame = results_frame(runs, store)
    write_results(frame, store)
    spec_record = {"scenarios": resolved.scenarios, "seeds": resolved.seeds, "variants": resolved.variants,
                   "grid": resolved.grid, "duration": resolved.duration, "tables": list(resolved.tables)}
    write_atomic(store.out / "spec.json", json.dumps(spec_record, indent=1) + "\n")
    return frame


def write_results(frame: pl.DataFrame, store: Store) -> Path:
    import io
    buffer = io.BytesIO()
    frame.write_parquet(buffer, statistics=False)
    return write_atomic(store.results_path, buffer.getvalue())


def read_results(out: str | Path) -> pl.DataFrame:
    path = Store(out).results_path
    if not path.is_file():
        raise UserError(f"{path}: no sweep results here (run `vmsched sweep SPEC --out {out}` first)")
    return pl.read_parquet(path)


# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (any statistics
# table, e.g. NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964


def t975(dof: int) -> float:
    """Student's t 97.5% quantile: the table, then the Cornish-Fisher expansion in 1/dof
    (Abramowitz & Stegun 26.7.5), within 1e-3 of the exact value beyond 30."""
    if dof < 1:
        return math.nan
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def mean_ci95(values: Iterable[float]) -> tuple[float | None, float | None, int]:
    """Mean, half-width of its 95% confidence interval (null below two values), count."""
    data = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    n = len(data)
    if n == 0:
        return None, None, 0
    mean = sum(data) / n
    if n < 2:
        return mean, None, n
    variance = sum((x - mean) ** 2 for x in data) / (n - 1)
    return mean, t975(n - 1) * math.sqrt(variance / n), n


def _points_in_order(results: pl.DataFrame) -> pl.DataFrame:
    """The runs by scenario, variant, then each grid key's value (as a number where it is
    one, so host.hz=250 comes before host.hz=1000), then seed: the order a reader looks
    for, where the store's own order is by run key, a hash."""
    by_value = []
    for name in (name for name in results.columns if name.startswith("set.")):
        # The grid's values are stored as their TOML text.
        by_value += [pl.col(name).cast(pl.String).cast(pl.Float64, strict=False), pl.col(name).cast(pl.String)]
    return results.sort([pl.col("scenario"), pl.col("variant"), *by_value, pl.col("seed")],
                        nulls_last=True, maintain_order=True)


def summarize(results: pl.DataFrame, metric_filter: str | None = None) -> pl.DataFrame:
    """Per (scenario, variant, point, metric): seeds, mean and the 95% CI half-width over
    the seeds of the successful runs."""
    groups = ["scenario", "variant", "point"]
    ok = _points_in_order(results.filter(pl.col("status") == "ok"))
    metrics = [name for name, dtype in ok.schema.items()
               if dtype.is_numeric() and name not in (*LABEL_COLUMNS, *groups) and not name.startswith("set.")
               and (metric_filter is None or metric_filter in name)]
    schema = {"scenario": pl.String, "variant": pl.String, "point": pl.String, "metric": pl.String,
              "n": pl.Int64, "mean": pl.Float64, "ci95": pl.Float64}
    rows = []
    for key, frame in ok.group_by(groups, maintain_order=True):
        for metric in metrics:
            mean, ci95, n = mean_ci95(frame[metric].to_list())
            if n:
                rows.append(dict(zip(groups, key)) | {"metric": metric, "n": n, "mean": mean, "ci95": ci95})
    return pl.DataFrame(rows, schema=schema)


# The headline of a sweep point, one line each in `sweep --summary`: (label, unit, how a
# run's value is made from its results row). Every scenario has a host; the others are
# left out of a point whose runs have no VM steal, no workload or no latencies.
def _host_busy(row: dict) -> float | None:
    capacity = row.get("host.pcpus", 0) * row.get("duration_ns", 0)
    return 100 * row["host.busy_ns"] / capacity if capacity else None


def _matching(row: dict, pattern: re.Pattern) -> list[float]:
    return [value for name, value in row.items() if value is not None and pattern.fullmatch(name)]


def _summed(pattern: str, scale: float = 1.0) -> Callable[[dict], float | None]:
    compiled = re.compile(pattern)
    return lambda row: (sum(found) * scale if (found := _matching(row, compiled)) else None)


# The engine's own threads are workloads of the summary too (a guest's kworkers `VM/os_noise`,
# a guest policy's threads, dom0's back ends): their runs are no one's throughput.
ENGINE_WORKLOAD_KINDS = frozenset({"os_noise", "guest_policy", "xen_backend"})
_THROUGHPUT = re.compile(r"(workloads\[.+\]\.)throughput_per_s")


def _scenario_throughput(row: dict) -> float | None:
    found = [value for name, value in row.items()
             if value is not None and (match := _THROUGHPUT.fullmatch(name))
             and row.get(match.group(1) + "kind") not in ENGINE_WORKLOAD_KINDS]
    return sum(found) if found else None


def _steal_per_s(row: dict) -> float | None:
    stolen = _summed(r"vms\[[^\]]+\]\.steal_ns")(row)
    return stolen / row["duration_ns"] if stolen is not None and row.get("duration_ns") else None


def _worst_p99_ms(row: dict) -> float | None:
    found = _matching(row, re.compile(r"workloads\[.+\]\.latency_ns\.p99"))
    return max(found) / 1e6 if found else None


HEADLINE = (("host busy", "%", _host_busy),
            ("steal", "vCPU-s/s", _steal_per_s),
            ("throughput", "/s", _scenario_throughput),
            ("worst p99", "ms", _worst_p99_ms))


def headline(results: pl.DataFrame) -> list[dict]:
    """Per (scenario, variant, point) of the successful runs: the seeds and, for each
    headline figure that its runs have, the mean and 95% CI half-width over the seeds."""
    points: dict[tuple, list[dict]] = {}
    for row in _points_in_order(results.filter(pl.col("status") == "ok")).iter_rows(named=True):
        points.setdefault((row["scenario"], row["variant"], row["point"]), []).append(row)
    lines = []
    for (scenario, variant, point), rows in points.items():
        figures = []
        for label, unit, value_of in HEADLINE:
            mean, ci95, n = mean_ci95(value_of(row) for row in rows)
            if n:
                figures.append({"metric": label, "unit": unit, "mean": mean, "ci95": ci95})
        lines.append({"scenario": scenario, "variant": variant, "point": point, "n": len(rows), "figures": figures})
    return lines


class ProgressBar:
    """Runs done / failed / ETA on stderr, for the CLI."""

    def __init__(self, console, label: str):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        self.bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[failed]} failed"), TimeRemainingColumn(),
                            console=getattr(console, "real", console))
        self.task = None

    def __call__(self, done: int, failed: int, total: int) -> None:
        if self.task is None:
            self.bar.start()
            self.task = self.bar.add_task("", total=total, completed=done, failed=failed)
        self.bar.update(self.task, completed=done, failed=failed)

    def close(self) -> None:
        if self.task is not None:
            self.bar.stop()
