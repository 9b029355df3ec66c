"""Tests of reactlab.analysis.verify: the lesson's verifier, Exercise 1 and the wrong-tool rule."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactlab.analysis.verify import (
    CALCULATING_TOOLS,
    Finding,
    asks_figure,
    asks_percentage,
    figures,
    near,
    verdict,
    verify,
)
from reactlab.trace.records import ToolCallRecord

# --- the lesson's code, verbatim, as a reference -------------------------------------------

NUM = re.compile(r"\d[\d.,]*\d|\d")


def cifras(s):
    out = []
    for t in NUM.findall(s or ""):
        if "," in t:
            t = t.replace(".", "").replace(",", ".")
        elif re.fullmatch(r"\d{1,3}(\.\d{3})+", t):
            t = t.replace(".", "")
        out.append(float(t.rstrip(".")))
    return out


def cerca(x, ys):
    return any(abs(x - y) <= 0.006 * max(1.0, abs(y)) for y in ys)


def verificar(pregunta, final, traza):
    if final is None:
        return ["no answer: step limit"]
    vistas, calculadas, errores = [], [], []
    for nombre, _args, r in traza:
        if "resultado" in r:
            vistas += cifras(json.dumps(r["resultado"]))
            if nombre in ("calculadora", "variacion"):
                calculadas += cifras(json.dumps(r["resultado"]))
        else:
            errores.append(nombre)
    fallos = []
    for x in cifras(final):
        if not cerca(x, vistas + cifras(pregunta)):
            fallos.append(f"figure without a source: {x:g}")
    for p in re.findall(r"(\d[\d.,]*)\s*%", final):
        if not cerca(cifras(p)[0], calculadas):
            fallos.append(f"percentage without a calculation: {p}%")
    if errores and not vistas:
        fallos.append("unresolved tool error")
    return fallos


def titulares_ok(final, traza):
    reales = {
        n["titular"]
        for nom, _, r in traza
        if nom == "buscar_noticias" and "resultado" in r
        for n in r["resultado"]
    }
    citados = re.findall(r"[«\"“]([^»\"”]+)[»\"”]", final or "")
    return [c for c in citados if c not in reales]


# --- the lesson's traces ---------------------------------------------------------------------

Q_CHANGE = "¿Cuánto cambió en porcentaje el cierre de BUSI entre el 2024-03-15 y el 2024-03-22?"
Q_ACME = "¿Cuál fue el cierre de ACME el 2024-03-15?"
Q_NEWS = "¿Qué titulares hubo sobre BUSI entre el 2024-03-18 y el 2024-03-20?"

CLOSE_15 = {"ticker": "BUSI", "fecha": "2024-03-15", "cierre": 26.19}
CLOSE_22 = {"ticker": "BUSI", "fecha": "2024-03-22", "cierre": 27.88}
OFFER = "Un fondo ofrece comprar Busmar Hogar"
NEWS_RESULT = {"resultado": [{"fecha": "2024-03-19", "titular": OFFER}]}


def call(name: str | None, arguments: dict | None, result: dict) -> ToolCallRecord:
    """A trace's tool-call record (the verifier reads the records the trace holds)."""
    return ToolCallRecord(step=1, id="c", name=name, arguments=arguments,
                          status="ok" if isinstance(result, dict) and "resultado" in result
                          else "error", result=result)


def price(ticker: str, fecha: str, result: dict) -> ToolCallRecord:
    return call("precio", {"ticker": ticker, "fecha": fecha}, result)


TWO_PRICES = [
    price("BUSI", "2024-03-15", {"resultado": CLOSE_15}),
    price("BUSI", "2024-03-22", {"resultado": CLOSE_22}),
]
ACME = [price("ACME", "2024-03-15", {"error": "ticker desconocido: ACME"})]
VARIACION = [
    call(
        "variacion",
        {"ticker": "BUSI", "desde": "2024-03-15", "hasta": "2024-03-22"},
        {"resultado": {"desde": CLOSE_15, "hasta": CLOSE_22, "variacion_pct": 6.45}},
    )
]
CORRECT = [
    *TWO_PRICES,
    call("calculadora", {"expresion": "(27.88/26.19 - 1)*100"}, {"resultado": 6.4528}),
]
NEWS_ARGS = {"ticker": "BUSI", "desde": "2024-03-18", "hasta": "2024-03-20"}
NEWS = [call("buscar_noticias", NEWS_ARGS, NEWS_RESULT)]
WRONG_TOOL = [
    call(
        "buscar_noticias",
        {"ticker": "BUSI", "desde": "2024-03-15", "hasta": "2024-03-22"},
        NEWS_RESULT,
    )
]

