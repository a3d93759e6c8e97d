"""The twin of a probed VM: a scenario whose VM has the vCPUs `vmsched probe`
measured, so vSched (or any guest policy) can be tried on it in the simulator
(`vmsched probe --scenario OUT.toml`, then `vmsched run OUT.toml`).

What the report gives and how it becomes the scenario (docs/vsched.md, "Twin"):

- topology groups (vtop): each socket group is a host socket, each SMT group
  inside it a core, each stacked group inside that a hardware thread; the
  vCPUs of a stacked group are pinned to the same hardware thread. The latency
  levels vtop measured become the host's cache-line distances.
- core speed (vcap's heavy phase, `core_rate_units_per_us`): the capacity of
  each core, relative to the fastest, with the simulated SMT slowdown divided
  out where the core holds two busy vCPUs, as the heavy phase ran on all vCPUs
  at once.
- share of the core and vCPU latency (vcap's light phase and vact): a vCPU
  (or stacked group) that lost part of its core gets a one-vCPU competing VM
  pinned on its hardware thread, running a CPU hog throttled by CFS bandwidth
  control to the lost fraction, with a quota equal to the measured inactive
  period (the paper's own way of shaping capacity and latency, §5.1), and a
  host weight large enough that CFS fairness lets it take that fraction.
"""
from __future__ import annotations

import math
from typing import Any

import tomli_w

# The simulator's defaults the mapping divides out or respects; they are the
# schema's defaults (crates/sim/src/scenario/) and are written into the twin
# so that the file states them.
SMT_FACTOR = 0.65
# CFS bandwidth control accepts quotas of at least 1 ms (min_cfs_quota_period,
# kernel/sched/core.c) and periods of at most 1 s (max_cfs_quota_period).
MIN_QUOTA_MS = 1.0
MAX_PERIOD_MS = 1000.0
# Host CFS group weights (MIN_SHARES..MAX_SHARES, kernel/sched/sched.h).
NICE_0_WEIGHT = 1024
MAX_WEIGHT = 262144
# A hardware thread whose vCPUs kept at least this share is dedicated: the
# twin resolves contention to 1% of a core, below which a competing VM's
# 1 ms minimum quota would only add long, rare gaps that were not measured.
DEDICATED_SHARE = 0.99


class TwinError(ValueError):
    """The report cannot be turned into a scenario (the message says why)."""


def _groups(topology: dict, level: str, cpus: list[int]) -> list[list[int]]:
    groups = topology.get("groups", {}).get(level)
    if not groups:
        raise TwinError(f"topology.groups.{level}: missing or empty")
    seen = sorted(c for g in groups for c in g)
    if seen != sorted(cpus):
        raise TwinError(f"topology.groups.{level}: does not partition the probed CPUs {cpus}")
    return sorted((sorted(g) for g in groups), key=lambda g: g[0])


def _inside(inner: list[list[int]], outer: list[int]) -> list[list[int]]:
    members = [g for g in inner if set(g) <= set(outer)]
    if sorted(c for g in members for c in g) != sorted(outer):
        raise TwinError("topology.groups: the stacked, SMT and socket groups are not nested")
    return members


def _share(report: dict, cpu: int) -> tuple[float, float]:
    """(share of the core, mean inactive period in ms) over the whole probe."""
    key = str(cpu)
    lat = report.get("latency", {}).get(key)
    detail = report.get("capacity_detail", {}).get(key)
    if lat is None or detail is None:
        raise TwinError(f"latency/capacity_detail: CPU {cpu} was not sampled")
    observed, stolen = lat.get("observed_ms") or 0.0, lat.get("gap_steal_ms") or 0.0
    share = 1.0 - stolen / observed if observed > 0 else float(detail.get("share") or 1.0)
    inactive_ms = float(lat.get("inactive_avg_us") or 0.0) / 1e3
    if not lat.get("preemptions"):
        inactive_ms = 0.0
    return min(max(share, 0.0), 1.0), inactive_ms


def _competitor(name: str, pcpu: int, lost: float, members: int, inactive_ms: float) -> dict:
    """A one-vCPU VM on `pcpu` taking `lost` of it in `inactive_ms` runs."""
    quota = max(inactive_ms, MIN_QUOTA_MS)
    period = min(quota / lost, MAX_PERIOD_MS)
    quota = min(quota, period)
    # CFS gives the competitor w / (w + members x 1024) of the core; raise w
    # until that fair share reaches the fraction the bandwidth limit allows.
    weight = max(NICE_0_WEIGHT, math.ceil(NICE_0_WEIGHT * members * lost / (1.0 - lost)))
    return {
        "name": name,
        "vcpus": 1,
        "pin": [pcpu],
        "weight": min(weight, MAX_WEIGHT),
        "bandwidth": {"quota_ms": round(quota, 3), "period_ms": round(period, 3), "per": "vcpu"},
        "workload": [{"kind": "hog", "threads": 1}],
    }


