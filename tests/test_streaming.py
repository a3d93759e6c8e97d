"""`vmsched run` writes the recorded tables while the run goes, a row group per chunk the
engine hands over: the files hold exactly the rows of the same run kept in memory."""
from __future__ import annotations

import pyarrow.parquet as pq
import polars as pl

from vmsched import api

# Samples every 0.1 ms on the default scenario's 4 pCPUs: 24 rows a sample, so half a
# second makes several chunks of 16,384 rows.
LONG = ["--duration", "500ms", "--set", "metrics.sample_interval_ms=0.1"]


def test_streamed_tables_hold_the_rows_of_the_run_in_row_groups(cli, tmp_path):
    out = tmp_path / "run"
    result = cli("run", "default", *LONG, "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    whole = api.run("default", duration="500ms", set=["metrics.sample_interval_ms=0.1"], record=True)
    assert pq.ParquetFile(out / "samples.parquet").num_row_groups >= 3
    assert pl.read_parquet(out / "samples.parquet").equals(whole.samples)
    # Requests come a chunk at a time, by workload inside each: the same rows.
    key = ["workload", "task", "arrival_ns", "end_ns"]
    assert pl.read_parquet(out / "requests.parquet").sort(key).equals(whole.requests.sort(key))
    assert pl.read_parquet(out / "tasks.parquet").equals(whole.tasks)
    assert not list(out.glob(".*.part")), "no partial file is left"


def test_a_short_run_writes_its_tables_as_before(cli, tmp_path):
    out = tmp_path / "run"
    assert cli("run", "default", "--duration", "100ms", "--out", str(out), "--json").exit_code == 0
    whole = api.run("default", duration="100ms", record=True)
    for name in api.RECORD_TABLES:
        assert pq.ParquetFile(out / f"{name}.parquet").num_row_groups == 1
        assert pl.read_parquet(out / f"{name}.parquet").equals(whole.table(name))


def test_the_api_streams_to_a_directory_and_reads_back(tmp_path):
    streamed = api.run("default", duration="500ms", set=["metrics.sample_interval_ms=0.1"], record=True,
                       stream_to=tmp_path)
    assert set(streamed.streamed) == set(api.RECORD_TABLES)
    whole = api.run("default", duration="500ms", set=["metrics.sample_interval_ms=0.1"], record=True)
    # 5000 sample instants, each with every metric's rows, streamed in chunks.
    assert streamed.samples.height == whole.samples.height
    assert streamed.samples["time_ns"].n_unique() == 5000
    saved = streamed.save(tmp_path / "copy")
    assert {path.name for path in saved} >= {"samples.parquet", "requests.parquet", "tasks.parquet"}
    assert pl.read_parquet(tmp_path / "copy" / "samples.parquet").equals(streamed.samples)
