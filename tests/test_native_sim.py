"""The simulator through its Python binding: schema errors carry the field
path, runs are deterministic, and the invariant checker runs on every
built-in scenario."""
import json
import subprocess
import sys
import tomllib
from pathlib import Path

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


GOLDEN = Path(__file__).resolve().parents[1] / "crates" / "sim" / "tests" / "golden"
GOLDEN_NS = 150_000_000  # the Rust golden test's run length


def golden_differences(want, got, path=""):
    """Paths where `got` differs from `want`, ignoring keys only `got` has (as the Rust
    golden test compares)."""
    if isinstance(want, dict) and isinstance(got, dict):
        return [d for key, value in want.items()
                for d in (golden_differences(value, got[key], f"{path}.{key}") if key in got else [f"{path}.{key} (missing)"])]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [d for i, (w, g) in enumerate(zip(want, got)) for d in golden_differences(w, g, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: {want} -> {got}"]


def test_the_installed_extension_gives_the_golden_summaries():
    """The extension as `make setup` builds it (release, for this machine's CPU) gives,
    value for value, the summaries the Rust golden test keeps from a portable debug
    build, for every built-in and variant: build flags change speed only."""
    from vmsched.comparison import builtin_cases

    mismatches, compared = [], 0
    for case, scenario, overrides in builtin_cases():
        try:
            summary, _ = _native.run_scenario(scenario.text, scenario.source, overrides, None, GOLDEN_NS, False, False, None, None)
        except ValueError as e:
            # A timeline that outlasts the golden run (the Rust test runs it cut
            # short; a user's run of that length is refused).
            assert "is not before the run's end" in str(e), e
            continue
        compared += 1
        got = json.loads(summary)
        want = json.loads((GOLDEN / f"{case}.json").read_text())
        if diffs := golden_differences(want, got):
            mismatches.append(f"{case}: {'; '.join(diffs[:3])}")
    assert compared > 0.9 * len(list(GOLDEN.glob("*.json"))), compared
    assert not mismatches, "\n".join(mismatches)
