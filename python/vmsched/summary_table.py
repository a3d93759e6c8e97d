"""The human summary of one run: host, per-VM, per-workload and lock tables."""
from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .terminal import make_console


def format_ns(ns: float | None) -> str:
    """A duration in the unit that keeps three significant figures readable."""
    if ns is None:
        return "–"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def format_count(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def steal_fraction(vm: dict, duration_ns: int) -> float:
    """Steal as a fraction of the VM's vCPU-time: what `top` inside the guest shows as %st."""
    vcpu_time = duration_ns * max(len(vm.get("vcpus", [])), 1)
    return vm["steal_ns"] / vcpu_time if vcpu_time else 0.0


def _name_width(names) -> int:
    """Names are what a reader scans for: keep them whole up to a reasonable width."""
    return min(max((len(name) for name in names), default=0), 24)


def _host_line(summary: dict) -> Text:
    host = summary["host"]
    capacity = host["pcpus"] * summary["duration_ns"]
    busy = host["busy_ns"] / capacity if capacity else 0.0
    return Text.assemble(
        (summary["scenario"], "bold"), f"  seed {summary['seed']}",
        f"  simulated {format_ns(summary['duration_ns'])}",
        f"  events {summary['events']:,}",
        f"  host {host['policy']} on {host['pcpus']} pCPUs, {busy:.1%} busy")


def _vm_table(summary: dict) -> Table:
    table = Table(title="VMs", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  caption="share and entitled in pCPUs; steal as a fraction of vCPU time", caption_justify="left")
    for header in ("VM", "vCPUs", "share", "entitled", "used", "steal", "ctx sw", "migr", "wakeups", "IPIs"):
        table.add_column(header, justify="left" if header == "VM" else "right", no_wrap=True,
                         min_width=_name_width(vm["name"] for vm in summary["vms"]) if header == "VM" else None)
    for vm in summary["vms"]:
        ratio = vm["share"] / vm["entitlement"] if vm["entitlement"] else None
        table.add_row(
            vm["name"], str(len(vm.get("vcpus", []))), f"{vm['share']:.3f}",
            f"{vm['entitlement']:.3f}", "–" if ratio is None else f"{ratio:.0%}",
            f"{steal_fraction(vm, summary['duration_ns']):.1%}",
            format_count(vm["context_switches"]), format_count(vm["migrations"]),
            format_count(vm.get("wakeups")), format_count(sum(vm.get("ipis", {}).values())))
    return table


def _workload_table(summary: dict) -> Table:
    table = Table(title="Workloads", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for header in ("workload", "VM", "done", "per s", "p50", "p99", "max", "CPU time"):
        table.add_column(header, justify="left" if header in ("workload", "VM") else "right",
                         no_wrap=True, min_width=_name_width(
                             w["name"] for w in summary["workloads"]) if header == "workload" else None)
    for workload in summary["workloads"]:
        latency = workload.get("latency_ns") or {}
        table.add_row(
            workload["name"], workload["vm"], format_count(workload["completed"]),
            f"{workload['throughput_per_s']:,.4g}", format_ns(latency.get("p50")),
            format_ns(latency.get("p99")), format_ns(latency.get("max")),
            format_ns(workload.get("cpu_time_ns")))
    return table


def _lock_table(summary: dict) -> Table:
    table = Table(title="Locks", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for header in ("VM", "lock-holder preempted", "lock-waiter preempted", "spin time"):
        table.add_column(header, justify="left" if header == "VM" else "right")
    for vm, locks in summary["locks"].items():
        table.add_row(vm, format_count(locks["lhp_count"]), format_count(locks["lwp_count"]),
                      format_ns(locks["spin_ns"]))
    return table


def render(summary: dict) -> Group:
    parts = [_host_line(summary), _vm_table(summary)]
    if summary["workloads"]:
        parts.append(_workload_table(summary))
    if summary.get("locks"):
        parts.append(_lock_table(summary))
    return Group(*parts)


def print_summary(summary: dict, console: Console | None = None) -> None:
    (console or make_console()).print(render(summary))
