"""Parquet output of a run's recorded tables (columns documented in docs/outputs.md)."""
from __future__ import annotations

import io
import os
from pathlib import Path

import polars as pl

from .atomic import write_atomic


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def write_tables(frames: dict[str, pl.DataFrame], out_dir: Path) -> list[Path]:
    """One NAME.parquet per table, each written atomically."""
    return [write_atomic(out_dir / f"{name}.parquet", parquet_bytes(frame))
            for name, frame in frames.items()]


def read_tables(run_dir: Path, names: tuple[str, ...]) -> dict[str, pl.DataFrame]:
    """The tables among `names` that the run directory holds."""
    return {name: pl.read_parquet(run_dir / f"{name}.parquet")
            for name in names if (run_dir / f"{name}.parquet").is_file()}


class TableStreams:
    """Parquet files written as the engine hands over rows, one row group per chunk, so
    that a long run never holds its whole tables. A table that arrives in one piece (a
    run too short to stream) is written exactly as `write_tables` writes it; a longer
    one goes through a pyarrow writer, each chunk cast to the first one's schema. Files
    are written beside their final name and renamed into place by `close`."""

    def __init__(self, out_dir: str | os.PathLike, names: tuple[str, ...]):
        self.out_dir = Path(out_dir)
        self.names = names
        self._first: dict[str, pl.DataFrame] = {}
        self._writers: dict = {}

    def _part(self, name: str) -> Path:
        return self.out_dir / f".{name}.parquet.part"

    def add(self, chunk: dict[str, dict | None]) -> None:
        """A chunk {table: {column: values}}; tables not streamed here are ignored."""
        for name, columns in chunk.items():
            if name not in self.names or columns is None:
                continue
            frame = pl.DataFrame(columns)
            held = self._first.get(name)
            if name not in self._writers and (held is None or held.is_empty()):
                # The first rows (an empty table is kept only until rows come: its
                # columns have no types yet).
                self._first[name] = frame
                continue
            if frame.is_empty():
                continue
            if name in self._first:
                import pyarrow as pa
                import pyarrow.parquet as pq
                first = self._first.pop(name).to_arrow()
                self.out_dir.mkdir(parents=True, exist_ok=True)
                # Dictionaries for the name columns only: the times and values are
                # mostly distinct, and a dictionary of them makes the file about half
                # again as large (pyarrow's default encodes every column so).
                names = [f.name for f in first.schema if f.type in (pa.string(), pa.large_string())]
                writer = pq.ParquetWriter(self._part(name), first.schema, compression="zstd", use_dictionary=names)
                writer.write_table(first)
                self._writers[name] = writer
            writer = self._writers[name]
            writer.write_table(frame.to_arrow().cast(writer.schema))

    def close(self) -> dict[str, Path]:
        """Finishes every file; returns the path of each table."""
        paths = {}
        for name, frame in self._first.items():
            paths[name] = write_atomic(self.out_dir / f"{name}.parquet", parquet_bytes(frame))
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