ANSWER_LOCAL_1 = (
    "El cambio en el cierre del producto BUSI entre el 2024-03-15 y el 2024-03-22 fue de 27.88%."
)
ANSWER_LOCAL_2 = "El cierre del ticker ACME el 2024-03-15 fue de $10."
ANSWER_VARIACION = (
    "El cambio en el cierre de la acción BUSI entre el 2024-03-15 y el 2024-03-22 fue de 6.45%."
)
ANSWER_CORRECT = "El cierre de BUSI varió un 6.45 % entre 2024-03-15 y 2024-03-22."
ANSWER_WRONG_TOOL = "BUSI subió por la oferta de compra de un fondo."
FAITHFUL = "On March 19: “Un fondo ofrece comprar Busmar Hogar”."
INVENTED = 'There was a news item: "Busmar Hogar dispara su beneficio un 40 %".'

# (question, answer, calls) of every lesson case without a headline or wrong-tool rule at stake
LESSON_CASES = [
    (Q_CHANGE, ANSWER_LOCAL_1, TWO_PRICES),
    (Q_ACME, ANSWER_LOCAL_2, ACME),
    (Q_CHANGE, ANSWER_VARIACION, VARIACION),
    (Q_CHANGE, ANSWER_CORRECT, CORRECT),
]


def messages(findings: list[Finding]) -> list[str]:
    return [f.message for f in findings]


def rules(findings: list[Finding]) -> list[str]:
    return [f.rule for f in findings]


def as_trace(calls: list[ToolCallRecord]) -> list[tuple]:
    return [(c.name, c.arguments, c.result) for c in calls]


# --- the lesson's outputs --------------------------------------------------------------------


def test_local_task_1_percentage_copied_from_a_close() -> None:
    findings = verify(Q_CHANGE, ANSWER_LOCAL_1, TWO_PRICES)
    assert messages(findings) == ["percentage without a calculation: 27.88%"]
    assert rules(findings) == ["percentage_without_calculation"]
    assert not verdict(findings)


def test_local_task_2_invented_close_after_an_error() -> None:
    findings = verify(Q_ACME, ANSWER_LOCAL_2, ACME)
    assert messages(findings) == ["figure without a source: 10", "unresolved tool error"]
    assert rules(findings) == ["figure_without_source", "unresolved_tool_error"]


def test_variacion_answer_passes() -> None:
    findings = verify(Q_CHANGE, ANSWER_VARIACION, VARIACION)
    assert findings == []
    assert verdict(findings)


def test_correct_api_scenario_passes() -> None:
    assert verify(Q_CHANGE, ANSWER_CORRECT, CORRECT) == []


def test_invented_arguments_scenario_passes_after_correction() -> None:
    bad = call(
        "precio",
        {"ticker": "BUSMAR", "fecha": "15/03/2024"},
        {"error": "argumentos no válidos: ticker: String should match pattern '^[A-Z]{4}$'"},
    )
    assert verify(Q_CHANGE, ANSWER_CORRECT, [bad, *CORRECT]) == []


def test_wrong_tool_gives_no_percentage() -> None:
    findings = verify(Q_CHANGE, ANSWER_WRONG_TOOL, WRONG_TOOL)
    assert findings == [
        Finding("percentage_not_given", "question asks for a percentage; the answer gives none")
    ]
    # the lesson's verifier alone lets it through: that is why the rule exists
    assert verificar(Q_CHANGE, ANSWER_WRONG_TOOL, as_trace(WRONG_TOOL)) == []


def test_no_answer_step_limit() -> None:
    findings = verify(
        Q_CHANGE,
        None,
        [price("BUSI", "2024-03-15", {"resultado": CLOSE_15})] * 6,
        termination="step_limit",
    )
    assert messages(findings) == ["no answer: step limit"]
    assert rules(findings) == ["no_answer"]


def test_no_answer_token_budget() -> None:
    assert verify(Q_CHANGE, None, [], termination="token_budget") == [
        Finding("no_answer", "no answer: token budget")
    ]


