"""BFCL's tables: ``bfcl.csv`` and ``bfcl_cases.csv`` (BFCL accuracy per category, beside
published context).

``bfcl_cases.csv`` has one row per case run (suite, backend, scenario, category, case,
BFCL's verdict and error type, the project's verdict and ``tc_f1``, tokens, trace).

``bfcl.csv`` has one row per (suite, backend, scenario, category): cases, correct,
accuracy with its 95 % Wilson interval (:func:`reactlab.analysis.stats.wilson`), BFCL's
error types with their counts, and how often BFCL's verdict and the project's trajectory
verdict agree. Per (suite, backend, scenario) two summary rows follow: ``non_live_ast``,
BFCL's own summary — the unweighted mean of the simple, multiple, parallel and
parallel_multiple accuracies (only when all four were run; no interval) — and ``all``,
every case pooled. Last come the published rows (``source`` says so): Qwen2.5-0.5B-Instruct
on BFCL v3 in prompt mode. They are context, not a like-for-like comparison: another
model, another data version, another prompt format, and on the full categories where
the measured rows may be a sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from reactlab import trace as tracemod
from reactlab.analysis.stats import case_rate
from reactlab.analysis.trials import deterministic
from reactlab.core.errors import TraceError
from reactlab.core.io import atomic_path
from reactlab.suites.bfcl import CATEGORIES, NON_LIVE_AST
from reactlab.suites.bfcl_score import suite_record
from reactlab.suites.types import checked_record

__all__ = ["PUBLISHED", "build_bfcl"]

FLOAT_DIGITS = 4
MEASURED = "measured"
PUBLISHED_SOURCE = ("published: BFCL v3 leaderboard, prompt mode (not like-for-like: "
                    "other model, data version and prompt format)")
#: Qwen2.5-0.5B-Instruct on the BFCL v3 leaderboard, prompt mode (accuracy, %).
PUBLISHED: dict[str, Any] = {"model": "Qwen2.5-0.5B-Instruct",
             "accuracy": {"simple_python": 58.25, "multiple": 68.00, "parallel": 53.50,
                          "parallel_multiple": 33.00, "irrelevance": 16.44,
                          "non_live_ast": 53.19}}

CASE_COLUMNS = ["suite", "backend", "scenario", "category", "case", "bfcl_correct",
                "error_type", "sub_error_types", "project_correct", "tc_f1", "calls",
                "tokens_sent", "trace"]
COLUMNS = ["source", "suite", "backend", "scenario", "category", "cases", "correct",
           "accuracy", "ci_low", "ci_high", "error_types", "project_correct", "agreement"]


def _error_types(rows: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        if not r["bfcl_correct"]:
            counts[r["error_type"]] = counts.get(r["error_type"], 0) + 1
    return "; ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1],
                                                                                   kv[0])))


def _row(key: tuple[str, str, str], category: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    k = sum(r["bfcl_correct"] for r in rows)
    acc, low, high = case_rate(k, n, all(r["deterministic"] for r in rows))
    return {"source": MEASURED, "suite": key[0], "backend": key[1], "scenario": key[2],
            "category": category, "cases": n, "correct": k, "accuracy": acc,
            "ci_low": low, "ci_high": high, "error_types": _error_types(rows),
            "project_correct": sum(r["project_correct"] for r in rows),
            "agreement": sum(r["project_correct"] == r["bfcl_correct"] for r in rows) / n}


def case_row(tr: tracemod.Trace, rec: Mapping[str, Any], trace_path: str) -> dict[str, Any]:
    return {"suite": rec["suite"], "backend": tr.run["backend"],
            "scenario": tr.run["scenario"], "category": rec["category"], "case": rec["case"],
            "bfcl_correct": bool(rec["verified"]), "error_type": rec["error_type"] or "",
            "sub_error_types": "; ".join(rec["sub_error_types"]),
            "project_correct": bool(rec["project_verified"]),
            "tc_f1": rec["trajectory"]["tc_f1"], "calls": tr.end.calls,
            "tokens_sent": tr.end.tokens_sent, "trace": trace_path,
            # not a column: whether its backend repeats one outcome (no interval then)
            "deterministic": deterministic(tr.header.run_spec.backend_config)}


def build_bfcl(pairs: Iterable[tuple[str, str]], out_dir: str | Path,
               ) -> dict[str, Path]:
    """Write ``bfcl_cases.csv`` and ``bfcl.csv`` from (trace, verification) pairs, each
    verification checked against BFCL's scorer first."""
    import pandas as pd  # lazy: heavy (pandas)

    cases = []
    for trace_path, verified_path in pairs:
        tr = tracemod.read(trace_path)
        rec = checked_record(tr, verified_path, trace_path, suite_record)
        cases.append(case_row(tr, rec, trace_path))
    if not cases:
        raise TraceError("no suite traces to aggregate")
    order = {c: i for i, c in enumerate(CATEGORIES)}
    groups: dict[tuple[str, str, str], dict[str, list[dict[str, Any]]]] = {}
    for r in cases:
        key = (r["suite"], r["backend"], r["scenario"])
        groups.setdefault(key, {}).setdefault(r["category"], []).append(r)
    rows = []
    for key in sorted(groups):
        by_cat = groups[key]
        for category in sorted(by_cat, key=lambda c: order.get(c, len(order))):
            rows.append(_row(key, category, by_cat[category]))
        if all(c in by_cat for c in NON_LIVE_AST):
            mean = sum(sum(r["bfcl_correct"] for r in by_cat[c]) / len(by_cat[c])
                       for c in NON_LIVE_AST) / len(NON_LIVE_AST)
            rows.append({"source": MEASURED, "suite": key[0], "backend": key[1],
                         "scenario": key[2], "category": "non_live_ast",
                         "cases": sum(len(by_cat[c]) for c in NON_LIVE_AST),
                         "correct": sum(sum(r["bfcl_correct"] for r in by_cat[c])
                                        for c in NON_LIVE_AST),
                         "accuracy": mean, "ci_low": None, "ci_high": None,
                         "error_types": "", "project_correct": None, "agreement": None})
        rows.append(_row(key, "all", [r for c in by_cat.values() for r in c]))
    for category, pct in PUBLISHED["accuracy"].items():
        rows.append({"source": PUBLISHED_SOURCE, "suite": "bfcl",
                     "backend": PUBLISHED["model"], "scenario": "", "category": category,
                     "cases": None, "correct": None, "accuracy": pct / 100, "ci_low": None,
                     "ci_high": None, "error_types": "", "project_correct": None,
                     "agreement": None})
    case_df = pd.DataFrame(cases, columns=CASE_COLUMNS).sort_values(
        ["suite", "backend", "scenario", "category", "case"], kind="stable",
        key=lambda s: s.map(order).fillna(len(order)) if s.name == "category" else s)
    table = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("cases", "correct", "project_correct"):
        table[c] = table[c].astype("Int64")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, df in (("bfcl_cases", case_df), ("bfcl", table.round(FLOAT_DIGITS))):
        path = out_dir / f"{name}.csv"
        with atomic_path(path) as tmp:
            df.to_csv(tmp, index=False, lineterminator="\n")
        written[name] = path
    return written
