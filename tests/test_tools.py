"""Tests of reactlab.tools: the lesson's tools, word for word and output for output."""

from __future__ import annotations

import ast
import json
import operator
import random
import re
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import BaseModel, Field, ValidationError

from reactlab import tools
from reactlab.core.errors import DataError
from reactlab.tools import TOOLS, ToolBox, calculator

# --------------------------------------------------------------------------- schemas


PRECIO_SCHEMA = {
    "properties": {
        "ticker": {"pattern": "^[A-Z]{4}$", "title": "Ticker", "type": "string"},
        "fecha": {"pattern": "^\\d{4}-\\d{2}-\\d{2}$", "title": "Fecha", "type": "string"},
    },
    "required": ["ticker", "fecha"],
    "title": "ArgsPrecio",
    "type": "object",
}


def test_precio_schema() -> None:
    assert tools.json_schema("precio") == PRECIO_SCHEMA
    assert TOOLS["precio"].args_model.__name__ == "ArgsPrecio"


def test_precio_schema_serialises_like_the_lesson() -> None:
    # The lesson prints the tool as the Qwen template serialises it (json.dumps order).
    printed = (
        '{"type": "function", "function": {"name": "precio", "description": "Cierre de una '
        'acción en una sesión (la última sesión en o antes de la fecha).", "parameters": '
        '{"properties": {"ticker": {"pattern": "^[A-Z]{4}$", "title": "Ticker", "type": '
        '"string"}, "fecha": {"pattern": "^\\\\d{4}-\\\\d{2}-\\\\d{2}$", "title": "Fecha", '
        '"type": "string"}}, "required": ["ticker", "fecha"], "title": "ArgsPrecio", '
        '"type": "object"}}}'
    )
    spec = TOOLS["precio"]
    mine = json.dumps({"type": "function", "function": {
        "name": spec.name, "description": spec.description,
        "parameters": tools.json_schema("precio")}}, ensure_ascii=False)
    assert mine == printed


def test_other_schemas() -> None:
    fecha = {"pattern": "^\\d{4}-\\d{2}-\\d{2}$", "type": "string"}
    ticker = {"pattern": "^[A-Z]{4}$", "title": "Ticker", "type": "string"}
    for name, title in [("buscar_noticias", "ArgsNoticias"), ("variacion", "ArgsVariacion")]:
        assert tools.json_schema(name) == {
            "properties": {
                "ticker": ticker,
                "desde": {**fecha, "title": "Desde"},
                "hasta": {**fecha, "title": "Hasta"},
            },
            "required": ["ticker", "desde", "hasta"],
            "title": title,
            "type": "object",
        }
    assert tools.json_schema("calculadora") == {
        "properties": {"expresion": {"title": "Expresion", "type": "string"}},
        "required": ["expresion"],
        "title": "ArgsCalculadora",
        "type": "object",
    }


def test_tool_specs() -> None:
    assert list(TOOLS) == ["precio", "buscar_noticias", "calculadora", "variacion"]
    assert {n: s.description for n, s in TOOLS.items()} == {
        "precio": "Cierre de una acción en una sesión (la última sesión en o antes de la fecha).",
        "buscar_noticias": "Titulares de noticias de una acción entre dos fechas (AAAA-MM-DD).",
        "calculadora": "Evalúa una expresión aritmética con + - * / y paréntesis.",
        "variacion": "Variación porcentual del cierre de una acción entre dos fechas "
        "(AAAA-MM-DD), calculada con los dos cierres.",
    }
    # One English definition per argument shape, under the lesson's class name.
    assert [(s.args_model.__name__, s.args_model.__base__) for s in TOOLS.values()] == [
        ("ArgsPrecio", tools.PriceArgs), ("ArgsNoticias", tools.TickerRangeArgs),
        ("ArgsCalculadora", tools.CalculatorArgs), ("ArgsVariacion", tools.TickerRangeArgs)]
    assert all(n == s.name for n, s in TOOLS.items())
    with pytest.raises(AttributeError):
        TOOLS["precio"].name = "x"  # type: ignore[misc]


