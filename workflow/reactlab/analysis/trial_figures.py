"""The figure of success rates, drawn from ``summary_trials.csv`` (deterministic bytes,
like every figure).

It stays readable at thousands of runs: the runs of every task are pooled (successes and
trials summed over the tasks of one backend, agent and scenario), one row per scenario,
so the number of rows is the number of scenarios, whatever the number of tasks. Panels
as in the run figures (:func:`reactlab.analysis.figures.run_panels`): the lesson loop's
backends apart from the agent frameworks, each panel the columns that ran the same
scenarios, at most :data:`reactlab.analysis.style.MAX_SERIES` series a panel; rows sorted
by the success rate. A 95 % Wilson interval only where the table gives one (repeated
stochastic trials, at least ``statistics.min_trials``: docs/statistics.md); a
deterministic condition is a hollow marker without an interval; ``k/n`` beside each point.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactlab.analysis import style
from reactlab.analysis.figures import _column, _runs_with_agent, run_panels, save
from reactlab.analysis.stats import wilson


@dataclass(frozen=True)
class Pool:
    """The trials of one (backend, agent, scenario), summed over the tasks."""

    successes: int
    n: int
    deterministic: bool
    interval: bool


def pooled(summary_csv: str | Path) -> dict[tuple[str, str, str], Pool]:
    """(backend, agent, scenario without the agent) -> its :class:`Pool`. An interval
    applies when every pooled row has one in the table (or, in a table without interval
    columns, is not deterministic)."""
    import pandas as pd  # lazy: heavy (pandas)

    df = _runs_with_agent(pd.read_csv(summary_csv))
    if "deterministic" not in df.columns:
        df["deterministic"] = False
    df["deterministic"] = df.deterministic.astype(bool)
    has = (df.success_low.notna() if "success_low" in df.columns else ~df.deterministic)
    df["has_interval"] = has
    out: dict[tuple[str, str, str], Pool] = {}
    for (backend, agent, base), g in df.groupby(["backend", "agent", "base"], sort=True):
        out[(str(backend), str(agent), str(base))] = Pool(
            int(g.successes.sum()), int(g.n.sum()), bool(g.deterministic.all()),
            bool(g.has_interval.all()))
    return out


def _panel(ax: Any, groups: dict[tuple[str, str, str], Pool],
           cols: dict[str, tuple[str, str]], title: str) -> None:
    names = list(cols)
    mine = {key: p for key, p in groups.items() if _column(key[0], key[1]) in cols}
    rates: dict[str, list[float]] = {}
    for (_, _, base), pool in mine.items():
        rates.setdefault(base, []).append(pool.successes / pool.n if pool.n else 0.0)
    rows = sorted(rates, key=lambda s: (-sum(rates[s]) / len(rates[s]), s))
    step = 0.76 / len(names)
    for i, name in enumerate(names):
        look = style.series(i)
        backend, agent = cols[name]
        label: str | None = name.replace("\n", " ")
        for base in rows:
            p = mine.get((backend, agent, base))
            if p is None or not p.n:
                continue
            y = rows.index(base) - 0.38 + step * (i + 0.5)
            iv = wilson(p.successes, p.n)
            xerr = ([[max(0.0, iv.estimate - iv.low)], [max(0.0, iv.high - iv.estimate)]]
                    if p.interval else None)
            ax.errorbar([iv.estimate], [y], xerr=xerr, fmt=look.marker, ms=4.5,
                        color=look.colour, mfc="white" if p.deterministic else look.colour,
                        elinewidth=1.0, capsize=2, label=label)
            label = None
            ax.annotate(f"{p.successes}/{p.n}", (iv.high if p.interval else iv.estimate, y),
                        xytext=(4, 0), textcoords="offset points", fontsize=6,
                        va="center", ha="left", color=look.colour)
    ax.set_xlim(-0.03, 1.18)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), rows, fontsize=7.5)
    for y in range(1, len(rows)):
        ax.axhline(y - 0.5, color="0.9", lw=0.6)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def success_rates(summary_csv: str | Path, out_png: str | Path) -> Path:
    import pandas as pd  # lazy: heavy (pandas)

    plt = style.pyplot()
    groups = pooled(summary_csv)
    cells = pd.DataFrame([{"backend": b, "agent": a, "task": "", "base": s}
                          for b, a, s in groups])
    panels = run_panels(cells) if len(cells) else []
    shapes = []
    for title, cols in panels:
        keys = {c: next((b, a) for b, a, _ in groups if _column(b, a) == c) for c in cols}
        n_rows = len({s for b, a, s in groups if (b, a) in keys.values()})
        shapes.append((title, keys, n_rows))
    # 0.11 in per series in a row: its k/n label (6 pt) clear of the next one
    heights = [0.7 + n * (0.08 + 0.11 * len(keys)) for _, keys, n in shapes] or [1.0]
    fig, axes = plt.subplots(max(1, len(shapes)), 1, figsize=(9.0, 0.8 + sum(heights)),
                             dpi=100, squeeze=False, height_ratios=heights)
    for ax, (title, keys, _) in zip(axes[:, 0], shapes, strict=False):
        _panel(ax, groups, keys, title)
    fig.suptitle("Success rate per scenario (answer delivered and verified), tasks pooled; "
                 "k/n beside each point\n95 % Wilson interval only for repeated stochastic "
                 "trials; hollow: deterministic (no interval)", fontsize=9)
    fig.supxlabel("success rate", fontsize=8)
    return save(fig, out_png)[0]
