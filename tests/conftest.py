"""Shared fixtures: a small built-in scenario run once per session, the CLI runner, and a
headless Chromium driven over the DevTools protocol for the report test."""
from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vmsched.cli import app

# A short simulated time keeps the whole suite within a few minutes on two cores.
SHORT = "200ms"


def assert_user_error(result, *fragments: str) -> None:
    """A user error: exit 2 and one `error: ...` line on stderr holding every fragment."""
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    return invoke


@dataclass
class PageLoad:
    errors: list[str]
    chart_areas: list[dict]
    screenshot_png: bytes


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_page_socket(port: int, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as reply:
                pages = [t for t in json.load(reply) if t["type"] == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError("chromium did not open its DevTools port")


async def _load_and_capture(ws_url: str, url: str, settle_s: float) -> PageLoad:
    import websockets

    ids = itertools.count(1)
    errors: list[str] = []
    async with websockets.connect(ws_url, max_size=None) as ws:
        async def call(method: str, **params):
            call_id = next(ids)
            await ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
            while True:
                message = json.loads(await ws.recv())
                if message.get("id") == call_id:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return message["result"]
                collect(message)

        def collect(message: dict) -> None:
            method, params = message.get("method"), message.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                errors.append(details.get("exception", {}).get("description", details.get("text", "")))
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                errors.append(" ".join(str(arg.get("value", arg.get("description"))) for arg in params["args"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                errors.append(params["entry"]["text"])

        for domain in ("Runtime", "Log", "Page"):
            await call(f"{domain}.enable")
        await call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
        await call("Page.navigate", url=url)
        while True:
            message = json.loads(await ws.recv())
            collect(message)
            if message.get("method") == "Page.loadEventFired":
                break
        await asyncio.sleep(settle_s)  # plotly draws after the load event
        areas = await call("Runtime.evaluate", returnByValue=True, expression="""
            Array.from(document.querySelectorAll('.js-plotly-plot .nsewdrag')).map(e => {
              const r = e.getBoundingClientRect();
              const title = e.closest('.js-plotly-plot').querySelector('.gtitle');
              return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height,
                      title: title ? title.textContent : ''};
            })""")
        size = await call("Runtime.evaluate", returnByValue=True,
                          expression="[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        width, height = size["result"]["value"]
        shot = await call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        return PageLoad(errors, areas["result"]["value"], base64.b64decode(shot["data"]))


@pytest.fixture(scope="session")
def browser_load():
    """Opens a local file in headless Chromium; returns JS errors, the charts' plot areas
    (page coordinates) and a full-page screenshot."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("chromium is not installed (Debian package `chromium`)")
    port = _free_port()
    profile = tempfile.mkdtemp(prefix="vmsched-chromium-")
    process = subprocess.Popen(
        [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         # The report must work with no network: any attempt to fetch is an error.
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
         f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ws_url = _wait_for_page_socket(port)

        def load(path: Path, settle_s: float = 2.0) -> PageLoad:
            return asyncio.run(_load_and_capture(ws_url, path.resolve().as_uri(), settle_s))
        yield load
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)
