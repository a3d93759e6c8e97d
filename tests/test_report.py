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
    # bench-mixed-64: 16 eight-vCPU VMs on 64 pCPUs.
    result = CliRunner().invoke(app, ["run", "bench-mixed-64", "--duration", "100ms", "--report", "--out", str(out)])
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
    # Three per-VM charts of 16 panels each (a quarter of the page wide), each drawn.
    panels = [area for area in page.chart_areas if area["width"] < 400]
    assert len(panels) == 3 * 16
    image = Image.open(io.BytesIO(page.screenshot_png))
    for area in panels:
        assert colored_fraction(image, area) > MIN_COLORED_FRACTION, area


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
