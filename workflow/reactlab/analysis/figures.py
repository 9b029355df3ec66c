"""The pipeline's figures, drawn deterministically with matplotlib (PNG and SVG).

Same inputs, same bytes: no timestamps in the files (PNG ``Software``/SVG ``Date``
metadata are dropped, the SVG hash salt is fixed), and every figure is a pure function
of a result table.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.analysis import style
from reactlab.core.errors import TraceError
from reactlab.core.io import atomic_path, write_bytes_atomic
from reactlab.trace.integrity import check_published, write_manifest

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

KINDS = ("cumulative_tokens", "outcomes", "tokens", "defences")
_plt = style.pyplot


def save(fig: Figure, out: str | Path) -> list[Path]:
    """Write ``out`` (PNG) and its SVG twin atomically; return both paths. The
    metadata that would date a file are left out (PNG ``Software``, SVG ``Date`` and
    ``Creator``); the SVG hash salt is fixed (:func:`reactlab.analysis.style.pyplot`)."""
    import matplotlib.pyplot as plt  # lazy: heavy (matplotlib)

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, metadata={"Software": None})
    svg = io.BytesIO()
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    written = [out, write_bytes_atomic(out.with_suffix(".svg"), canonical_svg(svg.getvalue()))]
    plt.close(fig)
    # Written last: the checksums that mark both files as published and unedited.
    write_manifest(manifest_path(out), written)
    return written


_CLIP_ID = re.compile(rb"\bp[0-9a-f]{10}\b")


def canonical_svg(svg: bytes) -> bytes:
    """``svg`` with its clip paths numbered in order of first use (``clip0``, ...).

    matplotlib names a clip path by a hash of its rectangle's full-precision floats,
    and the constrained layout's solver can differ in a coordinate's last bit from one
    process to another (the rectangle, printed to 6 decimals, does not): the same figure
    drawn by two processes then differed only in those names."""
    names: dict[bytes, bytes] = {}

    def rename(m: re.Match[bytes]) -> bytes:
        return names.setdefault(m.group(0), b"clip%d" % len(names))

    # only matplotlib's clip-path ids ("p" + 10 hex digits, as defined and referenced)
    ids = set(re.findall(rb'<clipPath id="(p[0-9a-f]{10})"', svg))
    return _CLIP_ID.sub(lambda m: rename(m) if m.group(0) in ids else m.group(0), svg)


def manifest_path(out_png: str | Path) -> Path:
    """The checksum manifest of a figure's PNG and SVG: ``.{name}.manifest.json``."""
    out_png = Path(out_png)
    return out_png.with_name(f".{out_png.stem}.manifest.json")


def check_source(table_csv: str | Path) -> None:
    """Refuse to draw from a table that differs from what the tables job published."""
    problem = check_published(table_csv)
    if problem:
        raise TraceError(f"{problem}; not drawing a figure from it. Run the pipeline again "
                         f"(`snakemake --cores 4`): damaged tables are removed and rebuilt "
                         f"before any job starts")


def cumulative_tokens(table_csv: str | Path, out_png: str | Path,
                      figure: Mapping[str, Any]) -> Path:
    """The lesson's figure: tokens sent, cumulative by step, loop vs correct case."""
    import pandas as pd  # lazy: heavy (pandas)

    plt = _plt()
    df = pd.read_csv(table_csv)
    loop = df[df.series == "loop"].sort_values("step")
    ref = df[df.series == "reference"].sort_values("step")
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    ax.plot([0, *loop.step], [0, *loop.cumulative_tokens], ms=3, **style.series(0).line(),
            label=f"{figure['loop']} (no step limit)")
    ax.plot([0, *ref.step], [0, *ref.cumulative_tokens], ms=4, **style.series(1).line(),
            label=f"{figure['reference']} (reference)")
    for m in figure["marks"]:
        hit = loop[loop.step == m]
        if hit.empty:
            continue
        y = int(hit.cumulative_tokens.iloc[0])
        ax.axvline(m, color="grey", ls="--", lw=0.8)
        ax.annotate(f"{y:,} tokens at step {m}", (m, y), textcoords="offset points",
                    xytext=(-8, 8), ha="right", fontsize=8)
    ax.set_ylim(0, max([*loop.cumulative_tokens, *ref.cumulative_tokens, 1]) * 1.12)
    ax.set_xlabel("step (request number)")
    ax.set_ylabel("cumulative tokens sent")
    ax.set_title(f"Tokens sent to the simulated {figure['backend']} API, cumulative by step "
                 "(one run each)", fontsize=10)
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    return save(fig, out_png)[0]


