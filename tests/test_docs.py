"""The scenario example in docs/scenario.md is valid and means what it says."""
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
