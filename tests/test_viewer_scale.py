"""The viewer at 5,000 runs, in a real headless browser (Debian's chromium).

The result set: a few real lesson runs cloned to 4,760 runs (:mod:`reactlab.dev.viewer_scale`:
the project's trace writer and verifier, only the names differ) plus 240 BFCL cases run
through the loop and scored by BFCL's checker (a seeded sample of 12 per category, the 4
scripted policies), with the suite's table. The viewer is built from them, then chromium
(driven over the DevTools protocol at a 1,400 × 900 window) loads the index, filters,
pages, follows the fragment, and the page must never overflow horizontally. The test
asserts behaviour only; it prints the times it measured (build, load, filtering) and
saves screenshots under ``results/test-artifacts/`` (or ``$REACTLAB_TEST_ARTIFACTS``).
Marked slow: building the set and the viewer takes about a minute on two cores.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactlab.dev.viewer_scale import clone_runs
from reactlab.views import html as viewer
from tests.test_viewer import index_rows, make_runs
from tests.test_viewer_browser import _artifacts, _png_size, chromium  # noqa: F401

pytestmark = pytest.mark.slow

N_RUNS = 5000
SUITE_SAMPLE = 12  # BFCL cases per category: 5 categories x 4 policies x 12 = 240
WIDTH, HEIGHT = 1400, 900
TEMPLATES = [
    ("cierre_acme", "openai", "cierre_inventado"),
    ("cierre_acme", "anthropic", "ticker_inexistente"),
    ("noticias_busi", "openai_chat", "titular_inventado"),
    ("noticias_busi_abril", "openai", "inyeccion_obedece"),
    ("noticias_busi_abril", "anthropic", "inyeccion_obedece_defensas"),
    ("variacion_busi", "openai", "correcto"),
    ("variacion_busi", "anthropic", "correcto"),
    ("variacion_busi", "openai_chat", "bucle"),
    ("variacion_busi", "openai", "fallo_servidor_persistente"),
    ("variacion_busi", "local", "json_invalido"),
    ("variacion_busi", "local", "herramienta_desconocida"),
]


@pytest.fixture(scope="module")
def big(toolbox: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The 5,000-run set and its viewer: {site, rows (the index's), build_s}."""
    from reactlab.suites.bfcl_tables import build_bfcl
    from tests.conftest import run_suite_shards
    from tests.test_suites import suite_config

    base = tmp_path_factory.mktemp("viewer_scale")
    templates = make_runs(toolbox, base / "templates", TEMPLATES)
    suite = run_suite_shards(suite_config(sample=SUITE_SAMPLE, backends=["local"]),
                             base / "suites")
    tables = build_bfcl(suite, base / "tables")
    pairs = clone_runs([t for t, _ in templates], N_RUNS - len(suite), base / "runs")
    start = time.perf_counter()
    written = viewer.build(pairs, base / "viewer", suite_pairs=suite,
                           suite_tables=[str(tables["bfcl"]), str(tables["bfcl_cases"])])
    build_s = time.perf_counter() - start
    print(f"\nviewer build: {len(written)} files ({len(pairs)} runs, {len(suite)} suite "
          f"cases) in {build_s:.1f} s")
    index = (base / "viewer" / "index.html").read_text(encoding="utf-8")
    print(f"index.html: {len(index.encode()) / 1e6:.2f} MB")
    return {"site": base / "viewer", "rows": index_rows(index), "build_s": build_s}


