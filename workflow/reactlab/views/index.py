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
import math
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reactlab.views.page import attr, doc, h, page_path

__all__ = ["INDEX_CSS", "INDEX_JS", "PAGE_SIZES", "SuiteRow", "render_index", "run_list"]

#: Rows per page the list offers (the first is the default).
PAGE_SIZES = (100, 250, 1000)
#: A summary matrix with more rows than this is folded (``<details>`` closed).
FOLD_ROWS = 30
#: The run list's columns, in the order of each row of the embedded JSON.
COLUMNS = ("suite", "task", "backend", "scenario", "agent", "trial", "termination",
           "verdict", "steps", "calls", "tokens", "detail", "href")
#: The verdict's place in a row of :data:`COLUMNS`.
VERDICT = COLUMNS.index("verdict")
#: Verdicts and their badge class.
VERDICTS = {"verified": "v-verified", "rejected": "v-rejected", "no answer": "v-none",
            "correct": "v-verified", "incorrect": "v-rejected"}

SuiteRow = Mapping[str, Any]
"""A suite case's row for the list: ``suite``, ``category``, ``task`` (the case),
``backend``, ``scenario``, ``termination``, ``verified``, ``steps``, ``calls``,
``tokens_sent``, ``detail`` and ``href``."""

INDEX_CSS = """
body { max-width: 1340px; }
.scroll { overflow-x: auto; max-width: 100%; }
table.matrix { width: auto; min-width: 50%; }
table.matrix td, table.matrix th { white-space: nowrap; }
table.matrix td.cell { text-align: center; font-variant-numeric: tabular-nums; }
td.r0 { background: #fde8e6; } td.r1 { background: #fbe3cf; } td.r2 { background: #fbf0c9; }
td.r3 { background: #e9f3cf; } td.r4 { background: #d3eed6; } td.r5 { background: #bfe5c6; }
td.na { color: #9aa1b1; }
.small { font-size: .82em; }
tr.published td { color: #5a6275; font-style: italic; background: #f6f7fa; }
.v-none { background: #eceef3; color: #4a5263; border-color: #c9ced9; }
details { margin: .4em 0 .8em; }
details > summary { cursor: pointer; color: #1f5fbf; margin: .3em 0; }
div.filters { display: flex; flex-wrap: wrap; gap: .5em 1em; align-items: end;
  background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: .5em .8em; }
div.filters label { display: flex; flex-direction: column; font-size: .85em; color: #5a6275; }
div.filters select, div.filters input { font: inherit; font-size: 14px; max-width: 16em; }
.pager { display: flex; gap: .6em; align-items: center; margin: .6em 0; flex-wrap: wrap; }
.pager button { font: inherit; font-size: 14px; }
table.runs { table-layout: fixed; font-size: 14px; }
table.runs td { overflow-wrap: anywhere; }
table.runs td.detail { white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  font-size: .9em; }
table.runs col.c-suite { width: 9%; } table.runs col.c-task { width: 13%; }
table.runs col.c-backend { width: 9%; } table.runs col.c-scenario { width: 14%; }
table.runs col.c-agent { width: 8%; }
table.runs col.c-term { width: 9%; } table.runs col.c-verdict { width: 8%; }
table.runs col.c-num { width: 5.5%; } table.runs col.c-tokens { width: 6.5%; }
table.runs col.c-detail { width: 12.5%; }
.toc { display: flex; gap: 1.2em; flex-wrap: wrap; }
"""