def test_args_models_validate() -> None:
    tools.PriceArgs(ticker="BUSI", fecha="2024-03-15")
    with pytest.raises(ValidationError):
        tools.PriceArgs(ticker="busi", fecha="2024-03-15")
    with pytest.raises(ValidationError):
        tools.TickerRangeArgs(ticker="BUSI", desde="2024-03-15", hasta="22/03/2024")


# --------------------------------------------------------------------------- the lesson's outputs


def test_lesson_outputs(toolbox: ToolBox) -> None:
    e = toolbox.execute
    assert e("precio", {"ticker": "BUSI", "fecha": "2024-03-16"}) == {
        "resultado": {"ticker": "BUSI", "fecha": "2024-03-15", "cierre": 26.19}}
    assert e("precio", {"ticker": "BUSI", "fecha": "16/03/2024"}) == {
        "error": "argumentos no válidos: fecha: String should match pattern "
        "'^\\d{4}-\\d{2}-\\d{2}$'"}
    assert e("calculadora", {"expresion": "(27.88/26.19 - 1)*100"}) == {"resultado": 6.4528}
    assert e("calculadora", {"expresion": "__import__('os').getcwd()"}) == {
        "error": "solo números, + - * / y paréntesis"}
    assert e("buscar_noticias", {"ticker": "BUSI", "desde": "2024-03-18",
                                 "hasta": "2024-03-20"}) == {
        "resultado": [{"fecha": "2024-03-19", "titular": "Un fondo ofrece comprar Busmar Hogar"}]}


def test_lesson_printed_reprs(toolbox: ToolBox) -> None:
    """The exact lines the lesson prints."""
    calls = [
        ("precio", {"ticker": "BUSI", "fecha": "2024-03-16"}),
        ("precio", {"ticker": "BUSI", "fecha": "16/03/2024"}),
        ("calculadora", {"expresion": "(27.88/26.19 - 1)*100"}),
        ("calculadora", {"expresion": "__import__('os').getcwd()"}),
        ("buscar_noticias", {"ticker": "BUSI", "desde": "2024-03-18", "hasta": "2024-03-20"}),
    ]
    printed = [
        "{'resultado': {'ticker': 'BUSI', 'fecha': '2024-03-15', 'cierre': 26.19}}",
        "{'error': \"argumentos no válidos: fecha: String should match pattern "
        "'^\\\\d{4}-\\\\d{2}-\\\\d{2}$'\"}",
        "{'resultado': 6.4528}",
        "{'error': 'solo números, + - * / y paréntesis'}",
        "{'resultado': [{'fecha': '2024-03-19', 'titular': "
        "'Un fondo ofrece comprar Busmar Hogar'}]}",
    ]
    assert [str(toolbox.execute(n, a)) for n, a in calls] == printed


def test_more_closes(toolbox: ToolBox) -> None:
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "2024-03-01"}) == {
        "resultado": {"ticker": "BUSI", "fecha": "2024-03-01", "cierre": 25.2}}
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "2024-01-03"}) == {
        "resultado": {"ticker": "BUSI", "fecha": "2024-01-03", "cierre": 27.75}}
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "2024-03-22"}) == {
        "resultado": {"ticker": "BUSI", "fecha": "2024-03-22", "cierre": 27.88}}


def test_exercise_2_without_validation(toolbox: ToolBox) -> None:
    """Exercise 2: called directly, "01/03/2024" is silently read month-first."""
    out = {f: toolbox.precio("BUSI", f)
           for f in ["15/03/2024", "2024-03-15", "01/03/2024", "2024-03-01"]}
    assert out == {
        "15/03/2024": {"ticker": "BUSI", "fecha": "2024-03-15", "cierre": 26.19},
        "2024-03-15": {"ticker": "BUSI", "fecha": "2024-03-15", "cierre": 26.19},
        "01/03/2024": {"ticker": "BUSI", "fecha": "2024-01-03", "cierre": 27.75},
        "2024-03-01": {"ticker": "BUSI", "fecha": "2024-03-01", "cierre": 25.2},
    }


def test_invented_arguments(toolbox: ToolBox) -> None:
    assert toolbox.execute("precio", {"ticker": "BUSMAR", "fecha": "15/03/2024"}) == {
        "error": "argumentos no válidos: ticker: String should match pattern '^[A-Z]{4}$'; "
        "fecha: String should match pattern '^\\d{4}-\\d{2}-\\d{2}$'"}


