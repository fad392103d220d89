"""A real browser opens every rendered report and the index.

Headless Chromium (Debian's `chromium`; `.ci/browser.sh` installs it) is driven over the DevTools
protocol with a minimal stdlib websocket client, so the test needs no extra Python package. For each
page it records every network request, console message and uncaught exception while the page loads,
then reads the DOM: each page must load nothing but itself (data: URIs are inside the file), log no
error, show its tables and charts (<table>, <svg>, <img> that decoded), and fit a 1280 px laptop
window without horizontal scrolling. Screenshots of the index and the summary go to
reports/screenshots/ for the closing note.

Without a chromium binary the test skips, unless COPYDECODE_REQUIRE_BROWSER=1 (set by .ci/browser.sh).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest
from conftest import ROOT

from analysis.layout import HTML, INDEX, REPORTS

pytestmark = pytest.mark.browser  # headless Chromium over the rendered reports

WIDTH = 1280
SCREENSHOTS = REPORTS / "screenshots"
# Charts each report must show (inline <svg>, or an <img> that decoded: nbconvert writes altair's SVG
# output as a data: URI); every page shows at least one table.
CHARTS = {"kernel": 1, "corpora": 3, "coverage": 2, "bounds": 1, "perturbation": 1, "e2e": 1}
INDEX_FIGURES = 4


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


# ---------------------------------------------------------------- a minimal websocket client (RFC 6455)


class WebSocket:
    def __init__(self, url: str, timeout: float = 30.0):
        parts = urlparse(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            response += chunk
        if b" 101 " not in response.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {response[:200]!r}")
        self.buffer = response.split(b"\r\n\r\n", 1)[1]

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x80 | opcode])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            header += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, text: str) -> None:
        self._frame(0x1, text.encode())

    def recv(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            opcode, n = first & 0x0F, second & 0x7F
            if n == 126:
                n = int.from_bytes(self._read(2), "big")
            elif n == 127:
                n = int.from_bytes(self._read(8), "big")
            payload = self._read(n)
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            message += payload
            if first & 0x80:
                return message.decode("utf-8")


class Browser:
    """One headless Chromium and one page target, spoken to over the DevTools protocol."""

    def __init__(self, binary: str):
        self.profile = tempfile.mkdtemp(prefix="copydecode-chromium-")
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={WIDTH},900",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = self._port()
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t["type"] == "page")
        self.ws = WebSocket(page["webSocketDebuggerUrl"])
        self.next_id, self.events = 0, []
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)

    def _port(self) -> int:
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if "DevTools listening on ws://" in line:
                return urlparse(line.split("listening on ")[1].strip()).port
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            message = json.loads(self.ws.recv())
            self.events.append(message)
            if message.get("method") == event:
                return
        raise TimeoutError(event)

    def open(self, url: str) -> list[dict]:
        """Load `url` and return the events it caused."""
        self.events = []
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        self.call("Runtime.evaluate", expression="1", awaitPromise=True)  # drain what the load queued
        return self.events

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"]["value"]

    def screenshot(self, path: Path) -> None:
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=min(height, 8000), deviceScaleFactor=1,
                  mobile=False)
        shot = self.call("Page.captureScreenshot", format="png")
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


DOM_PROBE = """(() => {
  const main = document.querySelector('main') || document.body;
  const edge = main.getBoundingClientRect().right + 1;
  const visible = [...document.querySelectorAll('table, svg, img')].filter(e => !e.closest('svg') || e.tagName === 'svg');
  return {
    tables: document.querySelectorAll('table').length,
    charts: document.querySelectorAll('svg').length
            + [...document.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).length,
    images: [...document.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).length,
    broken: [...document.querySelectorAll('img')].filter(i => !(i.complete && i.naturalWidth > 0)).length,
    overflowing: visible.filter(e => e.getBoundingClientRect().right > edge).map(e => e.tagName + ' ' + Math.round(e.getBoundingClientRect().width)),
    scroll: document.documentElement.scrollWidth, width: window.innerWidth,
    prompts: /\\b(In|Out)\\s*\\[\\s*\\d*\\s*\\]:/.test(document.body.innerText),
  };
})()"""


def _problems(events: list[dict], url: str) -> dict[str, list[str]]:
    requests = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    errors = [e["params"]["exceptionDetails"].get("text", "exception") for e in events
              if e.get("method") == "Runtime.exceptionThrown"]
    errors += [" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"])
               for e in events if e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")]
    errors += [e["params"]["entry"]["text"] for e in events
               if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"]
    outside = [r for r in requests if r != url and not r.startswith("data:")]
    return {"outside requests": outside, "console errors": errors}


def _pages() -> list[Path]:
    pages = sorted((ROOT / HTML).glob("*.html")) + [ROOT / INDEX]
    missing = [p for p in pages if not p.is_file()]
    assert not missing and len(pages) > 1, f"rendered reports missing: {missing or ROOT / HTML}; run `copydecode reports`"
    return pages


@pytest.fixture(scope="module")
def browser():
    binary = _chromium()
    if binary is None:
        if os.environ.get("COPYDECODE_REQUIRE_BROWSER") == "1":
            pytest.fail("COPYDECODE_REQUIRE_BROWSER=1 but no chromium binary on PATH")
        pytest.skip("no chromium binary on PATH (Debian: apt-get install -y chromium, or run .ci/browser.sh)")
    b = Browser(binary)
    yield b
    b.close()


def test_every_report_and_the_index_render_offline_without_errors(browser):
    failures = {}
    for path in _pages():
        url = path.resolve().as_uri()
        events = browser.open(url)
        problems = _problems(events, url)
        dom = browser.evaluate(DOM_PROBE)
        expected_charts = CHARTS.get(path.stem, 0)
        checks = {
            **problems,
            "no table": [] if dom["tables"] >= 1 else ["0 tables"],
            "charts": [] if dom["charts"] >= expected_charts else [f"{dom['charts']} charts, expected {expected_charts}"],
            "broken images": [f"{dom['broken']} images did not decode"] if dom["broken"] else [],
            "wider than the window": dom["overflowing"] + ([f"page {dom['scroll']} px wide"] if dom["scroll"] > dom["width"] else []),
            "notebook prompts": ["In [ ]:/Out[ ]: shown"] if dom["prompts"] else [],
        }
        if path.name == INDEX.name and dom["images"] < INDEX_FIGURES:
            checks["index figures"] = [f"{dom['images']} inline figures, expected {INDEX_FIGURES}"]
        bad = {k: v for k, v in checks.items() if v}
        if bad:
            failures[str(path.relative_to(ROOT))] = bad
    assert not failures, json.dumps(failures, indent=1)


def test_screenshots_of_the_index_and_the_summary(browser):
    for path, name in ((ROOT / INDEX, "index.png"), (ROOT / HTML / "summary.html", "summary.png")):
        browser.open(path.resolve().as_uri())
        target = ROOT / SCREENSHOTS / name
        browser.screenshot(target)
        data = target.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, target


def test_the_probe_sees_outside_requests_console_errors_and_wide_tables(browser, tmp_path):
    """The checks above can fail: a page that loads a CDN script, logs an error and holds a table
    wider than the window (inside a scrolling wrapper, as great_tables makes them) is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><html><head><script src='https://cdn.example.invalid/x.js'></script></head>"
                   "<body><main><script>console.error('boom')</script><div style='overflow-x:auto'>"
                   "<table style='width:3000px'><tr><td>x</td></tr></table></div></main></body></html>")
    url = bad.resolve().as_uri()
    problems = _problems(browser.open(url), url)
    assert any("cdn.example.invalid" in r for r in problems["outside requests"])
    assert any("boom" in e for e in problems["console errors"])
    assert browser.evaluate(DOM_PROBE)["overflowing"]
