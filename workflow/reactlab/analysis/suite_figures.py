"""Figures of the outside suites, drawn from their tables (deterministic bytes, like every
figure).

``bfcl_accuracy``: BFCL accuracy by its own checker, one panel per category (the table's
order, then ``all`` pooled), one row per (backend, scenario), a point with its 95 % Wilson
interval and ``k/n`` beside it. The published row of ``bfcl.csv`` is drawn in each
category that has it as a dashed vertical line, labelled as context (another model, data
version and prompt format: not a like-for-like comparison). ``non_live_ast`` (BFCL's mean
of four accuracies, without an interval) is left out.

``agentdojo_rates``: AgentDojo's utility and attack success rate by its own checks, one
panel per AgentDojo suite (banking, slack, travel, workspace), one row per (backend,
policy, defence), each rate with its 95 % Wilson interval (the columns of
``agentdojo.csv``: ``utility``/``utility_low``/``utility_high``,
``attack_success_rate``/``asr_low``/``asr_high``, ``pairs``).

An interval is drawn only where something is estimated, by the tables' rule
(:func:`reactlab.analysis.stats.inferential`, docs/statistics.md): a rate over at least
``statistics.min_trials`` cases (pairs) of a stochastic backend. A deterministic backend
(simulated, scripted, a local model decoding greedily) gives its cases one outcome each,
and a rate over fewer cases estimates nothing worth a bar: its point stands alone. Which
backend is which comes in the figure's mapping, ``statistics`` (the rule's: each
backend's ``deterministic`` and ``min_trials``); a backend it does not name counts as
deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reactlab.analysis import style
from reactlab.analysis.figures import save
from reactlab.analysis.stats import inferential
from reactlab.config.trials import MIN_TRIALS
from reactlab.core.errors import TraceError

#: Category panels side by side before wrapping to another row of panels.
PANELS_PER_ROW = 3
MEASURED = "measured"
#: The rate axis, with room on the right for the counts (k/n, n) inside the panel.
RIGHT = 1.2
TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def estimated(figure: Mapping[str, Any]) -> tuple[Callable[[str, int], bool], int]:
    """(whether a rate of a backend over n cases gets its interval, ``min_trials``), from
    the figure's ``statistics`` (see the module's note)."""
    section = figure.get("statistics") or {}
    fixed = section.get("deterministic") or {}
    min_trials = int(section.get("min_trials", MIN_TRIALS))

    def interval(backend: str, n: int) -> bool:
        return inferential(bool(fixed.get(backend, True)), n, min_trials)

    return interval, min_trials


def _rule(min_trials: int, unit: str) -> str:
    return (f"95 % Wilson interval only over ≥ {min_trials} {unit} of a stochastic backend "
            "(none: deterministic, or fewer)")


def bfcl_accuracy(bfcl_csv: str | Path, out_png: str | Path,
                  figure: Mapping[str, Any]) -> Path:
    import pandas as pd  # lazy: heavy (pandas)

    plt = style.pyplot()
    df = pd.read_csv(bfcl_csv, keep_default_na=False, na_values=[""])
    df["scenario"] = df["scenario"].fillna("")
    measured = df[(df.source == MEASURED) & (df.category != "non_live_ast")]
    if measured.empty:
        raise TraceError(f"{bfcl_csv}: no measured row to draw")
    published = df[df.source != MEASURED]
    categories = list(dict.fromkeys(measured.category))
    series = sorted({(str(b), str(s)) for b, s in zip(measured.backend, measured.scenario,
                                                       strict=True)})
    y_of = {key: i for i, key in enumerate(series)}
    n_cols = min(PANELS_PER_ROW, len(categories))
    n_rows = math.ceil(len(categories) / n_cols)
    height = 0.8 + 0.22 * len(series)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(2.4 + 3.0 * n_cols,
                                                      0.6 + height * n_rows),
                             dpi=100, sharey=True, squeeze=False)
    looks = {b: style.series(i) for i, b in enumerate(sorted({b for b, _ in series}))}
    interval, min_trials = estimated(figure)
    for i, ax in enumerate(axes.flat):
        if i >= len(categories):
            ax.set_visible(False)
            continue
        category = categories[i]
        rows = measured[measured.category == category]
        for r in rows.itertuples():
            key = (str(r.backend), str(r.scenario))
            y = y_of[key]
            look = looks[key[0]]
            ax.plot([r.accuracy], [y], look.marker, ms=3.5, color=look.colour)
            if interval(key[0], int(r.cases)):
                low = max(0.0, float(r.accuracy) - float(r.ci_low))
                high = max(0.0, float(r.ci_high) - float(r.accuracy))
                ax.errorbar([r.accuracy], [y], xerr=[[low], [high]], fmt="none",
                            color=look.colour, elinewidth=1.0, capsize=2)
            ax.annotate(f"{int(r.correct)}/{int(r.cases)}", (1.04, y), fontsize=6,
                        va="center", ha="left")
        ref = published[published.category == category]
        if not ref.empty:
            x = float(ref.accuracy.iloc[0])
            ax.axvline(x, color="grey", ls="--", lw=0.9)
            ax.annotate(f"published {x:.2f}", (x, 0.0), xycoords=("data", "axes fraction"),
                        xytext=(2, 2), textcoords="offset points", fontsize=6,
                        color="dimgrey", rotation=90, va="bottom", ha="left")
        ax.set_title(category, fontsize=9)
        ax.set_xlim(-0.02, RIGHT)
        ax.set_xticks(TICKS)
        ax.set_ylim(len(series) - 0.5, -0.5)
        ax.set_yticks(range(len(series)), [f"{b} · {s}" if s else b for b, s in series],
                      fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(alpha=0.3)
    note = ""
    if not published.empty:
        note = (f"; dashed: {published.backend.iloc[0]}, published (BFCL v3, prompt mode), "
                "context only, not like-for-like")
    fig.suptitle("BFCL accuracy by its own checker, per category; k/n at the right"
                 f"{note}\n{_rule(min_trials, 'cases')}", fontsize=8.5)
    fig.supxlabel("accuracy", fontsize=8)
    return save(fig, out_png)[0]


#: The columns of ``agentdojo.csv`` the figure reads.
AGENTDOJO_COLUMNS = ("suite", "backend", "policy", "defence", "pairs", "utility",
                     "utility_low", "utility_high", "attack_success_rate", "asr_low",
                     "asr_high")


def agentdojo_rates(agentdojo_csv: str | Path, out_png: str | Path,
                    figure: Mapping[str, Any]) -> Path:
    import pandas as pd  # lazy: heavy (pandas)

    plt = style.pyplot()
    df = pd.read_csv(agentdojo_csv, keep_default_na=False, na_values=[""])
    missing = [c for c in AGENTDOJO_COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(f"{agentdojo_csv}: no column {', '.join(missing)}")
    if df.empty:
        raise TraceError(f"{agentdojo_csv}: no row to draw")
    suites = list(dict.fromkeys(str(s) for s in df.suite))
    series = list(dict.fromkeys((str(r.backend), str(r.policy), str(r.defence))
                                for r in df.itertuples()))
    y_of = {key: i for i, key in enumerate(series)}
    interval, min_trials = estimated(figure)
    n_cols = min(2, len(suites))
    n_rows = math.ceil(len(suites) / n_cols)
    height = 0.8 + 0.26 * len(series)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.0 + 3.6 * n_cols,
                                                      0.7 + height * n_rows),
                             dpi=100, sharey=True, squeeze=False)
    kinds = (("utility", "utility_low", "utility_high", style.UTILITY[0], "o", -0.15,
              "utility"),
             ("attack_success_rate", "asr_low", "asr_high", style.ATTACK[0], "s", 0.15,
              "attack success rate"))
    for i, ax in enumerate(axes.flat):
        if i >= len(suites):
            ax.set_visible(False)
            continue
        rows = df[df.suite == suites[i]]
        shown = rows[[interval(str(r.backend), int(r.pairs)) for r in rows.itertuples()]]
        for value, low, high, colour, marker, dy, label in kinds:
            ys = [y_of[(str(r.backend), str(r.policy), str(r.defence))] + dy
                  for r in rows.itertuples()]
            ax.plot(rows[value].astype(float).tolist(), ys, marker, ms=3.2, color=colour,
                    label=label if i == 0 else None)
            if shown.empty:
                continue
            lo = (shown[value].astype(float) - shown[low].astype(float)).clip(lower=0)
            hi = (shown[high].astype(float) - shown[value].astype(float)).clip(lower=0)
            ax.errorbar(shown[value].astype(float).tolist(),
                        [y_of[(str(r.backend), str(r.policy), str(r.defence))] + dy
                         for r in shown.itertuples()], xerr=[lo.tolist(), hi.tolist()],
                        fmt="none", color=colour, elinewidth=1.0, capsize=2)
        for r in rows.itertuples():
            ax.annotate(f"n={int(r.pairs)}", (1.04, y_of[(str(r.backend), str(r.policy),
                                                           str(r.defence))]),
                        fontsize=6, va="center", ha="left")
        ax.set_title(suites[i], fontsize=9)
        ax.set_xlim(-0.02, RIGHT)
        ax.set_xticks(TICKS)
        ax.set_ylim(len(series) - 0.5, -0.5)
        ax.set_yticks(range(len(series)), [" · ".join(k) for k in series], fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(alpha=0.3)
    fig.legend(loc="outside right center", fontsize=7, frameon=False)
    fig.suptitle("AgentDojo by its own checks: utility and attack success rate per suite; "
                 f"rows: backend · policy · defence\n{_rule(min_trials, 'pairs')}", fontsize=8.5,
                 x=0.02, ha="left")
    fig.supxlabel("rate over the pairs run", fontsize=8)
    return save(fig, out_png)[0]
