"""Sweeps: the run set of a spec, resuming after SIGKILL with nothing lost or repeated,
the Ray backend storing exactly what the local one does, failed runs recorded, and the
statistics."""
from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from vmsched import sweeps as engine
from vmsched.sweep_worker import RunTask

# Long enough simulated time that a run takes a good fraction of a second, so that the
# kills land while runs are in flight.
KILL_SPEC = """
scenarios = ["default"]
seeds = [1, 2, 3, 4, 5, 6]
duration = "30s"
[grid]
"host.hz" = [250, 1000]
"""
SMALL_SPEC = """
scenarios = ["default", "anubis-table1"]
seeds = [1, 2]
variants = ["", "fast-tick=host.hz=1000"]
duration = "100ms"
"""


def write_spec(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def stored_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes()
            for p in sorted(out.rglob("*")) if p.is_file() and p.name != "spec.json"}


def start_sweep(spec: Path, out: Path, *extra: str) -> subprocess.Popen:
    # A session of its own, so that a kill takes the driver and its workers together,
    # as when a machine or a job scheduler stops the sweep.
    return subprocess.Popen([sys.executable, "-m", "vmsched.cli", "sweep", str(spec), "--out", str(out),
                             "--workers", "2", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def test_plan_is_the_cartesian_product_with_one_key_per_distinct_run(tmp_path):
    spec = engine.load_spec(write_spec(tmp_path, KILL_SPEC))
    runs = engine.plan(spec)
    assert len(runs) == 12
    assert {(r.seed, r.point) for r in runs} == {(s, (("host.hz", hz),)) for s in range(1, 7) for hz in ("250", "1000")}
    assert len({r.task.key for r in runs}) == 12
    # The key is the content: the same run asked for through another route shares it.
    same = engine.plan(engine.spec_from_mapping({"scenarios": ["default"], "seeds": [3], "duration": "30000ms",
                                                 "variants": ["hz=host.hz=1000"]}))
    assert same[0].task.key == next(r.task.key for r in runs if r.seed == 3 and r.point == (("host.hz", "1000"),))


def record_count(out: Path) -> int:
    return len(list((out / "runs").glob("*.json"))) if (out / "runs").is_dir() else 0


def test_resume_after_sigkill_loses_and_repeats_nothing(tmp_path):
    spec = write_spec(tmp_path, KILL_SPEC)
    expected = {run.task.key for run in engine.plan(engine.load_spec(spec))}
    reference = tmp_path / "reference"
    subprocess.run([sys.executable, "-m", "vmsched.cli", "sweep", str(spec), "--out", str(reference),
                    "--workers", "2"], check=True, capture_output=True)

    out = tmp_path / "killed"
    chance = random.Random(10)
    # Each attempt is killed once a random number of further runs have finished, after a
    # random extra moment: while runs are in flight, records are being written, or the
    # driver is between the two.
    # The last target leaves at least three runs to do, so the sweep (two workers) is
    # still running when the kill comes, however fast the machine.
    targets = sorted(chance.sample(range(1, len(expected) - 2), 3))
    finished_before: dict[str, tuple[int, int]] = {}
    for target in targets:
        process = start_sweep(spec, out)
        deadline = time.monotonic() + 120
        while record_count(out) < target and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(chance.uniform(0, 0.3))
        assert process.poll() is None, "the sweep finished before it could be killed: make its runs longer"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        records = {p.stem: p for p in (out / "runs").glob("*.json")}
        # A run finished before a kill is never run (nor written) again.
        for key, (inode, mtime) in finished_before.items():
            assert (records[key].stat().st_ino, records[key].stat().st_mtime_ns) == (inode, mtime), key
        finished_before = {key: (p.stat().st_ino, p.stat().st_mtime_ns) for key, p in records.items()}
        assert target <= len(records) < len(expected) and set(records) <= expected

    process = start_sweep(spec, out)
    stderr = process.communicate()[1].decode()  # read as it comes: a full pipe would stall the sweep
    assert process.returncode == 0, stderr
    assert {p.stem for p in (out / "runs").iterdir()} == expected  # no temp file left behind
    for key, (inode, mtime) in finished_before.items():
        assert ((out / "runs" / f"{key}.json").stat().st_ino, (out / "runs" / f"{key}.json").stat().st_mtime_ns) == (inode, mtime)
    results = pl.read_parquet(str(out / "results" / "**" / "*.parquet"))
    assert sorted(results["key"]) == sorted(expected)
    assert (results["status"] == "ok").all()
    assert stored_files(out) == stored_files(reference)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def stale_ray_cluster(monkeypatch):
    """A Ray temporary folder whose ray_current_cluster names a head that is gone, as a
    `ray start --head` ended without `ray stop` leaves it. The folder's path is short:
    Ray puts its sockets under it, and a Unix socket path has at most 107 bytes."""
    import shutil
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="vr", dir="/tmp"))
    (folder / "ray").mkdir()
    dead = f"127.0.0.1:{_closed_port()}"
    (folder / "ray" / "ray_current_cluster").write_text(dead + "\n")
    monkeypatch.setenv("RAY_TMPDIR", str(folder))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield folder, dead
    shutil.rmtree(folder, ignore_errors=True)


