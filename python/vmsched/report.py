"""Self-contained HTML report of one run, or of several variants overlaid.

plotly.js is embedded once, inline, so the file opens without a network."""
from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from . import api
from .atomic import write_atomic
from .errors import UserError
from .metrics import change, format_value, headline_metrics
from .tables import read_tables

# Tables the report reads from a run directory, when present.
REPORT_TABLES = ("requests", "samples", "vcpu_states", "pcpu_slices", "task_slices")
STATE_COLORS = {"running": "#2ca02c", "preempted": "#d62728", "halted": "#c7c7c7"}
CDF_POINTS = 500  # points per latency CDF: enough to draw, small enough to embed
# The window re-run for the timelines of a run that was not traced.
DEFAULT_TIMELINE_NS = 50_000_000
# Bars in one timeline chart: a traced window is drawn whole (zoom in with the mouse) up to
# this many, and beyond it its first part that holds them, so that the page stays a few
# MB and the browser draws it in seconds.
TIMELINE_MAX_BARS = 40_000
# Above this many VMs a per-VM chart becomes small multiples (one panel per VM, shared
# axes) instead of one tangle of lines.
OVERLAY_MAX_VMS = 8
SMALL_MULTIPLE_COLUMNS = 4
# Samples averaged in the smoothed series (the raw series is one legend click away).
SMOOTHING_SAMPLES = 5


def _srgb_to_lab(color: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB colour #rrggbb (IEC 61966-2-1 and CIE 15 formulas)."""
    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(int(color[i:i + 2], 16)) for i in (1, 3, 5))
    xyz = (0.4124 * r + 0.3576 * g + 0.1805 * b, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           0.0193 * r + 0.1192 * g + 0.9505 * b)
    white = (0.95047, 1.0, 1.08883)

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29
    fx, fy, fz = (f(value / reference) for value, reference in zip(xyz, white))
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def color_distance(a: str, b: str) -> float:
    """CIE76 colour difference: about 2.3 is just noticeable, above 20 reads as another colour."""
    return math.dist(_srgb_to_lab(a), _srgb_to_lab(b))


def _hsl(hue: float, saturation: float, lightness: float) -> str:
    import colorsys
    r, g, b = colorsys.hls_to_rgb(hue / 360, lightness, saturation)
    return "#{:02x}{:02x}{:02x}".format(*(round(channel * 255) for channel in (r, g, b)))


MAX_LIGHTNESS = 65


def _distinct_colors(count: int) -> list[str]:
    """`count` colours chosen one by one, each the candidate farthest (CIE76) from those
    already chosen (Glasbey et al., "Colour displays for categorical images", 2007). The
    candidates are saturated and of middle lightness, so that every colour stands out
    from the white page and its grey grid and thin lines stay visible."""
    candidates = [_hsl(hue, saturation, lightness) for hue in range(0, 360, 6)
                  for saturation in (0.65, 0.9) for lightness in (0.3, 0.42, 0.55)]
    labs = {color: _srgb_to_lab(color) for color in candidates}
    # Dark enough to show as a thin line on white (CIELAB L* at most 65: no pale yellow).
    labs = {color: lab for color, lab in labs.items() if lab[0] <= MAX_LIGHTNESS}
    candidates = list(labs)
    chosen = [_hsl(210, 0.9, 0.42)]  # a blue first, the usual first series colour
    nearest = {color: math.dist(labs[color], labs[chosen[0]]) for color in candidates}
    while len(chosen) < count:
        best = max(nearest, key=nearest.get)
        chosen.append(best)
        nearest = {color: min(distance, math.dist(labs[color], labs[best]))
                   for color, distance in nearest.items() if color != best}
    return chosen


# VM i is drawn in colour i mod 16 and, from the 17th VM on, with the (i div 16)th
# pattern as well: a hatch on bars, a dash on lines. 16 colours keep clearly apart;
# 64 VMs get 64 distinct styles, and every trace names its VM on hover.
VM_PALETTE = _distinct_colors(16)
BAR_PATTERNS = ("", "/", ".", "x")
LINE_DASHES = ("solid", "dot", "dash", "dashdot")