def test_no_answer_is_the_only_finding() -> None:
    # errors in the trace and a percentage question do not add findings to a missing answer
    findings = verify(Q_CHANGE, None, ACME, termination="backend_error")
    assert messages(findings) == ["no answer: backend error"]


@pytest.mark.parametrize(("question", "answer", "calls"), LESSON_CASES)
def test_rule_2_matches_the_lesson_verbatim(question: str, answer: str, calls: list) -> None:
    ours = [
        f.message
        for f in verify(question, answer, calls)
        if f.rule not in {"headline_not_verbatim", "percentage_not_given"}
    ]
    assert ours == verificar(question, answer, as_trace(calls))


# --- Exercise 1 ------------------------------------------------------------------------------


def test_exercise_1_faithful_headline_passes() -> None:
    assert titulares_ok(FAITHFUL, as_trace(NEWS)) == []
    assert verify(Q_NEWS, FAITHFUL, NEWS) == []


def test_exercise_1_invented_headline() -> None:
    """The invented answer also quotes "40 %": the rules are independent, so besides the
    headline it gets the lesson's two findings for that figure (no source, no calculation),
    in rule order: figure, percentage, headline."""
    assert titulares_ok(INVENTED, as_trace(NEWS)) == ["Busmar Hogar dispara su beneficio un 40 %"]
    findings = verify(Q_NEWS, INVENTED, NEWS)
    assert messages(findings) == [
        "figure without a source: 40",
        "percentage without a calculation: 40%",
        "headline not in any news result: Busmar Hogar dispara su beneficio un 40 %",
    ]
    assert rules(findings) == [
        "figure_without_source",
        "percentage_without_calculation",
        "headline_not_verbatim",
    ]


def test_headline_needs_a_successful_news_result() -> None:
    failed = [call("buscar_noticias", NEWS_ARGS, {"error": "ticker desconocido: BUSX"})]
    assert rules(verify(Q_NEWS, "«Un fondo ofrece comprar Busmar Hogar»", failed)) == [
        "unresolved_tool_error",
        "headline_not_verbatim",
    ]
    # a titular returned by another tool does not count
    other = [call("otra", {}, NEWS_RESULT)]
    assert rules(verify(Q_NEWS, f"«{OFFER}»", other)) == ["headline_not_verbatim"]


def test_headline_quote_styles_and_paraphrase() -> None:
    for quoted in (f"«{OFFER}»", f'"{OFFER}"', f"“{OFFER}”"):
        assert verify(Q_NEWS, f"Titular: {quoted}.", NEWS) == []
    paraphrase = "«Un fondo lanza una oferta por Busmar»"
    assert messages(verify(Q_NEWS, paraphrase, NEWS)) == [
        "headline not in any news result: Un fondo lanza una oferta por Busmar"
    ]


def test_malformed_news_result_does_not_crash() -> None:
    weird = [
        call("buscar_noticias", NEWS_ARGS, {"resultado": "sin noticias"}),
        call("buscar_noticias", NEWS_ARGS, {"resultado": [None, {"fecha": "x"}, {"titular": 3}]}),
    ]
    assert rules(verify(Q_NEWS, f"«{OFFER}»", weird)) == ["headline_not_verbatim"]


# --- figures, near, asks_percentage ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.234,5", [1234.5]),
        ("1.234", [1234.0]),
        ("27.88.", [27.88]),
        ("fue de 27.88%.", [27.88]),
        ("2024-03-15", [2024.0, 3.0, 15.0]),
        ("6,45 %", [6.45]),
        ("12.5", [12.5]),
        ("1.234.567", [1234567.0]),
        ("$10.", [10.0]),
        ("sin cifras", []),
        ("", []),
    ],
)
def test_figures_matches_the_lesson(text: str, expected: list[float]) -> None:
    assert figures(text) == expected
    assert figures(text) == cifras(text)


def test_figures_of_none() -> None:
    assert figures(None) == [] == cifras(None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15.03.2024", [15.0, 3.0, 2024.0]),
        ("1,234,567", [1.0, 234.0, 567.0]),
        ("versión 1.2.3", [1.0, 2.0, 3.0]),
    ],
)
def test_figures_where_the_lesson_raises(text: str, expected: list[float]) -> None:
    with pytest.raises(ValueError):
        cifras(text)
    assert figures(text) == expected


