"""The Python API over the native simulator: resolve a scenario, run it, and hand back
its summary and tables as polars data frames (polars is imported when a frame is first
asked for: a run that only writes its files never loads it)."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from . import _native
from .atomic import write_atomic
from .errors import UserError
from .overrides import check_override, parse_duration_ns
from .tables import TableStreams, arrow_table, write_tables

DEFAULT_SCENARIO = "default"
# Tables the engine returns with record=True; the trace tables come only with a window.
RECORD_TABLES = ("requests", "samples", "tasks")
TRACE_TABLES = ("pcpu_slices", "vcpu_states", "task_slices", "irqs")


@dataclass(frozen=True)
class Scenario:
    """Scenario text plus the name errors are reported under (a path or builtin:NAME)."""
    text: str
    source: str


@dataclass(frozen=True)
class ScenarioInfo:
    name: str
    description: str
    toml: str


def scenarios() -> list[ScenarioInfo]:
    """The built-in scenarios, in the engine's order."""
    return [ScenarioInfo(*entry) for entry in _native.builtin_scenarios()]


# A scenario file larger than this is not a scenario (the largest built-in is ~10 KB).
MAX_SCENARIO_BYTES = 16 * 2**20


def load_scenario(spec: str | Path) -> Scenario:
    """A built-in name, or a path to a TOML (or JSON) scenario file."""
    path = Path(spec)
    try:
        exists, is_dir, is_file = path.exists(), path.is_dir(), path.is_file()
    except OSError as err:  # a name longer than the file system allows, say
        raise UserError(f"{spec}: no such scenario file or built-in ({err.strerror or err})") from err
    # A file of that name comes first; the built-ins' texts are made only where there is none.
    builtins = {} if exists else _native.builtin_scenario_texts()
    if str(spec) in builtins:
        return Scenario(builtins[str(spec)], f"builtin:{spec}")
    if is_dir:
        raise UserError(f"{spec}: is a directory, not a scenario file")
    if exists and not is_file:
        raise UserError(f"{spec}: is not a regular file")
    if is_file:
        try:
            if path.stat().st_size > MAX_SCENARIO_BYTES:
                raise UserError(f"{spec}: {path.stat().st_size} bytes is too large for a scenario file")
            return Scenario(path.read_text(encoding="utf-8"), str(spec))
        except UnicodeDecodeError as err:
            raise UserError(f"{spec}: not a text file (not UTF-8 at byte {err.start})") from err
        except OSError as err:
            raise UserError(f"{spec}: cannot read ({err.strerror or err})") from err
    if str(spec) == "":
        raise UserError("scenario: an empty name; give a built-in name or a scenario file (.toml or .json)")
    if path.suffix in (".toml", ".json") or path.parent != Path("."):
        raise UserError(f"{spec}: no such file")
    raise UserError(f"{spec}: unknown scenario; built-ins are {', '.join(sorted(builtins))}")


def _user_error(err: ValueError) -> UserError:
    """The engine's message, on one line (parser messages can span several)."""
    return UserError(" ".join(line.strip() for line in str(err).splitlines() if line.strip()))


def normalize(scenario: Scenario, overrides: Iterable[str] = ()) -> dict:
    """The scenario with defaults filled and overrides applied, checked by the engine's schema."""
    overrides = [check_override(item, scenario.source) for item in overrides]
    try:
        return json.loads(_native.validate_scenario(scenario.text, scenario.source, overrides))
    except ValueError as err:
        raise _user_error(err) from err


def _duration_ns(duration: int | str | None) -> int | None:
    if duration is None:
        return None
    if isinstance(duration, int):
        if not 0 < duration < 2**64:
            raise UserError(f"duration {duration}: must be a positive number of ns")
        return duration
    return parse_duration_ns(duration)


def check_seed(seed: int | None) -> None:
    """Seeds are 64-bit unsigned integers (the engine's random streams are keyed by them)."""
    if seed is not None and not 0 <= seed < 2**64:
        raise UserError(f"--seed {seed}: must be an integer from 0 to 2^64-1")


def _flatten(record: dict, prefix: str = "") -> dict:
    """Nested dicts become prefix_key columns; lists (the per-vCPU rows) are left out."""
    flat = {}
    for key, value in record.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}_"))
        elif not isinstance(value, list):
            flat[f"{prefix}{key}"] = value
    return flat


def _frame(rows: list[dict]):
    import polars as pl
    return pl.from_dicts(rows, infer_schema_length=None) if rows else pl.DataFrame()


