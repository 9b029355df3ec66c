"""Tests of reactlab.config.scripts: scripted steps rendered against params and tool results."""

from __future__ import annotations

from typing import Any

import pytest

from reactlab.config.scripts import Script, ScriptedCall, render, template_names
from reactlab.core.errors import ScriptError

PARAMS = {"ticker": "BUSI", "desde": "2024-03-15", "hasta": "2024-03-22"}
QUESTION = "¿Cuánto cambió BUSI?"
# Two successful results with an error between them, then a calculator result.
RESULTS: list[dict[str, Any]] = [
    {"resultado": {"ticker": "BUSI", "fecha": "2024-03-15", "cierre": 20.0}},
    {"error": "ticker desconocido: BUSMAR"},
    {"resultado": {"ticker": "BUSI", "fecha": "2024-03-22", "cierre": 21.5}},
    {"resultado": 7.123456},
]


def _script(steps: list[dict[str, Any]], repeat_last: bool = False,
            name: str = "prueba") -> Script:
    return Script.from_config(name, {"steps": steps, "repeat_last": repeat_last})


def _answer(template: str, results: list[dict[str, Any]] = RESULTS) -> str:
    action = _script([{"answer": template}]).action(0, PARAMS, QUESTION, results)
    assert action.calls == ()
    assert action.text is not None
    return action.text


def test_params_and_question_are_rendered() -> None:
    assert _answer("{ticker} de {desde} a {hasta}") == "BUSI de 2024-03-15 a 2024-03-22"
    assert _answer("P: {question}") == "P: ¿Cuánto cambió BUSI?"


def test_ok_holds_successful_results_only() -> None:
    assert _answer("{ok[0][cierre]} {ok[1][cierre]} {ok[1][fecha]}") == "20.0 21.5 2024-03-22"
    assert _answer("{ok[2]}") == "7.123456"


def test_results_holds_every_result() -> None:
    assert _answer("{results[1][error]}") == "ticker desconocido: BUSMAR"
    assert _answer("{results[2][resultado][cierre]}") == "21.5"


def test_format_spec() -> None:
    assert _answer("{ok[2]:.2f} %") == "7.12 %"
    assert _answer("{ok[0][cierre]:>6}") == "  20.0"


def test_doubled_braces_are_literal() -> None:
    assert _answer('{{"ticker": "{ticker}"}}') == '{"ticker": "BUSI"}'


def test_nested_arguments_are_rendered() -> None:
    step = {"calls": [{"name": "precio", "arguments": {
        "ticker": "{ticker}", "n": 3, "lista": ["{desde}", {"x": "{ok[0][cierre]}"}, None],
    }}]}
    action = _script([step]).action(0, PARAMS, QUESTION, RESULTS)
    assert action.text is None
    assert action.calls == (ScriptedCall(name="precio", arguments={
        "ticker": "BUSI", "n": 3, "lista": ["2024-03-15", {"x": "20.0"}, None]}),)
    assert action.calls[0].arguments_text() == (
        '{"ticker": "BUSI", "n": 3, "lista": ["2024-03-15", {"x": "20.0"}, null]}')


def test_call_names_are_templates_too() -> None:
    step = {"calls": [{"name": "{herramienta}", "arguments": {}}]}
    action = _script([step]).action(0, {"herramienta": "calculadora"}, QUESTION, [])
    assert action.calls[0].name == "calculadora"
    assert action.calls[0].arguments_text() == "{}"


def test_raw_arguments_pass_through_as_text() -> None:
    step = {"calls": [{"name": "precio", "raw_arguments": '{{"ticker": "{ticker}", "fecha": '}]}
    (call,) = _script([step]).action(0, PARAMS, QUESTION, []).calls
    assert call.arguments is None
    assert call.raw_arguments == '{"ticker": "BUSI", "fecha": '
    assert call.arguments_text() == '{"ticker": "BUSI", "fecha": '


def test_repeat_last_repeats_beyond_the_end() -> None:
    steps = [{"answer": "primero"}, {"answer": "último {ticker}"}]
    script = _script(steps, repeat_last=True)
    assert [script.action(t, PARAMS, QUESTION, []).text for t in range(5)] == [
        "primero", "último BUSI", "último BUSI", "último BUSI", "último BUSI"]


def test_past_the_end_the_final_answer_is_repeated() -> None:
    script = _script([{"calls": [{"name": "precio", "arguments": {}}]},
                      {"answer": "fin {ticker}"}], name="corto")
    assert [script.action(t, PARAMS, QUESTION, []).text for t in (1, 2, 3, 9)] == [
        "fin BUSI"] * 4


