"""The index's summaries, each a section of the page: the lesson's runs (by backend with
a 95 % Wilson interval, then scenario × backend and task × backend matrices of
verified/runs), a suite table with its own layout (BFCL's accuracy per category, its
error types and the checker agreement; AgentDojo's utility and attack success rate) or
any other suite table as it is, and the runs with repeated trials. Long matrices are
folded in a ``<details>`` element."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reactlab.analysis.stats import pass_at_k, pass_hat_k, wilson
from reactlab.views.page import attr, h
from reactlab.views.rows import VERDICT, truthy
from reactlab.views.rows import count as _int
from reactlab.views.rows import number as _float
from reactlab.views.rows import text as _text
from reactlab.views.rows import trial as _trial

__all__ = ["AGENTDOJO_COLUMNS", "FOLD_ROWS", "agentdojo_summary", "bfcl_summary",
           "generic_summary", "lesson_summary", "trials_summary"]

#: A summary matrix with more rows than this is folded (``<details>`` closed).
FOLD_ROWS = 30


def _rate_class(k: int, n: int) -> str:
    if n == 0:
        return "na"
    p = k / n
    return "r5" if p == 1 else f"r{min(4, int(p * 5))}"


def _interval(k: int, n: int) -> str:
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


def lesson_summary(runs: Sequence[list[Any]]) -> str:
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


def bfcl_summary(name: str, table: Sequence[Mapping[str, Any]]) -> str:
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


def agentdojo_summary(name: str, table: Sequence[Mapping[str, Any]]) -> str:
    """AgentDojo's table: utility and attack success rate per suite × backend × policy ×
    defence, with intervals and the change against the same group without defence."""
    if not table or any(c not in table[0] for c in AGENTDOJO_COLUMNS):
        return generic_summary(name, table)

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


def generic_summary(name: str, table: Sequence[Mapping[str, Any]]) -> str:
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


def trials_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    """Runs with repeated trials: success rate with its 95 % Wilson interval, pass@k and
    pass^k for k = n (the same estimators as results/tables/summary_trials.csv)."""
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
