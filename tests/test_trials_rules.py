"""When the trial tables report an interval or a p-value (docs/statistics.md): only for
repeated stochastic trials, at least ``statistics.min_trials`` of them; deterministic
conditions are labelled and their interval and p-value cells stay empty. Checked on the
tables computed in process from a few scripted traces."""

from __future__ import annotations

import copy
import math
from typing import Any

import pandas as pd
import pytest

from reactlab.analysis import trials as trials_mod
from reactlab.analysis.tables import run_row
from reactlab.analysis.verify import Verification, VerifiedRun
from reactlab.config import parse
from reactlab.config.settings import backend_settings
from reactlab.config.trials import analysis_section
from reactlab.runner import run_to_trace
from reactlab.trace import read
from tests.conftest import ROOT

INTERVALS = [f"{side}_{end}" for side in ("success", "steps", "calls", "tokens")
             for end in ("low", "high")]
PAIRED_TESTS = ["mcnemar_p", "diff_low", "diff_high"]
COMPARISON = {"name": "openai_vs_local", "vary": "backend", "a": "openai", "b": "local"}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory, toolbox: Any) -> list[dict[str, Any]]:
    """trials.csv rows of three trials each of a scripted and a simulated backend."""
    from reactlab.config import load_yaml

    raw = load_yaml(ROOT / "config.yaml")
    raw["matrix"] = [{"tasks": ["variacion_busi"], "backends": ["local", "openai"],
                      "scenarios": ["correcto"], "trials": 3}]
    raw["figure"] = {**raw["figure"], "backend": "openai", "loop": "correcto",
                     "marks": [1]}
    raw["comparisons"] = []
    cfg = parse(raw)
    tmp = tmp_path_factory.mktemp("rules")
    out = []
    for spec in cfg.runs:
        path = tmp / f"{spec.key.replace('/', '_')}.jsonl"
        run_to_trace(spec, toolbox, path)
        tr = read(path)
        verified = VerifiedRun(tr, Verification.of(tr, str(path)))
        out.append(trials_mod.trial_row(tr, run_row(verified), analysis_section(raw)))
    return out


def _empty(df: pd.DataFrame, columns: list[str]) -> bool:
    return bool(df[columns].isna().all().all())


def test_the_backends_settings_decide_determinism(raw_config: dict[str, Any]) -> None:
    backends = raw_config["backends"]
    decided = {name: trials_mod.deterministic(backend_settings(backends[name]))
               for name in ("openai", "local", "smollm2", "smollm2_forced",
                            "smollm2_sampled", "openai_live")}
    assert decided == {"openai": True, "local": True, "smollm2": True,
                       "smollm2_forced": True, "smollm2_sampled": False,
                       "openai_live": False}


def test_deterministic_trials_get_no_interval_and_no_p_value(
        rows: list[dict[str, Any]]) -> None:
    tables = trials_mod.build(rows, {"comparisons": [COMPARISON], "min_trials": 3})
    summary, paired = tables["summary_trials"], tables["paired"]
    assert tables["trials"].deterministic.all() and len(summary) == 2
    assert summary.deterministic.all() and (summary.n == 3).all()
    assert _empty(summary, INTERVALS)
    # the estimates themselves are reported
    assert summary.success_rate.notna().all() and summary.steps_mean.notna().all()
    row = paired.iloc[0]
    assert bool(row.deterministic) and row.pairs == 3
    assert _empty(paired, PAIRED_TESTS) and row.difference == 0.0


def test_stochastic_trials_get_an_interval_from_min_trials_on(
        rows: list[dict[str, Any]]) -> None:
    # the same outcomes as if a sampling backend had drawn them
    drawn = [{**r, "deterministic": False} for r in rows]
    analysis: dict[str, Any] = {"comparisons": [COMPARISON], "min_trials": 3}
    tables = trials_mod.build(drawn, analysis)
    summary, paired = tables["summary_trials"], tables["paired"]
    assert not summary.deterministic.any()
    assert summary[INTERVALS].notna().all().all()
    assert (summary.success_low <= summary.success_rate).all()
    assert not bool(paired.iloc[0].deterministic)
    assert paired[PAIRED_TESTS].notna().all().all()
    # fewer trials (or pairs) than min_trials: no interval, no p-value
    few = trials_mod.build(drawn, {**analysis, "min_trials": 7})
    assert _empty(few["summary_trials"], INTERVALS) and _empty(few["paired"], PAIRED_TESTS)
    # one deterministic side makes the pairs deterministic
    mixed = [{**r, "deterministic": r["backend"] == "local"} for r in rows]
    row = trials_mod.build(mixed, analysis)["paired"].iloc[0]
    assert bool(row.deterministic) and math.isnan(row.mcnemar_p)


def test_the_shipped_config_sets_min_trials(raw_config: dict[str, Any]) -> None:
    assert analysis_section(raw_config)["min_trials"] == raw_config["statistics"]["min_trials"]
    raw = {k: v for k, v in raw_config.items() if k != "statistics"}
    assert analysis_section(raw)["min_trials"] == trials_mod.MIN_TRIALS


def test_a_min_trials_below_two_is_refused(raw_config: dict[str, Any]) -> None:
    from reactlab.core.errors import ConfigError

    raw = copy.deepcopy(raw_config)
    raw["statistics"] = {"min_trials": 1}
    with pytest.raises(ConfigError, match="min_trials"):
        parse(raw)