def twin_scenario(report: dict, name: str = "twin", duration_ms: int = 2000) -> dict[str, Any]:
    """The scenario (as a dict in the schema's shape) of the VM in `report`."""
    if report.get("schema") != "vmsched.probe/1":
        raise TwinError("schema: not a vmsched.probe/1 report")
    cpus = list(report.get("cpus") or [])
    topology = report.get("topology")
    if not cpus or not topology:
        raise TwinError("topology: the report has no topology (probe without --only)")
    if not report.get("capacity_detail"):
        raise TwinError("capacity_detail: the report has no capacity sampling (probe without --only)")
    sockets = _groups(topology, "socket", cpus)
    smt = _groups(topology, "smt", cpus)
    stacked = _groups(topology, "stacked", cpus)
    # Host shape: socket -> cores (SMT groups) -> threads (stacked groups).
    layout = [[_inside(stacked, core) for core in _inside(smt, socket)] for socket in sockets]
    cores_per_socket = max(len(s) for s in layout)
    threads_per_core = max(len(core) for s in layout for core in s)
    ncores = len(layout) * cores_per_socket
    pin: dict[int, int] = {}
    thread_members: dict[int, list[int]] = {}
    core_cpus: dict[int, list[int]] = {}
    for s, socket in enumerate(layout):
        for c, core in enumerate(socket):
            core_id = s * cores_per_socket + c
            core_cpus[core_id] = [cpu for group in core for cpu in group]
            for t, group in enumerate(core):
                # pCPU p and p + ncores are SMT siblings (crates/sim/src/machine.rs).
                pcpu = core_id + t * ncores
                thread_members[pcpu] = group
                for cpu in group:
                    pin[cpu] = pcpu
    # Core speeds from the heavy phase's rates.
    rate = {}
    for cpu in cpus:
        value = report["capacity_detail"].get(str(cpu), {}).get("core_rate_units_per_us")
        if value is None or not value > 0:
            raise TwinError(f"capacity_detail.{cpu}.core_rate_units_per_us: no rate was measured")
        rate[cpu] = float(value)
    speed = {}
    for core_id, members in core_cpus.items():
        smt_busy = sum(1 for t in range(threads_per_core) if core_id + t * ncores in thread_members) > 1
        speed[core_id] = max(rate[c] for c in members) / (SMT_FACTOR if smt_busy else 1.0)
    fastest = max(speed.values())
    core_capacity = [max(1, round(1024 * speed[c] / fastest)) if c in speed else 1024 for c in range(ncores)]
    host: dict[str, Any] = {
        "sockets": len(layout),
        "cores_per_socket": cores_per_socket,
        "threads_per_core": threads_per_core,
        "core_capacity": core_capacity,
        "smt_factor": SMT_FACTOR,
    }
    distances = {f"{level['class']}_ns": max(1, round(level["center_ns"])) for level in topology.get("levels", [])
                 if level.get("class") in ("smt", "socket", "cross_socket")}
    if distances:
        host["distances"] = distances
    vm = {
        "name": "probed",
        "vcpus": len(cpus),
        "pin": [pin[cpu] for cpu in cpus],
        "guest": {"policy": "vsched", "hz": 1000},
    }
    vms = [vm]
    for pcpu, members in sorted(thread_members.items()):
        shares = [_share(report, cpu) for cpu in members]
        kept = sum(s for s, _ in shares)
        if kept >= DEDICATED_SHARE:
            continue
        inactive = [ms for _, ms in shares if ms > 0]
        inactive_ms = sum(inactive) / len(inactive) if inactive else MIN_QUOTA_MS
        vms.append(_competitor(f"contention-p{pcpu}", pcpu, 1.0 - kept, len(members), inactive_ms))
    described = ", ".join(f"vCPU {i} (CPU {cpu}) on pCPU {pin[cpu]}" for i, cpu in enumerate(cpus))
    return {
        "name": name,
        "description": f"Twin of a VM probed by vmsched probe at Unix time {report.get('timestamp', 0):.0f}: "
                       f"{described}; contention as bandwidth-limited competing VMs",
        "duration_ms": duration_ms,
        "host": host,
        "vm": vms,
    }


def twin_toml(report: dict, name: str = "twin", duration_ms: int = 2000) -> str:
    header = (
        "# Written by `vmsched probe --scenario`: the probed VM as a simulated one.\n"
        "# Add workloads under [[vm]] \"probed\" ([[vm.workload]]) and run it with\n"
        "# `vmsched run`; docs/vsched.md (\"Twin\") says how each measurement maps.\n"
    )
    return header + tomli_w.dumps(twin_scenario(report, name, duration_ms))
