"""The lesson's four deterministic tools: ``precio``, ``buscar_noticias``, ``calculadora``
and ``variacion``.

Argument models, descriptions and every string that reaches the model are word for word
those of lesson 6.4.1 (they are Spanish on purpose: changing them would change the
model's behaviour and its token counts). The behaviour is the lesson's too; only the
implementation differs: prices and news are indexed by ticker once, so that a call is a
bisection instead of a scan of the whole frame, and the calculator is hardened (caps on
length, parenthesis depth, tree depth, node count, digits per number and the result's
magnitude; division by zero, overflow, non-finite results) so that it always answers
with data, fast.

Arguments are validated strictly, without changing the JSON schema the model sees: no
lax coercion (a number or ``true`` where a string is expected is refused), no fields
beyond the schema's, dates that match the pattern with ASCII digits only and that exist
in the calendar. :func:`parse_arguments_strict` reads the model's argument text and
refuses duplicate keys and non-finite numbers.

Tool failures are not exceptions: :meth:`ToolBox.execute` returns ``{"error": ...}`` or
``{"resultado": ...}`` (always JSON-serialisable with ``allow_nan=False``) and never raises.
"""

from __future__ import annotations

import ast
import bisect
import datetime as dt
import json
import math
import operator
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from reactlab import data
from reactlab.core.io import DuplicateKeyError, NonFiniteConstantError, loads_strict

__all__ = [
    "FECHA",
    "MAX_CIFRAS",
    "MAX_EXPRESION",
    "MAX_NODOS",
    "MAX_PARENTESIS",
    "MAX_PROFUNDIDAD",
    "MAX_RESULTADO",
    "TOOLS",
    "ArgsCalculadora",
    "ArgsNoticias",
    "ArgsPrecio",
    "ArgsVariacion",
    "ErrorCalculadora",
    "ToolBox",
    "ToolSpec",
    "calculadora",
    "json_schema",
    "parse_arguments_strict",
]

FECHA = r"^\d{4}-\d{2}-\d{2}$"

# The calculator's caps, all checked before anything is evaluated. Longest expression it
# parses (longer ones are refused before parsing):
MAX_EXPRESION = 256
# Deepest nesting of parentheses (a scan of the raw text, before parsing).
MAX_PARENTESIS = 128
# Deepest expression tree and most expression nodes (numbers and operations). With the
# length cap neither can be reached; they bound the walk should that cap ever be raised.
MAX_PROFUNDIDAD = 256
MAX_NODOS = 256
# Most digits in a row (a number's integer part, its decimals or its exponent).
MAX_CIFRAS = 30
# Largest magnitude of a result: integers stay exact in a double and in any JSON reader.
MAX_RESULTADO = 10**15


def _fecha_ascii_y_real(v: str) -> str:
    """After the pattern: ASCII digits only (the schema's ``\\d`` means 0-9 to the model,
    but the regex engine would take any Unicode digit), and a date that exists."""
    if not v.isascii():
        # The same error (and message) as a pattern mismatch, which is what it is.
        raise PydanticCustomError(
            "string_pattern_mismatch", "String should match pattern '{pattern}'",
            {"pattern": FECHA})
    try:
        dt.date.fromisoformat(v)
    except ValueError:
        raise PydanticCustomError(
            "fecha_inexistente", "fecha inexistente: {fecha}", {"fecha": v}) from None
    return v


class _Args(BaseModel):
    """Strict validation (no coercion); ``strict`` leaves the JSON schema as it is.

    Extra fields are refused by :meth:`ToolBox.execute`, not with ``extra="forbid"``,
    which would add ``additionalProperties`` to the schema the model sees.
    """

    model_config = ConfigDict(strict=True)


class ArgsPrecio(_Args):
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    fecha: str = Field(pattern=FECHA)

    _fecha = field_validator("fecha")(_fecha_ascii_y_real)


class ArgsNoticias(_Args):
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    desde: str = Field(pattern=FECHA)
    hasta: str = Field(pattern=FECHA)

    _fechas = field_validator("desde", "hasta")(_fecha_ascii_y_real)


class ArgsCalculadora(_Args):
    expresion: str