@given(st.text(alphabet="0123456789.,% -ab"))
def test_figures_agrees_with_the_lesson_whenever_it_returns(text: str) -> None:
    try:
        reference = cifras(text)
    except ValueError:
        figures(text)  # must not raise
        return
    assert figures(text) == reference


@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=5),
)
def test_near_is_cerca(x: float, ys: list[float]) -> None:
    assert near(x, ys) == cerca(x, ys)
    assert near(x, iter(ys)) == cerca(x, ys)


def test_near_tolerance() -> None:
    assert near(6.45, [6.4528])
    assert near(0.5, [0.505])  # absolute 0.006 below 1
    assert not near(0.5, [0.507])
    assert near(1000.0, [1005.9])
    assert not near(1000.0, [1006.1])
    assert not near(1.0, [])


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (Q_CHANGE, True),
        ("Variación PORCENTUAL de BUSI", True),
        ("¿Cuántos Porcentajes?", True),
        ("¿Cambio en % de BUSI?", True),
        (Q_ACME, False),
        (Q_NEWS, False),
        ("", False),
    ],
)
def test_asks_percentage(question: str, expected: bool) -> None:
    assert asks_percentage(question) is expected


def test_calculating_tools() -> None:
    assert frozenset({"calculadora", "variacion"}) == CALCULATING_TOOLS


# --- edge cases ------------------------------------------------------------------------------


def test_empty_answer_is_an_answer() -> None:
    assert verify(Q_CHANGE, "", CORRECT) == [
        Finding("percentage_not_given", "question asks for a percentage; the answer gives none")
    ]
    # an empty answer gives no data point (no unresolved error), but it does not answer
    assert rules(verify(Q_ACME, "", ACME)) == ["non_answer"]
    assert rules(verify(Q_ACME, "", [])) == ["non_answer"]


def test_unparseable_calls_count_as_errors() -> None:
    bad = call(None, None, {"error": "llamada con JSON no válido"})
    assert verify(Q_ACME, "No pude obtener el cierre de ACME.", [bad, bad]) == []
    findings = verify(Q_ACME, "El cierre de ACME fue de 12.", [bad, bad])
    assert messages(findings) == ["figure without a source: 12", "unresolved tool error"]
    # resolved once some result brings figures
    findings = verify(Q_CHANGE, ANSWER_CORRECT, [bad, *CORRECT])
    assert findings == []


def test_result_that_is_not_a_mapping_is_an_error() -> None:
    assert rules(verify(Q_ACME, "Cierre: 12.", [call("precio", {}, None)])) == [  # type: ignore[arg-type]
        "figure_without_source",
        "unresolved_tool_error",
    ]


def test_successful_result_without_figures_does_not_resolve_an_error() -> None:
    # the lesson tests `not vistas` (figures seen), not the number of successful calls
    calls = [*ACME, call("buscar_noticias", NEWS_ARGS, {"resultado": []})]
    assert messages(verify(Q_ACME, "El cierre de ACME fue 12.", calls)) == [
        "figure without a source: 12", "unresolved tool error"]
    assert verificar(Q_ACME, "No hay datos de ACME.", as_trace(calls)) == ["unresolved tool error"]


def test_percentage_only_from_calculating_tools() -> None:
    # 6.45 appears in a precio result: it is a sourced figure but not a computed percentage
    calls = [price("BUSI", "2024-03-15", {"resultado": {"cierre": 6.45}})]
    assert rules(verify(Q_CHANGE, "Subió un 6.45 %.", calls)) == ["percentage_without_calculation"]


def test_figures_from_the_question_are_sources() -> None:
    assert verify("¿Qué pasó con 1.234,5 acciones?", "Las 1234.5 acciones subieron.", []) == []


def test_repeated_figures_give_one_finding_each_in_order() -> None:
    findings = verify(Q_ACME, "Fue de 10, luego 11 y otra vez 10.", ACME)
    assert messages(findings) == [
        "figure without a source: 10",
        "figure without a source: 11",
        "figure without a source: 10",
        "unresolved tool error",
    ]


