"""The lesson's cumulative-token figure, drawn deterministically with matplotlib."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def cumulative_tokens(table_csv: str | Path, out_png: str | Path,
                      figure: Mapping[str, Any]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    matplotlib.rcParams["svg.hashsalt"] = "reactlab"
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
    ax.set_xlabel("step (request number)")
    ax.set_ylabel("cumulative tokens sent")
    ax.set_title(f"Tokens sent to the simulated {figure['backend']} API, cumulative by step")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_png.with_name(f".{out_png.stem}.tmp{out_png.suffix}")
    fig.savefig(tmp, metadata={"Software": None})
    plt.close(fig)
    tmp.replace(out_png)
    return out_png
