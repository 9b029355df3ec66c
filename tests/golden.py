"""Compare result tables with the golden files, with readable diffs.

Integers and strings must match exactly; floats within an explicit tolerance.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

FLOAT_ABS_TOL = 1e-6
KEY_COLUMNS = ("series", "task", "backend", "scenario", "step")


def _is_float_column(s: pd.Series) -> bool:
    return pd.api.types.is_float_dtype(s)


def diff_tables(expected: Path, actual: Path, max_lines: int = 30) -> list[str]:
    """Human-readable differences between two CSV tables (empty list when equal)."""
    exp = pd.read_csv(expected, dtype=str, keep_default_na=False)
    act = pd.read_csv(actual, dtype=str, keep_default_na=False)
    name = expected.name
    out: list[str] = []
    if list(exp.columns) != list(act.columns):
        return [f"{name}: columns differ\n  expected: {list(exp.columns)}\n"
                f"  actual:   {list(act.columns)}"]
    if len(exp) != len(act):
        out.append(f"{name}: {len(exp)} rows expected, {len(act)} found")
    typed = pd.read_csv(expected)
    floats = {c for c in exp.columns if _is_float_column(typed[c])}
    keys = [c for c in KEY_COLUMNS if c in exp.columns]
    for i in range(min(len(exp), len(act))):
        where = ", ".join(f"{k}={exp.at[i, k]}" for k in keys) or f"row {i}"
        for c in exp.columns:
            e, a = exp.at[i, c], act.at[i, c]
            if e == a:
                continue
            if c in floats:
                try:
                    if math.isclose(float(e), float(a), rel_tol=0, abs_tol=FLOAT_ABS_TOL):
                        continue
                except ValueError:
                    pass
            out.append(f"{name} [{where}] {c}: expected {e!r}, got {a!r}")
    if len(out) > max_lines:
        out = [*out[:max_lines], f"... and {len(out) - max_lines} more differences"]
    return out