def test_unknown_ticker(toolbox: ToolBox) -> None:
    assert toolbox.execute("precio", {"ticker": "ACME", "fecha": "2024-03-15"}) == {
        "error": "ticker desconocido: ACME"}
    assert toolbox.execute("buscar_noticias", {"ticker": "ACME", "desde": "2024-03-15",
                                           "hasta": "2024-03-22"}) == {
        "error": "ticker desconocido: ACME"}
    assert toolbox.execute("variacion", {"ticker": "ACME", "desde": "2024-03-15",
                                     "hasta": "2024-03-22"}) == {
        "error": "ticker desconocido: ACME"}


def test_before_first_session(toolbox: ToolBox) -> None:
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "2022-12-30"}) == {
        "error": "sin datos hasta 2022-12-30"}
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "2023-01-01"}) == {
        "error": "sin datos hasta 2023-01-01"}
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "2023-01-02"})["resultado"][
        "fecha"] == "2023-01-02"
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "0001-01-01"}) == {
        "error": "sin datos hasta 0001-01-01"}
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "9999-12-31"})["resultado"][
        "fecha"] == "2024-12-31"


def test_variacion(toolbox: ToolBox) -> None:
    r = toolbox.execute("variacion", {"ticker": "BUSI", "desde": "2024-03-15",
                                  "hasta": "2024-03-22"})
    assert r == {"resultado": {
        "desde": {"ticker": "BUSI", "fecha": "2024-03-15", "cierre": 26.19},
        "hasta": {"ticker": "BUSI", "fecha": "2024-03-22", "cierre": 27.88},
        "variacion_pct": 6.45}}
    # The lesson's trace line (first 70 characters of the JSON).
    line = json.dumps(r, ensure_ascii=False)[:70]
    assert line == ('{"resultado": {"desde": {"ticker": "BUSI", "fecha": "2024-03-15", '
                    '"cie')


def test_wrong_tool_scenario(toolbox: ToolBox) -> None:
    """herramienta_equivocada: the news search over the week of the question."""
    assert toolbox.execute("buscar_noticias", {"ticker": "BUSI", "desde": "2024-03-15",
                                           "hasta": "2024-03-22"}) == {
        "resultado": [{"fecha": "2024-03-19", "titular": "Un fondo ofrece comprar Busmar Hogar"}]}


def test_news_at_most_five_distinct(toolbox: ToolBox) -> None:
    r = toolbox.execute("buscar_noticias", {"ticker": "BUSI", "desde": "2023-01-01",
                                        "hasta": "2024-12-31"})["resultado"]
    assert len(r) == 5
    assert len({x["titular"] for x in r}) == 5
    assert [x["fecha"] for x in r] == sorted(x["fecha"] for x in r)


def test_news_empty_window(toolbox: ToolBox) -> None:
    assert toolbox.execute("buscar_noticias", {"ticker": "BUSI", "desde": "2024-03-20",
                                           "hasta": "2024-03-18"}) == {"resultado": []}


# --------------------------------------------------------------------------- execute


def test_unknown_tool(toolbox: ToolBox) -> None:
    assert toolbox.execute("borrar_todo", {}) == {"error": "herramienta desconocida: borrar_todo"}
    assert toolbox.execute(None, {}) == {"error": "herramienta desconocida: None"}  # type: ignore[arg-type]
    assert toolbox.execute(["precio"], {}) == {  # type: ignore[arg-type]
        "error": "herramienta desconocida: ['precio']"}


def test_not_allowed(toolbox: ToolBox) -> None:
    args = {"ticker": "BUSI", "fecha": "2024-03-15"}
    allowed = ["variacion", "buscar_noticias"]
    assert toolbox.execute("precio", args, allowed) == {"error": "herramienta desconocida: precio"}
    assert toolbox.execute("precio", args, ()) == {"error": "herramienta desconocida: precio"}
    assert "resultado" in toolbox.execute("precio", args, {"precio"})
    assert "resultado" in toolbox.execute(
        "variacion", {"ticker": "BUSI", "desde": "2024-03-15", "hasta": "2024-03-22"}, allowed)


