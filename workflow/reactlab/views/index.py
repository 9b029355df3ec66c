"""The viewer's index page: summaries first, then every run in a filterable, paged list.

The page is one static file, readable at thousands of runs:

* **Summaries** of the lesson's runs (by backend with a 95 % Wilson interval, then
  scenario × backend and task × backend matrices of verified/runs), of each outside suite
  from its table (BFCL: accuracy per category × backend and scenario, with its interval
  and n, BFCL's error types and the checker agreement; any other suite table, such as
  ``agentdojo.csv``, as it is), and of repeated trials. Long matrices are folded in a
  ``<details>`` element.
* **The run list**: every run (lesson runs, then suite cases) is one row of a compact
  JSON document embedded in the page (``<script type="application/json">``, never
  executed). A small inline script (no external asset; the page's Content-Security-Policy
  allows that one script by its hash and nothing else) filters the rows by suite, task,
  backend, scenario, agent (the project's loop, ``lesson``, or a framework's agent:
  docs/agents.md) and verdict, and shows one page of them at a time; the filters and
  the page live in the URL's fragment (``#backend=openai&page=2``), so a view can be
  linked. Without JavaScript the summaries stay readable and a note points to the tables.

The bytes are a pure function of the rows and tables given: rows in sorted order, no
timestamps, no absolute paths.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from reactlab.config.trials import MIN_TRIALS
from reactlab.suites.registry import BENCHMARKS
from reactlab.suites.summaries import Summary
from reactlab.views.index_assets import INDEX_CSS, INDEX_JS
from reactlab.views.page import attr, doc, h
from reactlab.views.rows import COLUMNS, VERDICT, SuiteRow, run_list
from reactlab.views.rows import trial as _trial
from reactlab.views.summaries import generic_summary, kit, lesson_summary, trials_summary

__all__ = ["INDEX_CSS", "INDEX_JS", "PAGE_SIZES", "SuiteRow", "render_index", "run_list"]

#: Rows per page the list offers (the first is the default).
PAGE_SIZES = (100, 250, 1000)
#: Verdicts and their badge class.
VERDICTS = {"verified": "v-verified", "rejected": "v-rejected", "no answer": "v-none",
            "correct": "v-verified", "incorrect": "v-rejected"}


def _embedded_json(value: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</`` can close it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# --------------------------------------------------------------------------- the list


def _select(name: str, label: str, values: Sequence[str]) -> str:
    options = "".join(f'<option value="{attr(v)}">{h(v)}</option>' for v in values)
    return (f'<label for="f-{name}">{h(label)}<select id="f-{name}">'
            f'<option value="">all</option>{options}</select></label>')


def _run_list_section(runs: Sequence[list[Any]]) -> str:
    col = {c: i for i, c in enumerate(COLUMNS)}

    def distinct(c: str) -> list[str]:
        return sorted({str(r[col[c]]) for r in runs})

    verdicts = [v for v in VERDICTS if v in {r[col["verdict"]] for r in runs}]
    sizes = "".join(f'<option value="{s}">{s}</option>' for s in PAGE_SIZES)
    form = ('<div class="filters" id="filters">'
            + _select("suite", "suite", distinct("suite"))
            + '<label for="f-task">task contains<input id="f-task" type="search" '
              'autocomplete="off" placeholder="e.g. variacion"></label>'
            + _select("backend", "backend", distinct("backend"))
            + _select("scenario", "scenario", distinct("scenario"))
            + _select("agent", "agent", distinct("agent"))
            + _select("verdict", "verdict", verdicts)
            + f'<label for="f-size">per page<select id="f-size">{sizes}</select></label>'
            + '<button type="button" id="f-reset">reset</button></div>\n')
    pager = ('<div class="pager"><button type="button" id="p-first">« first</button>'
             '<button type="button" id="p-prev">‹ previous</button>'
             '<span id="runs-page"></span>'
             '<button type="button" id="p-next">next ›</button>'
             '<button type="button" id="p-last">last »</button>'
             '<span class="muted" id="runs-count"></span></div>\n')
    cols = ("suite", "task", "backend", "scenario", "agent", "term", "verdict", "num",
            "num", "tokens", "detail")
    colgroup = "<colgroup>" + "".join(f'<col class="c-{c}">' for c in cols) + "</colgroup>"
    head = ("<thead><tr><th>suite</th><th>task / case</th><th>backend</th><th>scenario</th>"
            "<th>agent</th><th>termination</th><th>verdict</th><th class=\"num\">steps</th>"
            "<th class=\"num\">calls</th><th class=\"num\">tokens</th>"
            "<th>findings / error</th></tr></thead>")
    data = {"columns": list(COLUMNS), "rows": runs, "verdicts": VERDICTS,
            "sizes": list(PAGE_SIZES)}
    return ('<h2 id="runs">All runs</h2>\n'
            '<noscript><p>The run list needs JavaScript. Every run is a row of '
            "<code>results/tables/runs.csv</code> (suite cases: the suite's "
            "<code>*_cases.csv</code>); its page is "
            "<code>{task}/{backend}/{scenario}.html</code> here.</p></noscript>\n"
            f'<div id="runs-ui" hidden>\n{form}{pager}'
            f'<table class="runs" id="runs-table">{colgroup}\n{head}\n'
            '<tbody id="runs-body"></tbody>\n</table>\n'
            "</div>\n"
            f'<script type="application/json" id="runs-data">{_embedded_json(data)}'
            "</script>\n")


def summaries() -> dict[str, Summary]:
    """The suite tables the index has a layout for, by table name: each registered
    benchmark's own (``Benchmark.summaries``, drawn with :func:`~reactlab.views.summaries.kit`);
    any other suite table is shown as it is (:func:`generic_summary`)."""
    return {name: summary for entry in BENCHMARKS.values()
            for name, summary in entry.summaries.items()}


def render_index(rows: Sequence[Mapping[str, Any]], suite_rows: Sequence[SuiteRow] = (),
                 suite_tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                 min_trials: int = MIN_TRIALS) -> str:
    """The index page.

    ``rows`` are the lesson runs: each needs ``task``, ``backend``, ``scenario``,
    ``termination``, ``verified``, ``steps``, ``tokens_sent``; ``answered``, ``calls``,
    ``findings``, ``trial`` and ``href`` are used when present (rows of ``runs.csv`` work
    as they are). ``suite_rows`` are suite cases (:data:`SuiteRow`); ``suite_tables``
    maps a suite table's name (``bfcl``, ``agentdojo`` ...) to its rows, summarised in
    that order. A rate gets its interval where something is estimated: runs of a
    stochastic backend (the rows' ``deterministic``), at least ``min_trials``
    (:func:`reactlab.views.summaries.kit`).
    """
    pieces = kit([*rows, *suite_rows], min_trials)
    runs = run_list(rows, suite_rows)
    lesson = [r for r in runs if r[0] == "lesson"]
    suites = [r for r in runs if r[0] != "lesson"]
    tiles = [("runs", len(lesson))] + [(v, sum(r[VERDICT] == v for r in lesson))
                                       for v in ("verified", "rejected", "no answer")]
    if suites:
        ok = sum(r[VERDICT] == "correct" for r in suites)
        tiles += [("suite cases", len(suites)), ("correct", ok), ("incorrect", len(suites) - ok)]
    tables = dict(suite_tables or {})
    toc = [('<a href="#lesson">lesson runs</a>', bool(lesson))]
    toc += [(f'<a href="#suite-{attr(name)}">{h(name)}</a>', True) for name in tables]
    toc += [('<a href="#trials">repeated trials</a>', any(_trial(r) for r in rows)),
            ('<a href="#runs">all runs</a>', True)]
    body = ["<h1>reactlab — results</h1>\n",
            '<div class="summary">' + "".join(
                f'<div><span class="label">{h(k)}</span><b>{v}</b></div>' for k, v in tiles)
            + "</div>\n",
            '<nav class="toc">' + "".join(link for link, shown in toc if shown) + "</nav>\n",
            lesson_summary(lesson, pieces)]
    layouts = summaries()
    for name, table in tables.items():
        layout = layouts.get(name)
        body.append(layout(name, table, pieces) if layout is not None
                    else generic_summary(name, table))
    body.append(trials_summary(rows, pieces))
    body.append(_run_list_section(runs))
    return doc("reactlab — results", "".join(body), css=INDEX_CSS, script=INDEX_JS)