@dataclass
class RunData:
    """What the report needs from one run."""
    label: str
    summary: dict
    config: dict
    frames: dict[str, pl.DataFrame] = field(default_factory=dict)
    # run.json without the scenario text and configuration: source, seed, overrides...
    meta: dict = field(default_factory=dict)

    def frame(self, name: str) -> pl.DataFrame:
        return self.frames.get(name, pl.DataFrame())


def load_run(run_dir: Path, label: str | None = None) -> RunData:
    summary = json.loads((run_dir / "summary.json").read_text())
    run_path = run_dir / "run.json"
    reproduce = json.loads(run_path.read_text()) if run_path.is_file() else {}
    meta = {key: value for key, value in reproduce.items() if key not in ("config", "scenario_text")}
    return RunData(label or summary["scenario"], summary, reproduce.get("config", {}),
                   read_tables(run_dir, REPORT_TABLES), meta)


def _table(headers: list[str], rows: list[list[str | tuple[str, str]]], numeric_from: int) -> str:
    """Cells are text, or (text, extra CSS class) such as a better/worse verdict."""
    def cell(i: int, value: str | tuple[str, str]) -> str:
        text, extra = value if isinstance(value, tuple) else (value, "")
        classes = " ".join(c for c in ("num" if i >= numeric_from else "", extra) if c)
        return f'<td class="{classes}">{html.escape(text)}</td>'
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(i, value) for i, value in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def summary_table_html(runs: list[RunData]) -> str:
    """Metrics as rows, runs as columns, each later run with its ratio to the first."""
    per_run = [headline_metrics(run.summary) for run in runs]
    base = per_run[0]
    headers = ["metric", "unit", "better"]
    for index, run in enumerate(runs):
        headers += [run.label] if index == 0 else [run.label, "change"]
    rows = []
    for position, metric in enumerate(base):
        row = [metric.name, metric.unit, metric.better, format_value(metric.value)]
        for metrics in per_run[1:]:
            other = next((m for m in metrics if m.name == metric.name), None)
            value = other.value if other else None
            row += [format_value(value), change(value, metric.value, metric.better)]
        rows.append(row)
    return _table(headers, rows, numeric_from=3)


def _figure_html(fig: go.Figure, first: bool) -> str:
    fig.update_layout(template="plotly_white", margin=dict(l=60, r=20, t=60, b=50))
    if fig.layout.height is None:
        fig.update_layout(height=380)
    return fig.to_html(full_html=False, include_plotlyjs=first, config={"displaylogo": False})


