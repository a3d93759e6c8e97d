"""The peer series of `vmsched bench --peer`: its scenarios are valid vmsched scenarios
of the model described in docs/peer.md, it is skipped (with a note) where tailtamer
cannot be imported, and where it can, a short run of each simulator gives the figures
the series compares."""
from __future__ import annotations

import json
import os

import pytest

from vmsched import api, peer


@pytest.mark.parametrize("pcpus, vms, duration_ms", peer.CASES)
def test_each_peer_case_is_the_model_at_its_size(pcpus, vms, duration_ms):
    config = api.normalize(api.Scenario(peer.scenario_text(pcpus, vms, duration_ms), peer.case_name(pcpus, vms)))
    assert len(config["vm"]) == vms and config["duration_ms"] == duration_ms
    # 10 vCPUs per 4 pCPUs, in groups of batch, web and hog.
    assert sum(vm["vcpus"] for vm in config["vm"]) * 4 == 10 * pcpus
    assert [vm["workload"][0]["kind"] for vm in config["vm"][:3]] == ["bursty", "server", "hog"]
    assert all(vm["guest"]["hrtick"] for vm in config["vm"])


def test_the_events_by_kind_add_up_to_the_events():
    result = api.run(api.Scenario(peer.scenario_text(4, 3, 200), "peer"), record=False)
    by_kind = result.summary["events_by_kind"]
    assert sum(by_kind.values()) == result.summary["events"]
    # Ticks at 10 kHz for 0.2 s: one host tick event for all pCPUs at a time,
    # where some pCPU's handler has something to decide (with 2 or 3 vCPUs a
    # pCPU and slices of 8 to 12 ms, few instants have).
    assert 0 < by_kind["host_tick"] < 2000 / 4
    # A replanned vCPU's progress event moves in place: a replaced plan is no event.
    assert "superseded" not in by_kind and result.summary["plans_superseded"] > 0


def test_the_peer_series_is_skipped_without_tailtamer(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "tailtamer", None)  # `import tailtamer` now raises ImportError
    assert peer.import_tailtamer(str(tmp_path)) is None


@pytest.mark.skipif(peer.import_tailtamer(os.environ.get("TAILTAMER_DIR")) is None,
                    reason="tailtamer is not importable (set TAILTAMER_DIR to a checkout)")
def test_tailtamer_runs_the_peer_model():
    figures = peer.run_tailtamer(peer.scenario_text(4, 3, 2000), os.environ.get("TAILTAMER_DIR"))
    # Four CPUs, ten vCPUs always wanting some: the shares fill the machine.
    assert 3.5 < sum(figures["vm_share"].values()) <= 4.0 + 1e-9
    assert set(figures["throughput_per_s"]) == {"batch0/bursty", "web1/server", "hog2/hog"}
    # The web VM is offered 1,000 requests/s, well within its share: it serves them.
    assert 800 < figures["throughput_per_s"]["web1/server"] < 1200
    json.dumps(figures)