# The run list's script. It reads the embedded rows once, then renders one page of the
# rows that pass the filters with DOM calls (textContent: nothing is parsed as HTML).
INDEX_JS = r"""(function () {
"use strict";
var data = JSON.parse(document.getElementById("runs-data").textContent);
var C = {};
data.columns.forEach(function (c, i) { C[c] = i; });
var rows = data.rows;
var $ = function (id) { return document.getElementById(id); };
var f = {suite: $("f-suite"), task: $("f-task"), backend: $("f-backend"),
         scenario: $("f-scenario"), agent: $("f-agent"), verdict: $("f-verdict"),
         size: $("f-size")};
var body = $("runs-body"), count = $("runs-count"), where = $("runs-page");
var page = 1, matching = rows, key = null;
function state() {
  return {suite: f.suite.value, task: f.task.value.trim().toLowerCase(),
          backend: f.backend.value, scenario: f.scenario.value, agent: f.agent.value,
          verdict: f.verdict.value};
}
function filter(s) {
  var out = [];
  for (var i = 0; i < rows.length; i++) {
    var r = rows[i];
    if ((s.suite && r[C.suite] !== s.suite) || (s.backend && r[C.backend] !== s.backend) ||
        (s.scenario && r[C.scenario] !== s.scenario) ||
        (s.agent && r[C.agent] !== s.agent) ||
        (s.verdict && r[C.verdict] !== s.verdict) ||
        (s.task && r[C.task].toLowerCase().indexOf(s.task) < 0)) { continue; }
    out.push(r);
  }
  return out;
}
function cell(tr, text, cls) {
  var td = document.createElement("td");
  if (cls) { td.className = cls; }
  td.textContent = text;
  tr.appendChild(td);
  return td;
}
function render() {
  var s = state(), k = JSON.stringify(s);
  if (k !== key) { matching = filter(s); key = k; }
  var size = parseInt(f.size.value, 10), pages = Math.max(1, Math.ceil(matching.length / size));
  page = Math.min(Math.max(1, page), pages);
  var first = (page - 1) * size, last = Math.min(matching.length, first + size);
  var frag = document.createDocumentFragment();
  for (var i = first; i < last; i++) {
    var r = matching[i], tr = document.createElement("tr");
    cell(tr, r[C.suite]);
    cell(tr, r[C.task]);
    cell(tr, r[C.backend]);
    var td = document.createElement("td"), a = document.createElement("a");
    a.href = r[C.href];
    a.textContent = r[C.scenario];
    td.appendChild(a);
    if (r[C.trial]) { td.appendChild(document.createTextNode(" \u00b7 t" + r[C.trial])); }
    tr.appendChild(td);
    cell(tr, r[C.agent]);
    cell(tr, r[C.termination]);
    var v = document.createElement("td"), b = document.createElement("span");
    b.className = "badge " + (data.verdicts[r[C.verdict]] || "v-none");
    b.textContent = r[C.verdict];
    v.appendChild(b);
    tr.appendChild(v);
    cell(tr, r[C.steps], "num");
    cell(tr, r[C.calls], "num");
    cell(tr, r[C.tokens], "num");
    cell(tr, r[C.detail], "detail").title = r[C.detail];
    frag.appendChild(tr);
  }
  body.replaceChildren(frag);
  count.textContent = matching.length
    ? "runs " + (first + 1).toLocaleString("en") + "\u2013" + last.toLocaleString("en") +
      " of " + matching.length.toLocaleString("en") + " matching (" +
      rows.length.toLocaleString("en") + " in all)"
    : "no run matches (" + rows.length.toLocaleString("en") + " in all)";
  where.textContent = "page " + page + " of " + pages;
  $("p-first").disabled = $("p-prev").disabled = page <= 1;
  $("p-next").disabled = $("p-last").disabled = page >= pages;
  var parts = [];
  Object.keys(f).forEach(function (n) {
    var val = f[n].value;
    if (val && !(n === "size" && val === String(data.sizes[0]))) {
      parts.push(n + "=" + encodeURIComponent(val));
    }
  });
  if (page > 1) { parts.push("page=" + page); }
  var hash = parts.length ? "#" + parts.join("&") : "";
  if (location.hash !== hash) {
    history.replaceState(null, "", hash || location.pathname + location.search);
  }
  document.body.setAttribute("data-rendered", String(matching.length));
}
function fromHash() {
  var q = location.hash.replace(/^#/, "").split("&");
  Object.keys(f).forEach(function (n) { f[n].value = n === "size" ? String(data.sizes[0]) : ""; });
  page = 1;
  q.forEach(function (p) {
    var i = p.indexOf("="), n = p.slice(0, i), val = decodeURIComponent(p.slice(i + 1));
    if (n === "page") { page = parseInt(val, 10) || 1; }
    else if (f[n]) { f[n].value = val; }
  });
}
Object.keys(f).forEach(function (n) {
  f[n].addEventListener(n === "task" ? "input" : "change", function () { page = 1; render(); });
});
$("p-first").addEventListener("click", function () { page = 1; render(); });
$("p-prev").addEventListener("click", function () { page -= 1; render(); });
$("p-next").addEventListener("click", function () { page += 1; render(); });
$("p-last").addEventListener("click", function () { page = 1e9; render(); });
$("f-reset").addEventListener("click", function () {
  history.replaceState(null, "", location.pathname + location.search); fromHash(); render();
});
window.addEventListener("hashchange", function () { fromHash(); render(); });
$("runs-ui").hidden = false;
fromHash();
render();
})();
"""


