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