@dataclass
class Result:
    """One run: `summary` is the parsed summary.json; the frames come from it and from the
    engine's recorded tables."""
    summary_json: str
    tables: dict | None
    scenario: Scenario
    overrides: list[str]
    config: dict = field(repr=False)
    # Tables written to Parquet during the run (`run(stream_to=...)`), read from there.
    streamed: dict[str, Path] = field(default_factory=dict)

    @cached_property
    def summary(self) -> dict:
        return json.loads(self.summary_json)

    @cached_property
    def vms(self):
        return _frame([{**_flatten(vm), "vcpu_count": len(vm.get("vcpus", []))}
                       for vm in self.summary["vms"]])

    @cached_property
    def vcpus(self):
        return _frame([{"vm": vm["name"], **_flatten(vcpu)}
                       for vm in self.summary["vms"] for vcpu in vm.get("vcpus", [])])

    @cached_property
    def workloads(self):
        return _frame([_flatten(workload) for workload in self.summary["workloads"]])

    @cached_property
    def locks(self):
        return _frame([{"vm": vm, **_flatten(counts)} for vm, counts in self.summary["locks"].items()])

    def table(self, name: str):
        """One recorded table as a polars data frame."""
        import polars as pl
        if name in self.streamed:
            return pl.read_parquet(self.streamed[name])
        if self.tables is None or name not in self.tables:
            raise ValueError(f"table {name!r} was not recorded: run with record=True"
                             + (" and a trace window" if name in TRACE_TABLES else ""))
        return pl.from_arrow(arrow_table(self.tables[name]))

    @property
    def requests(self):
        return self.table("requests")

    @property
    def samples(self):
        return self.table("samples")

    @property
    def tasks(self):
        return self.table("tasks")

    def recorded_tables(self) -> dict:
        """Every recorded table, by name, as a polars data frame."""
        return {name: self.table(name) for name in (*(self.tables or {}), *self.streamed)}

    def meta(self) -> dict:
        """What names the run: scenario source, overrides, seed and duration."""
        return {"source": self.scenario.source, "overrides": self.overrides, "seed": self.summary["seed"],
                "duration_ns": self.summary["duration_ns"]}

    def save(self, out_dir: str | Path, tables: Iterable[str] | None = None) -> list[Path]:
        """summary.json exactly as the engine wrote it, run.json (what reproduces the run:
        scenario text, overrides, seed, plus the normalized configuration) and one Parquet
        file per recorded table (or per table named in `tables`); each written atomically."""
        out_dir = Path(out_dir)
        from . import __version__
        reproduce = {**self.meta(), "vmsched_version": __version__, "scenario_text": self.scenario.text,
                     "config": self.config}
        wanted = [name for name in (*(self.tables or {}), *self.streamed) if tables is None or name in tables]
        # A streamed table already in out_dir stays where it is; elsewhere it is copied.
        in_place = [self.streamed[name] for name in wanted
                    if name in self.streamed and self.streamed[name].parent.resolve() == out_dir.resolve()]
        frames = {name: self.tables[name] if name in (self.tables or {}) else self.table(name)
                  for name in wanted if self.streamed.get(name) not in in_place}
        return [write_atomic(out_dir / "summary.json", self.summary_json),
                write_atomic(out_dir / "run.json", json.dumps(reproduce, indent=2) + "\n"),
                *write_tables(frames, out_dir), *in_place]

@dataclass(frozen=True)
class SizeEstimate:
    """The engine's estimate of a run before it starts (an order of magnitude)."""
    events: float
    memory_bytes: float  # held by the engine with the tables streamed to files
    output_bytes: float  # the recorded tables as Parquet
    refusal: str | None  # why the run is refused without allow_large, or None


def estimate(scenario: Scenario, overrides: Iterable[str] = (), duration: int | str | None = None,
             record: bool = True) -> SizeEstimate:
    try:
        return SizeEstimate(*_native.estimate_run(scenario.text, scenario.source, list(overrides),
                                                  _duration_ns(duration), record))
    except ValueError as err:
        raise _user_error(err) from err


def run(scenario: str | Path | Scenario = DEFAULT_SCENARIO, seed: int | None = None,
        set: Iterable[str] | None = None, duration: int | str | None = None,
        validate: bool = False, record: bool = True,
        trace_window: tuple[int, int] | None = None,
        progress: Callable[[int, int], None] | None = None, allow_large: bool = False,
        stream_to: str | Path | None = None, config: dict | None = None) -> Result:
    """Run a scenario (built-in name, path or Scenario). `set` holds dotted.key=value
    overrides; `duration` is ns or a string like '2s'; `validate` checks the engine's
    invariants after every event; `trace_window` (start_ns, end_ns) records the trace tables.
    A run whose estimated size is beyond the limits is refused unless `allow_large`.
    With `stream_to` (a directory), the recorded tables are written there as Parquet
    while the run goes, so that memory stays bounded however long the run; the Result
    reads them from there. `config` is `normalize(scenario, set)` where the caller has
    made it already (the engine then reads the scenario once more, not twice)."""
    source = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    overrides = list(set or [])
    config = normalize(source, overrides) if config is None else config
    check_seed(seed)
    streams = TableStreams(stream_to, RECORD_TABLES) if stream_to is not None and record else None
    try:
        summary_json, tables = _native.run_scenario(
            source.text, source.source, overrides, seed, _duration_ns(duration),
            validate, record, trace_window, progress, allow_large, streams.paths() if streams else None)
    except BaseException as err:
        if streams:
            streams.discard()
        if isinstance(err, ValueError):
            raise _user_error(err) from err
        raise
    if streams is None:
        return Result(summary_json, tables, source, overrides, config)
    rest = {name: columns for name, columns in tables.items() if name not in RECORD_TABLES}
    return Result(summary_json, rest, source, overrides, config, streamed=streams.close())
