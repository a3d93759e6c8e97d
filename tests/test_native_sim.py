"""The simulator through its Python binding: schema errors carry the field
path, runs are deterministic, and the invariant checker runs on every
built-in scenario."""
import json
import subprocess
import sys
import tomllib

import pytest

from vmsched import _native

BUILTINS = {name: text for name, _, text in _native.builtin_scenarios()}


def test_bad_field_names_file_and_path():
    text = BUILTINS["default"].replace("threads = 4\nrate_per_s", "threads = 'four'\nrate_per_s")
    with pytest.raises(ValueError) as e:
        _native.validate_scenario(text, "my.toml", [])
    assert str(e.value).startswith("my.toml: vm[0].workload[0].threads")


def test_bad_override_is_rejected():
    with pytest.raises(ValueError, match="vm\\[0\\].pin"):
        _native.validate_scenario(BUILTINS["two-vms-one-pcpu"], "x", ["vm[0].pin=[7]"])


def quick_ns(name: str, default_ns: int) -> int:
    """A built-in whose timeline (phases, re-pinning) outlasts a short run names the
    shortest run that covers it, `paper.quick_ms`."""
    quick_ms = tomllib.loads(BUILTINS[name]).get("paper", {}).get("quick_ms")
    return round(quick_ms * 1e6) if quick_ms else default_ns


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_runs_with_invariants_checked(name):
    summary, _ = _native.run_scenario(BUILTINS[name], name, [], None, quick_ns(name, 200_000_000), True, False, None, None)
    data = json.loads(summary)
    assert data["scenario"] == name
    # CPU time is conserved per vCPU: running + steal + halted = duration.
    for vm in data["vms"]:
        for v in vm["vcpus"]:
            assert v["cpu_time_ns"] + v["steal_ns"] + v["halted_ns"] == data["duration_ns"]


def test_same_seed_gives_identical_summary():
    run = lambda: _native.run_scenario(BUILTINS["default"], "default", [], 3, 300_000_000, False, False, None, None)[0]
    assert run() == run()


def test_cli_run_writes_summary(tmp_path):
    out = tmp_path / "r"
    subprocess.run([sys.executable, "-m", "vmsched.cli", "run", "two-vms-one-pcpu", "--out", str(out)], check=True, capture_output=True)
    data = json.loads((out / "summary.json").read_text())
    assert {"scenario", "seed", "duration_ns", "events", "vms", "workloads", "locks"} <= set(data)


def test_atomic_writes_get_the_usual_file_mode(tmp_path):
    import os
    from vmsched.atomic import write_atomic
    mask = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "x" / "out.json", "{}")
    finally:
        os.umask(mask)
    assert path.read_text() == "{}"
    assert (path.stat().st_mode & 0o777) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]