class ArgsVariacion(_Args):
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    desde: str = Field(pattern=FECHA)
    hasta: str = Field(pattern=FECHA)

    _fechas = field_validator("desde", "hasta")(_fecha_ascii_y_real)


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and argument schema."""

    name: str
    description: str
    args_model: type[BaseModel]


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "precio",
            "Cierre de una acción en una sesión (la última sesión en o antes de la fecha).",
            ArgsPrecio,
        ),
        ToolSpec(
            "buscar_noticias",
            "Titulares de noticias de una acción entre dos fechas (AAAA-MM-DD).",
            ArgsNoticias,
        ),
        ToolSpec(
            "calculadora",
            "Evalúa una expresión aritmética con + - * / y paréntesis.",
            ArgsCalculadora,
        ),
        ToolSpec(
            "variacion",
            "Variación porcentual del cierre de una acción entre dos fechas (AAAA-MM-DD), "
            "calculada con los dos cierres.",
            ArgsVariacion,
        ),
    )
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, as the model sees it."""
    return TOOLS[name].args_model.model_json_schema()


# --------------------------------------------------------------------------- calculator

_OPS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}

_SOLO = "solo números, + - * / y paréntesis"
_NO_VALIDA = "expresión no válida"
_LARGA = "expresión demasiado larga"
_COMPLEJA = "expresión demasiado compleja"
_DIV_CERO = "división por cero"
_NO_FINITO = "resultado no finito"
_NUMERO_LARGO = "número demasiado largo"
_GRANDE = "resultado demasiado grande"

# The only characters an expression may have: ASCII digits, the decimal point, the
# exponent letter, the four operators, parentheses and blanks. Anything else (letters,
# "_" as in 1_000, "x" as in 0x10, "#" comments, non-ASCII digits such as "١" or "１",
# lone surrogates) is refused before parsing with the lesson's message "solo números...";
# control characters (NUL...) with "expresión no válida". "**" gets through this check
# and is refused as a power by the tree check, before anything is evaluated.
_PERMITIDOS = frozenset("0123456789.eE+-*/() \t\n\r")
_DIGITOS = re.compile(r"[0-9]+")


class ErrorCalculadora(ValueError):
    """A refused expression; the message (Spanish) is for the model."""


def _finite(x: int | float) -> int | float:
    if isinstance(x, float) and not math.isfinite(x):
        raise ErrorCalculadora(_NO_FINITO)
    return x


def _revisa_texto(expresion: str) -> None:
    """The checks on the raw text, before ``ast.parse`` sees it."""
    if len(expresion) > MAX_EXPRESION:
        raise ErrorCalculadora(_LARGA)
    for c in expresion:
        if c not in _PERMITIDOS:
            # Control characters (NUL...) are malformed text; anything else is not arithmetic.
            raise ErrorCalculadora(_NO_VALIDA if c < " " or c == "\x7f" else _SOLO)
    if any(len(m) > MAX_CIFRAS for m in _DIGITOS.findall(expresion)):
        raise ErrorCalculadora(_NUMERO_LARGO)
    depth = deepest = 0
    for c in expresion:
        if c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
    if deepest > MAX_PARENTESIS:
        raise ErrorCalculadora(_COMPLEJA)


def _revisa_arbol(root: ast.expr) -> None:
    """Only numbers, + - * / and unary minus; depth and node count capped (iterative)."""
    stack: list[tuple[ast.expr, int]] = [(root, 1)]
    nodes = 0
    while stack:
        n, depth = stack.pop()
        nodes += 1
        if depth > MAX_PROFUNDIDAD or nodes > MAX_NODOS:
            raise ErrorCalculadora(_COMPLEJA)
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            continue
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            stack.append((n.right, depth + 1))
            stack.append((n.left, depth + 1))
        elif isinstance(n, ast.UnaryOp) and type(n.op) in _OPS:
            stack.append((n.operand, depth + 1))
        else:
            raise ErrorCalculadora(_SOLO)


