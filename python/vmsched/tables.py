"""Parquet output of a run's recorded tables (columns documented in docs/outputs.md)."""
from __future__ import annotations

import io
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
