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


def test_name_columns_are_written_as_dictionaries_and_read_back_as_the_names(tmp_path):
    """The name columns' pages are laid out from the engine's numbering of the names (a
    dictionary page and run-length encoded indices): every reader gets the run's strings
    back. The peer model on 4 pCPUs has three VMs and one server: its requests' workload
    and VM columns hold a single name in every row group, its samples' names cycle row
    by row, and 20 simulated seconds make two chunks."""
    from vmsched.peer import scenario_text
    source = api.Scenario(scenario_text(4, 3, 20000), "peer-4p3vm")
    streamed = api.run(source, record=True, allow_large=True, stream_to=tmp_path)
    streamed.save(tmp_path, tables=api.RECORD_TABLES)
    whole = api.run(source, record=True, allow_large=True)
    for name in api.RECORD_TABLES:
        path = tmp_path / f"{name}.parquet"
        assert pl.read_parquet(path).equals(whole.table(name)), name
        assert pl.from_arrow(pq.read_table(path)).equals(whole.table(name)), name
        metadata = pq.ParquetFile(path).metadata
        for group in range(metadata.num_row_groups):
            for column in range(metadata.num_columns):
                chunk = metadata.row_group(group).column(column)
                if chunk.path_in_schema in ("workload", "vm", "task", "metric"):
                    assert chunk.has_dictionary_page and "RLE_DICTIONARY" in chunk.encodings, (name, chunk)
                    assert chunk.statistics is None or not chunk.statistics.has_min_max
    requests = pq.ParquetFile(tmp_path / "requests.parquet")
    assert requests.metadata.num_row_groups >= 2
    assert whole.requests["workload"].n_unique() == 1
