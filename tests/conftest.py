"""Shared fixtures: a small built-in scenario run once per session, the CLI runner, and a
headless Chromium driven over the DevTools protocol for the report test."""
from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import signal
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


def interrupt(process: subprocess.Popen) -> tuple[float, list[str]]:
    """Sends Ctrl-C (SIGINT) to a running command and reads its stderr to the end: the
    seconds until its `error: ...` line, which it prints once it has stopped and
    discarded its output (the interpreter's own shutdown after it is not the command's
    response time), and every line."""
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    lines = []
    for line in process.stderr:
        lines.append(line)
        if line.startswith("error: "):
            break
    answered = time.monotonic() - sent
    return answered, lines + process.stderr.readlines()


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


# Bounds on the browser's steps, so that a browser that hangs fails the test that uses
# it with the step named instead of holding the suite: a cold start of Chromium on a
# loaded 2-core machine takes a few seconds, a report page's load well under ten.
BROWSER_START_S = 60
PAGE_LOAD_S = 120


def _wait_for_page_socket(process: subprocess.Popen, profile: Path, timeout_s: float = BROWSER_START_S) -> str:
    """The DevTools WebSocket of the browser's first page. Chromium started with
    --remote-debugging-port=0 binds a free port itself and writes it as the first line
    of DevToolsActivePort in its profile: no port is chosen here that another process
    on the machine (another test run) could take first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with status {process.returncode} before opening DevTools")
        try:
            port = int((profile / "DevToolsActivePort").read_text().split()[0])
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as reply:
                pages = [t for t in json.load(reply) if t["type"] == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except (OSError, ValueError, IndexError):
            pass  # not written yet (or half written), or not listening yet
        time.sleep(0.2)
    raise TimeoutError(f"chromium did not open its DevTools port within {timeout_s} s")


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
    profile = Path(tempfile.mkdtemp(prefix="vmsched-chromium-"))
    process = subprocess.Popen(
        [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         # The report must work with no network: any attempt to fetch is an error.
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ws_url = _wait_for_page_socket(process, profile)

        def load(path: Path, settle_s: float = 2.0) -> PageLoad:
            async def bounded() -> PageLoad:
                try:
                    async with asyncio.timeout(PAGE_LOAD_S):
                        return await _load_and_capture(ws_url, path.resolve().as_uri(), settle_s)
                except TimeoutError:
                    raise TimeoutError(f"chromium did not load and capture {path} within {PAGE_LOAD_S} s") from None
            return asyncio.run(bounded())
        yield load
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(profile, ignore_errors=True)
