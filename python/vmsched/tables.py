"""Parquet output of a run's recorded tables (columns documented in docs/outputs.md).

A run streamed to a directory (`vmsched run`) has its tables written there by the engine
itself (`TableStreams`), so that it loads no data-frame library. Otherwise the engine
hands its tables over as columns of raw values, {column: ("i64" | "f64", little-endian
bytes)} or ("text", row codes as little-endian u32, the distinct strings): they become
Arrow arrays without a copy, and pyarrow writes them."""
from __future__ import annotations

import io
import os
from pathlib import Path

from .atomic import write_atomic


def arrow_table(columns: dict):
    """The Arrow table of one engine table's columns, of {column: list of values}, or of a
    polars frame."""
    import pyarrow as pa
    if isinstance(columns, pa.Table):
        return columns
    if not isinstance(columns, dict):  # a polars data frame
        return columns.to_arrow()
    if all(isinstance(values, list) for values in columns.values()):  # {column: list of values}
        return pa.table(columns)
    arrays = {}
    for name, (kind, data, *distinct) in columns.items():
        if kind == "text":
            codes = pa.Array.from_buffers(pa.uint32(), len(data) // 4, [None, pa.py_buffer(data)])
            arrays[name] = pa.array(distinct[0], pa.string()).take(codes)
        else:
            arrow_type = {"i64": pa.int64(), "f64": pa.float64()}[kind]
            arrays[name] = pa.Array.from_buffers(arrow_type, len(data) // 8, [None, pa.py_buffer(data)])
    return pa.table(arrays)


def _text_columns(table) -> list[str]:
    # Dictionaries for the name columns only: the times and values are mostly distinct,
    # and a dictionary of them makes the file about half again as large (pyarrow's
    # default encodes every column so).
    import pyarrow as pa
    return [f.name for f in table.schema if f.type in (pa.string(), pa.large_string(), pa.string_view())]


def parquet_bytes(table) -> bytes:
    """A table (engine columns, Arrow or polars) as one Parquet file, zstd-compressed."""
    import pyarrow.parquet as pq
    table = arrow_table(table)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", use_dictionary=_text_columns(table))
    return buffer.getvalue()


def write_tables(frames: dict, out_dir: Path) -> list[Path]:
    """One NAME.parquet per table (engine columns, Arrow or polars), each written atomically."""
    return [write_atomic(out_dir / f"{name}.parquet", parquet_bytes(frame))
            for name, frame in frames.items()]


def read_tables(run_dir: Path, names: tuple[str, ...]) -> dict:
    """The tables among `names` that the run directory holds, as polars frames."""
    import polars as pl
    return {name: pl.read_parquet(run_dir / f"{name}.parquet")
            for name in names if (run_dir / f"{name}.parquet").is_file()}


class TableStreams:
    """Parquet files the engine writes as it runs, one row group per chunk of rows it
    hands over, so that a long run never holds its whole tables (crates/py/src/
    table_files.rs). Each is written beside its final name and renamed into place by
    `close`, or removed by `discard` (a failed run)."""

    def __init__(self, out_dir: str | os.PathLike, names: tuple[str, ...]):
        self.out_dir = Path(out_dir)
        self.names = names

    def _part(self, name: str) -> Path:
        return self.out_dir / f".{name}.parquet.part"

    def paths(self) -> dict[str, str]:
        """Where the engine writes each table, {table: path}."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        return {name: str(self._part(name)) for name in self.names}

    def close(self) -> dict[str, Path]:
        """Puts every file in place; returns the path of each table."""
        paths = {}
        for name in self.names:
            paths[name] = self.out_dir / f"{name}.parquet"
            os.replace(self._part(name), paths[name])
        return paths

    def discard(self) -> None:
        """Drops what was written (a failed run)."""
        for name in self.names:
            self._part(name).unlink(missing_ok=True)
