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
"""

from __future__ import annotations

import math
from pathlib import Path

from reactlab.analysis import style
from reactlab.analysis.figures import save
from reactlab.core.errors import TraceError

#: Category panels side by side before wrapping to another row of panels.
PANELS_PER_ROW = 3
MEASURED = "measured"
#: The rate axis, with room on the right for the counts (k/n, n) inside the panel.
RIGHT = 1.2
TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def bfcl_accuracy(bfcl_csv: str | Path, out_png: str | Path) -> Path:
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
    for i, ax in enumerate(axes.flat):
        if i >= len(categories):
            ax.set_visible(False)
            continue
        category = categories[i]
        rows = measured[measured.category == category]
        for r in rows.itertuples():
            key = (str(r.backend), str(r.scenario))
            y = y_of[key]
            low = max(0.0, float(r.accuracy) - float(r.ci_low))
            high = max(0.0, float(r.ci_high) - float(r.accuracy))
            look = looks[key[0]]
            ax.errorbar([r.accuracy], [y], xerr=[[low], [high]], fmt=look.marker, ms=3.5,
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
    fig.suptitle("BFCL accuracy by its own checker, per category; 95 % Wilson interval, "
                 f"k/n at the right{note}", fontsize=8.5)
    fig.supxlabel("accuracy", fontsize=8)
    return save(fig, out_png)[0]


#: The columns of ``agentdojo.csv`` the figure reads.
AGENTDOJO_COLUMNS = ("suite", "backend", "policy", "defence", "pairs", "utility",
                     "utility_low", "utility_high", "attack_success_rate", "asr_low",
                     "asr_high")


def agentdojo_rates(agentdojo_csv: str | Path, out_png: str | Path) -> Path:
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
        for value, low, high, colour, marker, dy, label in kinds:
            ys = [y_of[(str(r.backend), str(r.policy), str(r.defence))] + dy
                  for r in rows.itertuples()]
            xs = rows[value].astype(float).tolist()
            lo = (rows[value].astype(float) - rows[low].astype(float)).clip(lower=0).tolist()
            hi = (rows[high].astype(float) - rows[value].astype(float)).clip(lower=0).tolist()
            ax.errorbar(xs, ys, xerr=[lo, hi], fmt=marker, ms=3.2, color=colour,
                        elinewidth=1.0, capsize=2, label=label if i == 0 else None)
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
    fig.legend(loc="outside right upper", fontsize=7, frameon=False)
    fig.suptitle("AgentDojo by its own checks: utility and attack success rate per suite; "
                 "rows: backend · policy · defence; 95 % Wilson interval", fontsize=8.5,
                 x=0.02, ha="left")
    fig.supxlabel("rate over the pairs run", fontsize=8)
    return save(fig, out_png)[0]
