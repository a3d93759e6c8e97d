"""The references in docs/ are valid and complete: the scenario example validates, the
matrix policies are named, every summary.json key is described."""
import json
import re
from pathlib import Path

from vmsched import _native

DOC = Path(__file__).resolve().parents[1] / "docs" / "scenario.md"


def test_scenario_reference_example_validates():
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S).group(1)
    scenario = json.loads(_native.validate_scenario(block, "docs/scenario.md", []))
    vm = scenario["vm"][0]
    assert vm["pin"] == [0, 1, 2, 3]
    assert vm["bandwidth"]["per"] == "vcpu"
    assert vm["guest"]["llc_groups"] == [[0, 1], [2, 3]]
    assert vm["io_backend"] == {"kind": "vhost", "submit_cpu_ns": 1000, "complete_cpu_ns": 1000, "affinity": []}
    assert scenario["variants"]["fast-tick"] == {"host.hz": 1000}


def test_the_matrix_docs_name_the_policies_it_runs():
    """docs/sweep.md lists the host and guest policies of `reproduce --matrix`."""
    from vmsched.reproduce import guest_policies, host_policies
    text = (DOC.parent / "sweep.md").read_text()
    section = text[text.index("### The composition matrix"):]
    hosts, guests = host_policies(), guest_policies()
    assert f"{len(hosts)} host policies ({', '.join(f'`{name}`' for name in hosts)})" in " ".join(section.split())
    assert f"{len(guests)} guest policies ({', '.join(f'`{name}`' for name in guests)})" in " ".join(section.split())
    assert f"{len(hosts) * len(guests)} combinations" in section


def test_every_summary_key_is_in_the_outputs_reference():
    """docs/outputs.md names every key a run writes at the top of summary.json, under
    `host`, under each VM and under each workload (a host policy's own counters are
    `vms[].POLICY`: this run's host is plain CFS, so it has none)."""
    import vmsched
    text = (DOC.parent / "outputs.md").read_text()
    scenario = """
name = "keys"
duration_ms = 30
[host]
cores_per_socket = 2
[[vm]]
name = "a"
vcpus = 2
[vm.guest]
policy = "vsched"
[[vm.workload]]
kind = "server"
rate_per_s = 1000
[[vm]]
name = "b"
vcpus = 2
[vm.guest]
policy = "irs"
[[vm.workload]]
kind = "parallel"
threads = 2
sync = "spin_barrier"
"""
    summary = vmsched.run(vmsched.api.Scenario(scenario, "keys.toml"), seed=1, record=False).summary
    paths = ([key for key in summary] + [f"host.{key}" for key in summary["host"]]
             + [f"vms[].{key}" for vm in summary["vms"] for key in vm]
             + [f"workloads[].{key}" for workload in summary["workloads"] for key in workload])
    undocumented = sorted({path for path in paths if not any(
        name == path or name.startswith((path + ".", path + "[")) for name in _summary_reference_names())})
    assert not undocumented, undocumented


def _summary_reference_names() -> list[str]:
    """The field names of docs/outputs.md's summary.json table: each row's first cell
    (`.x` continues the path before it), and for a list row such as `workloads[]` the
    names its meaning cell gives."""
    text = (DOC.parent / "outputs.md").read_text()
    section = text[text.index("## summary.json"):text.index("## Parquet tables")]
    names = []
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        first, meaning = row.split(" | ")[:2]
        fields = re.findall(r"`([^`]+)`", first)
        parent = fields[0].rsplit(".", 1)[0]
        names += [parent + field if field.startswith(".") else field for field in fields]
        if fields[0].endswith("[]"):
            names += [f"{fields[0]}.{field}" for field in re.findall(r"`([^`]+)`", meaning)]
    return names
