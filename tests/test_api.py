"""The Python API gives the same numbers as the CLI; every built-in keeps the engine's
invariants in validation mode."""
from __future__ import annotations

import json
import tomllib

import polars as pl
import pytest

import vmsched
from vmsched import _native
from vmsched.errors import UserError
from conftest import SHORT


def test_api_matches_cli_json(cli, tmp_path):
    assert cli("run", "default", "--seed", "3", "--duration", SHORT, "--out", tmp_path).exit_code == 0
    from_cli = json.loads((tmp_path / "summary.json").read_text())
    result = vmsched.run("default", seed=3, duration=SHORT)
    assert result.summary == from_cli
    assert result.vms["cpu_time_ns"].to_list() == [vm["cpu_time_ns"] for vm in from_cli["vms"]]
    assert result.vcpus["steal_ns"].to_list() == [v["steal_ns"] for vm in from_cli["vms"] for v in vm["vcpus"]]
    assert result.workloads["throughput_per_s"].to_list() == [w["throughput_per_s"] for w in from_cli["workloads"]]
    assert result.requests.equals(pl.read_parquet(tmp_path / "requests.parquet"))
    assert result.samples.equals(pl.read_parquet(tmp_path / "samples.parquet"))


def test_frames_have_documented_columns():
    result = vmsched.run("default", duration=SHORT)
    assert {"name", "cpu_time_ns", "steal_ns", "entitlement", "share", "vcpu_count"} <= set(result.vms.columns)
    assert {"vm", "index", "cpu_time_ns", "steal_ns", "preemptions"} <= set(result.vcpus.columns)
    assert {"name", "vm", "kind", "completed", "throughput_per_s"} <= set(result.workloads.columns)
    assert set(result.requests.columns) >= {"workload", "vm", "task", "arrival_ns", "start_ns", "end_ns",
                                            "latency_ns", "queue_ns", "service_ns"}
    assert set(result.samples.columns) == {"time_ns", "metric", "vm", "vcpu", "pcpu", "value"}


def test_without_recording_tables_are_refused():
    result = vmsched.run("default", duration=SHORT, record=False)
    assert result.summary["duration_ns"] == 200_000_000
    with pytest.raises(ValueError, match="record=True"):
        result.requests


def test_bad_override_raises_user_error():
    with pytest.raises(UserError, match="builtin:default: host.no_such_knob"):
        vmsched.run("default", set=["host.no_such_knob=1"], duration=SHORT)


def test_scenarios_lists_builtins():
    assert [info.name for info in vmsched.scenarios()] == [n for n, _, _ in _native.builtin_scenarios()]


@pytest.mark.parametrize("name", [n for n, _, _ in _native.builtin_scenarios()])
def test_builtin_keeps_invariants(name):
    # validate=True checks the engine's invariants after every event and raises on a violation.
    duration = "20ms" if name.startswith("bench-") else "50ms"
    # A timeline (phases, re-pinning) that outlasts a short run names the run covering it.
    text = next(toml for n, _, toml in _native.builtin_scenarios() if n == name)
    quick_ms = tomllib.loads(text).get("paper", {}).get("quick_ms")
    if quick_ms:
        duration = f"{quick_ms:g}ms"
    result = vmsched.run(name, duration=duration, validate=True, record=False)
    assert result.summary["events"] > 0


def test_exported_functions_survive_submodule_imports():
    """Importing a submodule binds its name on the package: no exported function may share
    its module's name, or `vmsched.NAME` would become the module once anything imported it."""
    import importlib
    for module in set(vmsched._EXPORTS.values()):
        importlib.import_module(f"vmsched.{module}")
    for name in vmsched._EXPORTS:
        assert callable(getattr(vmsched, name)) and not isinstance(getattr(vmsched, name), type(vmsched)), name
