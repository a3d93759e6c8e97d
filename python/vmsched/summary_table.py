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

from .terminal import LazyConsole, cell_width, make_console, unchanged_by_rich, wrapped


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


def plain_table_lines(summary: dict, width: int) -> list[str] | None:
    """The summary's tables as rich draws them without colour on a console `width` cells
    wide, or None where their layout would not be the fixed one below: a table whose
    columns wrap and that is wider than the console, or text rich would change. A table
    is its title, a blank line, the header, a rule, the rows, a blank line and its
    caption, each line as wide as the table: one space at each edge, columns two spaces
    apart, each as wide as its widest cell (or its minimum width), names to the left and
    figures to the right; a table of unwrapped columns too wide for the console has its
    columns narrowed as rich narrows them (`_narrowed`), a cell cut to its column's width
    ending in an ellipsis."""
    lines = []
    for table in _tables(summary):
        cells = [tuple(column.header for column in table.columns), *table.rows]
        if not all(unchanged_by_rich(text) for row in cells for text in row):
            return None
        widths = [max(column.min_width or 0, *(cell_width(row[i]) for row in cells))
                  for i, column in enumerate(table.columns)]
        if sum(widths) + 2 * (len(widths) - 1) + 2 > width:
            widths = _narrowed(widths, table, width)
            if widths is None:
                return None
        inner = sum(widths) + 2 * (len(widths) - 1)
        full = inner + 2
        if full > width or any(cell_width(text) > full for text in (table.title, table.caption or "")):
            return None

        def fitted(text: str, w: int) -> str | None:
            """`text` in `w` cells: cut to w - 1 and an ellipsis where longer (rich's
            Text.truncate), None where its characters are not one cell each."""
            if cell_width(text) <= w:
                return text
            return text[:w - 1] + "…" if len(text) == cell_width(text) else None

        def line(row: tuple[str, ...]) -> str | None:
            texts = [fitted(text, w) for text, w in zip(row, widths)]
            if None in texts:
                return None
            padded = [" " * (w - cell_width(text)) + text if column.right else text + " " * (w - cell_width(text))
                      for text, w, column in zip(texts, widths, table.columns)]
            return " " + "  ".join(padded) + " "

        def whole(text: str) -> str:
            return text + " " * (full - cell_width(text))

        rows = [line(row) for row in cells]
        if None in rows:
            return None
        lines += [whole(table.title), " " * full, rows[0], " " + "─" * inner + " ", *rows[1:], " " * full]
        if table.caption:
            lines.append(whole(table.caption))
    return lines


def _narrowed(widths: list[int], table: _Table, width: int) -> list[int] | None:
    """The columns' text widths rich gives a table of unwrapped columns wider than the
    console (rich/table.py, Table._calculate_column_widths): the excess is taken from the
    columns evenly, each column's share rounded as rich/_ratio.py's ratio_reduce rounds
    it, then each column is measured again within its width and held to its minimum
    width. A column's width there counts the one space of padding on its right (not the
    last column's: the table's edge has none). None where rich would lay the table out
    otherwise: a column that wraps, a column left too narrow for a cut cell, or columns
    still wider together than the console (rich crops the lines)."""
    if not all(column.no_wrap for column in table.columns):
        return None
    pads = [1] * (len(widths) - 1) + [0]
    padded = [w + pad for w, pad in zip(widths, pads)]
    # The console's width less the edges and the rules between columns.
    available = width - (len(widths) + 1)
    remaining, shares, reduced = sum(padded) - available, sum(1 for w in padded if w), []
    for w in padded:
        if w and shares > 0:
            taken = min(w, round(remaining / shares))
            reduced.append(w - taken)
            remaining -= taken
            shares -= 1
        else:
            reduced.append(w)
    narrowed = [max(w, column.min_width + pad) if column.min_width is not None else w
                for w, pad, column in zip(reduced, pads, table.columns)]
    if sum(narrowed) > available or any(w - pad < 2 for w, pad in zip(narrowed, pads)):
        return None
    return [w - pad for w, pad in zip(narrowed, pads)]


def print_summary(summary: dict, console=None) -> None:
    console = console or make_console()
    width = console.plain_width() if isinstance(console, LazyConsole) else None
    if width is not None:
        lines = plain_table_lines(summary, width)
        host_line = "".join(_host_parts(summary))
        host_lines = wrapped(host_line, width) if unchanged_by_rich(host_line) else None
        if lines is not None and host_lines is not None:
            console.write_plain("\n".join([*host_lines, *lines]) + "\n")
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