def test_all_rules_in_order() -> None:
    answer = "Según «Titular inventado», el cierre fue 99 y subió un 12 %."
    findings = verify(Q_CHANGE, answer, ACME)
    assert rules(findings) == [
        "figure_without_source",
        "figure_without_source",
        "percentage_without_calculation",
        "unresolved_tool_error",
        "headline_not_verbatim",
    ]
    no_pct = verify(Q_CHANGE, "Según «Titular inventado», el cierre fue 99.", ACME)
    assert rules(no_pct)[-1] == "percentage_not_given"


def test_deterministic_and_pure() -> None:
    snapshot = json.dumps([c.to_json() for c in CORRECT + ACME + NEWS], sort_keys=True)
    runs = [
        verify(Q_CHANGE, INVENTED + " " + ANSWER_LOCAL_1, CORRECT + ACME + NEWS) for _ in range(3)
    ]
    assert runs[0] == runs[1] == runs[2]
    assert runs[0]  # something was found
    assert json.dumps([c.to_json() for c in CORRECT + ACME + NEWS],
                      sort_keys=True) == snapshot  # inputs untouched (results are dicts)


def test_finding_is_frozen() -> None:
    finding = Finding("no_answer", "no answer: step limit")
    with pytest.raises(AttributeError):
        finding.rule = "other"  # type: ignore[misc]


def test_verdict() -> None:
    assert verdict([])
    assert not verdict([Finding("no_answer", "no answer: step limit")])
    assert verdict(iter([]))


def test_honest_no_data_answer_is_not_an_unresolved_error() -> None:
    """An error followed by an answer that gives no data point passes (the lesson's prose)."""
    assert verify(Q_ACME, "No hay datos de ACME: el ticker no existe.", ACME) == []
    # the date of the question is not a data point either
    assert verify(Q_ACME, "No hay cierre de ACME el 2024-03-15.", ACME) == []
    # but any figure that is not in the question is
    assert messages(verify(Q_ACME, "ACME cerró en 12,5.", ACME)) == [
        "figure without a source: 12.5", "unresolved tool error"]


# --- rule 5: answers that do not answer ----------------------------------------------------

NON_ANSWER = Finding("non_answer", "data question; the answer gives no figure and does not say "
                                   "that there is no data")


def test_figure_free_non_answer_to_a_price_question_is_a_finding() -> None:
    """The gap the constrained-decoding experiment found: SmolLM2's reply to the ACME
    question passed with zero findings."""
    answer = "You can use json.dumps() to convert the result into a string."
    assert verify(Q_ACME, answer, []) == [NON_ANSWER]
    assert verify(Q_ACME, answer, ACME) == [NON_ANSWER]
    # echoing the question's own date is still no figure
    assert verify(Q_ACME, "El cierre de ACME el 2024-03-15 se consulta con precio.", []) == [
        NON_ANSWER]


@pytest.mark.parametrize("answer", [
    "No hay datos de ACME: el ticker no existe.",
    "No pude obtener el cierre de ACME.",
    "No encontré ese ticker.",
    "El dato no está disponible.",
    "Sin datos para ACME en esa fecha.",
    "There is no data for ACME.",
])
def test_honest_no_data_statement_is_an_answer(answer: str) -> None:
    assert "non_answer" not in rules(verify(Q_ACME, answer, ACME))


def test_an_answer_with_a_figure_is_not_a_non_answer() -> None:
    assert rules(verify(Q_ACME, "El cierre fue 12.", [])) == ["figure_without_source"]


def test_non_answer_leaves_percentage_questions_to_rule_4() -> None:
    assert rules(verify(Q_CHANGE, "Usa la calculadora.", CORRECT)) == ["percentage_not_given"]


def test_news_question_is_not_a_data_question() -> None:
    q = "¿Qué noticias hubo de BUSI entre el 2024-03-18 y el 2024-03-20?"
    assert not asks_figure(q)
    assert verify(q, "Consulta buscar_noticias.", []) == []


@pytest.mark.parametrize(("question", "expected"), [
    ("¿Cuál fue el cierre de ACME el 2024-03-15?", True),
    ("¿Cuánto cambió en porcentaje el cierre de BUSI?", True),
    ("¿A qué precio cotizó ACME?", True),
    ("¿Qué noticias hubo de BUSI?", False),
    ("Resume las noticias de BUSI.", False),
])
def test_asks_figure(question: str, expected: bool) -> None:
    assert asks_figure(question) is expected
