"""The human summary of one run: host, per-VM, per-workload and lock tables.

The tables are drawn by rich. Where the output has no colour (a pipe, a file: what
scripts and benchmarks see) and every table fits the console's width, the same
characters are written directly: rich's general layout costs about a millisecond a row,
a sixth of a whole run of the 64-pCPU peer case (`vmsched bench --peer`), to reach lines
whose layout is fixed here (tests/test_summary_table.py compares the two over random
summaries and widths). Printed through the command line's console before anything
else made it a rich one, those lines do not load rich at all (terminal.py)."""
from __future__ import annotations

from dataclasses import dataclass

from .terminal import LazyConsole, cell_width, make_console, unchanged_by_rich


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


@dataclass
class _Column:
    header: str
    right: bool
    no_wrap: bool = True
    min_width: int | None = None


@dataclass
class _Table:
    title: str
    columns: list[_Column]
    rows: list[tuple[str, ...]]
    caption: str | None = None


def _host_parts(summary: dict) -> tuple[str, str]:
    """The host line: the scenario's name (bold), then the rest."""
    host = summary["host"]
    capacity = host["pcpus"] * summary["duration_ns"]
    busy = host["busy_ns"] / capacity if capacity else 0.0
    return summary["scenario"], (f"  seed {summary['seed']}  simulated {format_ns(summary['duration_ns'])}"
                                 f"  events {summary['events']:,}"
                                 f"  host {host['policy']} on {host['pcpus']} pCPUs, {busy:.1%} busy")


def _vm_table(summary: dict) -> _Table:
    name_width = _name_width(vm["name"] for vm in summary["vms"])
    columns = [_Column(header, right=header != "VM", min_width=name_width if header == "VM" else None)
               for header in ("VM", "vCPUs", "share", "entitled", "used", "steal", "ctx sw", "migr", "wakeups", "IPIs")]
    rows = []
    for vm in summary["vms"]:
        ratio = vm["share"] / vm["entitlement"] if vm["entitlement"] else None
        rows.append((
            vm["name"], str(len(vm.get("vcpus", []))), f"{vm['share']:.3f}",
            f"{vm['entitlement']:.3f}", "–" if ratio is None else f"{ratio:.0%}",
            f"{steal_fraction(vm, summary['duration_ns']):.1%}",
            format_count(vm["context_switches"]), format_count(vm["migrations"]),
            format_count(vm.get("wakeups")), format_count(sum(vm.get("ipis", {}).values()))))
    return _Table("VMs", columns, rows, caption="share and entitled in pCPUs; steal as a fraction of vCPU time")


def _workload_table(summary: dict) -> _Table:
    name_width = _name_width(w["name"] for w in summary["workloads"])
    columns = [_Column(header, right=header not in ("workload", "VM"),
                       min_width=name_width if header == "workload" else None)
               for header in ("workload", "VM", "done", "per s", "p50", "p99", "max", "CPU time")]
    rows = []
    for workload in summary["workloads"]:
        latency = workload.get("latency_ns") or {}
        rows.append((
            workload["name"], workload["vm"], format_count(workload["completed"]),
            f"{workload['throughput_per_s']:,.4g}", format_ns(latency.get("p50")),
            format_ns(latency.get("p99")), format_ns(latency.get("max")),
            format_ns(workload.get("cpu_time_ns"))))
    return _Table("Workloads", columns, rows)


def _lock_table(summary: dict) -> _Table:
    columns = [_Column(header, right=header != "VM", no_wrap=False)
               for header in ("VM", "lock-holder preempted", "lock-waiter preempted", "spin time")]
    rows = [(vm, format_count(locks["lhp_count"]), format_count(locks["lwp_count"]), format_ns(locks["spin_ns"]))
            for vm, locks in summary["locks"].items()]
    return _Table("Locks", columns, rows)


def _tables(summary: dict) -> list[_Table]:
    tables = [_vm_table(summary)]
    if summary["workloads"]:
        tables.append(_workload_table(summary))
    if summary.get("locks"):
        tables.append(_lock_table(summary))
    return tables


def _rich_table(spec: _Table):
    from rich import box
    from rich.table import Table
    table = Table(title=spec.title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  caption=spec.caption, caption_justify="left")
    for column in spec.columns:
        table.add_column(column.header, justify="right" if column.right else "left", no_wrap=column.no_wrap,
                         min_width=column.min_width)
    for row in spec.rows:
        table.add_row(*row)
    return table


def _host_line(summary: dict):
    from rich.text import Text
    name, rest = _host_parts(summary)
    return Text.assemble((name, "bold"), rest)


def render(summary: dict):
    """The summary as one rich renderable."""
    from rich.console import Group
    return Group(_host_line(summary), *map(_rich_table, _tables(summary)))


def _plain_text(text: str) -> bool:
    """Text rich writes as it is: printable, no emoji code (`:name:`) to replace, and no
    space at either end for a wrapping column to trim."""
    return unchanged_by_rich(text)


def plain_table_lines(summary: dict, width: int) -> list[str] | None:
    """The summary's tables as rich draws them without colour on a console `width` cells
    wide, or None where their layout would not be the fixed one below: a table wider than
    the console (rich shrinks or wraps its columns), or text rich would change. A table
    is its title, a blank line, the header, a rule, the rows, a blank line and its
    caption, each line as wide as the table: one space at each edge, columns two spaces
    apart, each as wide as its widest cell (or its minimum width), names to the left and
    figures to the right."""
    lines = []
    for table in _tables(summary):
        cells = [tuple(column.header for column in table.columns), *table.rows]
        if not all(_plain_text(text) for row in cells for text in row):
            return None
        widths = [max(column.min_width or 0, *(cell_width(row[i]) for row in cells))
                  for i, column in enumerate(table.columns)]
        inner = sum(widths) + 2 * (len(widths) - 1)
        full = inner + 2
        if full > width or any(cell_width(text) > full for text in (table.title, table.caption or "")):
            return None

        def line(row: tuple[str, ...]) -> str:
            padded = [" " * (w - cell_width(text)) + text if column.right else text + " " * (w - cell_width(text))
                      for text, w, column in zip(row, widths, table.columns)]
            return " " + "  ".join(padded) + " "

        def whole(text: str) -> str:
            return text + " " * (full - cell_width(text))

        lines += [whole(table.title), " " * full, line(cells[0]), " " + "─" * inner + " ",
                  *map(line, table.rows), " " * full]
        if table.caption:
            lines.append(whole(table.caption))
    return lines


def print_summary(summary: dict, console=None) -> None:
    console = console or make_console()
    width = console.plain_width() if isinstance(console, LazyConsole) else None
    if width is not None:
        lines = plain_table_lines(summary, width)
        host_line = "".join(_host_parts(summary))
        if lines is not None and unchanged_by_rich(host_line) and cell_width(host_line) <= width:
            console.write_plain("\n".join([host_line, *lines]) + "\n")
            return
    if console.color_system is None:
        lines = plain_table_lines(summary, console.width)
        if lines is not None:
            # The host line as rich wraps it at the console's width, then the tables'
            # lines as they are (through the console, so that a capture sees them).
            console.print(_host_line(summary))
            console.out("\n".join(lines), highlight=False)
            return
    console.print(render(summary))
