"""The Perfetto trace, read back by a reader that knows only the Chrome JSON trace format,
agrees with the run's own accounting."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from conftest import SHORT


def ns(microseconds: float) -> int:
    return round(microseconds * 1000)


def read_trace(path):
    """Track names from the metadata events, and the events themselves."""
    events = json.loads(path.read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    return processes, threads, [e for e in events if e["ph"] != "M"]


def running_time_per_vcpu(path):
    """(VM name, vCPU index) -> ns, from the vCPU tracks' 'running' slices and, separately,
    from the pCPU tracks' slices."""
    processes, threads, events = read_trace(path)
    from_vcpu_tracks, from_pcpu_tracks = defaultdict(int), defaultdict(int)
    for event in events:
        if event["ph"] != "X":
            continue
        process = processes[event["pid"]]
        if process.startswith("VM ") and event["name"] == "running":
            vcpu = int(threads[(event["pid"], event["tid"])].removeprefix("vCPU "))
            from_vcpu_tracks[(process.removeprefix("VM "), vcpu)] += ns(event["dur"])
        elif process == "host":
            from_pcpu_tracks[(event["args"]["vm"], event["args"]["vcpu"])] += ns(event["dur"])
    return from_vcpu_tracks, from_pcpu_tracks


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    from typer.testing import CliRunner
    from vmsched.cli import app
    out = tmp_path_factory.mktemp("traced")
    result = CliRunner().invoke(app, ["run", "default", "--duration", SHORT, "--trace", "--check-invariants",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_running_slices_equal_summary_cpu_time(traced_run):
    summary = json.loads((traced_run / "summary.json").read_text())
    from_vcpu_tracks, from_pcpu_tracks = running_time_per_vcpu(traced_run / "trace.json")
    expected = {(vm["name"], vcpu["index"]): vcpu["cpu_time_ns"] for vm in summary["vms"] for vcpu in vm["vcpus"]}
    assert dict(from_vcpu_tracks) == {k: v for k, v in expected.items() if v}
    assert dict(from_pcpu_tracks) == {k: v for k, v in expected.items() if v}


def test_tracks_and_flows(traced_run):
    summary = json.loads((traced_run / "summary.json").read_text())
    processes, threads, events = read_trace(traced_run / "trace.json")
    assert sum(name.startswith("pCPU ") for name in threads.values()) == summary["host"]["pcpus"]
    assert sum(name.startswith("vCPU ") for name in threads.values()) == sum(len(vm["vcpus"]) for vm in summary["vms"])
    starts = {e["id"] for e in events if e["ph"] == "s"}
    finishes = {e["id"] for e in events if e["ph"] == "f"}
    assert starts == finishes
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert any(name.startswith("steal vCPU") for name in counters)
    assert any(name.startswith("runqueue") for name in counters)
    # Task slices nest inside the state slice of their vCPU track.
    by_track = defaultdict(list)
    for event in events:
        if event["ph"] == "X" and event.get("cat") in ("vcpu_state", "task"):
            by_track[(event["pid"], event["tid"])].append(event)
    for slices in by_track.values():
        states = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in slices if e["cat"] == "vcpu_state"]
        for task in (e for e in slices if e["cat"] == "task"):
            start, end = ns(task["ts"]), ns(task["ts"]) + ns(task["dur"])
            assert any(a <= start and end <= b for a, b in states)


def test_window_limits_the_trace(cli, tmp_path):
    result = cli("run", "default", "--duration", SHORT, "--trace-window", "50ms:120ms", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    _, _, events = read_trace(tmp_path / "trace.json")
    timed = [e for e in events if e["ph"] in ("X", "i", "s", "f")]
    assert timed
    assert all(50_000_000 <= ns(e["ts"]) and ns(e["ts"]) + ns(e.get("dur", 0)) <= 120_000_000 for e in timed)
    summary = json.loads((tmp_path / "summary.json").read_text())
    from_vcpu_tracks, from_pcpu_tracks = running_time_per_vcpu(tmp_path / "trace.json")
    assert from_vcpu_tracks == from_pcpu_tracks
    for vm in summary["vms"]:
        for vcpu in vm["vcpus"]:
            assert from_vcpu_tracks.get((vm["name"], vcpu["index"]), 0) <= min(vcpu["cpu_time_ns"], 70_000_000)


def test_oversized_trace_is_refused(cli, tmp_path):
    result = cli("run", "default", "--duration", SHORT, "--trace", "--trace-limit-mb", "0.001", "--out", tmp_path)
    assert result.exit_code == 2
    assert "--trace-window" in result.stderr and "MB" in result.stderr
    assert not (tmp_path / "trace.json").exists()
    assert (tmp_path / "summary.json").exists()


def test_pids_positive_and_tids_unique_across_the_trace(traced_run):
    # Perfetto's JSON importer names threads by tid alone: a tid reused in two
    # processes would merge their tracks.
    events = json.loads((traced_run / "trace.json").read_text())["traceEvents"]
    assert min(e["pid"] for e in events) > 0
    owner = {}
    for event in events:
        assert owner.setdefault(event["tid"], event["pid"]) == event["pid"], event
    processes, threads, body = read_trace(traced_run / "trace.json")
    # Every slice and instant sits on a named thread (counters on the process's main thread).
    for event in body:
        if event["ph"] in ("X", "i"):
            assert (event["pid"], event["tid"]) in threads, event
        elif event["ph"] == "C":
            assert event["tid"] == event["pid"]


@pytest.mark.parametrize("scenario", ["default", "vcpu-stacking"])
def test_the_size_estimate_is_close_to_the_trace_written(scenario):
    """The estimate printed before a trace is written (and checked against the limit)
    is within a tenth of its size: an event's size depends on its kind and the run."""
    import vmsched
    from vmsched.cli import WHOLE_RUN
    from vmsched.trace import TraceBuilder
    result = vmsched.run(scenario, duration="100ms", trace_window=WHOLE_RUN)
    summary = result.summary
    builder = TraceBuilder(summary, result.recorded_tables(), (0, summary["duration_ns"]))
    written = len(builder.to_json())
    assert builder.event_count() > 1000
    assert abs(builder.estimated_bytes() - written) < 0.1 * written, (builder.estimated_bytes(), written)
