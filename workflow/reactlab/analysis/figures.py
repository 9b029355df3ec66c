"""The pipeline's figures, drawn deterministically with matplotlib (PNG and SVG).

Same inputs, same bytes: no timestamps in the files (PNG ``Software``/SVG ``Date``
metadata are dropped, the SVG hash salt is fixed), and every figure is a pure function
of a result table.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.core.errors import TraceError
from reactlab.core.io import atomic_path
from reactlab.trace.integrity import check_published, write_manifest

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

KINDS = ("cumulative_tokens", "outcomes", "tokens", "defences")
VERDICT_COLOURS = {"verified": "#4caf50", "rejected": "#e57373", "no answer": "#bdbdbd"}


def _plt() -> Any:
    import matplotlib  # lazy: heavy (matplotlib)

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "reactlab"
    matplotlib.rcParams["font.family"] = "DejaVu Sans"
    import matplotlib.pyplot as plt  # lazy: heavy (matplotlib)

    return plt


def save(fig: Figure, out: str | Path) -> list[Path]:
    """Write ``out`` (PNG) and its SVG twin atomically; return both paths."""
    import matplotlib.pyplot as plt  # lazy: heavy (matplotlib)

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for path, meta in ((out, {"Software": None}),
                       (out.with_suffix(".svg"), {"Date": None, "Creator": None})):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, metadata=meta)
        written.append(path)
    plt.close(fig)
    # Written last: the checksums that mark both files as published and unedited.
    write_manifest(manifest_path(out), written)
    return written


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
    ax.plot([0, *loop.step], [0, *loop.cumulative_tokens], marker="o", ms=3,
            label=f"{figure['loop']} (no step limit)")
    ax.plot([0, *ref.step], [0, *ref.cumulative_tokens], marker="s", ms=4,
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
    ax.set_title(f"Tokens sent to the simulated {figure['backend']} API, cumulative by step")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save(fig, out_png)[0]


def agents_tokens(steps_csv: str | Path, out_png: str | Path,
                  figure: Mapping[str, Any]) -> Path:
    """The lesson's cumulative-token figure per agent: every run of the figure's task
    under ``figure.agents_scenario`` (default ``bucle``), the lesson loop's and each agent
    framework's (as shipped, capped), one line per backend and agent, to where each run
    stopped (docs/agents.md)."""
    import pandas as pd  # lazy: heavy (pandas)

    plt = _plt()
    base = str(figure.get("agents_scenario", "bucle"))
    df = pd.read_csv(steps_csv)
    df = df[(df.task == figure["task"])
            & ((df.scenario == base) | df.scenario.str.startswith(f"{base}__"))]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=100)
    top = 1
    for (backend, scenario), g in df.groupby(["backend", "scenario"], sort=True):
        g = g.sort_values("step")
        agent = scenario[len(base) + 2:] if scenario != base else "lesson"
        ax.plot([0, *g.step], [0, *g.cumulative_tokens], marker="o", ms=2.5, lw=1.2,
                label=f"{agent} ({backend})")
        top = max(top, int(g.cumulative_tokens.max()))
    ax.set_ylim(0, top * 1.12)
    ax.set_xlabel("step (request number)")
    ax.set_ylabel("cumulative tokens sent")
    ax.set_title(f"{figure['task']} / {base}: tokens sent per agent, to where it stopped")
    if len(df):
        ax.legend(loc="upper left", fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save(fig, out_png)[0]


def _verdict(row: pd.Series) -> str:
    if not row["answered"]:
        return "no answer"
    return "verified" if row["verified"] else "rejected"


def outcomes(runs_csv: str | Path, out_png: str | Path) -> Path:
    """Outcome matrix: one row per task/scenario, one column per backend, coloured by
    verdict, with the termination reason in each cell."""
    import pandas as pd  # lazy: heavy (pandas)
    from matplotlib.patches import Patch  # lazy: heavy (matplotlib)

    plt = _plt()
    runs = pd.read_csv(runs_csv)
    runs["row"] = runs.task + " / " + runs.scenario
    rows = sorted(runs.row.unique())
    cols = sorted(runs.backend.unique())
    fig, ax = plt.subplots(figsize=(2.0 + 1.45 * len(cols), 0.8 + 0.3 * len(rows)), dpi=100)
    for _, r in runs.iterrows():
        y, x = rows.index(r.row), cols.index(r.backend)
        ax.add_patch(plt.Rectangle((x, y), 1, 1, color=VERDICT_COLOURS[_verdict(r)], ec="white"))
        ax.text(x + 0.5, y + 0.5, r.termination.replace("_", " "), ha="center",
                va="center", fontsize=7)
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([i + 0.5 for i in range(len(cols))], cols, fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows, fontsize=7)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in VERDICT_COLOURS.items()],
              loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8, frameon=False)
    ax.set_title("Verdict per run (cell text: termination)", fontsize=10, pad=24)
    fig.tight_layout()
    return save(fig, out_png)[0]


def tokens(runs_csv: str | Path, out_png: str | Path) -> Path:
    """Tokens sent per run, by scenario (rows) and backend (bars)."""
    import numpy as np  # lazy: heavy (numpy)
    import pandas as pd  # lazy: heavy (pandas)

    plt = _plt()
    runs = pd.read_csv(runs_csv)
    runs["row"] = runs.task + " / " + runs.scenario
    pivot = runs.pivot_table(index="row", columns="backend", values="tokens_sent",
                             aggfunc="sum").sort_index()
    n_rows, n_cols = pivot.shape
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * n_rows), dpi=100)
    height = 0.8 / n_cols
    y = np.arange(n_rows)
    for i, backend in enumerate(pivot.columns):
        ax.barh(y + i * height, pivot[backend].fillna(0), height=height, label=backend)
    ax.set_yticks(y + 0.4 - height / 2, pivot.index, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("tokens sent in the run (log scale)")
    ax.set_title("Tokens sent per run, by scenario and backend", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return save(fig, out_png)[0]


def defences(summary_csv: str | Path, out_png: str | Path) -> Path:
    """Utility and attack success rate of the attacked runs, by set of defences."""
    import numpy as np  # lazy: heavy (numpy)
    import pandas as pd  # lazy: heavy (pandas)

    plt = _plt()
    df = pd.read_csv(summary_csv)
    df = df[df.attacked > 0].sort_values("defences")
    x = np.arange(len(df))
    fig, ax = plt.subplots(figsize=(7.5, 4), dpi=100)
    ax.bar(x - 0.2, df.utility_under_attack, width=0.4, label="utility under attack",
           color="#4caf50")
    ax.bar(x + 0.2, df.attack_success_rate, width=0.4, label="attack success rate",
           color="#e57373")
    ax.set_xticks(x, [d.replace("+", "\n+ ").replace("_", " ") for d in df.defences],
                  fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate over attacked runs")
    ax.set_title("Prompt injection: utility and attack success by defence", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save(fig, out_png)[0]
