"""The figure of success rates with 95 % Wilson intervals, drawn from
``summary_trials.csv`` (deterministic bytes, like every figure).

It stays readable at thousands of runs: one panel per backend (at most
:data:`PANELS_PER_ROW` side by side, more panels wrap to further rows), one row per
scenario, the runs of every task pooled (successes and trials summed over the tasks of
that backend and scenario) into one rate with its Wilson interval. The number of rows is
the number of scenarios, whatever the number of tasks.
"""

from __future__ import annotations

import math
from pathlib import Path

from reactlab.analysis.figures import _plt, save
from reactlab.analysis.stats import wilson

#: Backend panels side by side before wrapping to another row of panels.
PANELS_PER_ROW = 4


def pooled(summary_csv: str | Path) -> dict[tuple[str, str], tuple[int, int]]:
    """(backend, scenario) -> (successes, trials), summed over the tasks."""
    import pandas as pd  # lazy: heavy (pandas)

    df = pd.read_csv(summary_csv)
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for (backend, scenario), g in df.groupby(["backend", "scenario"], sort=True):
        out[(str(backend), str(scenario))] = (int(g.successes.sum()), int(g.n.sum()))
    return out


def success_rates(summary_csv: str | Path, out_png: str | Path) -> Path:
    plt = _plt()
    groups = pooled(summary_csv)
    backends = sorted({b for b, _ in groups})
    scenarios = sorted({s for _, s in groups})
    n_cols = min(PANELS_PER_ROW, max(1, len(backends)))
    n_rows = math.ceil(len(backends) / n_cols) if backends else 1
    height = 0.9 + 0.19 * max(1, len(scenarios))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(2.0 + 2.6 * n_cols, 0.5 + height * n_rows),
                             dpi=100, sharey=True, squeeze=False)
    y_of = {s: i for i, s in enumerate(scenarios)}
    for i, ax in enumerate(axes.flat):
        if i >= len(backends):
            ax.set_visible(False)
            continue
        backend = backends[i]
        ys, xs, lo, hi, labels = [], [], [], [], []
        for s in scenarios:
            if (backend, s) not in groups:
                continue
            k, n = groups[(backend, s)]
            iv = wilson(k, n)
            ys.append(y_of[s])
            xs.append(iv.estimate)
            lo.append(max(0.0, iv.estimate - iv.low))
            hi.append(max(0.0, iv.high - iv.estimate))
            labels.append(f"{k}/{n}")
        colour = f"C{i % 10}"
        ax.errorbar(xs, ys, xerr=[lo, hi], fmt="o", ms=3.5, color=colour, ecolor=colour,
                    elinewidth=1.0, capsize=2)
        for y, text in zip(ys, labels, strict=True):
            ax.annotate(text, (1.0, y), xycoords=("axes fraction", "data"),
                        xytext=(3, 0), textcoords="offset points", fontsize=6,
                        va="center", ha="left", annotation_clip=False)
        ax.set_title(backend, fontsize=9)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(len(scenarios) - 0.5, -0.5)
        ax.set_yticks(range(len(scenarios)), scenarios, fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("Success rate per scenario and backend (answer delivered and verified), "
                 "tasks and trials pooled; 95 % Wilson interval; k/n at the right", fontsize=9)
    fig.supxlabel("success rate", fontsize=8)
    fig.tight_layout()
    return save(fig, out_png)[0]