class Page:
    """The index in a headless chromium at WIDTH x HEIGHT (DevTools protocol)."""

    def __init__(self, browser: Any, url: str) -> None:
        self.b = browser
        self.url = url
        self.b.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                    deviceScaleFactor=1, mobile=False)

    def js(self, expression: str) -> Any:
        result = self.b.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def count(self) -> str:
        return str(self.js("document.getElementById('runs-count').textContent"))

    def where(self) -> str:
        return str(self.js("document.getElementById('runs-page').textContent"))

    def shown(self) -> list[dict[str, str]]:
        """The rows on screen: the cells' text and the link."""
        return list(self.js("""Array.from(document.querySelectorAll('#runs-body tr')).map(
            function (tr) { var c = tr.children; var heads = Array.from(
                tr.closest('table').querySelectorAll('thead th')).map(
                function (th) { return th.textContent; });
            return {suite: c[0].textContent,
            task: c[1].textContent, backend: c[2].textContent,
            scenario: c[3].querySelector('a').textContent,
            href: c[3].querySelector('a').getAttribute('href'),
            verdict: c[heads.indexOf('verdict')].textContent}; })"""))

    def set(self, name: str, value: str) -> float:
        """Set filter ``name`` as a user would; returns the ms filtering and rendering took
        (the page renders synchronously in the event handler)."""
        event = "input" if name == "task" else "change"
        return float(self.js(f"""(function () {{ var t0 = performance.now();
            var el = document.getElementById('f-{name}'); el.value = {json.dumps(value)};
            el.dispatchEvent(new Event('{event}'));
            return performance.now() - t0; }})()"""))

    def click(self, button: str) -> float:
        return float(self.js(f"""(function () {{ var t0 = performance.now();
            document.getElementById('{button}').click(); return performance.now() - t0; }})()"""))

    def overflow(self) -> dict[str, int]:
        """How far the page is wider than the window (0: no horizontal scrolling)."""
        return dict(self.js("""({doc: document.documentElement.scrollWidth -
            document.documentElement.clientWidth,
            body: document.body.scrollWidth - document.documentElement.clientWidth,
            inner: window.innerWidth})"""))


@pytest.fixture
def page(chromium: str, big: dict[str, Any], tmp_path: Path, loopback: None  # noqa: F811
         ) -> Iterator[Page]:
    pytest.importorskip("websocket", reason="websocket-client (the export extra) drives "
                                            "chromium over the DevTools protocol")
    from tests.test_exports_browser import Browser

    b = Browser(chromium, tmp_path / "profile")
    try:
        yield Page(b, (big["site"] / "index.html").as_uri())
    finally:
        b.close()


def _expected(rows: list[dict[str, Any]], **want: str) -> int:
    return sum(all((want[k].lower() in str(r[k]).lower()) if k == "task" else
                   str(r[k]) == want[k] for k in want) for r in rows)


def _shot(page: Page, name: str) -> Path:
    data = page.b.screenshot()
    assert _png_size(data) == (WIDTH, HEIGHT)
    final = _artifacts() / name
    staged = final.with_name(f".{name}.tmp")
    staged.write_bytes(data)
    os.replace(staged, final)
    print(f"screenshot: {final}")
    return final


def test_the_set_has_5000_runs_and_every_link_resolves(big: dict[str, Any]) -> None:
    rows = big["rows"]
    assert len(rows) == N_RUNS
    assert len({r["href"] for r in rows}) == N_RUNS
    assert {r["suite"] for r in rows} == {"lesson", *(f"bfcl/{c}" for c in (
        "simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"))}
    missing = [r["href"] for r in rows if not (big["site"] / r["href"]).is_file()]
    assert missing == []
    pages = sum(1 for _ in big["site"].rglob("*.html"))
    assert pages == N_RUNS + 1