@pytest.mark.parametrize("args", ["BUSI", None, ["BUSI", "2024-03-15"], 42, 1.5])
def test_args_not_a_dict(toolbox: ToolBox, args: object) -> None:
    assert toolbox.execute("precio", args) == {
        "error": "argumentos no válidos: Input should be a valid dictionary or instance "
        "of ArgsPrecio"}


def test_missing_and_mistyped_args(toolbox: ToolBox) -> None:
    assert toolbox.execute("precio", {"ticker": "BUSI"}) == {
        "error": "argumentos no válidos: fecha: Field required"}
    assert toolbox.execute("calculadora", {"expresion": 5}) == {
        "error": "argumentos no válidos: expresion: Input should be a valid string"}
    assert toolbox.execute("calculadora", {}) == {
        "error": "argumentos no válidos: expresion: Field required"}


def test_invalid_calendar_date(toolbox: ToolBox) -> None:
    # Matches the pattern but is no date: the lesson's pandas code fails on it with an
    # English message (see the oracle below); here it is refused by validation.
    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "2024-13-45"}) == {
        "error": "argumentos no válidos: fecha: fecha inexistente: 2024-13-45"}
    assert toolbox.execute("buscar_noticias", {"ticker": "BUSI", "desde": "2024-02-30",
                                           "hasta": "2024-03-01"}) == {
        "error": "argumentos no válidos: desde: fecha inexistente: 2024-02-30"}


def test_execute_never_raises(toolbox: ToolBox) -> None:
    class Weird:
        def __contains__(self, item: object) -> bool:
            raise RuntimeError("boom")

    assert toolbox.execute("precio", {"ticker": "BUSI", "fecha": "2024-03-15"},
                       Weird()) == {"error": "boom"}  # type: ignore[arg-type]


# --------------------------------------------------------------------------- calculator


@pytest.mark.parametrize(
    ("expresion", "expected"),
    [
        ("1/0", {"error": "división por cero"}),
        ("1/(2-2)", {"error": "división por cero"}),
        ("1e308*10", {"error": "resultado no finito"}),
        ("-1e308*10", {"error": "resultado no finito"}),
        ("1e308*10 - 1e308*10", {"error": "resultado no finito"}),
        ("1/(1e308*10)", {"error": "resultado no finito"}),
        ("1e999", {"error": "resultado no finito"}),
        ("9" * 30 + "/1e-300", {"error": "resultado no finito"}),
        ("9" * 31 + "/1e-300", {"error": "número demasiado largo"}),
        ("1 +", {"error": "expresión no válida"}),
        ("", {"error": "expresión no válida"}),
        (" 1+1", {"error": "expresión no válida"}),
        ("1\x00", {"error": "expresión no válida"}),
        ("((1)", {"error": "expresión no válida"}),
        ("(" * 120 + "1" + ")" * 120, {"resultado": 1}),
        ("1" + "+1" * 200, {"error": "expresión demasiado larga"}),
        ("2**3", {"error": "solo números, + - * / y paréntesis"}),
        ("+1", {"error": "solo números, + - * / y paréntesis"}),
        ("True + 1", {"error": "solo números, + - * / y paréntesis"}),
        ("1j", {"error": "solo números, + - * / y paréntesis"}),
        ("'a' * 3", {"error": "solo números, + - * / y paréntesis"}),
        ("x", {"error": "solo números, + - * / y paréntesis"}),
        ("2+3", {"resultado": 5}),
        ("-(2.5 - 4) * 2", {"resultado": 3.0}),
        ("10/4", {"resultado": 2.5}),
        ("1/3", {"resultado": 0.3333}),
        ("-" * 250 + "1", {"resultado": 1}),
    ],
)
def test_calculator_hardening(toolbox: ToolBox, expresion: str, expected: dict[str, Any]) -> None:
    r = toolbox.execute("calculadora", {"expresion": expresion})
    assert r == expected
    assert type(r.get("resultado")) is type(expected.get("resultado"))