def test_running_out_of_steps_that_end_with_calls_names_script_and_step() -> None:
    script = _script([{"answer": "a"}, {"calls": [{"name": "precio", "arguments": {}}]}],
                     name="corto")
    assert script.action(1, PARAMS, QUESTION, []).calls[0].name == "precio"
    with pytest.raises(ScriptError) as info:
        script.action(2, PARAMS, QUESTION, [])
    msg = str(info.value)
    assert "'corto'" in msg
    assert "2 steps" in msg
    assert "turn 3" in msg


def test_foreign_results_are_read_leniently() -> None:
    """Results not shaped like the lesson's: the scripted model still answers."""
    script = _script([{"calls": [{"name": "calculadora", "arguments": {
        "expresion": "({ok[1][cierre]}/{ok[0][cierre]} - 1)*100"}}]},
        {"answer": "varió un {ok[2]:.2f} %; {ok[5][x]}"}])
    call = script.action(0, PARAMS, QUESTION, [191.5, 203.9]).calls[0]
    assert call.arguments == {"expresion": "(203.9/191.5 - 1)*100"}  # a bare number stands
    answer = script.action(1, PARAMS, QUESTION, [191.5, 203.9, {"texto": "6,45"}]).text
    # free text (read as {"texto": ...}) counts as its text, its format spec dropped;
    # an unfilled field is '?'
    assert answer == "varió un 6,45 %; ?"
    # with the lesson's results a field that cannot be filled stays a script error
    with pytest.raises(ScriptError, match="no item 5"):
        script.action(1, PARAMS, QUESTION, [{"resultado": 1}, {"resultado": 2},
                                             {"resultado": 3}])


def test_attribute_access_is_refused() -> None:
    with pytest.raises(ScriptError, match="attribute access is not allowed"):
        _answer("{ticker.__class__}")
    with pytest.raises(ScriptError, match="attribute access is not allowed"):
        _answer("{ok[0].__class__.__mro__}")
    # nested inside a format spec
    with pytest.raises(ScriptError, match="attribute access is not allowed"):
        _answer("{ticker:{ticker.__class__}}")


def test_index_out_of_range_names_the_field_script_and_step() -> None:
    script = _script([{"calls": [{"name": "precio", "arguments": {}}]},
                      {"answer": "{ok[5][cierre]}"}], name="roto")
    with pytest.raises(ScriptError) as info:
        script.action(1, PARAMS, QUESTION, RESULTS)
    msg = str(info.value)
    assert "{ok[5][cierre]}" in msg
    assert "no item 5" in msg
    assert "script 'roto', step 2" in msg


def test_missing_key_and_unknown_name() -> None:
    with pytest.raises(ScriptError, match=r"\{ok\[0\]\[apertura\]\}: no item 'apertura'"):
        _answer("{ok[0][apertura]}")
    with pytest.raises(ScriptError, match=r"unknown name \{fecha\}"):
        _answer("{fecha}")
    with pytest.raises(ScriptError, match="is not an integer"):
        _answer("{ok[x]}")


def test_bad_format_spec_is_a_script_error() -> None:
    with pytest.raises(ScriptError, match="cannot render"):
        _answer("{ticker:.2f}")


def test_render_leaves_non_strings_alone() -> None:
    value = {"a": 1, "b": [2.5, True, None], "c": "{ticker}"}
    assert render(value, PARAMS) == {"a": 1, "b": [2.5, True, None], "c": "BUSI"}


def test_template_names() -> None:
    assert template_names("sin campos") == set()
    assert template_names("{ok[1][cierre]} y {ticker} y {{literal}}") == {"ok", "ticker"}
    assert template_names("{results[0]:.2f}{question}") == {"results", "question"}
    with pytest.raises(ScriptError, match="malformed template"):
        template_names("{ok[0")
    with pytest.raises(ScriptError, match="positional field"):
        template_names("{} y {0}")


def test_script_names_collects_every_step() -> None:
    script = _script([
        {"calls": [{"name": "precio", "arguments": {"ticker": "{ticker}", "f": ["{desde}"]}}]},
        {"calls": [{"name": "x", "raw_arguments": "{{{hasta}"}]},
        {"answer": "{ok[0]} {question}"},
    ])
    assert script.names() == {"ticker", "desde", "hasta", "ok", "question"}
