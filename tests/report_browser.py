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


def result_infos(chromium: str, html: Path, profile: Path, wanted: str
                 ) -> tuple[dict[str, str], list[str]]:
    """(each result of the report (every figure and table it holds, by its path in
    Snakemake's ``results``) → the page's text once its information panel shows, the
    errors seen from the load on). The panel is the report's own
    (``app.showResultInfo``: its caption under "Description")."""
    browser = Browser(chromium, profile)
    try:
        for domain in ("Runtime", "Log", "Page"):
            browser.call(f"{domain}.enable")
        browser.open(html.resolve().as_uri(), wanted)
        listed = browser.call("Runtime.evaluate", returnByValue=True,
                              expression="Object.keys(results)")["result"]["value"]
        shown = {}
        for path in listed:
            browser.call("Runtime.evaluate",
                         expression=f"app.showResultInfo({json.dumps(path)})")
            deadline = time.monotonic() + min(10, PAGE_TIMEOUT)  # a result without caption
            text = browser.text()  # the heading in capitals (CSS): innerText has them
            while "DESCRIPTION" not in text.upper() and time.monotonic() < deadline:
                time.sleep(0.1)
                text = browser.text()
            shown[path] = text
        return shown, errors(browser)
    finally:
        browser.close()


def caption_counts(results: Path) -> dict[str, int]:
    """The n a caption may state, counted from the results themselves: the three
    selections of runs (reactlab.views.counts, from trials.csv) and the traces of each
    suite (its cases)."""
    from reactlab.views.counts import SELECTIONS, count, table_rows

    rows = table_rows(results / "tables" / "trials.csv")
    totals = {s: sum(c[s] for c in count(rows, "backend").values()) for s in SELECTIONS}
    for suite in sorted(p.name for p in (results / "suites").glob("*") if p.is_dir()):
        totals[suite] = len(list((results / "suites" / suite / "traces").rglob("*.jsonl")))
    return totals


def check_captions(shown: dict[str, str], results: Path) -> list[str]:
    """What is wrong with the captions ``shown`` (:func:`result_infos`): each must name the
    folder stamp's config files and fingerprint, and state an n that is one of
    :func:`caption_counts` (the figure of two runs: 2 of them)."""
    import re

    stamp = json.loads((results / ".reactlab-config.json").read_text(encoding="utf-8"))
    counts = caption_counts(results)
    configs = " + ".join(stamp["configs"])
    wrong = []
    for path, text in shown.items():
        if f"results stamp {stamp['fingerprint']}" not in text or configs not in text:
            wrong.append(f"{path}: no configuration ({configs}, {stamp['fingerprint']})")
        sentence = re.search(r"\bn: (.*?)Configuration:", text, re.S)
        said = [int(n) for n in re.findall(r"(\d+) (?:runs|BFCL cases|AgentDojo cases)",
                                           sentence.group(1) if sentence else "")]
        if not said or not set(said) <= {2, *counts.values()}:
            wrong.append(f"{path}: n {said} is none of {counts}")
    return wrong
