"""The benchmarks' summaries on the viewer's index (their ``Benchmark.summaries``): BFCL's
accuracy per category, its error types and the checker agreement (``bfcl.csv``);
AgentDojo's utility and attack success rate (``agentdojo.csv``).

A summary is a function of the table's name, its rows and a :class:`SummaryKit`: the
viewer's own HTML pieces (escaping, a table, a folded section, the rate colours), which
the viewer hands in when it renders the index (``reactlab.views.index``, a later stage),
so that a benchmark's layout is its own and the viewer names no benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

__all__ = ["AGENTDOJO_COLUMNS", "Summary", "SummaryKit", "agentdojo_summary", "bfcl_summary"]


class SummaryKit(Protocol):
    """The viewer's HTML pieces (``reactlab.views.summaries.KIT``)."""

    def h(self, text: object) -> str:
        """``value`` as escaped HTML text."""

    def attr(self, text: object) -> str:
        """``value`` escaped for an attribute."""

    def text(self, value: object) -> str:
        """A text cell (NaN and None empty)."""

    def count(self, value: object) -> int | str:
        """A count cell as an int (``""`` when missing)."""

    def number(self, value: object) -> float | None:
        """A number cell (None when missing)."""

    def rate_class(self, k: int, n: int) -> str:
        """The colour class of the rate ``k/n``."""

    def table(
        self, head: Sequence[str], body: Sequence[str], cls: str = "", numeric: Sequence[str] = ()
    ) -> str:
        """A table in a horizontally scrolling box."""

    def fold(self, title: str, n_rows: int, content: str) -> str:
        """``content`` under a ``<details>`` that starts open unless it has many rows."""

    def generic(self, name: str, table: Sequence[Mapping[str, Any]]) -> str:
        """A table shown as it is."""

    def estimated(self, backends: Iterable[str], n: int) -> bool:
        """Whether a rate over ``n`` cases (pairs) of ``backends`` gets its interval: a
        stochastic backend, ``n`` at least ``statistics.min_trials`` (the tables' rule)."""

    def interval_note(self) -> str:
        """The sentence that says which rates have an interval."""


#: A benchmark's summary of one of its tables: (table name, rows, the viewer's kit) → HTML.
Summary = Callable[[str, Sequence[Mapping[str, Any]], SummaryKit], str]


def _bfcl_cell(cell: Mapping[str, Any] | None, kit: SummaryKit) -> str:
    """One (backend, scenario) × category cell of BFCL's accuracy matrix."""
    if cell is None:
        return '<td class="cell na">—</td>'
    n, k = kit.count(cell["cases"]), kit.count(cell["correct"])
    acc, lo, hi = (kit.number(cell["accuracy"]), kit.number(cell["ci_low"]),
                   kit.number(cell["ci_high"]))
    text = "—" if acc is None else f"{acc * 100:.1f} %"
    detail = f"n={n}"
    estimated = isinstance(n, int) and kit.estimated([str(cell["backend"])], n)
    if lo is not None and hi is not None and estimated:
        detail = f"[{lo * 100:.0f}–{hi * 100:.0f}] {detail}"
    cls = kit.rate_class(int(k), int(n)) if isinstance(n, int) and isinstance(k, int) \
        and n else "na"
    return (f'<td class="cell {cls}" title="{kit.attr(f"{k}/{n} correct")}">'
            f'{kit.h(text)}<br><span class="muted small">{kit.h(detail)}</span></td>')


def _bfcl_errors(groups: Mapping[tuple[str, str], Mapping[str, Mapping[str, Any]]],
                 kit: SummaryKit) -> tuple[list[str], list[str]]:
    """The rows of BFCL's error types: pooled with the checker agreement, then per
    category."""
    errors = []
    for (backend, scenario), cats in sorted(groups.items()):
        pooled = cats.get("all")
        if pooled is None:
            continue
        agreement = kit.number(pooled.get("agreement"))
        errors.append(
            f"<tr><td>{kit.h(backend)}</td><td>{kit.h(scenario)}</td>"
            f'<td class="num">{kit.h(kit.count(pooled["cases"]))}</td>'
            f'<td class="num">{kit.h(kit.count(pooled["correct"]))}</td>'
            f'<td class="num">{"—" if agreement is None else f"{agreement:.2f}"}</td>'
            f'<td class="text">{kit.h(kit.text(pooled.get("error_types")) or "—")}</td>'
            "</tr>\n"
        )
    per_cat = []
    for (backend, scenario), cats in sorted(groups.items()):
        for c, r in cats.items():
            if c in ("all", "non_live_ast") or not kit.text(r.get("error_types")):
                continue
            per_cat.append(
                f"<tr><td>{kit.h(backend)}</td><td>{kit.h(scenario)}</td><td>{kit.h(c)}</td>"
                f'<td class="text">{kit.h(kit.text(r.get("error_types")))}</td></tr>\n'
            )
    return errors, per_cat