# --------------------------------------------------------------------------- values


def truthy(value: object) -> bool:
    """A boolean cell of a row or CSV table (``"True"``, ``"1"``, ``True`` ...)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(value)


def _trial(row: Mapping[str, Any]) -> int:
    """The row's trial number, 0 for a run without trials (also for empty CSV cells)."""
    value = row.get("trial")
    try:
        return int(value) if value is not None and value == value and value != "" else 0
    except (TypeError, ValueError):
        return 0


def _int(value: object) -> int | str:
    """A count cell as an int (``""`` when missing or NaN)."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return ""
    try:
        return int(float(str(value)))
    except ValueError:
        return str(value)


def _float(value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        out = float(str(value))
    except ValueError:
        return None
    return None if math.isnan(out) else out


def _text(value: object) -> str:
    """A text cell; NaN (an empty CSV cell read by pandas) and None are empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def lesson_verdict(row: Mapping[str, Any]) -> str:
    """``verified``, ``rejected`` or ``no answer`` (when the row says it has none)."""
    if truthy(row["verified"]):
        return "verified"
    if "answered" in row and not truthy(row["answered"]):
        return "no answer"
    return "rejected"


def _findings(row: Mapping[str, Any]) -> str:
    findings = row.get("findings", "")
    if isinstance(findings, list):
        return "; ".join(str(f.get("message", f)) if isinstance(f, Mapping) else str(f)
                         for f in findings)
    return _text(findings)


def _href(row: Mapping[str, Any]) -> str:
    href = row.get("href")
    if not href:
        href = page_path(row)
    return urllib.parse.quote(str(href), safe="/")


def run_list(rows: Sequence[Mapping[str, Any]], suite_rows: Sequence[SuiteRow] = ()
             ) -> list[list[Any]]:
    """The run list's rows (:data:`COLUMNS`): lesson runs sorted by task, backend,
    scenario and trial, then suite cases sorted by suite, category, backend, scenario and
    case (numbers in case ids in numeric order)."""
    out: list[list[Any]] = []
    for r in sorted(rows, key=lambda r: (str(r["task"]), str(r["backend"]),
                                         str(r["scenario"]), _trial(r))):
        out.append(["lesson", str(r["task"]), str(r["backend"]), str(r["scenario"]),
                    _agent(r), _trial(r), str(r["termination"]), lesson_verdict(r),
                    _int(r["steps"]), _int(r.get("calls")), _int(r["tokens_sent"]),
                    _findings(r), _href(r)])
    for s in sorted(suite_rows, key=lambda s: (str(s["suite"]), str(s["category"]),
                                               str(s["backend"]), str(s["scenario"]),
                                               _natural(str(s["task"])))):
        label = f"{s['suite']}/{s['category']}" if s.get("category") else str(s["suite"])
        out.append([label, str(s["task"]), str(s["backend"]), str(s["scenario"]),
                    _agent(s), 0,
                    str(s["termination"]), "correct" if truthy(s["verified"]) else "incorrect",
                    _int(s["steps"]), _int(s["calls"]), _int(s["tokens_sent"]),
                    _text(s.get("detail")), urllib.parse.quote(str(s["href"]), safe="/")])
    return out