def test_ray_backend_stores_what_the_local_backend_stores_whatever_ray_left(tmp_path, stale_ray_cluster, capfd):
    """Without --address the sweep starts its own local Ray instance, says so, and is not
    sent to the dead cluster that the stale ray_current_cluster file names."""
    pytest.importorskip("ray")
    spec = write_spec(tmp_path, SMALL_SPEC)
    local = engine.sweep(spec, tmp_path / "local", backend="local", workers=2)
    on_ray = engine.sweep(spec, tmp_path / "ray", backend="ray", workers=2)
    assert "ray: started a private local Ray instance with 2 CPUs" in capfd.readouterr().err
    assert local.height == 8 and (local["status"] == "ok").all()
    assert stored_files(tmp_path / "ray") == stored_files(tmp_path / "local")
    assert on_ray.equals(local)


def test_address_auto_names_the_dead_cluster_and_where_it_came_from(cli, tmp_path, stale_ray_cluster, monkeypatch):
    pytest.importorskip("ray")
    folder, dead = stale_ray_cluster
    spec = write_spec(tmp_path, SMALL_SPEC)
    result = cli("sweep", spec, "--out", tmp_path / "out", "--backend", "ray", "--address", "auto")
    assert result.exit_code == 2, result.output
    assert dead in result.stderr and str(folder / "ray" / "ray_current_cluster") in result.stderr
    assert "ray stop" in result.stderr and "--address local" in result.stderr
    assert not (tmp_path / "out" / "runs").exists()  # nothing left behind
    monkeypatch.setenv("RAY_ADDRESS", dead)
    result = cli("sweep", spec, "--out", tmp_path / "out", "--backend", "ray", "--address", "auto")
    assert result.exit_code == 2 and f"{dead} (from RAY_ADDRESS" in result.stderr
    assert "unset ray_address" in result.stderr.lower()


