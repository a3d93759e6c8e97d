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