def _agent(row: Mapping[str, Any]) -> str:
    """The agent that ran a row: its ``agent`` field (the viewer's rows), else the suffix
    of a framework run's scenario (``{scenario}__{agent}``, as in ``runs.csv``), else the
    lesson's loop."""
    agent = row.get("agent")
    if agent:
        return str(agent)
    _, sep, suffix = str(row["scenario"]).partition("__")
    return suffix if sep and suffix else "lesson"


def _natural(text: str) -> tuple[str, int]:
    head = text.rstrip("0123456789")
    tail = text[len(head):]
    return (head, int(tail) if tail else -1)


def _embedded_json(value: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</`` can close it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# --------------------------------------------------------------------------- summaries


def _rate_class(k: int, n: int) -> str:
    if n == 0:
        return "na"
    p = k / n
    return "r5" if p == 1 else f"r{min(4, int(p * 5))}"


def _interval(k: int, n: int) -> str:
    from reactlab.analysis.stats import wilson

    if n == 0:
        return "—"
    iv = wilson(k, n)
    return f"{iv.estimate:.2f} [{iv.low:.2f}, {iv.high:.2f}]"


def _table(head: Sequence[str], body: Sequence[str], cls: str = "",
           numeric: Sequence[str] = ()) -> str:
    """A table in a horizontally scrolling box; the ``numeric`` columns' headers are
    right-aligned like their cells."""
    ths = "".join(f'<th class="num">{h(c)}</th>' if c in numeric else f"<th>{h(c)}</th>"
                  for c in head)
    klass = f' class="{cls}"' if cls else ""
    return (f'<div class="scroll"><table{klass}>\n<thead><tr>{ths}</tr></thead>\n<tbody>\n'
            + "".join(body) + "</tbody>\n</table></div>\n")


def _fold(title: str, n_rows: int, content: str) -> str:
    """``content`` under a ``<details>`` that starts open unless it has many rows."""
    is_open = " open" if n_rows <= FOLD_ROWS else ""
    return (f"<details{is_open}><summary>{h(title)} ({n_rows} rows)</summary>\n"
            f"{content}</details>\n")


def _matrix(runs: Sequence[list[Any]], by: int, title: str, label: str) -> str:
    """verified/runs per (``by`` column value) × backend, plus the row's total."""
    backends = sorted({r[2] for r in runs})
    cells: dict[tuple[str, str], list[int]] = {}
    tasks: dict[str, set[str]] = {}
    for r in runs:
        c = cells.setdefault((r[by], r[2]), [0, 0])
        c[0] += r[VERDICT] == "verified"
        c[1] += 1
        tasks.setdefault(r[by], set()).add(r[1])
    keys = sorted({r[by] for r in runs})
    body = []
    for key in keys:
        tds = []
        k_all = n_all = 0
        for b in backends:
            k, n = cells.get((key, b), [0, 0])
            k_all, n_all = k_all + k, n_all + n
            tds.append(f'<td class="cell {_rate_class(k, n)}">{f"{k}/{n}" if n else "—"}</td>')
        extra = f'<td class="num">{len(tasks[key])}</td>' if by == 3 else ""
        body.append(f"<tr><td>{h(key)}</td>{extra}{''.join(tds)}"
                    f'<td class="num">{_interval(k_all, n_all)}</td></tr>\n')
    head = [label, *(["tasks"] if by == 3 else []), *backends, "all backends [95 % Wilson]"]
    return _fold(title, len(keys), _table(head, body, "matrix", [head[-1]]))


def _lesson_summary(runs: Sequence[list[Any]]) -> str:
    if not runs:
        return ""
    by_backend: dict[str, dict[str, int]] = {}
    for r in runs:
        counts = by_backend.setdefault(r[2], {"verified": 0, "rejected": 0, "no answer": 0})
        counts[r[VERDICT]] += 1
    body = []
    for b in sorted(by_backend):
        c = by_backend[b]
        n = sum(c.values())
        body.append(f"<tr><td>{h(b)}</td><td class=\"num\">{n}</td>"
                    f"<td class=\"num\">{c['verified']}</td><td class=\"num\">{c['rejected']}"
                    f"</td><td class=\"num\">{c['no answer']}</td>"
                    f'<td class="num">{_interval(c["verified"], n)}</td></tr>\n')
    out = ['<h2 id="lesson">Lesson runs</h2>\n',
           '<p class="muted">Verified: the answer passed the project\'s verifier. Cells of '
           "the matrices: verified/runs, pooled over the other factors (trials count as "
           "runs).</p>\n",
           _table(["backend", "runs", "verified", "rejected", "no answer",
                   "success rate [95 % Wilson]"], body, "",
                  ["runs", "verified", "rejected", "no answer", "success rate [95 % Wilson]"]),
           _matrix(runs, 3, "Scenario × backend", "scenario"),
           _matrix(runs, 1, "Task × backend", "task")]
    return "".join(out)


def _bfcl_summary(name: str, table: Sequence[Mapping[str, Any]]) -> str:
    """BFCL's table (``bfcl.csv``): accuracy per category × (backend, scenario), the
    published context row, and BFCL's error types with the checker agreement."""
    measured = [r for r in table if _text(r.get("source")) == "measured"]
    published = [r for r in table if _text(r.get("source")) not in ("measured", "")]
    categories: list[str] = []
    for r in [*measured, *published]:
        if str(r["category"]) not in categories:
            categories.append(str(r["category"]))
    groups: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for r in measured:
        groups.setdefault((str(r["backend"]), _text(r["scenario"])), {})[str(r["category"])] = r
    body = []
    for (backend, scenario), cats in sorted(groups.items()):
        tds: list[str] = []
        for c in categories:
            cell = cats.get(c)
            if cell is None:
                tds.append('<td class="cell na">—</td>')
                continue
            n, k = _int(cell["cases"]), _int(cell["correct"])
            acc, lo, hi = (_float(cell["accuracy"]), _float(cell["ci_low"]),
                           _float(cell["ci_high"]))
            text = "—" if acc is None else f"{acc * 100:.1f} %"
            detail = f"n={n}"
            if lo is not None and hi is not None:
                detail = f"[{lo * 100:.0f}–{hi * 100:.0f}] {detail}"
            cls = _rate_class(int(k), int(n)) if isinstance(n, int) and isinstance(k, int) \
                and n else "na"
            tds.append(f'<td class="cell {cls}" title="{attr(f"{k}/{n} correct")}">'
                       f"{h(text)}<br><span class=\"muted small\">{h(detail)}</span></td>")
        body.append(f"<tr><td>{h(backend)}</td><td>{h(scenario)}</td>{''.join(tds)}</tr>\n")
    if published:
        by_cat = {str(r["category"]): r for r in published}
        published_tds = "".join(
            f'<td class="cell">{(_float(by_cat[c]["accuracy"]) or 0) * 100:.2f} %</td>'
            if c in by_cat else '<td class="cell na">—</td>' for c in categories)
        src = _text(published[0].get("source"))
        body.append(f'<tr class="published"><td title="{attr(src)}">'
                    f"{h(published[0]['backend'])}</td><td>published, not like-for-like"
                    f"</td>{published_tds}</tr>\n")
    matrix = _table(["backend", "scenario", *categories], body, "matrix")
    errors = []
    for (backend, scenario), cats in sorted(groups.items()):
        pooled = cats.get("all")
        if pooled is None:
            continue
        agreement = _float(pooled.get("agreement"))
        errors.append(f"<tr><td>{h(backend)}</td><td>{h(scenario)}</td>"
                      f'<td class="num">{h(_int(pooled["cases"]))}</td>'
                      f'<td class="num">{h(_int(pooled["correct"]))}</td>'
                      f'<td class="num">{"—" if agreement is None else f"{agreement:.2f}"}</td>'
                      f'<td class="text">{h(_text(pooled.get("error_types")) or "—")}</td>'
                      "</tr>\n")
    per_cat = []
    for (backend, scenario), cats in sorted(groups.items()):
        for c, r in cats.items():
            if c in ("all", "non_live_ast") or not _text(r.get("error_types")):
                continue
            per_cat.append(f"<tr><td>{h(backend)}</td><td>{h(scenario)}</td><td>{h(c)}</td>"
                           f'<td class="text">{h(_text(r.get("error_types")))}</td></tr>\n')
    out = ['<h2 id="suite-bfcl">BFCL</h2>\n',
           '<p class="muted">Accuracy by BFCL\'s own checker, per category, with its 95 % '
           "Wilson interval in points and the number of cases; <code>non_live_ast</code> "
           "is BFCL's unweighted mean of the four non-live AST categories. The published "
           "row is context, not a like-for-like comparison (another model, data version and "
           "prompt format).</p>\n",
           _fold("Accuracy: category × backend and scenario", len(body), matrix)]
    if errors:
        out.append(_fold("Error types (BFCL's checker, all categories pooled) and agreement "
                         "with the project's trajectory verdict", len(errors),
                         _table(["backend", "scenario", "cases", "correct", "agreement",
                                 "error types"], errors, "", ["cases", "correct", "agreement"])))
    if per_cat:
        out.append(_fold("Error types per category", len(per_cat),
                         _table(["backend", "scenario", "category", "error types"], per_cat)))
    return "".join(out)


AGENTDOJO_COLUMNS = ("suite", "backend", "policy", "defence", "pairs", "utility",
                     "utility_low", "utility_high", "attack_success_rate", "asr_low",
                     "asr_high", "baseline_utility", "baseline_attack_success_rate")


def _rate_cell(value: object, low: object, high: object, good_high: bool) -> str:
    v, lo, hi = _float(value), _float(low), _float(high)
    if v is None:
        return '<td class="cell na">—</td>'
    text = f"{v:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "")
    bucket = min(5, int((v if good_high else 1 - v) * 5 + 1e-9))
    return f'<td class="cell r{bucket}">{h(text)}</td>'


def _agentdojo_summary(name: str, table: Sequence[Mapping[str, Any]]) -> str:
    """AgentDojo's table: utility and attack success rate per suite × backend × policy ×
    defence, with intervals and the change against the same group without defence."""
    if not table or any(c not in table[0] for c in AGENTDOJO_COLUMNS):
        return _generic_summary(name, table)

    def delta(value: object, base: object) -> str:
        v, b = _float(value), _float(base)
        return "—" if v is None or b is None else f"{v - b:+.2f}"

    body = []
    for r in table:
        asr_delta = delta(r["attack_success_rate"], r["baseline_attack_success_rate"])
        body.append(f"<tr><td>{h(_text(r['suite']))}</td><td>{h(_text(r['backend']))}</td>"
                    f"<td>{h(_text(r['policy']))}</td><td>{h(_text(r['defence']))}</td>"
                    f'<td class="num">{h(_int(r["pairs"]))}</td>'
                    + _rate_cell(r["utility"], r["utility_low"], r["utility_high"], True)
                    + f'<td class="num">{delta(r["utility"], r["baseline_utility"])}</td>'
                    + _rate_cell(r["attack_success_rate"], r["asr_low"], r["asr_high"], False)
                    + f'<td class="num">{asr_delta}</td></tr>\n')
    head = ["suite", "backend", "policy", "defence", "pairs", "utility [95 % Wilson]",
            "Δ utility", "attack success [95 % Wilson]", "Δ attack success"]
    return (f'<h2 id="suite-{attr(name)}">AgentDojo</h2>\n'
            '<p class="muted">Utility and attack success rate by AgentDojo\'s own '
            "<code>utility</code> and <code>security</code> checks, per (user task, "
            "injection task) pair; Δ: the change against the same suite, backend and "
            f"policy without defence (<code>results/tables/{h(name)}.csv</code>).</p>\n"
            + _fold("Utility and attack success: suite × backend × policy × defence",
                    len(body), _table(head, body, "matrix",
                                      ["pairs", "Δ utility", "Δ attack success"])))


def _generic_summary(name: str, table: Sequence[Mapping[str, Any]]) -> str:
    """A suite table the viewer has no layout for (``agentdojo.csv`` ...): as it is, each
    cell as the file writes it."""
    if not table:
        return ""
    columns = list(table[0])

    def fmt(value: object) -> str:  # the cell as the file writes it; empty: a dash
        return h(_text(value)) or "—"

    body = ["<tr>" + "".join(f"<td>{fmt(r.get(c))}</td>" for c in columns) + "</tr>\n"
            for r in table]
    return (f'<h2 id="suite-{attr(name)}">{h(name)}</h2>\n'
            f'<p class="muted">The table <code>results/tables/{h(name)}.csv</code>.</p>\n'
            + _fold(name, len(body), _table(columns, body)))


def _trials_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    """Runs with repeated trials: success rate with its 95 % Wilson interval, pass@k and
    pass^k for k = n (the same estimators as results/tables/summary_trials.csv)."""
    from reactlab.analysis.stats import pass_at_k, pass_hat_k, wilson

    groups: dict[tuple[str, str, str], list[bool]] = {}
    for r in rows:
        if _trial(r):
            key = (str(r["task"]), str(r["backend"]), str(r["scenario"]))
            groups.setdefault(key, []).append(truthy(r.get("utility", r["verified"])))
    if not groups:
        return ""
    body = []
    for (task, backend, scenario), ok in sorted(groups.items()):
        n, c = len(ok), sum(ok)
        iv = wilson(c, n)
        body.append(f"<tr><td>{h(task)}</td><td>{h(backend)}</td><td>{h(scenario)}</td>"
                    f'<td class="num">{n}</td><td class="num">{c}</td>'
                    f'<td class="num">{iv.estimate:.2f} [{iv.low:.2f}, {iv.high:.2f}]</td>'
                    f'<td class="num">{pass_at_k(n, c, n):.2f}</td>'
                    f'<td class="num">{pass_hat_k(n, c, n):.2f}</td></tr>\n')
    table = _table(["task", "backend", "scenario", "n", "successes",
                    "success rate [95 % Wilson]", "pass@n", "pass^n"], body, "",
                   ["n", "successes", "success rate [95 % Wilson]", "pass@n", "pass^n"])
    return ('<h2 id="trials">Repeated trials</h2>\n'
            + _fold("Run groups with trials", len(body), table))


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


#: The suite tables the index has a layout for (by table name, a benchmark's
#: ``Benchmark.tables``); any other suite table is shown as it is (:func:`_generic_summary`).
SUMMARIES: dict[str, Callable[[str, Sequence[Mapping[str, Any]]], str]] = {
    "bfcl": _bfcl_summary, "agentdojo": _agentdojo_summary}


def render_index(rows: Sequence[Mapping[str, Any]], suite_rows: Sequence[SuiteRow] = (),
                 suite_tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
                 ) -> str:
    """The index page.

    ``rows`` are the lesson runs: each needs ``task``, ``backend``, ``scenario``,
    ``termination``, ``verified``, ``steps``, ``tokens_sent``; ``answered``, ``calls``,
    ``findings``, ``trial`` and ``href`` are used when present (rows of ``runs.csv`` work
    as they are). ``suite_rows`` are suite cases (:data:`SuiteRow`); ``suite_tables``
    maps a suite table's name (``bfcl``, ``agentdojo`` ...) to its rows, summarised in
    that order.
    """
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
            _lesson_summary(lesson)]
    for name, table in tables.items():
        body.append(SUMMARIES.get(name, _generic_summary)(name, table))
    body.append(_trials_summary(rows))
    body.append(_run_list_section(runs))
    return doc("reactlab — results", "".join(body), css=INDEX_CSS, script=INDEX_JS)