def test_a_ray_client_address_without_the_client_is_a_user_error(cli, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setitem(sys.modules, "grpc", None)  # `import grpc` now raises ImportError
    spec = write_spec(tmp_path, SMALL_SPEC)
    result = cli("sweep", spec, "--out", tmp_path / "out", "--backend", "ray", "--address", "ray://127.0.0.1:10001")
    assert result.exit_code == 2, result.output
    assert "ray[client]" in result.stderr and "ray://127.0.0.1:10001" in result.stderr
    assert not (tmp_path / "out" / "runs").exists()


def test_changed_spec_reuses_the_runs_it_shares(tmp_path):
    out = tmp_path / "out"
    first = engine.sweep({"scenarios": ["two-vms-one-pcpu"], "seeds": [1, 2], "duration": "50ms"}, out, workers=1)
    mtimes = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    second = engine.sweep({"scenarios": ["two-vms-one-pcpu"], "seeds": [1, 2, 3], "duration": "50ms"}, out, workers=1)
    assert second.height == 3
    assert set(first["key"]) < set(second["key"])
    for name, mtime in mtimes.items():
        assert (out / "runs" / name).stat().st_mtime_ns == mtime


def test_a_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    good = engine.plan(engine.spec_from_mapping({"scenarios": ["two-vms-one-pcpu"], "seeds": [1], "duration": "20ms"}))
    broken_task = RunTask("f" * 32, "name = 'broken'\nduration_ms = 10\n", "broken.toml", (), 1, None)
    broken = engine.PlannedRun("broken.toml", "", 1, (), broken_task)
    store = engine.execute_runs([broken, *good], tmp_path, workers=2)
    frame = engine.results_frame([broken, *good], store)
    by_status = dict(zip(frame["scenario"], frame["status"]))
    assert by_status == {"broken.toml": "failed", "two-vms-one-pcpu": "ok"}
    error = frame.filter(pl.col("status") == "failed")["error"][0]
    assert "broken.toml" in error and "vm" in error


def test_summary_lists_points_by_scenario_variant_and_grid_value_not_by_run_key():
    # The store keeps rows by run key (a hash); a reader looks for the grid in its order,
    # with numbers by value (250 before 1000).
    rows = [("b", "", "1000", 1), ("a", "", "1000", 1), ("a", "", "250", 2), ("a", "", "250", 1),
            ("a", "fast", "250", 1), ("b", "", "250", 1)]
    results = pl.DataFrame({
        "key": [f"k{i}" for i in range(len(rows))], "scenario": [r[0] for r in rows],
        "variant": [r[1] for r in rows], "seed": [r[3] for r in rows],
        "point": [f"host.hz={r[2]}" for r in rows], "status": ["ok"] * len(rows), "error": [None] * len(rows),
        "set.host.hz": [r[2] for r in rows], "host.busy_ns": [1.0] * len(rows),
        "host.pcpus": [1] * len(rows), "duration_ns": [1] * len(rows)})
    expected = [("a", "", "host.hz=250"), ("a", "", "host.hz=1000"), ("a", "fast", "host.hz=250"),
                ("b", "", "host.hz=250"), ("b", "", "host.hz=1000")]
    assert [(line["scenario"], line["variant"], line["point"]) for line in engine.headline(results)] == expected
    stats = engine.summarize(results, "busy")
    assert list(zip(stats["scenario"], stats["variant"], stats["point"])) == expected


def test_headline_throughput_is_the_scenarios_workloads_not_the_engines_threads():
    # A guest's kworkers (VM/os_noise), a guest policy's threads and dom0's back ends are
    # workloads of the summary, but their runs are no throughput of the scenario's.
    row = {"key": "k", "scenario": "s", "variant": "", "seed": 1, "point": "", "status": "ok", "error": None,
           "host.busy_ns": 1.0, "host.pcpus": 1, "duration_ns": 1}
    for name, kind, rate in [("a/web", "server", 1000.0), ("a/batch", "parallel", 20.0), ("a/os_noise", "os_noise", 70.0),
                             ("a/vsched", "guest_policy", 5.0), ("dom0/backends", "xen_backend", 900.0)]:
        row |= {f"workloads[{name}].kind": kind, f"workloads[{name}].throughput_per_s": rate}
    figures = engine.headline(pl.DataFrame([row]))[0]["figures"]
    assert next(f["mean"] for f in figures if f["metric"] == "throughput") == 1020.0


def test_mean_and_interval_against_hand_computed_values():
    mean, ci95, n = engine.mean_ci95([1.0, 2.0, 3.0])
    # sd 1, t(0.975, 2 dof) = 4.303: 4.303 / sqrt(3)
    assert (mean, n) == (2.0, 3) and ci95 == pytest.approx(4.303 / math.sqrt(3))
    assert engine.mean_ci95([5.0]) == (5.0, None, 1)
    assert engine.t975(40) == pytest.approx(2.0211, abs=1e-3)
    assert engine.t975(120) == pytest.approx(1.9799, abs=1e-3)


def test_summary_cli_aggregates_the_seeds_of_each_point(cli, tmp_path):
    out = tmp_path / "out"
    spec = write_spec(tmp_path, SMALL_SPEC)
    result = cli("sweep", spec, "--out", out, "--workers", "2")
    assert result.exit_code == 0, result.output
    results = pl.read_parquet(str(out / "results" / "**" / "*.parquet"))
    assert {"key", "scenario", "variant", "seed", "status", "vms[web].share"} <= set(results.columns)
    result = cli("sweep", "--summary", out, "--json", "--metric", "vms[web].share")
    rows = json.loads(result.stdout)
    assert {(r["variant"], r["n"]) for r in rows} == {("", 2), ("fast-tick", 2)}
    for row in rows:
        shares = results.filter((pl.col("scenario") == "default") & (pl.col("variant") == row["variant"]))["vms[web].share"]
        assert row["mean"] == pytest.approx(shares.mean())
        assert row["ci95"] == pytest.approx(engine.t975(1) * shares.std() / math.sqrt(2))
    # Without --metric: one line per point (2 scenarios x 2 variants) after the heading,
    # its headline figures the means over the seeds.
    result = cli("sweep", "--summary", out)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    points = [line for line in lines if "(n=2)" in line]
    assert len(points) == 4 and all("host busy" in line for line in points), result.stdout
    headline = json.loads(cli("sweep", "--summary", out, "--json").stdout)
    busy = next(f for line in headline if line["scenario"] == "default" and line["variant"] == ""
                for f in line["figures"] if f["metric"] == "host busy")
    default = results.filter((pl.col("scenario") == "default") & (pl.col("variant") == ""))
    assert busy["mean"] == pytest.approx((100 * default["host.busy_ns"] / (default["host.pcpus"] * default["duration_ns"])).mean())
    # Metric paths keep their brackets, and the table keeps to 80 columns.
    result = cli("sweep", "--summary", out, "--metric", "latency_ns.p95")
    assert "workloads[web/nginx-like].latency_ns.p95" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


@pytest.mark.parametrize("text, message", [
    ('scenarios = ["default"]\nseeds = [1]\nsedes = [2]\n', "spec.toml: sedes: unknown field"),
    ('scenarios = ["default"]\nseeds = ["x"]\n', "spec.toml: seeds: expected"),
    ('scenarios = ["default"]\nseeds = [1]\ntables = ["trace"]\n', "spec.toml: tables: expected true or a list"),
    ('scenarios = ["default"]\nseeds = [1]\nvariants = ["stacked"]\n', "variants: builtin:default has no variant 'stacked'"),
    ('scenarios = ["default"]\nseeds = [1]\n[grid]\n"vm[0].vcpuz" = [2]\n', "builtin:default: vm[0].vcpuz: unknown field"),
    ('scenarios = ["nope"]\nseeds = [1]\n', "spec.toml: scenarios[0]: nope: unknown scenario"),
    ('scenarios = ["default", "gone.toml"]\nseeds = [1]\n', "spec.toml: scenarios[1]: gone.toml: no such file"),
    ('scenarios = ["gone.json"]\nseeds = [1]\n', "spec.toml: scenarios[0]: gone.json: no such file"),
])
def test_spec_errors_name_the_file_and_field(cli, tmp_path, text, message):
    result = cli("sweep", write_spec(tmp_path, text), "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "out").exists()


def test_scenario_files_are_found_beside_the_spec_whatever_their_format(cli, tmp_path, monkeypatch):
    # docs/scenario.md: a scenario is a TOML file or a JSON file of the same structure;
    # docs/sweep.md: a spec's paths are relative to the spec, not to the working directory.
    specs = tmp_path / "specs"
    specs.mkdir()
    scenario = {"name": "json-one", "duration_ms": 20, "vm": [{"name": "a", "vcpus": 1}]}
    (specs / "one.json").write_text(json.dumps(scenario))
    write_spec(specs, 'scenarios = ["one.json"]\nseeds = [1]\n')
    monkeypatch.chdir(tmp_path)
    result = cli("sweep", "specs/spec.toml", "--out", "out")
    assert result.exit_code == 0, result.stderr
    results = pl.read_parquet(tmp_path / "out" / "results" / "runs.parquet")
    assert results["status"].to_list() == ["ok"] and results["vms[a].vcpus[0].cpu_time_ns"].to_list() != [None]


def test_python_api_returns_the_results_frame(tmp_path):
    import vmsched
    frame = vmsched.sweep({"scenarios": ["two-vms-one-pcpu"], "seeds": [1, 2], "duration": "50ms",
                           "grid": {"host.hz": [250, 1000]}}, out=tmp_path)
    assert isinstance(frame, pl.DataFrame) and frame.height == 4
    assert frame.equals(vmsched.read_results(tmp_path))
    stats = vmsched.summarize(frame, "vms[a].share")
    assert sorted(stats["point"]) == ["host.hz=1000", "host.hz=250"] and (stats["n"] == 2).all()


def test_a_script_without_a_main_guard_can_sweep(tmp_path):
    # Workers are fresh interpreters running the worker module: they do not re-import
    # the caller's main module (which would run the sweep again, recursively).
    script = tmp_path / "analysis.py"
    script.write_text("import vmsched\n"
                      f"frame = vmsched.sweep({{'scenarios': ['two-vms-one-pcpu'], 'seeds': [1, 2, 3], "
                      f"'duration': '20ms'}}, out={str(tmp_path / 'out')!r}, workers=2)\n"
                      "print(frame.height)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3"


def test_tables_are_stored_per_run_only_when_asked_for(tmp_path):
    import vmsched
    spec = {"scenarios": ["anubis-table1"], "seeds": [1, 2], "duration": "100ms"}
    first = engine.sweep(spec, tmp_path, workers=2)
    assert not (tmp_path / "tables").exists()
    # Kept tables make other runs (recording samples adds events, counted as `other`),
    # with the same metrics.
    with_tables = engine.sweep(spec | {"tables": ["requests"]}, tmp_path, workers=2)
    assert not set(with_tables["key"]) & set(first["key"])
    samples = ("key", "events", "events_by_kind.other")
    assert with_tables.drop(*samples).sort("seed").equals(first.drop(*samples).sort("seed"))
    kept, plain = with_tables.sort("seed"), first.sort("seed")
    assert (kept["events"] - plain["events"]).to_list() == (
        kept["events_by_kind.other"] - plain["events_by_kind.other"]).to_list()
    for row in with_tables.iter_rows(named=True):
        assert sorted(p.name for p in (tmp_path / "tables" / row["key"]).iterdir()) == ["requests.parquet"]
        stored = pl.read_parquet(tmp_path / "tables" / row["key"] / "requests.parquet")
        assert stored.equals(vmsched.run("anubis-table1", seed=row["seed"], duration="100ms").requests)


def _wait_for_records(out: Path, count: int, process: subprocess.Popen, limit_s: float = 120) -> None:
    started = time.monotonic()
    while record_count(out) < count:
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() - started < limit_s
        time.sleep(0.05)


def _worker_pids(driver: int) -> list[int]:
    """The sweep workers of a driver: `python -m vmsched.sweep_worker` processes whose
    parent it is (or was: a worker whose driver died is adopted)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = status.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"vmsched.sweep_worker" in command:
            found.append(int(status.parent.name))
    return found


def test_ctrl_c_on_a_sweep_says_what_is_kept_and_how_to_resume(tmp_path):
    """Ctrl-C at a terminal reaches the driver and its workers (one process group): the
    driver names the finished runs it keeps and how to resume; no process prints a
    traceback (KeyboardInterrupt, BrokenPipeError)."""
    out = tmp_path / "out"
    process = start_sweep(write_spec(tmp_path, KILL_SPEC), out)
    _wait_for_records(out, 1, process)
    os.killpg(process.pid, signal.SIGINT)
    stderr = process.communicate(timeout=60)[1].decode()
    assert process.returncode == 130, stderr
    kept = record_count(out)
    assert 1 <= kept < 12
    last = [line for line in stderr.splitlines() if line.strip()][-1]
    assert last == (f"error: interrupted; {kept} finished run{'s' * (kept != 1)} kept in {out / 'runs'}; the same command resumes "
                    "the sweep, running only the missing ones"), stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr and "BrokenPipe" not in stderr


def test_workers_end_quietly_with_their_driver(tmp_path):
    """A driver killed outright (no chance to end its workers) takes them with it, and
    they print nothing."""
    out = tmp_path / "out"
    process = start_sweep(write_spec(tmp_path, KILL_SPEC), out)
    _wait_for_records(out, 1, process)
    workers = [pid for pid in _worker_pids(process.pid)
               if Path(f"/proc/{pid}/stat").read_text().split()[3] == str(process.pid)]
    assert len(workers) == 2
    process.kill()
    stderr = process.communicate(timeout=60)[1].decode()  # the workers share the pipe: EOF once they are gone
    # A worker closes the pipe on its way out a moment before it is a zombie (or reaped):
    # give the exit that moment, and fail a worker that keeps running.
    deadline = time.monotonic() + 10
    while (running := [pid for pid in workers if _running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running == [], running
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def _running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
