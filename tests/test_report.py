"""The HTML report opens in headless Chromium without JavaScript errors or network, and
its charts are drawn."""
from __future__ import annotations

import io

import pytest
from PIL import Image

from conftest import SHORT

MIN_COLORED_FRACTION = 0.002  # a drawn line or bar covers far more of a plot area than this


def colored_fraction(image: Image.Image, area: dict) -> float:
    """Share of pixels in the plot area that are saturated colour: traces, not the white
    background or grey grid."""
    box = (int(area["x"]), int(area["y"]), int(area["x"] + area["width"]), int(area["y"] + area["height"]))
    pixels = image.crop(box).convert("RGB").get_flattened_data()
    return sum(1 for p in pixels if max(p) - min(p) > 60) / len(pixels)


def assert_charts_drawn(page, expected_charts: int) -> None:
    assert page.errors == []
    assert len(page.chart_areas) >= expected_charts
    image = Image.open(io.BytesIO(page.screenshot_png))
    for area in page.chart_areas:
        assert colored_fraction(image, area) > MIN_COLORED_FRACTION, area


@pytest.fixture(scope="module")
def reported_run(tmp_path_factory):
    from typer.testing import CliRunner
    from vmsched.cli import app
    out = tmp_path_factory.mktemp("reported")
    result = CliRunner().invoke(app, ["run", "default", "--duration", SHORT, "--report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_report_is_self_contained(reported_run):
    html = (reported_run / "report.html").read_text()
    # Every script is inline (the browser test also blocks the network).
    assert "<script src=" not in html and 'rel="stylesheet"' not in html
    assert "<table>" in html


def test_report_renders_in_chromium(reported_run, browser_load):
    # CPU share, steal, runqueue and the vCPU timeline at least; latency CDFs where any.
    assert_charts_drawn(browser_load(reported_run / "report.html"), expected_charts=4)


def test_report_command_with_window(cli, reported_run, browser_load):
    result = cli("report", reported_run, "--window", "10ms:30ms")
    assert result.exit_code == 0, result.output
    html = (reported_run / "report.html").read_text()
    assert "vCPU host states, 10.000" in html
    assert_charts_drawn(browser_load(reported_run / "report.html"), expected_charts=4)


def test_report_of_missing_run(cli, tmp_path):
    result = cli("report", tmp_path)
    assert result.exit_code == 2 and "summary.json" in result.stderr


@pytest.fixture(scope="module")
def sixteen_vm_run(tmp_path_factory):
    from typer.testing import CliRunner
    from vmsched.cli import app
    out = tmp_path_factory.mktemp("sixteen") / "run"
    # bench-mixed-64: 16 eight-vCPU VMs on 64 pCPUs, traced for a window whose vCPU-state
    # bars (about 400 per ms) stay under the timelines' 40,000, so that the whole window shows.
    result = CliRunner().invoke(app, ["run", "bench-mixed-64", "--duration", "60ms", "--trace", "--report",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_report_at_16_vms_uses_small_multiples_and_one_colour_per_vm(sixteen_vm_run, browser_load):
    import json
    from vmsched.report import VM_PALETTE
    html = (sixteen_vm_run / "report.html").read_text()
    summary = json.loads((sixteen_vm_run / "summary.json").read_text())
    assert len(summary["vms"]) == 16
    # Each VM's colour is used, and its entitlement line shares it.
    for index, vm in enumerate(summary["vms"]):
        assert f'"name":"{vm["name"]} entitled"' in html.replace(", ", ",").replace('": "', '":"')
    assert all(color in html for color in VM_PALETTE[:16])
    page = browser_load(sixteen_vm_run / "report.html", settle_s=4.0)
    assert page.errors == []
    # Three per-VM charts of 16 panels each (a quarter of the page wide), each drawn,
    # and a fourth of lock preemptions where the run has any.
    with_locks = any(locks["lhp_count"] or locks["lwp_count"] for locks in summary["locks"].values())
    panels = [area for area in page.chart_areas if area["width"] < 400]
    assert len(panels) == (4 if with_locks else 3) * 16
    image = Image.open(io.BytesIO(page.screenshot_png))
    for area in panels:
        assert colored_fraction(image, area) > MIN_COLORED_FRACTION, area
    assert_reads_at_many_vms(sixteen_vm_run, page, image, summary, vm_count=16)


def palette_colors_drawn(image: Image.Image, area: dict) -> set[str]:
    """The VM palette's colours found as exact pixels (the inside of a bar) in an area."""
    from vmsched.report import VM_PALETTE
    box = (int(area["x"]), int(area["y"]), int(area["x"] + area["width"]), int(area["y"] + area["height"]))
    found = {"#{:02x}{:02x}{:02x}".format(*pixel) for pixel in set(image.crop(box).convert("RGB").get_flattened_data())}
    return found & set(VM_PALETTE)


def assert_reads_at_many_vms(run_dir, page, image: Image.Image, summary: dict, vm_count: int) -> None:
    """Charts come first (the long table last, collapsed); the latency CDFs of every
    workload are one chart; the timelines cover the whole traced window; the pCPU lanes
    show every palette colour that the VMs running there were given."""
    html = (run_dir / "report.html").read_text()
    assert html.index("Plotly.newPlot(") < html.index("<h2>Summary</h2>") < html.index("<h2>Configuration</h2>")
    assert "<details><summary>every headline metric" in html and "<details open" not in html
    first_chart = min(area["y"] for area in page.chart_areas)
    assert first_chart < 700, first_chart  # below the title and the one-row run table only
    cdfs = [area for area in page.chart_areas if area["title"].startswith("Latency CDF")]
    with_latency = [w for w in summary["workloads"] if w.get("latency_ns")]
    assert len(cdfs) == (1 if with_latency else 0)
    duration_ms = summary["duration_ns"] / 1e6
    for title in ("vCPU host states", "pCPU lanes"):
        area = chart_area(page, title)
        assert f"0.000–{duration_ms:.3f} ms" in area["title"], area["title"]
    lanes = palette_colors_drawn(image, chart_area(page, "pCPU lanes"))
    assert len(lanes) == min(vm_count, 16), lanes


def test_the_vm_palette_keeps_16_colours_apart_and_64_vms_distinct():
    """Every two of the 16 VM colours differ by a CIE76 distance of 30 or more (20 reads
    as another colour), none is a grey, and 64 VMs get 64 distinct colour and pattern
    pairs."""
    from vmsched.report import BAR_PATTERNS, VM_PALETTE, RunData, color_distance, vm_colors, vm_patterns
    assert len(VM_PALETTE) == 16
    closest = min(color_distance(a, b) for i, a in enumerate(VM_PALETTE) for b in VM_PALETTE[i + 1:])
    assert closest >= 30, closest
    assert color_distance("#000000", "#ffffff") == pytest.approx(100, abs=0.01)
    for color in VM_PALETTE:
        channels = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
        assert max(channels) - min(channels) > 60, color
        # A thin line must show on white: no pale colour (CIELAB L* of white is 100).
        assert color_distance(color, "#000000") <= 65 + 1e-9 or color_distance(color, "#ffffff") > 35, color
    run = RunData("r", {"vms": [{"name": f"vm{i}"} for i in range(64)]}, {})
    colors, patterns = vm_colors([run]), vm_patterns([run])
    assert len({(colors[vm], patterns[vm]) for vm in colors}) == 64
    assert set(patterns.values()) == set(range(len(BAR_PATTERNS)))


def test_report_at_2_vms_reads_the_same_way(reported_run, browser_load):
    import json
    page = browser_load(reported_run / "report.html")
    summary = json.loads((reported_run / "summary.json").read_text())
    assert len(summary["vms"]) == 2
    html = (reported_run / "report.html").read_text()
    assert html.index("Plotly.newPlot(") < html.index("<h2>Summary</h2>")
    cdfs = [area for area in page.chart_areas if area["title"].startswith("Latency CDF")]
    assert len(cdfs) == 1
    image = Image.open(io.BytesIO(page.screenshot_png))
    assert len(palette_colors_drawn(image, chart_area(page, "pCPU lanes"))) == 2


def sixty_four_vm_scenario() -> str:
    """64 one-vCPU VMs on 16 pCPUs, servers and hogs by turns."""
    parts = ['name = "many-vms"', "duration_ms = 40", "[host]", "cores_per_socket = 16"]
    for index in range(64):
        parts += ["[[vm]]", f'name = "vm{index:02d}"', "vcpus = 1", "[[vm.workload]]"]
        parts += (['kind = "server"', "threads = 1", "rate_per_s = 1500", "work_us = 300"] if index % 2 == 0
                  else ['kind = "hog"'])
    return "\n".join(parts) + "\n"


def test_report_at_64_vms(tmp_path, cli, browser_load):
    import json
    vm_count = 64
    scenario = tmp_path / "many.toml"
    scenario.write_text(sixty_four_vm_scenario())
    out = tmp_path / "run"
    result = cli("run", scenario, "--trace", "--report", "--out", out)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["vms"]) == vm_count
    page = browser_load(out / "report.html", settle_s=6.0)
    assert page.errors == []
    image = Image.open(io.BytesIO(page.screenshot_png))
    panels = [area for area in page.chart_areas if area["width"] < 400]
    assert len(panels) >= 3 * vm_count
    assert_reads_at_many_vms(out, page, image, summary, vm_count=vm_count)
    # Past 16 VMs the colours repeat with a pattern: the lanes carry hatched bars.
    html = (out / "report.html").read_text()
    lanes = next(chart for chart in html.split("Plotly.newPlot(") if "pCPU lanes" in chart)
    assert '"shape":"x"' in lanes.replace(", ", ",").replace('": "', '":"')


def test_report_config_shows_only_fields_each_kind_reads(reported_run):
    html = (reported_run / "report.html").read_text()
    config_section = html[html.index("<h2>Configuration</h2>"):]
    # The default scenario's server does not read `phases`; its parallel job does.
    assert config_section.count("&quot;phases&quot;") == 1


def test_report_lists_the_run_and_its_parts_of_latency(reported_run):
    import json
    html = (reported_run / "report.html").read_text()
    run = json.loads((reported_run / "run.json").read_text())
    from vmsched import __version__
    assert run["vmsched_version"] == __version__
    run_section = html[html.index("<h2>Run</h2>"):html.index("<h2>Summary</h2>")]
    assert "builtin:default" in run_section and __version__ in run_section
    # The server's latency splits into queue wait and service; steal is shown per vCPU.
    assert "queue wait" in html and "service" in html
    assert "Steal per vCPU" in html


def test_report_shows_pcpu_lanes_in_vm_colours(sixteen_vm_run):
    from vmsched.report import VM_PALETTE
    html = (sixteen_vm_run / "report.html").read_text()
    lanes = next(chart for chart in html.split("Plotly.newPlot(") if "pCPU lanes" in chart)
    assert '"pCPU 63"' in lanes and '"pCPU 0"' in lanes
    assert VM_PALETTE[0] in lanes and VM_PALETTE[15] in lanes


def chart_area(page, title_start: str) -> dict:
    matches = [area for area in page.chart_areas if area["title"].startswith(title_start)]
    assert len(matches) == 1, [area["title"] for area in page.chart_areas]
    return matches[0]


@pytest.fixture(scope="module")
def lock_run(tmp_path_factory):
    from typer.testing import CliRunner
    from vmsched.cli import app
    out = tmp_path_factory.mktemp("locks") / "run"
    # Native ticket spinlocks without pause-loop exiting: lock holders are preempted.
    result = CliRunner().invoke(app, ["run", "lock-holder-preemption", "--duration", "300ms", "--report",
                                      "--set", "vm[0].guest.kernel='linux-3.2'", "--set", "host.kvm.ple_gap=0",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_report_draws_task_lanes_irq_pending_and_lock_preemptions(lock_run, browser_load):
    import json

    import polars as pl
    html = (lock_run / "report.html").read_text()
    summary = json.loads((lock_run / "summary.json").read_text())
    page = browser_load(lock_run / "report.html")
    assert_charts_drawn(page, expected_charts=7)
    image = Image.open(io.BytesIO(page.screenshot_png))
    for title in ("Guest task lanes of locky", "Interrupt pending time", "Lock-holder preemptions"):
        assert colored_fraction(image, chart_area(page, title)) > MIN_COLORED_FRACTION, title
    # The lock chart draws the samples' per-interval counts, which add up to (at most)
    # the summary's totals.
    samples = pl.read_parquet(lock_run / "samples.parquet")
    lhp = samples.filter((pl.col("metric") == "vm_lhp") & (pl.col("vm") == "locky"))["value"].sum()
    assert 0 < lhp <= summary["locks"]["locky"]["lhp_count"]
    # One lane per vCPU of the VM, one colour per task (the program's four threads and
    # the guest kernel's four kworkers, one per vCPU).
    lanes = next(chart for chart in html.split("Plotly.newPlot(") if "Guest task lanes" in chart)
    lanes = lanes.replace(", ", ",").replace('": "', '":"')
    assert all(f'"vCPU {v}"' in lanes for v in range(4))
    assert lanes.count('"legendgroup":"tasks"') == 4 + 4
    # The interrupt CDF covers the whole run (the timeline tables only their window):
    # its total is every VM's delivered interrupts, each kind's CDF ends at 1.
    pending = summary["interrupt_pending"]
    total = sum(kind["count"] for kind in pending.values())
    assert total == sum(vm["interrupts"]["count"] for vm in summary["vms"]) > 0
    assert f"whole run ({total} interrupts)" in html
    assert all(kind["cdf"][-1][1] == 1.0 and len(kind["cdf"]) <= 100 for kind in pending.values())
    if (lock_run / "irqs.parquet").is_file():
        assert total > pl.read_parquet(lock_run / "irqs.parquet").height


def test_report_task_lanes_of_a_chosen_vm(cli, lock_run):
    assert cli("report", lock_run, "--vm", "bg").exit_code == 0
    html = (lock_run / "report.html").read_text()
    assert "Guest task lanes of bg" in html and "Guest task lanes of locky" not in html
    result = cli("report", lock_run, "--vm", "nope")
    assert result.exit_code == 2 and "--vm: 'nope'" in result.stderr and "locky, bg" in result.stderr


def test_lock_chart_only_where_locks_were_preempted(lock_run):
    import vmsched
    from vmsched.report import RunData, load_run, lock_preemptions
    assert lock_preemptions([load_run(lock_run)]) is not None
    # CPU hogs take no lock: nothing to draw.
    hogs = vmsched.run("two-vms-one-pcpu", duration="100ms")
    assert lock_preemptions([RunData("hogs", hogs.summary, hogs.config, hogs.recorded_tables())]) is None
