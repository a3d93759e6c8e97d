"""The headline metrics of a run, with units and the better direction, as shown side by
side by `vmsched compare` and in the HTML report's summary table."""
from __future__ import annotations

from dataclasses import dataclass

from .summary_table import steal_fraction

HIGHER, LOWER, NEUTRAL = "↑", "↓", ""


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: str
    value: float | None


def headline_metrics(summary: dict) -> list[Metric]:
    duration = summary["duration_ns"]
    host = summary["host"]
    capacity = host["pcpus"] * duration
    rows = [Metric("host: busy", "%", NEUTRAL, 100 * host["busy_ns"] / capacity if capacity else None)]
    for vm in summary["vms"]:
        name = vm["name"]
        rows += [
            Metric(f"{name}: CPU share", "pCPUs", HIGHER, vm["share"]),
            Metric(f"{name}: entitlement", "pCPUs", NEUTRAL, vm["entitlement"]),
            Metric(f"{name}: steal", "%", LOWER, 100 * steal_fraction(vm, duration)),
            Metric(f"{name}: context switches", "count", LOWER, vm["context_switches"]),
            Metric(f"{name}: migrations", "count", LOWER, vm["migrations"]),
        ]
        pending = vm.get("interrupts", {}).get("pending_ns_mean")
        if pending is not None:
            rows.append(Metric(f"{name}: interrupt pending (mean)", "µs", LOWER, pending / 1e3))
    for workload in summary["workloads"]:
        name = workload["name"]
        rows += [
            Metric(f"{name}: completed", "count", HIGHER, workload["completed"]),
            Metric(f"{name}: throughput", "/s", HIGHER, workload["throughput_per_s"]),
        ]
        latency = workload.get("latency_ns")
        if latency:
            rows += [Metric(f"{name}: latency {q}", "µs", LOWER, latency[q] / 1e3)
                     for q in ("p50", "p95", "p99", "max")]
    for vm, locks in summary.get("locks", {}).items():
        rows += [
            Metric(f"{vm}: lock-holder preemptions", "count", LOWER, locks["lhp_count"]),
            Metric(f"{vm}: lock-waiter preemptions", "count", LOWER, locks["lwp_count"]),
            Metric(f"{vm}: spin time", "ms", LOWER, locks["spin_ns"] / 1e6),
        ]
    return rows


def format_value(value: float | None) -> str:
    if value is None:
        return "–"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{value:,.0f}"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base


def change(value: float | None, base: float | None, better: str) -> tuple[str, str]:
    """How `value` differs from the reference `base`, as (text, verdict): a ratio such as
    ×1.234, or, where the reference is zero and a ratio means nothing, the absolute
    difference such as +387. The verdict is "better", "worse" or "" (no direction, or
    no change), from the metric's better direction (↑ or ↓)."""
    if value is None or base is None:
        return "–", ""
    factor = ratio(value, base)
    if factor is not None:
        text, unchanged = f"×{factor:.3f}", abs(factor - 1) < 1e-3
    else:
        text, unchanged = ("=" if value == 0 else f"{value - base:+,.4g}"), value == base
    if better == "" or unchanged:
        return text, ""
    return text, "better" if (value > base) == (better == "↑") else "worse"