def _runs_with_agent(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (runs.csv or steps.csv) with ``agent`` (``lesson`` where a table has no such
    column) and ``base``, the scenario without the agent (:func:`style.scenario_of`)."""
    df = df.copy()
    if "agent" not in df.columns:
        df["agent"] = style.LESSON
    df["base"] = [style.scenario_of(str(s), str(a))
                  for s, a in zip(df.scenario, df.agent, strict=True)]
    return df


def _column(backend: str, agent: str) -> str:
    return backend if agent == style.LESSON else f"{agent}\n({backend})"


def run_panels(runs: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """The panels of a figure of runs: the lesson loop's columns (backends) apart from
    the agent frameworks' (agent on backend), each split into the groups of columns that
    ran the same (task, scenario) rows (:func:`style.components`), and into panels of at
    most :data:`style.MAX_SERIES` columns. Each: (title, its columns)."""
    panels: list[tuple[str, list[str]]] = []
    for lesson, title in ((True, "lesson loop, by backend"), (False, "agent frameworks")):
        sel = runs[(runs.agent == style.LESSON) == lesson]
        cells = [(_column(b, a), (t, s)) for b, a, t, s in
                 zip(sel.backend, sel.agent, sel.task, sel.base, strict=True)]
        for group in style.components(cells):
            panels.extend((title, cols) for cols in style.facets(group))
    return panels


def _rows(runs: pd.DataFrame, measure: str, descending: bool) -> list[tuple[str, str]]:
    """(task, scenario) rows grouped by task, sorted by the mean of ``measure``."""
    means = runs.groupby(["task", "base"])[measure].mean()
    sign = -1 if descending else 1
    return sorted(means.index, key=lambda r: (r[0], sign * float(means[r]), r[1]))


def outcomes(runs_csv: str | Path, out_png: str | Path) -> Path:
    """Outcome matrix: one panel per group of columns (:func:`run_panels`: backends of the
    lesson loop, agent frameworks), one row per task / scenario that the panel's columns
    ran, grouped by task and sorted by the share verified; each cell one run (n = 1),
    coloured and hatched by verdict, with the termination reason."""
    import pandas as pd  # lazy: heavy (pandas)
    from matplotlib.patches import Patch  # lazy: heavy (matplotlib)

    plt = _plt()
    runs = _runs_with_agent(pd.read_csv(runs_csv))
    runs["col"] = [_column(b, a) for b, a in zip(runs.backend, runs.agent, strict=True)]
    runs["verdict"] = [_verdict(r) for _, r in runs.iterrows()]
    panels = run_panels(runs)
    shapes = [(cols, _rows(runs[runs.col.isin(cols)], "verified", True))
              for _, cols in panels]
    heights = [0.75 + 0.27 * len(rows) for _, rows in shapes]
    width = 3.2 + 1.25 * max(len(cols) for cols, _ in shapes)
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 0.6 + sum(heights)), dpi=100,
                             squeeze=False, height_ratios=heights)
    for ax, (title, _), (cols, rows) in zip(axes[:, 0], panels, shapes, strict=True):
        sel = runs[runs.col.isin(cols)]
        for r in sel.itertuples():
            y, x = rows.index((r.task, r.base)), cols.index(r.col)
            colour, hatch = style.VERDICTS[r.verdict]
            ax.add_patch(plt.Rectangle((x, y), 1, 1, facecolor=colour, hatch=hatch,
                                       edgecolor="white", lw=1.0))
            ax.text(x + 0.5, y + 0.5, r.termination.replace("_", " "), ha="center",
                    va="center", fontsize=7,
                    bbox={"facecolor": "white", "alpha": 0.75, "lw": 0, "pad": 0.6})
        ax.set_xlim(0, len(cols))
        ax.set_ylim(len(rows), 0)
        ax.set_xticks([i + 0.5 for i in range(len(cols))], cols, fontsize=7.5)
        ax.set_yticks([i + 0.5 for i in range(len(rows))],
                      [f"{t} / {s}" for t, s in rows], fontsize=7.5)
        ax.xaxis.tick_top()
        ax.tick_params(length=0)
        for side in ax.spines.values():
            side.set_visible(False)
        ax.set_title(title, fontsize=9, loc="left")
    handles = [Patch(facecolor=c, hatch=h, edgecolor="white", label=k)
               for k, (c, h) in style.VERDICTS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8,
               frameon=False)
    fig.suptitle("Verdict per run (one run per cell; text: how it ended); rows grouped by "
                 "task, sorted by the share verified", fontsize=9.5)
    return save(fig, out_png)[0]


def _verdict(row: pd.Series) -> str:
    if not row["answered"]:
        return "no answer"
    return "verified" if row["verified"] else "rejected"


def _legend(ax: Any, n: int) -> None:
    """The panel's legend beside it (never over a point)."""
    if n:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def tokens(runs_csv: str | Path, out_png: str | Path) -> Path:
    """Tokens sent per run: one panel per group of columns (:func:`run_panels`), one row
    per task / scenario the panel ran (grouped by task, sorted by tokens), one point per
    run (n = 1) in the colour and marker of its backend or agent, log scale."""
    import pandas as pd  # lazy: heavy (pandas)

    plt = _plt()
    runs = _runs_with_agent(pd.read_csv(runs_csv))
    runs["col"] = [_column(b, a) for b, a in zip(runs.backend, runs.agent, strict=True)]
    panels = run_panels(runs)
    shapes = [(cols, _rows(runs[runs.col.isin(cols)], "tokens_sent", True))
              for _, cols in panels]
    heights = [0.7 + len(rows) * (0.1 + 0.06 * len(cols)) for cols, rows in shapes]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10.0, 0.6 + sum(heights)), dpi=100,
                             squeeze=False, height_ratios=heights)
    positive = runs.tokens_sent[runs.tokens_sent > 0]
    low = float(positive.min()) / 1.5 if len(positive) else 1.0
    high = float(runs.tokens_sent.max() or 1) * 1.5
    for ax, (title, _), (cols, rows) in zip(axes[:, 0], panels, shapes, strict=True):
        sel = runs[runs.col.isin(cols)]
        step = 0.7 / max(1, len(cols))
        for i, col in enumerate(cols):
            mine = sel[sel.col == col]
            ys = [rows.index((t, s)) - 0.35 + step * (i + 0.5)
                  for t, s in zip(mine.task, mine.base, strict=True)]
            look = style.series(i)
            # a run that sent nothing (it failed before its first request) sits at the left
            xs = [max(float(v), low) for v in mine.tokens_sent]
            ax.scatter(xs, ys, s=22, color=look.colour, marker=look.marker,
                       label=col.replace("\n", " "), zorder=3)
            for x, y, v in zip(xs, ys, mine.tokens_sent, strict=True):
                if not v:
                    ax.annotate("0 tokens", (x, y), xytext=(5, 0), textcoords="offset points",
                                fontsize=6, va="center", color=look.colour)
        ax.set_xscale("log")
        ax.set_xlim(low / 1.5, high)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_yticks(range(len(rows)), [f"{t} / {s}" for t, s in rows], fontsize=7.5)
        for y in range(1, len(rows)):
            ax.axhline(y - 0.5, color="0.9", lw=0.6)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(title, fontsize=9, loc="left")
        _legend(ax, len(cols))
    fig.supxlabel("tokens sent in the run (log scale; one run per point, n = 1)", fontsize=8)
    fig.suptitle("Tokens sent per run, by task / scenario; rows grouped by task, sorted by "
                 "tokens", fontsize=9.5)
    return save(fig, out_png)[0]


