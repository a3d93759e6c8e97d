"""A closed-loop server (`clients`, `think_us`) through the Python side: the one schema
rejects bad fields with file and field path (exit 2, nothing written), and a run keeps
no more requests in the machine than it has clients."""
from __future__ import annotations

import vmsched
from vmsched.api import Scenario

from conftest import assert_user_error

SERVER = """
name = "closed-loop"
duration_ms = 100
[[vm]]
name = "web"
vcpus = 2
[[vm.workload]]
kind = "server"
threads = 4
work_us = 200
"""


def test_clients_and_a_rate_are_refused_with_file_and_path(cli, tmp_path):
    scenario = tmp_path / "both.toml"
    scenario.write_text(SERVER + "clients = 8\nrate_per_s = 1000\n")
    out = tmp_path / "out"
    result = cli("run", scenario, "--out", out)
    assert_user_error(result, str(scenario), "vm[0].workload[0].clients", "mutually exclusive")
    assert not out.exists()


def test_a_negative_think_time_is_refused_with_its_path(cli, tmp_path):
    scenario = tmp_path / "think.toml"
    scenario.write_text(SERVER + "clients = 8\nthink_us = -5\n")
    out = tmp_path / "out"
    result = cli("run", scenario, "--out", out)
    assert_user_error(result, str(scenario), "vm[0].workload[0].think_us")
    assert not out.exists()


def test_clients_bound_the_requests_in_flight():
    result = vmsched.run(Scenario(SERVER + "clients = 3\nthink_us = 50\n", "closed-loop"), seed=4)
    web = result.summary["workloads"][0]
    assert web["completed"] > 100 and web["dropped"] == 0
    assert web["backlog_max"] <= 3
    # Never more than 3 requests between arrival and reply at any instant.
    edges = sorted([(t, 1) for t in result.requests["arrival_ns"].to_list()] + [(t, -1) for t in result.requests["end_ns"].to_list()])
    in_flight = most = 0
    for _, step in edges:
        in_flight += step
        most = max(most, in_flight)
    assert most <= 3
