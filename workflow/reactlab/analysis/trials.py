"""Tables over repeated trials: per-run trial rows, a summary with intervals, and paired
comparisons.

* ``trials.csv`` — one row per run, runs with repeated trials included (the single-draw
  tables leave those out): the agent (``lesson`` or a framework's entry), trial and seed,
  ``deterministic``, termination, verdict, success (the answer was delivered and
  verified: the ``utility`` of runs.csv), steps, calls, tokens in and out, cost
  (:mod:`reactlab.analysis.cost`) and the trajectory metrics
  (:mod:`reactlab.analysis.trajectory`).
* ``summary_trials.csv`` — one row per (task, backend, scenario) over its n trials:
  whether the condition is ``deterministic`` (:func:`deterministic`), success rate with
  its 95 % Wilson interval, pass@k and pass^k for k = n (unbiased, from the n trials;
  with n = 1 both are the success rate), mean steps, calls and tokens with seeded
  bootstrap intervals, cost per run and per success, mean trajectory F1 (any order, in
  order), mean argument accuracy and the rate of correct abstention. The intervals only
  for a stochastic condition with n >= ``min_trials`` (:func:`inferential`).
* ``paired.csv`` — one row per comparison declared in config.yaml (``comparisons``): the
  runs of side ``a`` and side ``b`` paired on everything but the varied factor (task,
  the other factor, trial number), the exact McNemar p-value on success, and the paired
  difference of success rates a − b with a bootstrap interval; the p-value and the
  interval only when every paired run is stochastic and there are at least
  ``min_trials`` pairs (a deterministic side repeats one outcome: nothing to test).

Pure functions of the traces, verification files and config: no clock, no unseeded
randomness (:mod:`reactlab.analysis.stats`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reactlab import trace as tracemod
from reactlab.analysis import stats
from reactlab.analysis.cost import priced_model, run_cost
from reactlab.analysis.stats import inferential
from reactlab.analysis.trajectory import TRAJECTORY_COLUMNS, trajectory_metrics
from reactlab.config.trials import MIN_TRIALS

if TYPE_CHECKING:
    import pandas as pd

KEYS = ["task", "backend", "scenario"]
TRIAL_COLUMNS = [*KEYS, "agent", "trial", "seed", "deterministic", "termination", "verified",
                 "success", "steps", "calls", "tokens_sent", "tokens_out", "priced_as",
                 "cost_usd", *TRAJECTORY_COLUMNS, "trace"]
COST_DIGITS = 8
DIGITS = 4


def deterministic(backend_config: Any) -> bool:
    """Whether a backend's runs repeat one outcome: simulated and scripted (a script plays
    the model) and a local model decoding greedily (no temperature above 0); a sampling
    local model and a live API are stochastic."""
    mode = str(backend_config.mode)
    if mode in ("simulated", "scripted"):
        return True
    return mode == "model" and not backend_config.samples


def trial_row(tr: tracemod.Trace, run: Mapping[str, Any],
              analysis: Mapping[str, Any] | None) -> dict[str, Any]:
    """The trials.csv row of one run, from its trace and its runs.csv row."""
    analysis = analysis or {}
    spec = tr.header.run_spec
    task_cfg = (analysis.get("tasks") or {}).get(run["task"], {})
    tokens_out = sum(r.tokens_out for r in tr.requests())
    pricing = analysis.get("pricing")
    metrics = trajectory_metrics(tr.tool_calls(), spec.question, tr.end.answer,
                                 task_cfg.get("expected_calls"),
                                 task_cfg.get("answerable", True))
    return {"task": run["task"], "backend": run["backend"], "scenario": run["scenario"],
            "agent": run["agent"], "trial": spec.trial or 1, "seed": spec.seed,
            "deterministic": deterministic(spec.backend_config),
            "termination": run["termination"], "verified": bool(run["verified"]),
            "success": bool(run["utility"]), "steps": run["steps"], "calls": run["calls"],
            "tokens_sent": run["tokens_sent"], "tokens_out": tokens_out,
            "priced_as": priced_model(run["backend"], pricing),
            "cost_usd": run_cost(run["backend"], run["tokens_sent"], tokens_out, pricing),
            **metrics, "trace": run["trace"]}


def trials_table(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    import pandas as pd  # lazy: heavy (pandas)

    df = pd.DataFrame(list(rows), columns=TRIAL_COLUMNS)
    # from the Python ints (a column with empty cells would go through float64 and
    # round 63-bit seeds)
    df["seed"] = pd.array([row["seed"] for row in rows], dtype="Int64")
    df = df.sort_values([*KEYS, "trial"], kind="stable").reset_index(drop=True)
    out = df.copy()
    out["cost_usd"] = out["cost_usd"].astype(float).round(COST_DIGITS)
    for c in TRAJECTORY_COLUMNS[:-1]:
        out[c] = out[c].astype(float).round(DIGITS)
    return out


def _mean_or_none(values: Sequence[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None and v == v]
    return sum(vals) / len(vals) if vals else None


def summary_table(trials: pd.DataFrame, min_trials: int = MIN_TRIALS) -> pd.DataFrame:
    import pandas as pd  # lazy: heavy (pandas)

    rows = []
    for key, g in trials.groupby(KEYS, sort=True):
        n, c = len(g), int(g.success.sum())
        fixed = bool(g.deterministic.astype(bool).all())
        interval = inferential(fixed, n, min_trials)
        rate = stats.wilson(c, n)
        row: dict[str, Any] = dict(zip(KEYS, key, strict=True))
        row.update(agent=str(g.agent.iloc[0]), deterministic=fixed, n=n, successes=c,
                   success_rate=rate.estimate,
                   success_low=rate.low if interval else None,
                   success_high=rate.high if interval else None, k=n,
                   pass_at_k=stats.pass_at_k(n, c, n), pass_hat_k=stats.pass_hat_k(n, c, n))
        for col, name in (("steps", "steps"), ("calls", "calls"), ("tokens_sent", "tokens")):
            iv = stats.bootstrap_mean(g[col].tolist())
            row.update({f"{name}_mean": iv.estimate,
                        f"{name}_low": iv.low if interval else None,
                        f"{name}_high": iv.high if interval else None})
        costs = g.cost_usd.dropna()
        priced = len(costs) == n
        row["cost_per_run"] = float(costs.mean()) if priced else None
        row["cost_per_success"] = float(costs.sum()) / c if priced and c else None
        row["tc_f1"] = _mean_or_none(g.tc_f1.tolist())
        row["tc_f1_order"] = _mean_or_none(g.tc_f1_order.tolist())
        row["arg_accuracy"] = _mean_or_none(g.arg_accuracy.tolist())
        abst = [bool(v) for v in g.abstained_correctly.tolist() if v is not None and v == v]
        row["abstention_rate"] = sum(abst) / len(abst) if abst else None
        rows.append(row)
    out = pd.DataFrame(rows)
    for col in ("cost_per_run", "cost_per_success"):
        out[col] = out[col].astype(float).round(COST_DIGITS)
    for side in ("success", "steps", "calls", "tokens"):
        for end in ("low", "high"):
            out[f"{side}_{end}"] = out[f"{side}_{end}"].astype(float)
    floats = [c for c in out.columns if out[c].dtype == float and not c.startswith("cost_")]
    out[floats] = out[floats].round(DIGITS)
    return out


PAIRED_COLUMNS = ["comparison", "vary", "a", "b", "deterministic", "pairs", "a_successes",
                  "b_successes", "only_a", "only_b", "mcnemar_p", "difference", "diff_low",
                  "diff_high"]


def paired_table(trials: pd.DataFrame, comparisons: Sequence[Mapping[str, Any]],
                 min_trials: int = MIN_TRIALS) -> pd.DataFrame:
    """One row per comparison: runs paired on (task, the other factor, trial);
    ``deterministic`` when a paired run of either side is. The McNemar p-value and the
    difference's interval only between stochastic pairs, at least ``min_trials`` of them
    (:func:`inferential`); the counts and the difference itself always."""
    import pandas as pd  # lazy: heavy (pandas)

    rows = []
    for comp in comparisons:
        vary = comp["vary"]
        other = "scenario" if vary == "backend" else "backend"
        on = ["task", other, "trial"]
        a = trials[trials[vary] == comp["a"]].set_index(on)
        b = trials[trials[vary] == comp["b"]].set_index(on)
        common = sorted(set(a.index) & set(b.index))
        sa = [bool(a.success.loc[i]) for i in common]
        sb = [bool(b.success.loc[i]) for i in common]
        fixed = any(bool(side.deterministic.loc[i]) for side in (a, b) for i in common)
        row: dict[str, Any] = {"comparison": comp["name"], "vary": vary, "a": comp["a"],
                               "b": comp["b"], "deterministic": fixed, "pairs": len(common),
                               "a_successes": sum(sa), "b_successes": sum(sb)}
        if common:
            test = stats.mcnemar_exact(sa, sb)
            diff = stats.paired_difference([float(x) for x in sa], [float(x) for x in sb])
            row.update(only_a=test.only_a, only_b=test.only_b, difference=diff.estimate)
            if inferential(fixed, len(common), min_trials):
                row.update(mcnemar_p=test.p_value, diff_low=diff.low, diff_high=diff.high)
        rows.append(row)
    out = pd.DataFrame(rows, columns=PAIRED_COLUMNS)
    for c in ("only_a", "only_b"):
        out[c] = out[c].astype("Int64")
    for c in ("mcnemar_p", "difference", "diff_low", "diff_high"):
        out[c] = out[c].astype(float).round(DIGITS)
    return out


def build(rows: Sequence[Mapping[str, Any]],
          analysis: Mapping[str, Any] | None) -> dict[str, pd.DataFrame]:
    analysis = analysis or {}
    min_trials = int(analysis.get("min_trials", MIN_TRIALS))
    trials = trials_table(rows)
    return {"trials": trials, "summary_trials": summary_table(trials, min_trials),
            "paired": paired_table(trials, analysis.get("comparisons", []), min_trials)}
