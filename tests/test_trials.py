"""Repeated trials: config (keys, derived seeds, validation), identical scripted trials,
trajectory metrics, cost, and the trial tables (values computed by hand)."""

from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from reactlab.analysis import trials as trials_mod
from reactlab.analysis.cost import run_cost
from reactlab.analysis.trajectory import call_matches, trajectory_metrics
from reactlab.config import parse
from reactlab.config.trials import analysis_section, derive_seed
from reactlab.core.errors import ConfigError
from reactlab.runner import run_to_trace
from reactlab.trace.records import ToolCallRecord

Raw = dict[str, Any]


def _error(raw: Raw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse(raw)
    return info.value


# ------------------------------------------------------------------------------ config


def test_derive_seed_is_sha256_of_key_trial_and_data_seed() -> None:
    digest = hashlib.sha256(b"variacion_busi/local/correcto|t2|data6").digest()
    assert derive_seed("variacion_busi/local/correcto", 2, 6) == (
        int.from_bytes(digest[:8], "big") % 2**63)
    seeds = {derive_seed("a/b/c", i, 6) for i in range(1, 50)}
    assert len(seeds) == 49
    assert derive_seed("a/b/c", 1, 6) != derive_seed("a/b/c", 1, 7)


def _with_trials(raw: Raw, k: int) -> Raw:
    raw = copy.deepcopy(raw)
    raw["matrix"] = [{"tasks": ["variacion_busi"], "backends": ["local", "openai"],
                      "scenarios": ["correcto", "bucle_sin_limite"], "trials": k}]
    raw["figure"] = {**raw["figure"], "backend": "openai"}
    raw["comparisons"] = []
    return raw


def test_trials_expand_into_keyed_seeded_runs(raw_config: Raw) -> None:
    cfg = parse(_with_trials(raw_config, 3))
    assert len(cfg.runs) == 2 * 2 * 3
    run = cfg.run("variacion_busi", "local", "correcto", 2)
    assert run.key == "variacion_busi/local/correcto/t2"
    assert run.seed == derive_seed("variacion_busi/local/correcto", 2,
                                   raw_config["data"]["seed"])
    assert len({r.seed for r in cfg.runs}) == len(cfg.runs)
    assert len({r.config_hash for r in cfg.runs}) == len(cfg.runs)
    assert parse(_with_trials(raw_config, 3)).runs == cfg.runs  # a function of the config


def test_one_trial_keeps_todays_keys_and_hashes(raw_config: Raw) -> None:
    explicit = parse(_with_trials(raw_config, 1))
    plain = _with_trials(raw_config, 1)
    del plain["matrix"][0]["trials"]
    assert [(r.key, r.config_hash) for r in explicit.runs] == [
        (r.key, r.config_hash) for r in parse(plain).runs]
    assert all(r.trial is None and r.seed is None for r in explicit.runs)
    assert "trial" not in explicit.runs[0].to_dict()


def test_shipped_sampling_backend_gets_trials_and_seeds(raw_config: Raw) -> None:
    cfg = parse(raw_config)
    sampled = [r for r in cfg.runs if r.backend == "smollm2_sampled"]
    assert sampled and all(r.seed is not None and r.trial for r in sampled)
    assert {r.key.rsplit("/", 1)[1] for r in sampled} == {"t1", "t2", "t3"}
    # every run of the scripted matrix keeps its key without a trial suffix
    assert all(r.trial is None for r in cfg.runs if r.backend in ("openai", "local"))


@pytest.mark.parametrize(("mutate", "field", "message"), [
    (lambda r: r["matrix"][0].update(trials=0), "matrix[0].trials", "minimum"),
    (lambda r: r["backends"]["openai"].update(temperature=0.5), "backends.openai", ""),
    (lambda r: r["backends"]["smollm2"].update(temperature=3), "backends.smollm2.temperature",
     "maximum"),
    (lambda r: r["tasks"]["cierre_acme"]["expected_calls"].append({"name": "cotizacion"}),
     "tasks.cierre_acme.expected_calls[1].name", ""),
    (lambda r: r["tasks"]["cierre_acme"]["expected_calls"][0].update(argumentos={}),
     "tasks.cierre_acme.expected_calls[0].argumentos", "unknown key"),
    (lambda r: r["pricing"]["backends"].update(ollama="gpt-5"), "pricing.backends.ollama",
     "no backend named 'ollama'"),
    (lambda r: r["pricing"]["backends"].update(openai="gpt-4"), "pricing.backends.openai",
     "no model named 'gpt-4'"),
    (lambda r: r["comparisons"].append({"name": "x", "vary": "backend", "a": "openai",
                                        "b": "opena"}), "comparisons[3].b",
     "no backend named 'opena'"),
])
def test_bad_trial_and_analysis_config_names_the_field(raw_config: Raw, mutate: Any,
                                                      field: str, message: str) -> None:
    raw = copy.deepcopy(raw_config)
    mutate(raw)
    err = _error(raw)
    assert err.field == field
    assert message in str(err)


# ------------------------------------------------------------------- identical scripted trials


def test_scripted_trials_are_identical(raw_config: Raw, toolbox: Any, tmp_path: Path) -> None:
    cfg = parse(_with_trials(raw_config, 3))
    for backend in ("local", "openai"):
        bodies = []
        for trial in (1, 2, 3):
            spec = cfg.run("variacion_busi", backend, "correcto", trial)
            path = tmp_path / f"{backend}_t{trial}.jsonl"
            run_to_trace(spec, toolbox, path)
            lines = path.read_text(encoding="utf-8").splitlines()
            header = json.loads(lines[0])
            assert header["run"]["trial"] == trial and header["spec"]["seed"] == spec.seed
            end = json.loads(lines[-1])
            del end["sha256"]  # the checksum covers the header, which names the trial
            bodies.append([*lines[1:-1], end])  # everything but the header
        assert bodies[0] == bodies[1] == bodies[2]
        assert len(bodies[0]) > 3


# ------------------------------------------------------------------- trajectory metrics

EXPECTED = [
    {"name": "precio", "arguments": {"ticker": ["BUSI"], "fecha": ["2024-03-15"]}},
    {"name": "precio", "arguments": {"ticker": ["BUSI"], "fecha": ["2024-03-22"]}},
    {"name": "calculadora"},
]
Q = "¿Cuánto cambió en porcentaje el cierre de BUSI entre el 2024-03-15 y el 2024-03-22?"


def _call(name: str, **arguments: Any) -> ToolCallRecord:
    return ToolCallRecord(step=1, id="c", name=name, arguments=arguments, status="ok",
                          result={"resultado": None})


def test_call_matching_uses_sets_of_acceptable_values() -> None:
    exp = {"name": "precio", "arguments": {"ticker": ["BUSI", "busi"], "fecha": [1]}}
    assert call_matches(_call("precio", ticker="busi", fecha=1.0, extra=True), exp)
    assert not call_matches(_call("precio", ticker="BUSMAR", fecha=1), exp)
    assert not call_matches(_call("precio", ticker="BUSI"), exp)  # missing argument
    invalid = ToolCallRecord(step=1, id="c", name="precio", arguments=None, status="invalid",
                             result={"error": "llamada con JSON no válido"})
    assert not call_matches(invalid, exp)  # invalid JSON
    assert call_matches(_call("calculadora", expresion="1+1"), {"name": "calculadora"})


def test_trajectory_of_the_correct_run_scores_one() -> None:
    calls = [_call("precio", ticker="BUSI", fecha="2024-03-15"),
             _call("precio", ticker="BUSI", fecha="2024-03-22"),
             _call("calculadora", expresion="(27.88/26.19 - 1)*100")]
    m = trajectory_metrics(calls, Q, "varió un 6.45 %", EXPECTED)
    assert [m[k] for k in ("tc_precision", "tc_recall", "tc_f1", "tc_f1_order",
                           "arg_accuracy")] == [1.0] * 5
    assert m["abstained_correctly"] is None  # answerable task


def test_trajectory_by_hand_invented_arguments_and_order() -> None:
    # argumentos_inventados: precio(BUSMAR, 15/03/2024), precio(15), precio(22), calculadora
    calls = [_call("precio", ticker="BUSMAR", fecha="15/03/2024"),
             _call("precio", ticker="BUSI", fecha="2024-03-15"),
             _call("precio", ticker="BUSI", fecha="2024-03-22"),
             _call("calculadora", expresion="x")]
    m = trajectory_metrics(calls, Q, None, EXPECTED)
    # 3 of 4 actual calls match, all 3 expected ones are met: P = 3/4, R = 1,
    # F1 = 2 * 0.75 * 1 / 1.75 = 6/7; in order the LCS is also 3.
    assert m["tc_precision"] == 0.75 and m["tc_recall"] == 1.0
    assert m["tc_f1"] == pytest.approx(6 / 7) == m["tc_f1_order"]
    # argument accuracy: 4 calls to expected tools, 3 with acceptable arguments
    assert m["arg_accuracy"] == 0.75
    # the calculator first, then both prices: any order still 3/3, in order LCS = 2
    # (precio, precio), so P = R = 2/3 and F1 = 2/3.
    swapped = [calls[3], calls[1], calls[2]]
    m = trajectory_metrics(swapped, Q, None, EXPECTED)
    assert m["tc_f1"] == 1.0
    assert m["tc_precision_order"] == pytest.approx(2 / 3) == m["tc_f1_order"]


def test_trajectory_without_calls_and_abstention() -> None:
    m = trajectory_metrics([], Q, "texto", EXPECTED)
    assert m["tc_precision"] is None and m["tc_recall"] == 0.0 and m["tc_f1"] == 0.0
    assert m["arg_accuracy"] is None
    qa = "¿Cuál fue el cierre de ACME el 2024-03-15?"
    exp = [{"name": "precio", "arguments": {"ticker": ["ACME"]}}]
    no_data = "No hay datos de ACME: la herramienta indica que el ticker no existe."
    assert trajectory_metrics([], qa, no_data, exp, answerable=False)["abstained_correctly"]
    for bad in ("El cierre del ticker ACME el 2024-03-15 fue de $10.", None,
                # no figure, but no statement that the data is missing either
                "¡Hola! ¿En qué más puedo ayudarte con ACME?",
                # says there is no data, then gives a figure anyway
                "No hay datos exactos; el cierre de ACME fue de unos 10 dólares."):
        assert trajectory_metrics([], qa, bad, exp, answerable=False)[
            "abstained_correctly"] is False
    assert trajectory_metrics([], qa, "ok", None)["tc_f1"] is None  # no expectation


# ------------------------------------------------------------------------------ cost

PRICING = {"models": {"m": {"input": 1.25, "output": 10.0}}, "backends": {"openai": "m"}}


def test_run_cost_by_hand() -> None:
    # 1519 tokens in at 1.25 $/M + 60 out at 10 $/M = 0.00189875 + 0.0006 = 0.00249875
    assert run_cost("openai", 1519, 60, PRICING) == pytest.approx(0.00249875)
    assert run_cost("local", 1519, 60, PRICING) is None
    assert run_cost("openai", 1, 1, None) is None


# ------------------------------------------------------------------------------ tables


def _row(backend: str, scenario: str, trial: int, success: bool, steps: int,
         **extra: Any) -> dict[str, Any]:
    row = dict.fromkeys(trials_mod.TRIAL_COLUMNS)
    row.update(task="t", backend=backend, scenario=scenario, agent="lesson", trial=trial,
               seed=trial,
               deterministic=False, termination="answer", verified=success,
               success=success, steps=steps, calls=steps, tokens_sent=100 * steps,
               tokens_out=10, priced_as="m", cost_usd=0.5, trace=f"{backend}{trial}",
               **extra)
    return row


def test_summary_by_hand() -> None:
    rows = [_row("a", "s", i, ok, steps, tc_f1=f1, abstained_correctly=ab)
            for i, (ok, steps, f1, ab) in enumerate(
                [(True, 2, 1.0, True), (True, 3, 0.5, False), (False, 4, None, False),
                 (True, 3, 1.0, True)], 1)]
    summary = trials_mod.summary_table(trials_mod.trials_table(rows))
    r = summary.iloc[0]
    # n = 4, c = 3: rate 0.75; pass@4 = 1 - C(1,4)/C(4,4) = 1; pass^4 = C(3,4)/1 = 0
    assert (r.n, r.successes, r.success_rate, r.k) == (4, 3, 0.75, 4)
    assert (r.pass_at_k, r.pass_hat_k) == (1.0, 0.0)
    # Wilson for 3/4 (centre (0.75 + 0.480182)/1.960365 = 0.627529, half 0.326645)
    assert r.success_low == pytest.approx(0.3006, abs=1e-4)
    assert r.success_high == pytest.approx(0.9544, abs=1e-4)
    assert r.steps_mean == 3.0 and r.steps_low <= 3.0 <= r.steps_high
    assert r.tokens_mean == 300.0
    # cost: 4 runs at 0.5 -> 0.5 per run, 2.0 / 3 successes = 0.66666667 per success
    assert r.cost_per_run == 0.5 and r.cost_per_success == pytest.approx(2 / 3, abs=1e-8)
    assert r.tc_f1 == pytest.approx(2.5 / 3, abs=1e-4)  # mean of the defined values
    assert r.abstention_rate == 0.5


def test_seeds_survive_the_table_exactly() -> None:
    seed = derive_seed("cierre_acme/smollm2_sampled/react", 1, 6)  # a 63-bit integer
    rows = [{**_row("a", "s", 1, True, 1), "seed": seed}, {**_row("b", "s", 1, True, 1),
                                                            "seed": None}]
    table = trials_mod.trials_table(rows)
    assert int(table.seed[0]) == seed and seed > 2**53
    assert table.to_csv(index=False).splitlines()[1].split(",")[5] == str(seed)


def test_paired_by_hand() -> None:
    # a succeeds in trials 1-6, b only in trial 1 -> only_a = 5, only_b = 0;
    # exact McNemar p = 2 * C(5,0) / 2^5 = 0.0625; difference a - b = 5/6 = 0.8333
    rows = [_row("a", "s", i, True, 1) for i in range(1, 7)]
    rows += [_row("b", "s", i, i == 1, 1) for i in range(1, 7)]
    rows += [_row("b", "s2", 1, True, 1)]  # no partner on side a: not paired
    table = trials_mod.paired_table(trials_mod.trials_table(rows), [
        {"name": "a_vs_b", "vary": "backend", "a": "a", "b": "b"},
        {"name": "none", "vary": "scenario", "a": "s", "b": "s3"}])
    r = table.iloc[0]
    assert (r.pairs, r.a_successes, r.b_successes, r.only_a, r.only_b) == (6, 6, 1, 5, 0)
    assert r.mcnemar_p == 0.0625
    assert r.difference == pytest.approx(0.8333, abs=1e-4)
    assert r.diff_low <= r.difference <= r.diff_high
    assert table.iloc[1].pairs == 0 and math.isnan(table.iloc[1].mcnemar_p)


def test_analysis_section_of_shipped_config(raw_config: Raw) -> None:
    section = analysis_section(raw_config)
    assert section["tasks"]["cierre_acme"]["answerable"] is False
    assert section["tasks"]["variacion_busi"]["expected_calls"][2] == {"name": "calculadora"}
    assert {c["name"] for c in section["comparisons"]} >= {"defensas_vs_ninguna"}
    assert isinstance(pd.DataFrame([section["pricing"]["models"]]), pd.DataFrame)


@pytest.mark.parametrize("backend", ["openai_live", "anthropic_live"])
def test_live_backends_send_the_sampling_settings(raw_config: Raw, backend: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from reactlab.backends import open_session

    monkeypatch.setenv(raw_config["backends"][backend]["api_key_env"], "sk-test")
    raw = copy.deepcopy(raw_config)
    raw["live"]["enabled"] = True
    raw["backends"][backend].update(temperature=0.2, top_p=0.9)
    session = open_session(parse(raw).run("variacion_busi", backend, "react"))
    assert (session.extra["temperature"], session.extra["top_p"]) == (0.2, 0.9)
    # nothing is added where the config sets nothing (simulated requests keep their bytes)
    plain = open_session(parse(raw_config).run("variacion_busi", "openai", "correcto"))
    assert "temperature" not in plain.extra and "top_p" not in plain.extra