def test_length_cap_boundary(toolbox: ToolBox) -> None:
    ok = "1" + "+1" * 127  # 255 characters
    assert toolbox.execute("calculadora", {"expresion": ok + " "}) == {"resultado": 128}
    assert toolbox.execute("calculadora", {"expresion": ok + "  "}) == {
        "error": "expresión demasiado larga"}


def test_big_integers_stay_exact(toolbox: ToolBox) -> None:
    # Integers stay exact up to the magnitude cap (10**15); beyond it they are refused.
    r = toolbox.execute("calculadora", {"expresion": "99999999*9999999"})
    assert r == {"resultado": 99999999 * 9999999}
    assert toolbox.execute("calculadora", {"expresion": "1000000000000000"}) == {
        "resultado": 10**15}
    assert toolbox.execute("calculadora", {"expresion": "-1000000000000001"}) == {
        "error": "resultado demasiado grande"}
    # Intermediate results may be large, as long as the result is not.
    assert toolbox.execute("calculadora", {"expresion": "9" * 30 + "*" + "9" * 30 + "/1e50"}) == {
        "resultado": 1e10}


def test_calculator_beyond_the_cap(monkeypatch: pytest.MonkeyPatch, toolbox: ToolBox) -> None:
    """Overflow and recursion are handled even if the caps on text are raised."""
    monkeypatch.setattr(calculator, "MAX_EXPRESSION", 10**6)
    assert toolbox.execute("calculadora", {"expresion": "9" * 400 + "/3.0"}) == {
        "error": "número demasiado largo"}
    assert toolbox.execute("calculadora", {"expresion": "(" * 300 + "1" + ")" * 300}) == {
        "error": "expresión demasiado compleja"}
    monkeypatch.setattr(calculator, "MAX_DIGITS", 10**6)
    monkeypatch.setattr(calculator, "MAX_PARENS", 10**6)
    assert toolbox.execute("calculadora", {"expresion": "9" * 400 + "/3.0"}) == {
        "error": "resultado no finito"}
    assert toolbox.execute("calculadora", {"expresion": "9" * 400 + "*1.5"}) == {
        "error": "resultado no finito"}
    assert toolbox.execute("calculadora", {"expresion": "(" * 300 + "1" + ")" * 300}) == {
        "error": "expresión no válida"}  # the parser's own nesting limit
    assert toolbox.execute("calculadora", {"expresion": "-" * 5000 + "1"}) == {
        "error": "expresión demasiado compleja"}
    assert toolbox.execute("calculadora", {"expresion": "1" + "+1" * 20000}) == {
        "error": "expresión demasiado compleja"}


def test_calculator_function() -> None:
    assert tools.calculate("(27.88/26.19 - 1)*100") == 6.4528
    assert ToolBox.calculadora("1+1") == 2
    with pytest.raises(ValueError, match="división por cero"):
        tools.calculate("1/0")


# --------------------------------------------------------------------------- construction


