"""The Snakemake report in a real headless browser: what it prints to the console.

Debian's chromium (the fixture of ``tests/test_viewer_browser.py``), driven over the
DevTools protocol by ``tests/test_exports_browser.py``'s :class:`Browser`, opens the report from
its file, waits until the page shows ``wanted``, and collects every console error, uncaught
exception and failed load (``Runtime`` and ``Log`` events) on the way.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.test_exports_browser import PAGE_TIMEOUT, Browser


def errors(browser: Browser) -> list[str]:
    """Every console error, uncaught exception and error log entry ``browser`` has seen
    so far (its kept events: :attr:`Browser.events`)."""
    out = []
    for e in browser.events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            out.append("exception: " + str(details.get("exception", {}).get(
                "description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error",
                                                                             "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                              for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            out.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
    return out


def _click(browser: Browser, label: str, *wanted: str) -> str:
    """Click the first link or button whose text is ``label``; wait for ``wanted``."""
    found = browser.call("Runtime.evaluate", returnByValue=True, expression=(
        "(() => { const e = [...document.querySelectorAll('a, button')]"
        f".find(x => x.textContent.trim() === {json.dumps(label)});"
        " if (!e) return false; e.click(); return true; })()"))
    assert found["result"].get("value") is True, f"no element reads {label!r}"
    deadline = time.monotonic() + PAGE_TIMEOUT
    text = ""
    while time.monotonic() < deadline:
        text = browser.text()
        if all(w in text for w in wanted):
            return text
        time.sleep(0.25)
    raise AssertionError(f"after {label!r} the page never showed {wanted!r}:\n{text[:2000]}")


def console_errors(chromium: str, html: Path, profile: Path, wanted: str,
                   clicks: dict[str, tuple[str, ...]]) -> tuple[str, list[str]]:
    """(the page's text after each click of ``clicks`` (label: what it then shows), the
    errors seen from the load on), once the page shows ``wanted``."""
    browser = Browser(chromium, profile)
    try:
        for domain in ("Runtime", "Log", "Page"):
            browser.call(f"{domain}.enable")
        text = browser.open(html.resolve().as_uri(), wanted)
        for label, shown in clicks.items():
            text += "\n" + _click(browser, label, *shown)
        deadline = time.monotonic() + min(5, PAGE_TIMEOUT)
        while time.monotonic() < deadline:  # late errors: a script run after the render
            browser.text()
            time.sleep(0.25)
        return text, errors(browser)
    finally:
        browser.close()
