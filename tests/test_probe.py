"""`vmsched probe` on the machine the tests run on (a VM with real steal time).

Real probes are kept short (50 ms periods, a few periods each) so the file
finishes in well under a minute even while other builds load the machine."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from vmsched import probe_cmd

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the real probers need Linux")

SHORT = ["--period-ms", "50", "--periods", "3", "--heavy-ms", "5"]
CLASSES = {"stacked", "smt", "socket", "cross_socket"}


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.callback()
    def _root() -> None:
        """Command group holding only `probe`, as in the full CLI."""

    probe_cmd.register(app)
    return app


def run(*args: str):
    result = CliRunner().invoke(_app(), ["probe", *args])
    return result


def probe_json(*args: str) -> dict:
    result = run("--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check_schema(report: dict, sampled: bool = True) -> None:
    cpus = report["cpus"]
    assert isinstance(cpus, list) and cpus and all(isinstance(c, int) for c in cpus)
    assert report["mode"] in ("full", "validate")
    assert isinstance(report["probe_ms"], float) and report["probe_ms"] > 0
    perms = report["permissions"]
    for key in ("root", "sched_fifo", "sched_idle", "steal_column", "schedstat"):
        assert isinstance(perms[key], bool), key
    assert perms["cpuset_cgroup"] in ("v1", "v2", None)
    assert isinstance(report["fallbacks"], list)
    if sampled:
        assert set(report["capacity"]) == {str(c) for c in cpus}
        assert set(report["latency"]) == {str(c) for c in cpus}
        for lat in report["latency"].values():
            assert isinstance(lat["inactive_avg_us"], float)
            assert isinstance(lat["active_avg_us"], float)
            assert isinstance(lat["preemptions"], int)
    topo = report["topology"]
    n = len(cpus)
    assert topo["cpus"] == cpus
    matrix = topo["matrix_ns"]
    assert len(matrix) == n and all(len(row) == n for row in matrix)
    for i in range(n):
        assert matrix[i][i] == 0
        for j in range(n):
            assert matrix[i][j] is None or isinstance(matrix[i][j], float)
    assert isinstance(topo["timestamp"], float)
    assert len(topo["pairs"]) == n * (n - 1) // 2
    for pair in topo["pairs"]:
        assert pair["a"] in cpus and pair["b"] in cpus and pair["a"] != pair["b"]
        assert pair["class"] in CLASSES
    for level in ("stacked", "smt", "socket"):
        groups = topo["groups"][level]
        assert sorted(c for g in groups for c in g) == sorted(cpus), level


def test_real_probe_on_this_machine():
    report = probe_json(*SHORT)
    check_schema(report)
    topo = report["topology"]
    n = len(report["cpus"])
    measured = {(p["a"], p["b"]) for p in topo["pairs"] if p["source"] == "measured"}
    for i in range(n):
        for j in range(n):
            if i != j and (report["cpus"][min(i, j)], report["cpus"][max(i, j)]) in measured:
                value = topo["matrix_ns"][i][j]
                assert value is not None and math.isfinite(value) and value > 0
    if n == 2:
        assert topo["probed_pairs"] == 1, "a two-vCPU VM has one pair and it must be probed"
    assert all(p["class"] != "stacked" for p in topo["pairs"]), "these VMs have no stacked vCPUs"
    assert all(c > 0 for c in report["capacity"].values())
    assert max(report["capacity"].values()) == pytest.approx(1024.0)
    for lat in report["latency"].values():
        if lat["preemptions"]:
            assert lat["inactive_avg_us"] >= report["sampling"]["preemption_threshold_us"]
    assert report["cost"]["cpu_ms_per_period"] > 0


def test_only_topology_runs_just_vtop():
    report = probe_json("--only", "topology")
    check_schema(report, sampled=False)
    assert report["capacity"] == {} and report["latency"] == {}
    assert report["sampling"]["periods"] == 0


def test_validation_of_a_previous_topology(tmp_path: Path):
    first = tmp_path / "first.json"
    result = run("--json", "--only", "topology", "--out", str(first))
    assert result.exit_code == 0, result.output
    second = probe_json("--only", "topology", "--validate", str(first))
    check_schema(second, sampled=False)
    validation = second["topology"]["validation"]
    assert validation["pairs"] >= 1
    # The host may move vCPUs between the two probes: then validation fails
    # and a full probe replaces it; either way the report says which.
    assert second["mode"] == ("validate" if validation["passed"] else "full")


def test_watch_streams_one_line_per_period():
    result = run("--watch", "--count", "2", "--period-ms", "50", "--heavy-ms", "5", "--topology-every", "1")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["period"] for line in lines] == [0, 1]
    assert lines[0]["heavy"] is True and lines[1]["heavy"] is False
    for line in lines:
        assert set(line["capacity"]) == set(line["latency"])
        assert "topology" in line and line["topology"]["matrix_ns"]


def test_bench_reports_probe_times_and_cost():
    result = run("--bench", "--repeat", "2", "--periods", "2", "--period-ms", "50", "--heavy-every", "2")
    assert result.exit_code == 0, result.output
    bench = json.loads(result.stdout)
    assert bench["full_probe_ms"]["runs"] == 2 and bench["full_probe_ms"]["min"] > 0
    assert bench["validate_probe_ms"]["runs"] == 2
    assert bench["heavy_period_cpu_ms"]["runs"] == 1 and bench["light_period_cpu_ms"]["runs"] == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cpus", "4095"], "offline"),
        (["--cpus", "x-y"], "--cpus"),
        (["--only", "nothing"], "--only"),
        (["--ema-decay", "1.5"], "EMA decay"),
        (["--vtop-max-timeout-ms", "1"], "vtop_max_timeout_ms"),
    ],
)
def test_user_errors_are_clear(args, message):
    result = run("--json", *args)
    assert result.exit_code == 2
    assert "error:" in result.stderr and message in result.stderr


def test_rwc_dry_run_changes_nothing():
    result = run("--json", *SHORT, "--apply-rwc", "/")
    if "no cpuset cgroup hierarchy" in result.stderr:
        pytest.skip("no cpuset cgroup hierarchy on this machine")
    assert result.exit_code == 0, result.output
    assert "dry run, nothing changed" in result.stderr
    json.loads(result.stdout)


def _run_as_nobody(args: list[str]) -> subprocess.CompletedProcess:
    script = textwrap.dedent(
        """
        import sys, typer
        from vmsched import probe_cmd
        app = typer.Typer(add_completion=False)
        @app.callback()
        def _root() -> None:
            pass
        probe_cmd.register(app)
        app(sys.argv[1:])
        """
    )

    def drop_privileges() -> None:
        os.setgid(65534)
        os.setuid(65534)

    return subprocess.run([sys.executable, "-c", script, "probe", *args], capture_output=True, text=True,
                          preexec_fn=drop_privileges, timeout=60, cwd="/")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as an unprivileged user")
def test_without_root_rwc_refuses_and_probing_falls_back(tmp_path: Path):
    try:
        _run_as_nobody(["--help"])
    except PermissionError:
        pytest.skip(f"the unprivileged user 'nobody' cannot run {sys.executable}")
    tmp_path.chmod(0o777)
    result = _run_as_nobody(["--json", *SHORT, "--apply-rwc", "/", "--no-dry-run", "--rwc-state-dir", str(tmp_path)])
    if "no cpuset cgroup hierarchy" in result.stderr:
        pytest.skip("no cpuset cgroup hierarchy on this machine")
    assert result.returncode == 2, result.stderr
    assert "refuses to change a cgroup without root" in result.stderr
    report = json.loads(result.stdout)
    check_schema(report)
    assert report["permissions"]["root"] is False
    assert report["permissions"]["sched_fifo"] is False
    assert any("SCHED_FIFO" in note for note in report["fallbacks"])


def _cpuset_hierarchy() -> tuple[str, Path] | None:
    v1 = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == "cgroup2" and "cpuset" in (Path(fields[1]) / "cgroup.controllers").read_text().split():
            return "v2", Path(fields[1])
        if fields[2] == "cgroup" and "cpuset" in fields[3].split(","):
            v1 = ("v1", Path(fields[1]))
    return v1


def test_rwc_apply_and_revert_on_a_scratch_cgroup(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("RWC writes cgroup files: needs root")
    hierarchy = _cpuset_hierarchy()
    if hierarchy is None:
        pytest.skip("no cpuset cgroup hierarchy (v2 with cpuset, or v1 cpuset) is mounted")
    version, root = hierarchy
    if version == "v2" and "cpuset" not in (root / "cgroup.subtree_control").read_text().split():
        pytest.skip("cgroup v2 root does not delegate the cpuset controller to children")
    scratch = root / f"vmsched-probe-test-{os.getpid()}"
    scratch.mkdir()
    try:
        if version == "v1":
            (scratch / "cpuset.mems").write_text((root / "cpuset.mems").read_text().strip())
        (scratch / "cpuset.cpus").write_text("0")
        name = "/" + scratch.name
        state = tmp_path / "state"
        result = run("--json", *SHORT, "--apply-rwc", name, "--no-dry-run", "--rwc-state-dir", str(state))
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        kept = report["rwc"]["keep"]
        applied = (scratch / "cpuset.cpus").read_text().strip()
        from vmsched import _native
        assert _native.parse_cpu_list(applied) == kept
        assert len(list(state.iterdir())) == 1, "the previous value is recorded before the change"
        again = run("--json", *SHORT, "--apply-rwc", name, "--no-dry-run", "--rwc-state-dir", str(state))
        assert again.exit_code == 2 and "--revert first" in again.stderr
        reverted = run("--apply-rwc", name, "--revert", "--rwc-state-dir", str(state))
        assert reverted.exit_code == 0, reverted.output
        assert (scratch / "cpuset.cpus").read_text().strip() == "0"
        assert not list(state.iterdir())
    finally:
        scratch.rmdir()


def test_rwc_refusal_message_for_a_non_root_user(monkeypatch, tmp_path: Path):
    # In-process stand-in for an unprivileged user: the refusal must come
    # before any cgroup write, and the probe report must still be printed.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = run("--json", *SHORT, "--apply-rwc", "/", "--no-dry-run", "--rwc-state-dir", str(tmp_path))
    if "no cpuset cgroup hierarchy" in result.stderr:
        pytest.skip("no cpuset cgroup hierarchy on this machine")
    assert result.exit_code == 2
    assert "refuses to change a cgroup without root" in result.stderr
    check_schema(json.loads(result.stdout))
    assert not list(tmp_path.iterdir())


def test_rwc_names_a_missing_cgroup_before_probing():
    """The cgroup is looked up first: a wrong name fails at once, with no probe report."""
    result = run("--json", "--period-ms", "1000", "--periods", "5", "--apply-rwc", "/no-such-cgroup-for-vmsched")
    assert result.exit_code == 2, result.output
    # With --json a probe that ran would have printed its report first.
    assert "--apply-rwc /no-such-cgroup-for-vmsched" in result.stderr and result.stdout == ""