def test_from_files_checks_schema(data_files: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        ToolBox.from_files(tmp_path / "nope.parquet", data_files[1])
    prices = pd.read_parquet(data_files[0]).drop(columns="ticker")
    bad = tmp_path / "acciones6_precios.parquet"
    prices.to_parquet(bad, index=False)
    with pytest.raises(DataError, match="column 'ticker' is missing"):
        ToolBox.from_files(bad, data_files[1])


def test_tickers(toolbox: ToolBox) -> None:
    assert len(toolbox.tickers) == 120
    assert "BUSI" in toolbox.tickers and "ACME" not in toolbox.tickers


# ------------------------------------------------------------- the lesson's code as oracle


class LessonArgsPrecio(BaseModel):
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    fecha: str = Field(pattern=tools.DATE_PATTERN)


class LessonArgsNoticias(BaseModel):
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    desde: str = Field(pattern=tools.DATE_PATTERN)
    hasta: str = Field(pattern=tools.DATE_PATTERN)


class LessonArgsCalculadora(BaseModel):
    expresion: str


LESSON_ARGS: dict[str, type[BaseModel]] = {
    "precio": LessonArgsPrecio, "buscar_noticias": LessonArgsNoticias,
    "calculadora": LessonArgsCalculadora, "variacion": LessonArgsNoticias}


def test_lesson_models_have_the_same_schemas() -> None:
    for name, model in LESSON_ARGS.items():
        mine = tools.json_schema(name)
        assert {**model.model_json_schema(), "title": mine["title"]} == mine


class Lesson:
    """The lesson's code, verbatim, over given frames: the reference semantics (its lax
    argument models included; ``variacion`` uses the news model's fields)."""

    def __init__(self, precios: pd.DataFrame, noticias: pd.DataFrame) -> None:
        self.precios = precios
        self.noticias = noticias
        self.TICKERS = set(precios.ticker)

    def precio(self, ticker: str, fecha: str) -> dict[str, Any]:
        precios = self.precios
        if ticker not in self.TICKERS:
            raise ValueError(f"ticker desconocido: {ticker}")
        s = precios[(precios.ticker == ticker) & (precios.fecha <= fecha)]
        if s.empty:
            raise ValueError(f"sin datos hasta {fecha}")
        r = s.iloc[-1]
        return {"ticker": ticker, "fecha": f"{r.fecha:%Y-%m-%d}",
                "cierre": round(float(r.cierre), 2)}

    def buscar_noticias(self, ticker: str, desde: str, hasta: str) -> list[dict[str, str]]:
        noticias = self.noticias
        if ticker not in self.TICKERS:
            raise ValueError(f"ticker desconocido: {ticker}")
        ini = pd.Timestamp(desde, tz="UTC")
        fin = pd.Timestamp(hasta, tz="UTC") + pd.Timedelta(days=1)
        x = noticias[(noticias.ticker == ticker) & (noticias.ts >= ini)
                     & (noticias.ts < fin)].drop_duplicates("titular")
        return [{"fecha": f"{t:%Y-%m-%d}", "titular": h}
                for t, h in zip(x.ts[:5], x.titular[:5], strict=False)]

    OPS = {ast.Add: operator.add, ast.Sub: operator.sub,  # noqa: RUF012
           ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.USub: operator.neg}

    def _evalua(self, n: ast.AST) -> Any:
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in self.OPS:
            return self.OPS[type(n.op)](self._evalua(n.left), self._evalua(n.right))
        if isinstance(n, ast.UnaryOp) and type(n.op) in self.OPS:
            return self.OPS[type(n.op)](self._evalua(n.operand))
        raise ValueError("solo números, + - * / y paréntesis")

    def calculadora(self, expresion: str) -> Any:
        return round(self._evalua(ast.parse(expresion, mode="eval").body), 4)

    def variacion(self, ticker: str, desde: str, hasta: str) -> dict[str, Any]:
        a, b = self.precio(ticker, desde), self.precio(ticker, hasta)
        return {"desde": a, "hasta": b, "variacion_pct":
                round(100 * (b["cierre"] / a["cierre"] - 1), 2)}

    def ejecutar(self, nombre: str, args: Any) -> dict[str, Any]:
        if nombre not in TOOLS:
            return {"error": f"herramienta desconocida: {nombre}"}
        f, Args = getattr(self, nombre), LESSON_ARGS[nombre]
        try:
            a = Args.model_validate(args)
        except ValidationError as e:
            return {"error": "argumentos no válidos: " + "; ".join(
                f"{x['loc'][0]}: {x['msg']}" for x in e.errors())}
        try:
            return {"resultado": f(**a.model_dump())}
        except Exception as e:
            return {"error": str(e)}


@pytest.fixture(scope="session")
def lesson(data_files: tuple[Path, Path]) -> Lesson:
    return Lesson(pd.read_parquet(data_files[0]), pd.read_parquet(data_files[1]))


def _random_calls(n: int, tickers: list[str]) -> list[tuple[str, dict[str, Any]]]:
    rnd = random.Random(20240315)
    days = pd.date_range("2022-12-20", "2025-01-10").strftime("%Y-%m-%d").tolist()
    days += ["2024-02-29", "2023-02-29", "2024-04-31", "0001-01-01", "9999-12-31",
             "2024-00-10", "16/03/2024", "2024-3-16"]
    names = ["ACME", "BUSM", "busi", *["BUSI"] * 20]
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(n):
        t = rnd.choice(tickers + names)
        kind = rnd.choice(["precio", "buscar_noticias", "variacion"])
        if kind == "precio":
            calls.append((kind, {"ticker": t, "fecha": rnd.choice(days)}))
        else:
            a, b = rnd.choice(days), rnd.choice(days)
            if rnd.random() < 0.7 and a[:2] == b[:2] == "20":
                a, b = sorted([a, b])
            calls.append((kind, {"ticker": t, "desde": a, "hasta": b}))
    return calls


def _impossible(v: str) -> bool:
    """Matches the lesson's date pattern but is not a date."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        return False
    try:
        date.fromisoformat(v)
    except ValueError:
        return True
    return False


def test_same_results_as_the_lesson(toolbox: ToolBox, lesson: Lesson) -> None:
    calls = _random_calls(1500, sorted(toolbox.tickers))
    calls += [("calculadora", {"expresion": e}) for e in [
        "(27.88/26.19 - 1)*100", "1/3", "2+3", "-(1.5)*-2", "7/2*2", "0.1+0.2",
        "__import__('os')", "2**8", "100*(27.88/26.19-1)", "(1)", "-0.0"]]
    mismatches = [(n, a, toolbox.execute(n, a), lesson.ejecutar(n, a)) for n, a in calls
                  if toolbox.execute(n, a) != lesson.ejecutar(n, a)]
    # The one intended difference: a date that matches the pattern but does not exist is
    # refused by validation, in Spanish, where the lesson's pandas code fails in English.
    impossible = [m for m in mismatches if any(_impossible(v) for v in m[1].values())]
    assert [m for m in mismatches if m not in impossible] == []
    assert impossible, "the random calls do exercise impossible dates"
    for _, args, mine, theirs in impossible:
        assert set(mine) == set(theirs) == {"error"}
        assert mine["error"].startswith("argumentos no válidos: ")
        assert [f"fecha inexistente: {v}" in mine["error"] for v in args.values()
                if _impossible(v)] == [True] * sum(map(_impossible, args.values()))
    # The random calls do exercise every branch.
    outcomes = {next(iter(toolbox.execute(n, a))) for n, a in calls}
    assert outcomes == {"resultado", "error"}


def test_windows_with_syndication_match_the_lesson(toolbox: ToolBox, lesson: Lesson) -> None:
    """Every ticker over every month: the deduplication and the cap of five."""
    months = pd.date_range("2023-01-01", "2024-12-01", freq="MS")
    for t in sorted(toolbox.tickers)[::7]:
        for m in months[::3]:
            a = f"{m:%Y-%m-%d}"
            b = f"{m + pd.offsets.MonthEnd(2):%Y-%m-%d}"
            assert toolbox.buscar_noticias(t, a, b) == lesson.buscar_noticias(t, a, b)


def test_shared_builds_once_per_file_contents(data_files: tuple[Path, Path],
                                              tmp_path: Path) -> None:
    """Run jobs that are threads of one process share one ToolBox per data contents."""
    import shutil
    import threading

    copies = [tmp_path / "copy" / f.name for f in data_files]
    copies[0].parent.mkdir()
    for src, dst in zip(data_files, copies, strict=True):
        shutil.copy(src, dst)
    got: list[ToolBox] = []
    threads = [threading.Thread(target=lambda: got.append(ToolBox.shared(*data_files)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = got[0]
    assert all(b is first for b in got)
    assert ToolBox.shared(*copies) is first  # same bytes elsewhere: the same ToolBox
    assert first.precio("BUSI", "2024-03-01") == ToolBox.from_files(*data_files).precio(
        "BUSI", "2024-03-01")
    # The same path with other contents gets a fresh ToolBox over the new data.
    prices = pd.read_parquet(copies[0])
    prices["cierre"] = prices["cierre"] * 2
    prices.to_parquet(copies[0], index=False)
    fresh = ToolBox.shared(*copies)
    assert fresh is not first
    assert fresh.precio("BUSI", "2024-03-01")["cierre"] == pytest.approx(
        2 * first.precio("BUSI", "2024-03-01")["cierre"])


def test_shared_reports_a_missing_file_like_from_files(data_files: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        ToolBox.shared(tmp_path / "nope.parquet", data_files[1])
