"""`vmsched plan` end to end: the real CLI on files in a temporary directory."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vmsched import _native

VMSCHED = [sys.executable, "-c", "from vmsched.cli import main; main()"]
TABLE_LENGTH_NS = 102_702_600  # Tableau Sec. 5 hyperperiod


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*VMSCHED, *args], cwd=cwd, capture_output=True, text=False, timeout=120)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


CONTRACT_VMS = """
[[vm]]
name = "web"
vcpus = 2
utilization = 0.25
latency_ms = 20

[[vm]]
name = "db"
vcpus = 3
utilization = 0.6
latency_ms = 5
"""
CONTRACT_INPUT = "\n[host]\ncores = 4\n" + CONTRACT_VMS


def check_schema(table: dict) -> None:
    length = table["table_length_ns"]
    assert length == TABLE_LENGTH_NS
    for core in table["cores"]:
        assert isinstance(core["core"], int)
        for a in core["allocations"]:
            assert set(a) >= {"vm", "vcpu", "start_ns", "end_ns"}
            assert 0 <= a["start_ns"] < a["end_ns"] <= length
    for v in table["vcpus"]:
        assert set(v) >= {"vm", "vcpu", "utilization", "latency_ms", "period_ns", "budget_ns"}
        assert length % v["period_ns"] == 0
        assert v["budget_ns"] >= v["utilization"] * v["period_ns"] - 1e-6


def test_toml_plan_writes_a_verified_json_table(tmp_path: Path) -> None:
    src = write(tmp_path / "hosts.toml", CONTRACT_INPUT)
    result = run("plan", str(src), "--out", "table.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    table = json.loads((tmp_path / "table.json").read_text())
    check_schema(table)
    assert [(v["vm"], v["vcpu"]) for v in table["vcpus"]] == [("web", 0), ("web", 1), ("db", 0), ("db", 1), ("db", 2)]
    # Each vCPU gets at least U of the table.
    for index, v in enumerate(table["vcpus"]):
        served = sum(a["end_ns"] - a["start_ns"] for c in table["cores"] for a in c["allocations"]
                     if (a["vm"], a["vcpu"]) == (v["vm"], v["vcpu"]))
        assert served >= v["utilization"] * TABLE_LENGTH_NS - 1e-6, index
    out = result.stdout.decode()
    for needle in ("per-core reservation", "splits (C=D)", "clusters", "table size", "planning time", "verifier: PASS"):
        assert needle in out
    assert _native.verify_table_json((tmp_path / "table.json").read_text()) == []


def test_json_input_and_stdout_output_match_toml(tmp_path: Path) -> None:
    doc = {"host": {"cores": 4}, "vm": [
        {"name": "web", "vcpus": 2, "utilization": 0.25, "latency_ms": 20},
        {"name": "db", "vcpus": 3, "utilization": 0.6, "latency_ms": 5}]}
    src_json = write(tmp_path / "hosts.json", json.dumps(doc))
    src_toml = write(tmp_path / "hosts.toml", CONTRACT_INPUT)
    from_json = run("plan", str(src_json), "--out", "-", cwd=tmp_path)
    from_toml = run("plan", str(src_toml), "--out", "-", cwd=tmp_path)
    assert from_json.returncode == 0 and from_toml.returncode == 0
    assert from_json.stdout == from_toml.stdout  # same structure, same table, byte for byte
    check_schema(json.loads(from_json.stdout))
    assert b"verifier: PASS" in from_json.stderr


def test_planning_is_deterministic(tmp_path: Path) -> None:
    src = write(tmp_path / "hosts.toml", CONTRACT_INPUT)
    for name in ("a.bin", "b.bin"):
        assert run("plan", str(src), "--out", name, "--format", "bin", cwd=tmp_path).returncode == 0
    a, b = (tmp_path / "a.bin").read_bytes(), (tmp_path / "b.bin").read_bytes()
    assert a == b
    assert a[:8] == b"VMSTABLE"
    assert int.from_bytes(a[8:10], "little") == 1
    decoded = json.loads(_native.binary_table_to_json(a))
    check_schema(decoded)
    corrupt = bytearray(a)
    corrupt[20] ^= 0xFF
    with pytest.raises(ValueError, match="checksum"):
        _native.binary_table_to_json(bytes(corrupt))


def test_explain_shows_periods_and_splits(tmp_path: Path) -> None:
    src = write(tmp_path / "split.toml", '[host]\ncores = 2\n[[vm]]\nname = "v"\nvcpus = 3\nutilization = 0.6\nlatency_ms = 100\n')
    result = run("plan", str(src), "--out", "t.json", "--explain", cwd=tmp_path)
    assert result.returncode == 0
    out = result.stdout.decode()
    assert "split: v/2 into 2 pieces" in out
    assert "102702600" in out  # T = H for U = 0.6, L = 100 ms
    table = json.loads((tmp_path / "t.json").read_text())
    assert [v["placement"] for v in table["vcpus"]] == ["partitioned", "partitioned", "split"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[host]\ncores = 2\n[[vm]]\nname = "a"\nutilization = 0\n', "vm[0].utilization: 0 is outside (0, 1]"),
        ('[host]\ncores = 2\n[[vm]]\nname = "a"\n[[vm]]\nname = "b"\nutilization = 1.5\n', "vm[1].utilization: 1.5 is outside (0, 1]"),
        ('[host]\ncores = 1\n[[vm]]\nname = "a"\nvcpus = 3\nutilization = 0.5\n', "vm: total utilization 1.500000 exceeds the 1 guest cores"),
        ('[host]\ncores = 2\n[[vm]]\nname = "a"\nutilization = 0.5\nlatency_ms = 0.01\n', "vm[0].latency_ms: 0.01 ms cannot be enforced"),
        ('[host]\ncores = 2\n[[host.group]]\ncores = [0, 7]\n', "host.group[0].cores[1]: unknown core 7"),
        ('[host]\ncores = 2\n[[vm]]\nname = "a"\nlatency = 3\n', "vm[0].latency: unknown field `latency`, expected one of"),
    ],
)
def test_bad_input_is_rejected_with_file_field_and_fix(tmp_path: Path, text: str, expected: str) -> None:
    src = write(tmp_path / "bad.toml", text)
    result = run("plan", str(src), "--out", "t.json", cwd=tmp_path)
    assert result.returncode != 0
    err = result.stderr.decode()
    assert err.startswith(f"error: {src}: "), err
    assert expected in err, err
    assert not (tmp_path / "t.json").exists()


def test_unreadable_and_unknown_inputs_fail(tmp_path: Path) -> None:
    missing = run("plan", str(tmp_path / "nope.toml"), "--out", "t.json", cwd=tmp_path)
    assert missing.returncode != 0 and b"cannot read" in missing.stderr
    odd = write(tmp_path / "hosts.yaml", "host: {}")
    result = run("plan", str(odd), "--out", "t.json", cwd=tmp_path)
    assert result.returncode != 0 and b"use a .toml or .json file" in result.stderr


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plan" / "tableau-fig3-176-vms.toml"


def test_the_shipped_example_is_the_papers_figure_3_case_and_plans(tmp_path: Path) -> None:
    """examples/plan/tableau-fig3-176-vms.toml (docs/plan.md): Tableau Sec. 7.1, 176 VMs at
    U = 0.25 on 44 guest cores of 48, four kept for dom0; full load, no split, no cluster."""
    assert EXAMPLE.name in (EXAMPLE.parents[2] / "docs" / "plan.md").read_text()
    result = run("plan", str(EXAMPLE), "--out", "t.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    table = json.loads((tmp_path / "t.json").read_text())
    check_schema(table)
    report = json.loads(_native.plan_table(EXAMPLE.read_text(), "toml")[2])
    assert report["verified"] and report["splits"] == [] and report["clusters"] == []
    assert len(report["cores"]) == 44 and all(abs(c["utilization"] - 1.0) < 1e-12 for c in report["cores"])
    assert {core["core"] for core in report["cores"]} == set(range(4, 48))



@pytest.mark.parametrize("goal_ms", [1, 30, 60, 100])
def test_the_paper_example_plans_within_figure_4s_bound(tmp_path: Path, goal_ms: int) -> None:
    # Tableau section 7.1, Fig. 4: tables of 176 VMs on 44 cores stay below 1.2 MiB.
    text = EXAMPLE.read_text().replace("\ndefault_latency_ms = 1\n", f"\ndefault_latency_ms = {goal_ms}\n")
    src = write(tmp_path / "fig3.toml", text)
    result = run("plan", str(src), "--out", "t.bin", "--format", "bin", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    size = (tmp_path / "t.bin").stat().st_size
    assert size < 1.2 * 1024 * 1024
    assert f"table size: {size} bytes" in result.stdout.decode()

# The same VMs in a simulator scenario on 2 sockets x 2 cores.
SCENARIO_WITH_RESERVATIONS = """
name = "tableau-host"
duration_ms = 100
[host]
sockets = 2
cores_per_socket = 2
""" + CONTRACT_VMS


def test_a_simulator_scenario_plans_like_the_equivalent_planner_input(tmp_path: Path) -> None:
    scenario = write(tmp_path / "scenario.toml", SCENARIO_WITH_RESERVATIONS)
    planner = write(tmp_path / "planner.toml", CONTRACT_INPUT.replace("cores = 4", "cores = 4\ngroup = [{ cores = [0, 1] }, { cores = [2, 3] }]"))
    a = run("plan", str(scenario), "--out", "-", cwd=tmp_path)
    b = run("plan", str(planner), "--out", "-", cwd=tmp_path)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_a_scenario_with_a_bad_reservation_names_the_field(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.toml", SCENARIO_WITH_RESERVATIONS.replace("utilization = 0.6", "utilization = 1.6"))
    result = run("plan", str(bad), "--out", str(tmp_path / "t.json"), cwd=tmp_path)
    assert result.returncode != 0
    assert b"bad.toml: vm[1].utilization" in result.stderr
    assert not (tmp_path / "t.json").exists()