def test_the_index_loads_filters_and_pages_at_5000_runs(page: Page, big: dict[str, Any]
                                                        ) -> None:
    rows = big["rows"]
    text = page.b.open(page.url, "runs 1–100 of 5,000 matching (5,000 in all)", "page 1 of 50")
    assert text.index("Lesson runs") < text.index("BFCL") < text.index("All runs")
    timing = page.js("""(function () { var n = performance.getEntriesByType('navigation')[0];
        return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd}; })()""")
    assert len(page.shown()) == 100
    assert [r["href"] for r in page.shown()] == [r["href"] for r in rows[:100]]
    assert page.overflow()["doc"] <= 0 and page.overflow()["body"] <= 0, page.overflow()
    assert page.overflow()["inner"] == WIDTH
    _shot(page, "viewer-5000-top.png")

    # one filter
    ms = {"backend": page.set("backend", "anthropic")}
    n = _expected(rows, backend="anthropic")
    assert 0 < n < N_RUNS
    assert page.count() == f"runs 1–100 of {n:,} matching (5,000 in all)"
    assert {r["backend"] for r in page.shown()} == {"anthropic"}
    assert "backend=anthropic" in page.js("location.hash")

    # filters combine; the task filter matches part of a name, in any case
    ms["verdict"] = page.set("verdict", "verified")
    ms["task"] = page.set("task", "VARIACION_BUSI_000")
    n = _expected(rows, backend="anthropic", verdict="verified", task="variacion_busi_000")
    assert 0 < n <= 100
    assert page.count() == f"runs 1–{n} of {n} matching (5,000 in all)"
    shown = page.shown()
    assert len(shown) == n and all(r["task"].startswith("variacion_busi_000") and
                                   r["verdict"] == "verified" for r in shown)
    assert page.where() == "page 1 of 1"

    # a suite category; then no match at all
    page.set("task", "")
    page.set("backend", "")
    page.set("verdict", "")
    ms["suite"] = page.set("suite", "bfcl/irrelevance")
    n = _expected(rows, suite="bfcl/irrelevance")
    assert n == 4 * SUITE_SAMPLE and len(page.shown()) == n
    assert all(r["href"].startswith("suites/bfcl/") for r in page.shown())
    page.set("task", "no such task")
    assert page.count() == "no run matches (5,000 in all)" and page.shown() == []
    page.click("f-reset")
    assert page.count() == "runs 1–100 of 5,000 matching (5,000 in all)"

    # paging: next, last, first; then the biggest page size
    ms["next"] = page.click("p-next")
    assert page.where() == "page 2 of 50"
    assert [r["href"] for r in page.shown()] == [r["href"] for r in rows[100:200]]
    page.click("p-last")
    assert page.where() == "page 50 of 50" and len(page.shown()) == 100
    assert page.js("document.getElementById('p-next').disabled") is True
    page.click("p-first")
    ms["size_1000"] = page.set("size", "1000")
    assert page.where() == "page 1 of 5" and len(page.shown()) == 1000
    assert page.overflow()["doc"] <= 0, page.overflow()
    page.js("document.getElementById('runs').scrollIntoView()")
    _shot(page, "viewer-5000-runs.png")

    # the fragment is a link to a view: filters and page come back from it
    combos: dict[tuple[str, str], int] = {}
    for r in rows:
        if r["verdict"] != "verified":
            combos[(r["backend"], r["verdict"])] = combos.get((r["backend"], r["verdict"]), 0) + 1
    (backend, verdict), n = max(combos.items(), key=lambda kv: (kv[1], kv[0]))
    assert n > 100
    page.b.open(page.url + f"#backend={backend}&verdict={verdict.replace(' ', '%20')}&page=2",
                "page 2 of")
    assert page.count() == f"runs 101–{min(200, n)} of {n:,} matching (5,000 in all)"
    assert {(r["backend"], r["verdict"]) for r in page.shown()} == {(backend, verdict)}
    assert page.overflow()["doc"] <= 0, page.overflow()
    print(f"\nindex at {N_RUNS} runs: DOMContentLoaded {timing['dcl']:.0f} ms, load "
          f"{timing['load']:.0f} ms; filter/page ms: "
          + ", ".join(f"{k} {v:.1f}" for k, v in ms.items()))


def test_suite_case_page_shows_the_checkers_verdict(big: dict[str, Any]) -> None:
    rows = [r for r in big["rows"] if r["suite"] == "bfcl/multiple"
            and r["scenario"] == "wrong_type"]
    assert rows and all(r["verdict"] == "incorrect" for r in rows)
    page = (big["site"] / rows[0]["href"]).read_text(encoding="utf-8")
    assert "incorrect" in page and "type_error" in page and "bfcl.ast_checker" in page
    assert "<script" not in page.lower()
