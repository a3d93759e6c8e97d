"""Parquet output of a run's recorded tables (columns documented in docs/outputs.md).

The engine hands its tables over as columns of raw values, {column: ("i64" | "f64",
little-endian bytes)} or ("text", row codes as little-endian u32, the distinct strings):
they become Arrow arrays without a copy, and only pyarrow is needed to write them, so a
run that records loads neither polars nor a text format."""
from __future__ import annotations

import io
import os
from pathlib import Path

from .atomic import write_atomic


def arrow_table(columns: dict):
    """The Arrow table of one engine table's columns (or of a polars frame's `to_arrow`)."""
    import pyarrow as pa
    if isinstance(columns, pa.Table):
        return columns
    if not isinstance(columns, dict):  # a polars data frame
        return columns.to_arrow()
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
    """Parquet files written as the engine hands over rows, one row group per chunk, so
    that a long run never holds its whole tables. A table that arrives in one piece (a
    run too short to stream) is written exactly as `write_tables` writes it; a longer
    one goes through a pyarrow writer. Files are written beside their final name and
    renamed into place by `close`."""

    def __init__(self, out_dir: str | os.PathLike, names: tuple[str, ...]):
        self.out_dir = Path(out_dir)
        self.names = names
        self._first: dict = {}
        self._writers: dict = {}

    def _part(self, name: str) -> Path:
        return self.out_dir / f".{name}.parquet.part"

    def add(self, chunk: dict[str, dict | None]) -> None:
        """A chunk {table: engine columns}; tables not streamed here are ignored."""
        import pyarrow.parquet as pq
        for name, columns in chunk.items():
            if name not in self.names or columns is None:
                continue
            table = arrow_table(columns)
            if name not in self._writers and name not in self._first:
                self._first[name] = table
                continue
            if table.num_rows == 0:
                continue
            if name in self._first:
                first = self._first.pop(name)
                self.out_dir.mkdir(parents=True, exist_ok=True)
                writer = pq.ParquetWriter(self._part(name), first.schema, compression="zstd",
                                          use_dictionary=_text_columns(first))
                if first.num_rows:
                    writer.write_table(first)
                self._writers[name] = writer
            self._writers[name].write_table(table)

    def close(self) -> dict[str, Path]:
        """Finishes every file; returns the path of each table."""
        paths = {}
        for name, table in self._first.items():
            paths[name] = write_atomic(self.out_dir / f"{name}.parquet", parquet_bytes(table))
        for name, writer in self._writers.items():
            writer.close()
            paths[name] = self.out_dir / f"{name}.parquet"
            os.replace(self._part(name), paths[name])
        self._first, self._writers = {}, {}
        return paths

    def discard(self) -> None:
        """Drops what was written (a failed run)."""
        for name, writer in self._writers.items():
            writer.close()
            self._part(name).unlink(missing_ok=True)
        self._first, self._writers = {}, {}