def _evalua(root: ast.expr) -> int | float:
    """The lesson's tree walk, without recursion, every intermediate float finite.

    The tree has been checked by :func:`_revisa_arbol`: it holds only numbers, + - * /
    and unary minus.
    """
    values: list[int | float] = []
    stack: list[tuple[ast.expr, bool]] = [(root, False)]
    while stack:
        n, ready = stack.pop()
        if isinstance(n, ast.Constant):
            values.append(_finite(n.value))
        elif isinstance(n, ast.BinOp):
            if ready:
                right = values.pop()
                left = values.pop()
                values.append(_finite(_OPS[type(n.op)](left, right)))
            else:
                stack += [(n, True), (n.right, False), (n.left, False)]
        elif isinstance(n, ast.UnaryOp):
            if ready:
                values.append(_finite(_OPS[type(n.op)](values.pop())))
            else:
                stack += [(n, True), (n.operand, False)]
        else:  # pragma: no cover - excluded by _revisa_arbol
            raise ErrorCalculadora(_SOLO)
    return values.pop()


def calculadora(expresion: str) -> int | float:
    """Arithmetic without eval(): the expression tree is walked (lesson 6.4.1).

    Only ASCII numbers, + - * / and unary minus; the result is rounded to 4 decimals,
    finite, and at most :data:`MAX_RESULTADO` in magnitude. The caps (length, parenthesis
    depth, digits in a row, tree depth, node count) are checked before anything is
    evaluated, so that every call is fast. Every failure is an :class:`ErrorCalculadora`
    (a ValueError) with a Spanish message for the model; nothing else is raised.
    """
    if not isinstance(expresion, str):
        raise ErrorCalculadora(_NO_VALIDA)
    expresion = str.__str__(expresion)  # a plain str, whatever subclass came in
    _revisa_texto(expresion)
    try:
        tree = ast.parse(expresion, mode="eval")
    except (SyntaxError, ValueError):  # ValueError: NUL bytes, surrogates
        raise ErrorCalculadora(_NO_VALIDA) from None
    except (RecursionError, MemoryError):
        raise ErrorCalculadora(_COMPLEJA) from None
    _revisa_arbol(tree.body)
    try:
        x = _finite(round(_evalua(tree.body), 4))
    except ZeroDivisionError:
        raise ErrorCalculadora(_DIV_CERO) from None
    except OverflowError:
        raise ErrorCalculadora(_NO_FINITO) from None
    except (RecursionError, MemoryError):  # pragma: no cover - the walk is iterative
        raise ErrorCalculadora(_COMPLEJA) from None
    if abs(x) > MAX_RESULTADO:
        raise ErrorCalculadora(_GRANDE)
    return x


# --------------------------------------------------------------------------- arguments

_JSON_NO_VALIDO = "JSON no válido"
_NO_OBJETO = "los argumentos deben ser un objeto JSON"
_ANIDADO = "JSON demasiado anidado"
# Longest integer literal accepted in argument text (Python refuses more than 4300).
_MAX_CIFRAS_JSON = 1000


class _ErrorArgumentos(ValueError):
    pass