def defences(runs_csv: str | Path, out_png: str | Path) -> Path:
    """Utility and attack success rate of the attacked runs (runs.csv), one pair of bars
    per set of defences and scenario: a set of defences is never pooled over scenarios
    (the model's scripted behaviour differs between them). Bars grouped by defences (none
    first), sorted by attack success; n (runs pooled over backends) on every bar."""
    import numpy as np  # lazy: heavy (numpy)
    import pandas as pd  # lazy: heavy (pandas)

    plt = _plt()
    runs = _runs_with_agent(pd.read_csv(runs_csv))
    attacked = runs[runs.attack_present.astype(bool)]
    g = attacked.groupby(["defences", "base"]).agg(
        n=("task", "size"), utility=("utility", "mean"), asr=("attack_succeeded", "mean"))
    keys = sorted(g.index, key=lambda k: (k[0] != "none", k[0].count("+"), k[0],
                                          float(g.asr[k]), k[1]))
    y = np.arange(len(keys))
    fig, ax = plt.subplots(figsize=(8.0, 1.3 + 0.62 * len(keys)), dpi=100)
    for dy, col, (colour, hatch), label in ((-0.2, "utility", style.UTILITY,
                                             "utility under attack"),
                                            (0.2, "asr", style.ATTACK, "attack success rate")):
        values = [float(g[col][k]) for k in keys]
        bars = ax.barh(y + dy, values, height=0.4, color=colour, hatch=hatch,
                       edgecolor="white", label=label)
        ax.bar_label(bars, [f"{v:.2f} (n={int(g.n[k])})" for v, k in zip(values, keys,
                                                                         strict=True)],
                     fontsize=7, padding=2)
    names = [f"{d.replace('_', ' ')}\n[{s}]" for d, s in keys]
    ax.set_yticks(y, names, fontsize=7.5)
    ax.set_ylim(max(1, len(keys)) - 0.5, -0.5)
    if not keys:
        ax.text(0.5, 0, "no attacked run", ha="center", va="center", fontsize=9)
    ax.set_xlim(0, 1.3)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel("rate over the attacked runs (n: attacked runs, one per backend)")
    ax.set_title("Prompt injection: utility and attack success by defences [scenario]",
                 fontsize=9.5)
    fig.legend(fontsize=8, loc="outside lower center", ncol=2, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return save(fig, out_png)[0]


def agents_tokens(steps_csv: str | Path, out_png: str | Path,
                  figure: Mapping[str, Any]) -> Path:
    """The lesson's cumulative-token figure per agent: every run of the figure's task
    under ``figure.agents_scenario`` (default ``bucle``), to where each run stopped
    (docs/agents.md). The agent is its own panel: the lesson loop's runs, one line per
    backend, beside the agent frameworks' (as shipped, capped), one line per agent, the
    lesson loop's run on the same backend drawn in grey for reference; at most
    :data:`style.MAX_SERIES` lines a panel."""
    import pandas as pd  # lazy: heavy (pandas)

    plt = _plt()
    base = str(figure.get("agents_scenario", "bucle"))
    df = _runs_with_agent(pd.read_csv(steps_csv))
    df = df[(df.task == figure["task"]) & (df.base == base)]
    lesson = df[df.agent == style.LESSON]
    framed = df[df.agent != style.LESSON]
    panels: list[tuple[str, list[tuple[str, str]]]] = []
    for sel, title in ((lesson, "lesson loop, by backend"), (framed, "agent frameworks")):
        keys = sorted({(str(b), str(a)) for b, a in zip(sel.backend, sel.agent, strict=True)})
        panels.extend((title, part) for part in style.facets(keys))
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(3.2 + 4.0 * max(1, len(panels)),
                                                            4.6),
                             dpi=100, sharey=True, squeeze=False)
    top = max(1, int(df.cumulative_tokens.max())) if len(df) else 1
    for ax, (title, keys) in zip(axes[0], panels, strict=False):
        if title != "lesson loop, by backend":
            for b in sorted({b for b, _ in keys}):
                ref = lesson[lesson.backend == b].sort_values("step")
                ax.plot([0, *ref.step], [0, *ref.cumulative_tokens], color="0.7", lw=2.5,
                        zorder=1, label=f"lesson loop ({b}), reference")
        for i, (b, a) in enumerate(keys):
            g = df[(df.backend == b) & (df.agent == a)].sort_values("step")
            ax.plot([0, *g.step], [0, *g.cumulative_tokens], ms=3.5, lw=1.3,
                    **style.series(i).line(), label=b if a == style.LESSON else f"{a} ({b})")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step (request number)")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=7)
    axes[0][0].set_ylim(0, top * 1.12)
    axes[0][0].set_ylabel("cumulative tokens sent")
    fig.suptitle(f"{figure['task']} / {base}: tokens sent per agent, to where each run "
                 "stopped (one run per line)", fontsize=10)
    return save(fig, out_png)[0]
