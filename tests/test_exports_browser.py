"""The exported Inspect logs in Inspect's own viewer, in a real headless browser.

``inspect view`` serves fresh exports on a free loopback port; Debian's chromium (the
fixture of ``tests/test_viewer_browser.py``, which installs it when missing) opens the
viewer's pages. The viewer is a script-driven page that fetches the logs from its HTTP
API, so the test drives chromium over the DevTools protocol (``websocket-client``): it
navigates, waits until the page's text shows what the log holds, then takes the
screenshot. Screenshots are kept under ``results/test-artifacts/`` (or
``$REACTLAB_TEST_ARTIFACTS``), their paths printed. Both processes run in their own
process group and are ended by PID.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactlab.export import inspect_log
from tests.test_exports import start_inspect_view, stop_inspect_view
from tests.test_viewer import make_runs
from tests.test_viewer_browser import _artifacts, _png_size, chromium  # noqa: F401

RUNS = [("variacion_busi", "openai", "correcto"), ("variacion_busi", "openai", "bucle"),
        ("cierre_acme", "openai", "cierre_inventado")]
PAGE_TIMEOUT = 60
ANSWER = "El cierre de BUSI varió un 6.45 % entre 2024-03-15 y 2024-03-22."


class Browser:
    """Headless chromium driven over the DevTools protocol (one page). The events it
    reads while waiting for an answer are kept in :attr:`events` (the console's, once a
    caller enables ``Runtime`` and ``Log``: tests/report_browser.py)."""

    def __init__(self, executable: str, profile: Path) -> None:
        import websocket

        self.events: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-dev-shm-usage", "--remote-debugging-port=0",
             "--remote-allow-origins=http://127.0.0.1", f"--user-data-dir={profile}",
             "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port = self._port(profile / "DevToolsActivePort")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                page = next(t for t in json.loads(r.read()) if t["type"] == "page")
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30,
                                                  origin="http://127.0.0.1")
        except BaseException:
            self.close()
            raise
        self.n = 0
        self.call("Emulation.setDeviceMetricsOverride", width=1280, height=900,
                  deviceScaleFactor=1, mobile=False)

    def _port(self, path: Path) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if path.is_file() and path.read_text().strip():
                return path.read_text().split()[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("chromium did not open its DevTools port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.n:
                assert "error" not in message, message
                return dict(message.get("result", {}))
            self.events.append(message)

    def text(self) -> str:
        result = self.call("Runtime.evaluate", returnByValue=True,
                           expression="document.body ? document.body.innerText : ''")
        return str(result["result"].get("value", ""))

    def open(self, url: str, *wanted: str) -> str:
        """Navigate and wait until every string of ``wanted`` is in the page's text."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + PAGE_TIMEOUT
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(w in text for w in wanted):
                time.sleep(0.5)  # let the last layout settle before a screenshot
                return self.text()
            time.sleep(0.25)
        missing = [w for w in wanted if w not in text]
        pytest.fail(f"{url}: the page never showed {missing!r}; it shows:\n{text[:2000]}")

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def served(toolbox: Any, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[str, dict[str, str]]]:
    """(viewer URL, log file name by (task/backend)) of fresh exports under inspect view."""
    base = tmp_path_factory.mktemp("inspect-browser")
    written = inspect_log.write_logs(make_runs(toolbox, base, RUNS), base / "inspect")
    names = {"/".join(k): inspect_log.log_name(*k)
             for k in sorted({(t, b) for t, b, _ in RUNS})}
    assert sorted(p.name for p in written) == sorted(names.values())
    proc, url = start_inspect_view(base / "inspect", base)
    try:
        yield url, names
    finally:
        stop_inspect_view(proc)


@pytest.fixture
def browser(chromium: str, tmp_path: Path, loopback: None) -> Iterator[Browser]:  # noqa: F811
    b = Browser(chromium, tmp_path / "profile")
    try:
        yield b
    finally:
        b.close()


def _sample_url(url: str, log: str, sample: str, tab: str = "") -> str:
    return f"{url}/#/logs/{urllib.parse.quote(log)}/samples/sample/{sample}/1/{tab}"


def _keep(data: bytes, name: str) -> Path:
    assert _png_size(data) == (1280, 900)
    assert len(data) > 20_000, f"{name}: {len(data)} bytes, the page looks empty"
    final = _artifacts() / name
    staged = final.with_name(f".{name}.tmp")
    staged.write_bytes(data)
    os.replace(staged, final)
    print(f"screenshot: {final}")
    return final


def test_the_viewer_lists_every_exported_log(browser: Browser,
                                             served: tuple[str, dict[str, str]]) -> None:
    url, names = served
    text = browser.open(f"{url}/", "variacion_busi", "cierre_acme", "openai/simulated",
                        f"{len(names)} items")
    assert text.count("openai/simulated") == len(names)
    _keep(browser.screenshot(), "inspect-view-logs.png")


def test_a_sample_shows_the_run_and_its_verdict(browser: Browser,
                                                served: tuple[str, dict[str, str]]) -> None:
    url, names = served
    page = _sample_url(url, names["variacion_busi/openai"], "correcto")
    text = browser.open(page, ANSWER, "calculadora", "(27.88/26.19 - 1)*100", "6.4528",
                        "MODEL CALL", "turn 3/3")
    assert "SCORE\nC" in text  # the verifier's verdict, verified
    _keep(browser.screenshot(), "inspect-view-variacion_busi-openai-correcto.png")
    text = browser.open(_sample_url(url, names["variacion_busi/openai"], "correcto",
                                    "messages"), ANSWER, "¿Cuánto cambió en porcentaje")
    # the conversation in order (the header above it repeats the question and the answer)
    assert text.rindex("¿Cuánto cambió") < text.index("precio") < text.rindex(ANSWER)
    assert text.count(ANSWER) == 2


def test_guardrails_and_findings_are_visible(browser: Browser,
                                             served: tuple[str, dict[str, str]]) -> None:
    url, names = served
    # the transcript shows its first screens only (it is virtualised): the first guardrail
    text = browser.open(_sample_url(url, names["variacion_busi/openai"], "bucle"),
                        "INFO: REACTLAB GUARDRAIL",
                        "repeated call with the same arguments: not executed")
    assert "SCORE\nI" in text and "Limit: turn" in text  # the step limit ended it
    _keep(browser.screenshot(), "inspect-view-variacion_busi-openai-bucle.png")
    browser.open(_sample_url(url, names["cierre_acme/openai"], "cierre_inventado",
                             "scoring"), "figure without a source: 10")

