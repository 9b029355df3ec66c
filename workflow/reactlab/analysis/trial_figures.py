"""The figure of success rates with 95 % Wilson error bars, one bar per (task, backend,
scenario) of ``summary_trials.csv`` (deterministic bytes, like every figure)."""

from __future__ import annotations

from pathlib import Path

from reactlab.analysis.figures import _plt, save


def success_rates(summary_csv: str | Path, out_png: str | Path) -> Path:
    import numpy as np
    import pandas as pd

    plt = _plt()
    df = pd.read_csv(summary_csv).sort_values(["backend", "task", "scenario"], kind="stable")
    labels = [f"{r.backend} · {r.task} · {r.scenario} (n={r.n})" for r in df.itertuples()]
    y = np.arange(len(df))
    lower = (df.success_rate - df.success_low).clip(lower=0)
    upper = (df.success_high - df.success_rate).clip(lower=0)
    backends = sorted(df.backend.unique())
    colours = {b: f"C{i % 10}" for i, b in enumerate(backends)}
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.2 * len(df)), dpi=100)
    ax.barh(y, df.success_rate, color=[colours[b] for b in df.backend], height=0.7)
    ax.errorbar(df.success_rate, y, xerr=[lower, upper], fmt="none", ecolor="black",
                elinewidth=0.8, capsize=2)
    ax.set_yticks(y, labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("success rate (answer delivered and verified), 95 % Wilson interval")
    ax.set_title("Success rate per run group, with error bars over its trials", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return save(fig, out_png)[0]