def _float_finito(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise _ErrorArgumentos(f"número no finito: {text}")
    return x


def _int_acotado(text: str) -> int:
    if len(text) > _MAX_CIFRAS_JSON:
        raise _ErrorArgumentos(_NUMERO_LARGO)
    return int(text)


def parse_arguments_strict(text: str) -> dict[str, Any] | str:
    """A tool call's argument text as a dict, or a Spanish error message for the model.

    Stricter than ``json.loads``: a key repeated in an object ("clave duplicada: fecha"),
    NaN / Infinity / -Infinity, numbers that overflow to infinity (1e400) and integers of
    more than a thousand digits are refused, and the value must be a JSON object.
    Never raises.
    """
    if not isinstance(text, str):
        return _JSON_NO_VALIDO
    try:
        value = loads_strict(text, parse_float=_float_finito, parse_int=_int_acotado)
    except _ErrorArgumentos as e:
        return str(e)
    except DuplicateKeyError as e:
        return f"clave duplicada: {e.key}"
    except NonFiniteConstantError as e:
        return f"valor no permitido: {e.name}"
    except RecursionError:
        return _ANIDADO
    except (ValueError, TypeError, MemoryError):
        return _JSON_NO_VALIDO
    if not isinstance(value, dict):
        return _NO_OBJETO
    return value


# --------------------------------------------------------------------------- tool box

_NS_PER_UNIT = {"D": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9, "s": 10**9,
                "ms": 10**6, "us": 10**3, "ns": 1}


def _ns(t: pd.Timestamp) -> int:
    """Exact nanoseconds since the epoch (UTC for aware timestamps) as a Python int.

    Works for timestamps outside the datetime64[ns] range too (pandas parses dates
    into microseconds), so comparisons never overflow.
    """
    d = t.to_datetime64()
    unit, count = np.datetime_data(d.dtype)
    return int(d.astype(np.int64)) * _NS_PER_UNIT[unit] * count


@dataclass(frozen=True)
class _Series:
    """One ticker's closes, sorted by date: ns since the epoch, "YYYY-MM-DD", close."""

    ns: list[int]
    dates: list[str]
    closes: list[float]


@dataclass(frozen=True)
class _Headlines:
    """One ticker's news in corpus order (sorted by ts): ns since the epoch (UTC),
    UTC date "YYYY-MM-DD", headline."""

    ns: list[int]
    dates: list[str]
    titles: list[str]


def _dates(values: np.ndarray) -> list[str]:
    return [str(s) for s in np.datetime_as_string(values, unit="D")]


class ToolBox:
    """The tools over one prices frame and one news frame; build it once per process.

    The frames are checked and normalised with :func:`reactlab.data.check_prices` and
    :func:`reactlab.data.check_news` (a bad frame raises :class:`reactlab.core.errors.DataError`).
    """

    def __init__(self, prices: pd.DataFrame, news: pd.DataFrame) -> None:
        prices = data.check_prices(prices, "prices")
        news = data.check_news(news, "news")
        self._fecha_dtype = str(prices["fecha"].dtype)
        self._prices: dict[str, _Series] = {}
        for ticker, g in prices.groupby("ticker", sort=False):
            fechas = g["fecha"].to_numpy()
            self._prices[str(ticker)] = _Series(
                ns=fechas.astype(np.int64).tolist(),
                dates=_dates(fechas),
                closes=g["cierre"].to_numpy(dtype="float64").tolist(),
            )
        self._tickers = frozenset(self._prices)
        self._news: dict[str, _Headlines] = {}
        for ticker, g in news.groupby("ticker", sort=False):
            ts = g["ts"].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
            self._news[str(ticker)] = _Headlines(
                ns=ts.astype(np.int64).tolist(),
                dates=_dates(ts),
                titles=[str(t) for t in g["titular"]],
            )

    @classmethod
    def from_files(cls, prices_path: Path | str, news_path: Path | str) -> ToolBox:
        """Build from the two parquet files (schema-checked; DataError if they do not fit)."""
        return cls(data.load_prices(prices_path), data.load_news(news_path))

    @property
    def tickers(self) -> frozenset[str]:
        """The known tickers (those of the prices frame, as in the lesson)."""
        return self._tickers

    # The tools. They raise on failure, like the lesson's functions; execute() turns
    # exceptions into {"error": str(e)}.

    def precio(self, ticker: str, fecha: str) -> dict[str, Any]:
        """Close of the last session on or before ``fecha``."""
        if ticker not in self._tickers:
            raise ValueError(f"ticker desconocido: {ticker}")
        # The lesson compares the naive datetime column with the string, which pandas
        # parses with Timestamp(); an unparsable or tz-aware one is an invalid comparison.
        try:
            t = pd.Timestamp(fecha)
            if t is not pd.NaT and t.tzinfo is not None:
                raise ValueError(fecha)
        except (ValueError, TypeError):
            raise TypeError(
                f"Invalid comparison between dtype={self._fecha_dtype} "
                f"and {type(fecha).__name__}"
            ) from None
        s = self._prices[ticker]
        # Timestamp("NaT") compares False with everything: no session qualifies.
        i = 0 if t is pd.NaT else bisect.bisect_right(s.ns, _ns(t))
        if i == 0:
            raise ValueError(f"sin datos hasta {fecha}")
        return {"ticker": ticker, "fecha": s.dates[i - 1], "cierre": round(s.closes[i - 1], 2)}

    def buscar_noticias(self, ticker: str, desde: str, hasta: str) -> list[dict[str, str]]:
        """At most five distinct headlines of ``ticker`` from ``desde`` to ``hasta``
        (both included, UTC dates), syndicated copies removed, first copy kept."""
        if ticker not in self._tickers:
            raise ValueError(f"ticker desconocido: {ticker}")
        ini = pd.Timestamp(desde, tz="UTC")
        fin = pd.Timestamp(hasta, tz="UTC") + pd.Timedelta(days=1)
        h = self._news.get(ticker)
        if h is None or ini is pd.NaT or fin is pd.NaT:
            return []
        lo = bisect.bisect_left(h.ns, _ns(ini))
        hi = bisect.bisect_left(h.ns, _ns(fin))
        out: list[dict[str, str]] = []
        seen: set[str] = set()
        for i in range(lo, hi):
            if h.titles[i] in seen:
                continue
            seen.add(h.titles[i])
            out.append({"fecha": h.dates[i], "titular": h.titles[i]})
            if len(out) == 5:
                break
        return out

    @staticmethod
    def calculadora(expresion: str) -> int | float:
        """See :func:`calculadora`."""
        return calculadora(expresion)

    def variacion(self, ticker: str, desde: str, hasta: str) -> dict[str, Any]:
        """Percentage change of the close between two dates, computed from two closes."""
        a, b = self.precio(ticker, desde), self.precio(ticker, hasta)
        if a["cierre"] == 0:  # a positive close below 0.005 rounds to 0
            raise ValueError(f"cierre nulo el {a['fecha']}: no hay variación porcentual")
        return {"desde": a, "hasta": b, "variacion_pct":
                round(100 * (b["cierre"] / a["cierre"] - 1), 2)}

    # Dispatch.

    def execute(
        self, name: str, args: object, allowed: Collection[str] | None = None
    ) -> dict[str, Any]:
        """Validate ``args`` and run tool ``name``; errors come back as data.

        Returns ``{"resultado": ...}`` or ``{"error": ...}`` and never raises; the result
        always passes ``json.dumps(..., allow_nan=False)``. A tool that is not in
        ``allowed`` (when given) is as unknown as one that does not exist.
        """
        try:
            out = self._execute(name, args, allowed)
        except Exception as e:  # never raise: a failure is an observation for the model
            return {"error": _texto(e)}
        try:
            json.dumps(out, allow_nan=False)
        except (ValueError, TypeError, RecursionError):
            return {"error": _NO_JSON}
        return out

    def _execute(
        self, name: str, args: object, allowed: Collection[str] | None
    ) -> dict[str, Any]:
        if (
            not isinstance(name, str)
            or name not in TOOLS
            or (allowed is not None and name not in allowed)
        ):
            return {"error": f"herramienta desconocida: {name}"}
        spec = TOOLS[name]
        errors: list[str] = []
        try:
            a = spec.args_model.model_validate(args)
        except ValidationError as e:
            errors = [f"{x['loc'][0]}: {x['msg']}" if x.get("loc") else x["msg"]
                      for x in e.errors()]
        if isinstance(args, dict):
            # After pydantic's errors, in the order of the arguments; at most a few.
            extra = [k for k in args if k not in spec.args_model.model_fields]
            errors += [f"{_corto(k)}: {_EXTRA}" for k in extra[:_MAX_EXTRA]]
            if len(extra) > _MAX_EXTRA:
                errors.append(f"y {len(extra) - _MAX_EXTRA} campos más no permitidos")
        if errors:
            return {"error": "argumentos no válidos: " + "; ".join(errors)}
        try:
            return {"resultado": getattr(self, name)(**a.model_dump())}
        except Exception as e:
            return {"error": _texto(e)}


_EXTRA = "campo no permitido"
_MAX_EXTRA = 5
_INTERNO = "error interno de la herramienta"
_NO_JSON = "resultado no representable en JSON"


def _corto(key: object, n: int = 40) -> str:
    """A field name for an error message, cut to ``n`` characters."""
    k = key if isinstance(key, str) else repr(key)
    return k if len(k) <= n else k[:n] + "…"


def _texto(e: BaseException) -> str:
    """An exception's message; a fixed one if even that fails."""
    try:
        return str(e)
    except Exception:
        return _INTERNO