def _cdf_points(values: pl.Series) -> tuple[pl.Series, list[float]]:
    """At most CDF_POINTS (value, fraction at or below it) pairs of sorted `values`, the
    largest always included."""
    step = max(1, len(values) // CDF_POINTS)
    picked = values.gather_every(step).append(values.tail(1))
    ranks = [min(1.0, (i * step + 1) / len(values)) for i in range(len(picked) - 1)] + [1.0]
    return picked, ranks


def latency_cdfs(runs: list[RunData]) -> list[go.Figure]:
    """Every workload's latency CDF overlaid in one chart, in its VM's colour (a VM's
    workloads, and each run of a comparison, apart by dash); the queue wait and service
    parts are in the legend, where a click shows or hides a line and a double click
    shows it alone."""
    workloads = sorted({name for run in runs if not run.frame("requests").is_empty()
                        for name in run.frame("requests")["workload"].unique().to_list()})
    if not workloads:
        return []
    colors = vm_colors(runs)
    vm_of = {w["name"]: w.get("vm") for run in runs for w in run.summary["workloads"]}
    all_latency = [run.frame("requests")["latency_ns"] for run in runs if not run.frame("requests").is_empty()]
    latency_ns = pl.concat(all_latency) if all_latency else pl.Series("latency_ns", [], dtype=pl.Int64)
    positive = latency_ns.filter(latency_ns > 0)
    # One latency axis for every workload, so the CDFs compare at a glance.
    axis_range = None
    if positive.len():
        axis_range = [math.log10(positive.min() / 1e3), math.log10(positive.max() / 1e3)]
    fig = go.Figure()
    dash_in_vm: dict[str, int] = {}
    for workload in workloads:
        vm = vm_of.get(workload)
        color = colors.get(vm, VM_PALETTE[0])
        within = dash_in_vm[vm] = dash_in_vm.get(vm, -1) + 1
        for run_index, run in enumerate(runs):
            requests = run.frame("requests")
            if requests.is_empty():
                continue
            rows = requests.filter(pl.col("workload") == workload)
            if rows.is_empty():
                continue
            prefix = f"{run.label} · " if len(runs) > 1 else ""
            dash = LINE_DASHES[(within + run_index) % len(LINE_DASHES)]
            # Total latency, and its parts where the workload has them: waiting in the
            # queue (arrival to service start) and being served (start to end).
            for column, label in (("latency_ns", ""), ("queue_ns", " queue wait"), ("service_ns", " service")):
                if column not in rows.columns or rows[column].null_count() == rows.height:
                    continue
                values = rows[column].drop_nulls().sort()
                if values.is_empty() or (column != "latency_ns" and values.equals(rows["latency_ns"].sort())):
                    continue
                picked, ranks = _cdf_points(values)
                fig.add_trace(go.Scatter(x=(picked / 1e3).to_list(), y=ranks, mode="lines", line_shape="hv",
                                         line=dict(color=color, dash=dash, width=2 if column == "latency_ns" else 1),
                                         name=f"{prefix}{workload}{label}", legendgroup=f"{prefix}{workload}",
                                         hovertemplate=f"{html.escape(prefix + workload + label)}: "
                                                       "%{x:.4g} µs, %{y:.3f}<extra></extra>",
                                         visible=True if column == "latency_ns" else "legendonly"))
    fig.update_layout(title="Latency CDF per workload, in its VM's colour (queue wait and service in the legend; "
                            "click to hide, double-click to isolate)",
                      xaxis_title="latency (µs)", yaxis_title="fraction of requests", xaxis_type="log",
                      xaxis_range=axis_range, height=max(420, 22 * len(fig.data) // 3 + 200))
    return [fig]


def _metric_by_vm(run: RunData, metric: str) -> pl.DataFrame:
    """One row per (time, vm): the metric averaged over the VM's entities."""
    samples = run.frame("samples")
    if samples.is_empty():
        return samples
    return (samples.filter(pl.col("metric") == metric)
            .group_by("time_ns", "vm").agg(pl.col("value").mean()).sort("vm", "time_ns"))


def _vm_order(runs: list[RunData]) -> list[str]:
    return list(dict.fromkeys(vm["name"] for run in runs for vm in run.summary["vms"]))


def vm_colors(runs: list[RunData]) -> dict[str, str]:
    """The colour of each VM, the same in every chart (by its order in the first run)."""
    return {name: VM_PALETTE[i % len(VM_PALETTE)] for i, name in enumerate(_vm_order(runs))}


def vm_patterns(runs: list[RunData]) -> dict[str, int]:
    """The pattern index of each VM: 0 (plain) for the first 16, then 1, 2, 3."""
    return {name: (i // len(VM_PALETTE)) % len(BAR_PATTERNS) for i, name in enumerate(_vm_order(runs))}


def _smoothed(values: pl.Series) -> list[float]:
    return values.rolling_mean(SMOOTHING_SAMPLES, min_samples=1).to_list()


def _lines_by_vm(runs: list[RunData], metric: str, title: str, yaxis: str,
                 dashed_metric: str | None = None, dashed_label: str = "entitled", smooth: bool = True) -> go.Figure:
    """One line per VM in its colour, smoothed over a few samples, with the raw series
    hidden in the legend (`smooth`; else the raw series alone); the dashed metric
    (entitlement) in the same colour, named "VM dashed_label". Above OVERLAY_MAX_VMS VMs
    each VM gets its own panel."""
    colors = vm_colors(runs)
    vms = list(colors)
    multiples = len(vms) > OVERLAY_MAX_VMS
    if multiples:
        rows = -(-len(vms) // SMALL_MULTIPLE_COLUMNS)
        fig = make_subplots(rows=rows, cols=SMALL_MULTIPLE_COLUMNS, subplot_titles=vms, shared_xaxes=True,
                            shared_yaxes=True, vertical_spacing=min(0.08, 0.5 / rows), horizontal_spacing=0.03)
        fig.update_layout(height=220 * rows + 120, showlegend=False)
    else:
        fig = go.Figure()

    def place(vm: str) -> dict:
        if not multiples:
            return {}
        index = vms.index(vm)
        return {"row": index // SMALL_MULTIPLE_COLUMNS + 1, "col": index % SMALL_MULTIPLE_COLUMNS + 1}

    patterns = vm_patterns(runs)
    for run_index, run in enumerate(runs):
        prefix = f"{run.label} · " if len(runs) > 1 else ""
        for (vm,), rows in _metric_by_vm(run, metric).group_by("vm", maintain_order=True):
            # Runs apart by dash in a comparison; otherwise the VM's pattern (past 16 VMs).
            line = LINE_DASHES[(run_index if len(runs) > 1 else patterns.get(vm, 0)) % len(LINE_DASHES)]
            x = (rows["time_ns"] / 1e6).to_list()
            common = dict(mode="lines", legendgroup=f"{prefix}{vm}")
            fig.add_trace(go.Scatter(x=x, y=_smoothed(rows["value"]) if smooth else rows["value"].to_list(),
                                     name=f"{prefix}{vm}", line=dict(color=colors[vm], dash=line), **common),
                          **place(vm))
            if not smooth:
                continue
            fig.add_trace(go.Scatter(x=x, y=rows["value"].to_list(), name=f"{prefix}{vm} raw", visible="legendonly",
                                     line=dict(color=colors[vm], width=1, dash=line), opacity=0.5, **common),
                          **place(vm))
        if dashed_metric:
            for (vm,), rows in _metric_by_vm(run, dashed_metric).group_by("vm", maintain_order=True):
                fig.add_trace(go.Scatter(x=(rows["time_ns"] / 1e6).to_list(), y=rows["value"].to_list(),
                                         mode="lines", legendgroup=f"{prefix}{vm}", name=f"{prefix}{vm} {dashed_label}",
                                         line=dict(color=colors[vm], dash="dash", width=1)), **place(vm))
    subtitle = f" (mean of {SMOOTHING_SAMPLES} samples; raw series in the legend)" if smooth and not multiples else ""
    fig.update_layout(title=title + subtitle)
    if multiples:
        fig.update_xaxes(title_text="simulated time (ms)", row=-(-len(vms) // SMALL_MULTIPLE_COLUMNS))
        fig.update_yaxes(title_text=yaxis, col=1)
        # One scale for every panel, from zero, with room above the highest line and
        # below zero (a line along an edge would be half hidden).
        highest = max((max(trace.y) for trace in fig.data if trace.y), default=0) or 1
        fig.update_yaxes(range=[-highest * 0.04, highest * 1.08])
    else:
        fig.update_layout(xaxis_title="simulated time (ms)", yaxis_title=yaxis)
    return fig


def pcpu_lanes(run: RunData) -> go.Figure | None:
    """Which vCPU ran on each pCPU: one lane per pCPU, bars in the VM's colour."""
    slices = run.frame("pcpu_slices")
    if slices.is_empty():
        return None
    names = [vm["name"] for vm in run.summary["vms"]]
    if slices["vm"].dtype.is_integer():
        slices = slices.with_columns(pl.col("vm").map_elements(names.__getitem__, return_dtype=pl.String))
    slices, note = timeline_span(slices, TIMELINE_MAX_BARS)
    colors, patterns = vm_colors([run]), vm_patterns([run])
    lanes = sorted(slices["pcpu"].unique().to_list(), reverse=True)  # pCPU 0 on top
    fig = go.Figure()
    for vm in names:
        rows = slices.filter(pl.col("vm") == vm)
        if rows.is_empty():
            continue
        fig.add_trace(go.Bar(y=[f"pCPU {p}" for p in rows["pcpu"].to_list()], base=(rows["start_ns"] / 1e6).to_list(),
                             x=((rows["end_ns"] - rows["start_ns"]) / 1e6).to_list(), orientation="h", name=vm,
                             marker=dict(color=colors[vm], pattern_shape=BAR_PATTERNS[patterns[vm]]),
                             customdata=rows["vcpu"].to_list(),
                             hovertemplate=f"{html.escape(vm)} vCPU %{{customdata}}<extra></extra>"))
    window = (slices["start_ns"].min() / 1e6, slices["end_ns"].max() / 1e6)
    fig.update_layout(title=f"pCPU lanes: which VM's vCPU ran where, {window[0]:.3f}–{window[1]:.3f} ms{note} "
                            f"({run.label}; drag to zoom)",
                      barmode="overlay", xaxis_title="simulated time (ms)", bargap=0.15,
                      yaxis=dict(categoryorder="array", categoryarray=[f"pCPU {p}" for p in lanes]),
                      height=max(300, 18 * len(lanes) + 140))
    return fig


def steal_heatmap(run: RunData) -> go.Figure | None:
    """Steal of every vCPU over time, one row per vCPU: which vCPUs wait, and when."""
    samples = run.frame("samples")
    if samples.is_empty():
        return None
    steal = samples.filter(pl.col("metric") == "vcpu_steal_frac")
    if steal.is_empty():
        return None
    if steal["vm"].dtype.is_integer():
        names = [vm["name"] for vm in run.summary["vms"]]
        steal = steal.with_columns(pl.col("vm").map_elements(names.__getitem__, return_dtype=pl.String))
    order = {vm["name"]: i for i, vm in enumerate(run.summary["vms"])}
    steal = steal.with_columns(pl.col("vm").replace_strict(order, return_dtype=pl.Int64).alias("vm_order"))
    wide = (steal.with_columns(pl.concat_str(pl.col("vm"), pl.lit(" vCPU "), pl.col("vcpu").cast(pl.String)).alias("track"))
            .sort("vm_order", "vcpu", "time_ns"))
    tracks = wide["track"].unique(maintain_order=True).to_list()
    times = sorted(wide["time_ns"].unique().to_list())
    column = {t: i for i, t in enumerate(times)}
    grid = [[None] * len(times) for _ in tracks]
    row_of = {track: i for i, track in enumerate(tracks)}
    for track, time_ns, value in wide.select("track", "time_ns", "value").iter_rows():
        grid[row_of[track]][column[time_ns]] = value
    fig = go.Figure(go.Heatmap(z=grid, x=[t / 1e6 for t in times], y=tracks, zmin=0, zmax=1,
                               colorscale="Reds", colorbar=dict(title="steal")))
    fig.update_layout(title=f"Steal per vCPU ({run.label})", xaxis_title="simulated time (ms)",
                      yaxis_autorange="reversed", height=max(300, min(1200, 12 * len(tracks) + 140)))
    return fig


def _with_vm_names(frame: pl.DataFrame, run: RunData) -> pl.DataFrame:
    """VM index -> name, as in the summary (tables name VMs by either)."""
    if frame.is_empty() or not frame["vm"].dtype.is_integer():
        return frame
    names = [vm["name"] for vm in run.summary["vms"]]
    return frame.with_columns(pl.col("vm").map_elements(names.__getitem__, return_dtype=pl.String))


# Task lanes: the task bar fills most of a vCPU's lane; a thin strip along the lane's
# lower edge shows when that vCPU was not running on a pCPU, so a task that is current
# but stalled (its vCPU preempted) reads as such.
TASK_BAR_WIDTH = 0.62
STATE_STRIP_WIDTH = 0.18
# More distinct tasks than this in one VM and the legend is left out (hover names them).
TASK_LEGEND_MAX = 24


def task_lanes(run: RunData, vm_name: str | None = None) -> go.Figure | None:
    """Which guest task was current on each vCPU of one VM (the first VM with task
    slices unless `vm_name` names one) over the report's window: one lane per vCPU, one
    colour per task, and under it the vCPU's preempted and halted periods."""
    slices = _with_vm_names(run.frame("task_slices"), run)
    if slices.is_empty():
        return None
    present = set(slices["vm"].unique().to_list())
    if vm_name is None:
        vm_name = next((vm["name"] for vm in run.summary["vms"] if vm["name"] in present), None)
    if vm_name not in present:
        return None
    slices, note = timeline_span(slices.filter(pl.col("vm") == vm_name), TIMELINE_MAX_BARS)
    window_end = slices["end_ns"].max()
    lane = lambda vcpus: [f"vCPU {v}" for v in vcpus]  # noqa: E731
    tasks = sorted(slices["task"].unique().to_list())
    fig = go.Figure()
    for index, task in enumerate(tasks):
        rows = slices.filter(pl.col("task") == task)
        fig.add_trace(go.Bar(y=lane(rows["vcpu"].to_list()), base=(rows["start_ns"] / 1e6).to_list(),
                             x=((rows["end_ns"] - rows["start_ns"]) / 1e6).to_list(), orientation="h", name=task,
                             width=TASK_BAR_WIDTH, marker_color=VM_PALETTE[index % len(VM_PALETTE)],
                             legendgroup="tasks", showlegend=len(tasks) <= TASK_LEGEND_MAX,
                             hovertemplate=f"{html.escape(task)}<extra>%{{y}}</extra>"))
    states = _with_vm_names(run.frame("vcpu_states"), run)
    if not states.is_empty():
        states = states.filter((pl.col("vm") == vm_name) & (pl.col("start_ns") < window_end))
        for state in ("preempted", "halted"):
            rows = states.filter(pl.col("state") == state)
            if rows.is_empty():
                continue
            end = pl.min_horizontal("end_ns", pl.lit(window_end, dtype=rows["end_ns"].dtype))
            rows = rows.with_columns(end.alias("end_ns"))
            fig.add_trace(go.Bar(y=lane(rows["vcpu"].to_list()), base=(rows["start_ns"] / 1e6).to_list(),
                                 x=((rows["end_ns"] - rows["start_ns"]) / 1e6).to_list(), orientation="h",
                                 name=f"vCPU {state}", width=STATE_STRIP_WIDTH, offset=-0.5,
                                 marker_color=STATE_COLORS[state], hovertemplate=f"{state}<extra>%{{y}}</extra>"))
    vcpus = sorted(slices["vcpu"].unique().to_list(), reverse=True)  # vCPU 0 on top
    window = (slices["start_ns"].min() / 1e6, window_end / 1e6)
    fig.update_layout(title=f"Guest task lanes of {vm_name}: the task current on each vCPU, "
                            f"{window[0]:.3f}–{window[1]:.3f} ms{note} ({run.label}; drag to zoom)",
                      barmode="overlay", xaxis_title="simulated time (ms)",
                      yaxis=dict(categoryorder="array", categoryarray=lane(vcpus)),
                      height=max(300, 34 * len(vcpus) + 160))
    return fig


def irq_pending_cdf(runs: list[RunData]) -> go.Figure | None:
    """Distribution of how long interrupts waited for their vCPU to run (raised until
    the handler began), one CDF per interrupt kind, over the whole run: the summary
    keeps it in a bounded histogram (`interrupt_pending`), so it is complete whatever
    the run length or trace window."""
    fig = go.Figure()
    dashes = ["solid", "dot", "dashdot", "longdash"]
    counts = []
    for run_index, run in enumerate(runs):
        by_kind = run.summary.get("interrupt_pending", {})
        if not by_kind:
            continue
        counts.append(f"{sum(kind['count'] for kind in by_kind.values())} interrupts")
        prefix = f"{run.label} · " if len(runs) > 1 else ""
        for index, (kind, stats) in enumerate(sorted(by_kind.items())):
            # On a log axis a zero wait (delivered at once) is drawn at 1 ns.
            values = [max(value, 1) / 1e3 for value, _ in stats["cdf"]]
            fractions = [fraction for _, fraction in stats["cdf"]]
            fig.add_trace(go.Scatter(x=values, y=fractions, mode="lines", line_shape="hv",
                                     name=f"{prefix}{kind} ({stats['count']})",
                                     line=dict(color=VM_PALETTE[index % len(VM_PALETTE)],
                                               dash=dashes[run_index % len(dashes)])))
    if not fig.data:
        return None
    fig.update_layout(title=f"Interrupt pending time (raised until its handler began on a running vCPU), "
                            f"by kind, whole run ({', '.join(counts)})",
                      xaxis_title="pending time (µs; a zero wait is drawn at 0.001)", xaxis_type="log",
                      yaxis_title="fraction of interrupts", yaxis_range=[0, 1.02])
    return fig


def lock_preemptions(runs: list[RunData]) -> go.Figure | None:
    """Lock-holder (solid) and lock-waiter (dashed) preemptions per sample interval and
    VM, when the run had any."""
    counts = [run.frame("samples").filter(pl.col("metric").is_in(["vm_lhp", "vm_lwp"]))["value"]
              for run in runs if not run.frame("samples").is_empty()]
    if not any(series.sum() > 0 for series in counts):
        return None
    interval_ms = runs[0].config.get("metrics", {}).get("sample_interval_ms")
    per = f"{interval_ms:g} ms sample" if interval_ms else "sample"
    return _lines_by_vm(runs, "vm_lhp", f"Lock-holder preemptions (solid) and lock-waiter preemptions (dashed) per {per}",
                        f"preemptions per {per}", dashed_metric="vm_lwp", dashed_label="LWP", smooth=False)


def run_metadata_html(run_dirs_meta: list[tuple[str, dict]]) -> str:
    """What reproduces each run: source, seed, duration, overrides, version."""
    rows = []
    for label, meta in run_dirs_meta:
        rows.append([label, meta.get("source", ""), str(meta.get("seed", "")),
                     f'{meta.get("duration_ns", 0) / 1e6:g} ms', " ".join(meta.get("overrides", [])) or "none",
                     meta.get("vmsched_version", "")])
    return _table(["run", "scenario", "seed", "duration", "overrides", "vmsched"], rows, numeric_from=99)


def first_span(states: pl.DataFrame, span_ns: int) -> pl.DataFrame:
    """The states within the first span_ns of the table, clipped to it."""
    if states.is_empty():
        return states
    end = states["start_ns"].min() + span_ns
    return (states.filter(pl.col("start_ns") < end)
            .with_columns(pl.min_horizontal("end_ns", pl.lit(end, dtype=states["end_ns"].dtype)).alias("end_ns")))


def timeline_span(slices: pl.DataFrame, max_bars: int) -> tuple[pl.DataFrame, str]:
    """The whole table when it has at most `max_bars` rows, else its first part that does
    (clipped at the start of the first row left out), with a note for the chart's title
    saying how much of the traced window that is."""
    if slices.height <= max_bars:
        return slices, ""
    ordered = slices.sort("start_ns")
    traced = (ordered["end_ns"].max() - ordered["start_ns"].min()) / 1e6
    shown = first_span(ordered, ordered["start_ns"][max_bars] - ordered["start_ns"].min())
    return shown, (f" (the first part of {traced:.3f} ms traced: more than {max_bars:,} bars; "
                   "`vmsched report --window START:END` draws another)")


def vcpu_timeline(run: RunData) -> go.Figure | None:
    states = run.frame("vcpu_states")
    if states.is_empty():
        return None
    states, note = timeline_span(states, TIMELINE_MAX_BARS)
    if states["vm"].dtype.is_integer():  # VM index -> name, as in the summary
        names = [vm["name"] for vm in run.summary["vms"]]
        states = states.with_columns(pl.col("vm").map_elements(names.__getitem__, return_dtype=pl.String))
    states = states.with_columns(
        pl.concat_str(pl.col("vm"), pl.lit(" vCPU "), pl.col("vcpu").cast(pl.String)).alias("track")
    ).sort("vm", "vcpu", descending=True)  # plotly draws the first category at the bottom
    fig = go.Figure()
    for state, color in STATE_COLORS.items():
        rows = states.filter(pl.col("state") == state)
        if rows.is_empty():
            continue
        fig.add_trace(go.Bar(y=rows["track"].to_list(), base=(rows["start_ns"] / 1e6).to_list(),
                             x=((rows["end_ns"] - rows["start_ns"]) / 1e6).to_list(),
                             orientation="h", name=state, marker_color=color))
    window = (states["start_ns"].min() / 1e6, states["end_ns"].max() / 1e6)
    fig.update_layout(title=f"vCPU host states, {window[0]:.3f}–{window[1]:.3f} ms{note} ({run.label}; drag to zoom)",
                      barmode="overlay", xaxis_title="simulated time (ms)", bargap=0.2,
                      height=max(300, 28 * states["track"].n_unique() + 120))
    return fig


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; font-size: 0.9em; margin: 1em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.75em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.better { color: #1a7f37; font-weight: 600; }
td.worse { color: #cf222e; font-weight: 600; }
pre { background: #f6f6f6; padding: 1em; overflow: auto; max-height: 30em; }
.chart { margin: 1.5em 0; }
details > summary { cursor: pointer; font-weight: 600; margin: 0.5em 0; }
"""


def config_as_read(config: dict) -> dict:
    """The normalized configuration with each workload reduced to the fields its kind
    reads (the schema fills every field with a default; the others mean nothing there)."""
    from . import _native
    if not config.get("vm"):
        return config
    vms = []
    for vm in config["vm"]:
        workloads = []
        for workload in vm.get("workload", []):
            read = set(_native.workload_fields_read(workload["kind"]))
            workloads.append({key: value for key, value in workload.items() if key in read})
        vms.append({**vm, "workload": workloads})
    return {**config, "vm": vms}


def build_report(runs: list[RunData], title: str, task_vm: str | None = None, across_seeds_html: str = "") -> str:
    """The whole page. The first run is the reference for ratios and the timelines;
    `task_vm` chooses the VM whose guest task lanes are drawn (default: the first)."""
    figures: list[go.Figure] = [*latency_cdfs(runs),
                                _lines_by_vm(runs, "vm_cpu_share", "CPU share per VM against entitlement",
                                             "pCPUs", dashed_metric="vm_entitlement"),
                                _lines_by_vm(runs, "vcpu_steal_frac", "Steal per VM (mean over vCPUs)",
                                             "fraction of time"),
                                _lines_by_vm(runs, "vcpu_runqueue", "Guest runqueue length per VM (mean over vCPUs)",
                                             "tasks")]
    figures += [fig for fig in (lock_preemptions(runs), irq_pending_cdf(runs)) if fig is not None]
    figures += [fig for run in runs if (fig := steal_heatmap(run)) is not None]
    figures += [fig for run in runs[:1] if (fig := pcpu_lanes(run)) is not None]
    figures += [fig for run in runs[:1] if (fig := task_lanes(run, task_vm)) is not None]
    figures += [fig for run in runs if (fig := vcpu_timeline(run)) is not None]
    charts = "".join(f'<div class="chart">{_figure_html(fig, first=(i == 0))}</div>'
                     for i, fig in enumerate(figures))
    configs = "".join(
        f"<details><summary>{html.escape(run.label)}</summary>"
        f"<pre>{html.escape(json.dumps(config_as_read(run.config), indent=2))}</pre></details>"
        for run in runs)
    first = runs[0].summary
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{html.escape(first.get("description", ""))}</p>
<p>Seed {first["seed"]}, {first["duration_ns"] / 1e9:g} simulated s.</p>
<h2>Run</h2>{run_metadata_html([(run.label, run.meta) for run in runs])}
{f"<h2>Across seeds</h2>{across_seeds_html}" if across_seeds_html else ""}
<h2>Charts</h2>{charts}
<h2>Summary</h2><details><summary>every headline metric ({len(headline_metrics(first))} rows; the
figures in full are in summary.json)</summary>{summary_table_html(runs)}</details>
<h2>Configuration</h2>{configs}
</body></html>
"""


def rerun_timelines(run_dir: Path, window: tuple[int, int]) -> dict[str, pl.DataFrame]:
    """The trace tables (vCPU states, pCPU and task slices, interrupts) in `window`,
    from a deterministic re-run of the run in run_dir."""
    reproduce = json.loads((run_dir / "run.json").read_text())
    result = api.run(api.Scenario(reproduce["scenario_text"], reproduce["source"]),
                     seed=reproduce["seed"], set=reproduce["overrides"],
                     duration=reproduce["duration_ns"], record=False, trace_window=window)
    return {name: result.table(name) for name in api.TRACE_TABLES}


def write_report(run_dir: str | Path, runs: list[RunData] | None = None, title: str | None = None,
                 window: tuple[int, int] | None = None, task_vm: str | None = None,
                 across_seeds_html: str = "") -> Path:
    """Write RUN_DIR/report.html from the run directory, or from given runs (compare).
    The timelines show the run's traced window (its first part past TIMELINE_MAX_BARS
    bars); with `window`, or when the run was not traced, the run is repeated (same scenario and seed) to record that window.
    `task_vm` names the VM whose guest task lanes are drawn (default: the first)."""
    run_dir = Path(run_dir)
    if runs is None:
        run = load_run(run_dir)
        names = [vm["name"] for vm in run.summary["vms"]]
        if task_vm is not None and task_vm not in names:
            raise UserError(f"--vm: {task_vm!r} is not a VM of this run (it has: {', '.join(names)})")
        if window or "vcpu_states" not in run.frames:
            window = window or (0, min(run.summary["duration_ns"], DEFAULT_TIMELINE_NS))
            run.frames.update(rerun_timelines(run_dir, window))
        runs = [run]
    title = title or f"vmsched: {runs[0].summary['scenario']}"
    return write_atomic(run_dir / "report.html", build_report(runs, title, task_vm, across_seeds_html))