def bfcl_summary(name: str, table: Sequence[Mapping[str, Any]], kit: SummaryKit) -> str:
    """BFCL's table (``bfcl.csv``): accuracy per category × (backend, scenario), the
    published context row, and BFCL's error types with the checker agreement."""
    measured = [r for r in table if kit.text(r.get("source")) == "measured"]
    published = [r for r in table if kit.text(r.get("source")) not in ("measured", "")]
    categories: list[str] = []
    for r in [*measured, *published]:
        if str(r["category"]) not in categories:
            categories.append(str(r["category"]))
    groups: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for r in measured:
        groups.setdefault((str(r["backend"]), kit.text(r["scenario"])), {})[str(r["category"])] = r
    body = []
    for (backend, scenario), cats in sorted(groups.items()):
        tds: list[str] = []
        for c in categories:
            tds.append(_bfcl_cell(cats.get(c), kit))
        body.append(f"<tr><td>{kit.h(backend)}</td><td>{kit.h(scenario)}</td>{''.join(tds)}</tr>\n")
    if published:
        by_cat = {str(r["category"]): r for r in published}
        published_tds = "".join(
            f'<td class="cell">{(kit.number(by_cat[c]["accuracy"]) or 0) * 100:.2f} %</td>'
            if c in by_cat
            else '<td class="cell na">—</td>'
            for c in categories
        )
        src = kit.text(published[0].get("source"))
        body.append(
            f'<tr class="published"><td title="{kit.attr(src)}">'
            f"{kit.h(published[0]['backend'])}</td><td>published, not like-for-like"
            f"</td>{published_tds}</tr>\n"
        )
    matrix = kit.table(["backend", "scenario", *categories], body, "matrix")
    errors, per_cat = _bfcl_errors(groups, kit)
    out = [
        '<h2 id="suite-bfcl">BFCL</h2>\n',
        '<p class="muted">Accuracy by BFCL\'s own checker, per category, with its 95 % '
        "Wilson interval in points and the number of cases; <code>non_live_ast</code> "
        "is BFCL's unweighted mean of the four non-live AST categories. The published "
        "row is context, not a like-for-like comparison (another model, data version and "
        f"prompt format). {kit.h(kit.interval_note())}</p>\n",
        kit.fold("Accuracy: category × backend and scenario", len(body), matrix),
    ]
    if errors:
        out.append(
            kit.fold(
                "Error types (BFCL's checker, all categories pooled) and agreement "
                "with the project's trajectory verdict",
                len(errors),
                kit.table(
                    ["backend", "scenario", "cases", "correct", "agreement", "error types"],
                    errors,
                    "",
                    ["cases", "correct", "agreement"],
                ),
            )
        )
    if per_cat:
        out.append(
            kit.fold(
                "Error types per category",
                len(per_cat),
                kit.table(["backend", "scenario", "category", "error types"], per_cat),
            )
        )
    return "".join(out)


AGENTDOJO_COLUMNS = (
    "suite",
    "backend",
    "policy",
    "defence",
    "pairs",
    "utility",
    "utility_low",
    "utility_high",
    "attack_success_rate",
    "asr_low",
    "asr_high",
    "baseline_utility",
    "baseline_attack_success_rate",
)


def _rate_cell(kit: SummaryKit, value: object, low: object, high: object, good_high: bool,
               estimated: bool) -> str:
    v, lo, hi = kit.number(value), kit.number(low), kit.number(high)
    if v is None:
        return '<td class="cell na">—</td>'
    shown = estimated and lo is not None and hi is not None
    text = f"{v:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if shown else "")
    bucket = min(5, int((v if good_high else 1 - v) * 5 + 1e-9))
    return f'<td class="cell r{bucket}">{kit.h(text)}</td>'


def agentdojo_summary(name: str, table: Sequence[Mapping[str, Any]], kit: SummaryKit) -> str:
    """AgentDojo's table: utility and attack success rate per suite × backend × policy ×
    defence, with intervals and the change against the same group without defence."""
    if not table or any(c not in table[0] for c in AGENTDOJO_COLUMNS):
        return kit.generic(name, table)

    def delta(value: object, base: object) -> str:
        v, b = kit.number(value), kit.number(base)
        return "—" if v is None or b is None else f"{v - b:+.2f}"

    body = []
    for r in table:
        asr_delta = delta(r["attack_success_rate"], r["baseline_attack_success_rate"])
        pairs = kit.count(r["pairs"])
        estimated = isinstance(pairs, int) and kit.estimated([kit.text(r["backend"])], pairs)
        body.append(
            f"<tr><td>{kit.h(kit.text(r['suite']))}</td><td>{kit.h(kit.text(r['backend']))}</td>"
            f"<td>{kit.h(kit.text(r['policy']))}</td><td>{kit.h(kit.text(r['defence']))}</td>"
            f'<td class="num">{kit.h(kit.count(r["pairs"]))}</td>'
            + _rate_cell(kit, r["utility"], r["utility_low"], r["utility_high"], True,
                         estimated)
            + f'<td class="num">{delta(r["utility"], r["baseline_utility"])}</td>'
            + _rate_cell(kit, r["attack_success_rate"], r["asr_low"], r["asr_high"], False,
                         estimated)
            + f'<td class="num">{asr_delta}</td></tr>\n'
        )
    head = [
        "suite",
        "backend",
        "policy",
        "defence",
        "pairs",
        "utility [95 % Wilson]",
        "Δ utility",
        "attack success [95 % Wilson]",
        "Δ attack success",
    ]
    return (
        f'<h2 id="suite-{kit.attr(name)}">AgentDojo</h2>\n'
        '<p class="muted">Utility and attack success rate by AgentDojo\'s own '
        "<code>utility</code> and <code>security</code> checks, per (user task, "
        "injection task) pair; Δ: the change against the same suite, backend and "
        f"policy without defence (<code>results/tables/{kit.h(name)}.csv</code>). "
        f"{kit.h(kit.interval_note())}</p>\n"
        + kit.fold(
            "Utility and attack success: suite × backend × policy × defence",
            len(body),
            kit.table(head, body, "matrix", ["pairs", "Δ utility", "Δ attack success"]),
        )
    )
