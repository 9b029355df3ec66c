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
from reactlab.analysis.stats import suite_min_trials, wilson
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


def _viewer_rows() -> list[dict[str, Any]]:
    """Index rows (reactlab.views.index.render_index) of three backends' trials of one
    task and scenario: a deterministic one (3 trials), a stochastic one with 3 trials and
    one with 2 (under the default min_trials, 3)."""
    out = []
    for backend, fixed, n in (("local", True, 3), ("sampled", False, 3),
                              ("sampled_few", False, 2)):
        for i in range(1, n + 1):
            out.append({"task": "variacion_busi", "backend": backend, "scenario": "correcto",
                        "termination": "answer", "verified": i != 2, "steps": 3,
                        "tokens_sent": 100, "trial": i, "deterministic": fixed})
    return out


def _cells(section: str) -> dict[str, str]:
    """Each row's backend (its second cell) → its last rate cell with a bracket, or its
    cells as text when none has one."""
    import re

    out = {}
    for row in re.findall(r"<tr><td>.*?</tr>", section):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        out[cells[1]] = " | ".join(cells)
    return out


def test_the_viewer_gives_an_interval_only_where_the_tables_do() -> None:
    """Issue 41: the viewer's rates (the lesson's summary by backend, the repeated trials)
    carry a 95 % Wilson interval only for a stochastic backend's runs, at least
    min_trials of them; a deterministic backend's and a short run's rate stands alone."""
    from reactlab.views.index import render_index

    page = render_index(_viewer_rows(), min_trials=3)
    trials = page[page.index('<h2 id="trials">'):page.index('<h2 id="runs"')]
    cells = _cells(trials)
    assert "[" in cells["sampled"] and "0.67 [" in cells["sampled"], cells
    assert "[" not in cells["local"] and "0.67" in cells["local"], cells
    assert "[" not in cells["sampled_few"], cells
    assert "statistics.min_trials" in trials
    by_backend = page[page.index('<h2 id="lesson">'):page.index("<details")]
    rates = {row.split("</td>")[0].removeprefix("<tr><td>"): row
             for row in by_backend.split("\n") if row.startswith("<tr><td>")}
    assert "[" in rates["sampled"] and "[" not in rates["local"], rates
    assert "[" not in rates["sampled_few"], rates
    # the same runs, min_trials 2: the short stochastic run gets its interval
    again = render_index(_viewer_rows(), min_trials=2)
    assert "[" in _cells(again[again.index('<h2 id="trials">'):])["sampled_few"]


def test_the_suite_summaries_and_figures_follow_the_same_rule(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """BFCL's summary on the index and its figure (bfcl_accuracy), from the goldens'
    bfcl.csv (one case per category): no interval for the scripted backends, nor for a
    stochastic one over fewer than min_trials cases; the figure draws its error bars only
    where the kit would print one."""
    import csv

    from matplotlib.axes import Axes

    from reactlab.analysis.suite_figures import bfcl_accuracy
    from reactlab.suites.summaries import bfcl_summary
    from reactlab.views.summaries import kit

    with (ROOT / "tests" / "golden" / "bfcl.csv").open(encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    # the table as stochastic backends over >= 1 case would have it: every interval given
    # (the goldens' backends are scripted, so their table gives none)
    for r in table:
        if r["source"] == "measured" and r["category"] != "non_live_ast":
            iv = wilson(int(r["correct"]), int(r["cases"]))
            r["ci_low"], r["ci_high"] = str(round(iv.low, 4)), str(round(iv.high, 4))
    backends = sorted({r["backend"] for r in table if r["source"] == "measured"})
    scripted = kit([{"backend": b, "deterministic": True} for b in backends])
    assert "[0–79]" not in bfcl_summary("bfcl", table, scripted)
    sampled = [{"backend": b, "deterministic": False} for b in backends]
    assert "[0–79]" not in bfcl_summary("bfcl", table, kit(sampled, min_trials=3))
    assert "[0–79]" in bfcl_summary("bfcl", table, kit(sampled, min_trials=1))

    bars: list[int] = []
    errorbar = Axes.errorbar

    def spy(self: Axes, x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
        bars.append(len(x))
        return errorbar(self, x, y, *args, **kwargs)

    monkeypatch.setattr(Axes, "errorbar", spy)
    # two of its panels (a figure of six takes seconds): a case in a category, 5 in "all"
    small = tmp_path / "bfcl.csv"
    with small.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, list(table[0]))
        w.writeheader()
        w.writerows(r for r in table if r["category"] in ("simple_python", "all"))
    drawn = [int(r["cases"]) for r in table if r["source"] == "measured"
             and r["category"] in ("simple_python", "all")]
    assert min(drawn) == 1 and max(drawn) == 5
    for fixed, min_trials in ((True, 1), (False, 3)):
        bars.clear()
        statistics = {"deterministic": dict.fromkeys(backends, fixed),
                      "min_trials": min_trials}
        bfcl_accuracy(small, tmp_path / "b.png", {"statistics": statistics})
        expected = 0 if fixed else sum(n >= min_trials for n in drawn)
        assert sum(bars) == expected, (fixed, min_trials, bars)


def test_the_suite_tables_give_an_interval_only_where_the_rule_does() -> None:
    """bfcl.csv and agentdojo.csv (the benchmarks' own tables): a rate's interval only over
    at least min_trials cases (pairs) of a stochastic backend; the goldens' backends are
    all scripted, so their tables give none."""
    from reactlab.suites import agentdojo_score, bfcl_tables

    for name, cols in (("bfcl", ["ci_low", "ci_high"]),
                       ("agentdojo", ["utility_low", "utility_high", "asr_low", "asr_high"])):
        golden = pd.read_csv(ROOT / "tests" / "golden" / f"{name}.csv")
        assert golden[cols].isna().all().all(), name
    row = {"entry": "agentdojo", "suite": "workspace", "backend": "b", "policy": "p",
           "defence": "none", "utility": True, "attack_succeeded": False}
    for fixed, n, min_trials, given in ((True, 5, 3, False), (False, 2, 3, False),
                                        (False, 3, 3, True), (False, 2, 2, True)):
        with suite_min_trials(min_trials):
            table = agentdojo_score.table([{**row, "deterministic": fixed}] * n)
            case = {"bfcl_correct": True, "project_correct": True, "error_type": "",
                    "deterministic": fixed}
            bfcl = bfcl_tables._row(("bfcl", "b", "s"), "simple_python", [case] * n)
        assert table[["utility_low", "asr_high"]].notna().all().all() == given, (fixed, n)
        assert (bfcl["ci_low"] is not None) == given, (fixed, n)
        if given:
            assert bfcl["ci_low"] == wilson(n, n).low
