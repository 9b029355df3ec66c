"""The index's summaries, each a section of the page: the lesson's runs (by backend with
a 95 % Wilson interval, then scenario × backend and task × backend matrices of
verified/runs), a suite table with its benchmark's own layout (``Benchmark.summaries``,
drawn with this module's pieces: :func:`kit`) or any other suite table as it is, and the
runs with repeated trials. Long matrices are folded in a ``<details>`` element.

A rate gets its interval only where something is estimated, by the tables' rule
(:func:`reactlab.analysis.stats.inferential`, docs/statistics.md): runs of stochastic
backends only (a sampling local model, a live API), at least ``statistics.min_trials`` of
them; a deterministic backend's runs repeat one outcome, and their rate is shown alone."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reactlab.analysis.stats import inferential, pass_at_k, pass_hat_k, wilson
from reactlab.config.trials import MIN_TRIALS
from reactlab.views.counts import count
from reactlab.views.page import attr, h
from reactlab.views.rows import VERDICT, truthy
from reactlab.views.rows import count as _int
from reactlab.views.rows import number as _float
from reactlab.views.rows import text as _text
from reactlab.views.rows import trial as _trial

__all__ = ["FOLD_ROWS", "KIT", "generic_summary", "kit", "lesson_summary", "trials_summary"]

#: A summary matrix with more rows than this is folded (``<details>`` closed).
FOLD_ROWS = 30


def _rate_class(k: int, n: int) -> str:
    if n == 0:
        return "na"
    p = k / n
    return "r5" if p == 1 else f"r{min(4, int(p * 5))}"


def _interval(k: int, n: int, estimated: bool) -> str:
    """The rate ``k/n``, with its 95 % Wilson interval when ``estimated``."""
    if n == 0:
        return "—"
    iv = wilson(k, n)
    if not estimated:
        return f"{iv.estimate:.2f}"
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


def _matrix(runs: Sequence[list[Any]], by: int, title: str, label: str, kit: _Kit) -> str:
    """verified/runs per (``by`` column value) × backend, plus the row's total (its
    interval where :meth:`_Kit.estimated`)."""
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
        pooled = []
        for b in backends:
            k, n = cells.get((key, b), [0, 0])
            k_all, n_all = k_all + k, n_all + n
            pooled += [b] if n else []
            tds.append(f'<td class="cell {_rate_class(k, n)}">{f"{k}/{n}" if n else "—"}</td>')
        extra = f'<td class="num">{len(tasks[key])}</td>' if by == 3 else ""
        total = _interval(k_all, n_all, kit.estimated(pooled, n_all))
        body.append(f"<tr><td>{h(key)}</td>{extra}{''.join(tds)}"
                    f'<td class="num">{total}</td></tr>\n')
    head = [label, *(["tasks"] if by == 3 else []), *backends, "all backends [95 % Wilson]"]
    return _fold(title, len(keys), _table(head, body, "matrix", [head[-1]]))


def lesson_summary(runs: Sequence[list[Any]], kit: _Kit | None = None) -> str:
    """The lesson's runs by backend, then the scenario × backend and task × backend
    matrices; ``kit`` (:func:`kit`) says which rates get an interval."""
    kit = kit or KIT
    if not runs:
        return ""
    by_backend: dict[str, dict[str, int]] = {}
    for r in runs:
        counts = by_backend.setdefault(r[2], {"verified": 0, "rejected": 0, "no answer": 0})
        counts[r[VERDICT]] += 1
    selections = count([{"backend": r[2], "agent": r[4], "trial": r[5]} for r in runs],
                       "backend")
    body = []
    for b in sorted(by_backend):
        c = by_backend[b]
        n = sum(c.values())
        body.append(f"<tr><td>{h(b)}</td><td class=\"num\">{n}</td>"
                    f"<td class=\"num\">{c['verified']}</td><td class=\"num\">{c['rejected']}"
                    f"</td><td class=\"num\">{c['no answer']}</td>"
                    f'<td class="num">{selections[b]["one_draw"]}</td>'
                    f'<td class="num">{selections[b]["lesson_loop"]}</td>'
                    f'<td class="num">{_interval(c["verified"], n, kit.estimated([b], n))}'
                    "</td></tr>\n")
    numeric = ["runs", "verified", "rejected", "no answer", "one draw", "lesson loop",
               "success rate [95 % Wilson]"]
    out = ['<h2 id="lesson">Lesson runs</h2>\n',
           '<p class="muted">Verified: the answer passed the project\'s verifier. Runs: '
           "every run, a trial of a run with repeated trials one run (as trials.csv and the "
           "exports count them); one draw: the runs without repeated trials (the rows of "
           "runs.csv); lesson loop: the project's loop's runs without repeated trials (the "
           "runs of summary_by_backend.csv). Cells of the matrices: verified/runs, pooled "
           f"over the other factors (trials count as runs). {h(kit.interval_note())}</p>\n",
           _table(["backend", *numeric], body, "", numeric),
           _matrix(runs, 3, "Scenario × backend", "scenario", kit),
           _matrix(runs, 1, "Task × backend", "task", kit)]
    return "".join(out)


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


class _Kit:
    """The pieces a benchmark's summary is made of
    (:class:`reactlab.suites.summaries.SummaryKit`): this module's own, and which rates
    get an interval (:meth:`estimated`), from whether each backend is deterministic."""

    def __init__(self, deterministic: Mapping[str, bool], min_trials: int) -> None:
        self.deterministic = dict(deterministic)
        self.min_trials = min_trials

    def estimated(self, backends: Iterable[str], n: int) -> bool:
        """Whether a rate over ``n`` runs (cases, pairs) of ``backends`` gets its 95 %
        Wilson interval: none of them deterministic (a backend it does not know counts
        as one), and ``n`` at least ``min_trials`` (the tables' rule)."""
        known = [self.deterministic.get(b, True) for b in backends]
        return bool(known) and inferential(any(known), n, self.min_trials)

    def interval_note(self) -> str:
        """The sentence that says which rates have an interval."""
        return ("A rate has its 95 % Wilson interval only where something is estimated: "
                "runs of stochastic backends (a sampling model, a live API), at least "
                f"{self.min_trials} of them (statistics.min_trials); a deterministic "
                "backend repeats one outcome, its rate stands alone (docs/statistics.md).")

    h = staticmethod(h)
    attr = staticmethod(attr)
    text = staticmethod(_text)
    count = staticmethod(_int)
    number = staticmethod(_float)
    rate_class = staticmethod(_rate_class)
    table = staticmethod(_table)
    fold = staticmethod(_fold)
    generic = staticmethod(generic_summary)


def kit(rows: Iterable[Mapping[str, Any]], min_trials: int = MIN_TRIALS) -> _Kit:
    """What the index hands a benchmark's summary (``Benchmark.summaries``) and uses for
    its own: a backend is deterministic when a row of it says so (``deterministic``; a
    row without it counts as deterministic)."""
    fixed: dict[str, bool] = {}
    for r in rows:
        b = str(r["backend"])
        fixed[b] = fixed.get(b, False) or truthy(r.get("deterministic", True))
    return _Kit(fixed, min_trials)


#: A kit that knows no backend: no interval anywhere.
KIT = _Kit({}, MIN_TRIALS)


def trials_summary(rows: Sequence[Mapping[str, Any]], kit: _Kit | None = None) -> str:
    """Runs with repeated trials: success rate with its 95 % Wilson interval (where
    :meth:`_Kit.estimated`), pass@k and pass^k for k = n (the same estimators as
    results/tables/summary_trials.csv)."""
    kit = kit or KIT
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
        body.append(f"<tr><td>{h(task)}</td><td>{h(backend)}</td><td>{h(scenario)}</td>"
                    f'<td class="num">{n}</td><td class="num">{c}</td>'
                    f'<td class="num">{_interval(c, n, kit.estimated([backend], n))}</td>'
                    f'<td class="num">{pass_at_k(n, c, n):.2f}</td>'
                    f'<td class="num">{pass_hat_k(n, c, n):.2f}</td></tr>\n')
    table = _table(["task", "backend", "scenario", "n", "successes",
                    "success rate [95 % Wilson]", "pass@n", "pass^n"], body, "",
                   ["n", "successes", "success rate [95 % Wilson]", "pass@n", "pass^n"])
    return ('<h2 id="trials">Repeated trials</h2>\n'
            f'<p class="muted">{h(kit.interval_note())}</p>\n'
            + _fold("Run groups with trials", len(body), table))
