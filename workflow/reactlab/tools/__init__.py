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
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
)
from pydantic_core import PydanticCustomError

from reactlab import data
from reactlab.core.errors import CalculatorError, JSONRefused, ToolInputError
from reactlab.core.io import DuplicateKeyError, NonFiniteConstantError, loads_strict

if TYPE_CHECKING:  # numpy and pandas are imported where they are used (lazy imports)
    import numpy as np
    import pandas as pd

__all__ = [
    "DATE_PATTERN",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_EXPRESSION",
    "MAX_NODES",
    "MAX_PARENS",
    "MAX_RESULT",
    "TOOLS",
    "CalculatorArgs",
    "CalculatorError",
    "PriceArgs",
    "TickerRangeArgs",
    "ToolBox",
    "ToolSpec",
    "calculate",
    "json_schema",
    "parse_arguments_strict",
]

DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"

# The calculator's caps, all checked before anything is evaluated. Longest expression it
# parses (longer ones are refused before parsing):
MAX_EXPRESSION = 256
# Deepest nesting of parentheses (a scan of the raw text, before parsing).
MAX_PARENS = 128
# Deepest expression tree and most expression nodes (numbers and operations). With the
# length cap neither can be reached; they bound the walk should that cap ever be raised.
MAX_DEPTH = 256
MAX_NODES = 256
# Most digits in a row (a number's integer part, its decimals or its exponent).
MAX_DIGITS = 30
# Largest magnitude of a result: integers stay exact in a double and in any JSON reader.
MAX_RESULT = 10**15


def _ascii_real_date(v: str) -> str:
    """After the pattern: ASCII digits only (the schema's ``\\d`` means 0-9 to the model,
    but the regex engine would take any Unicode digit), and a date that exists."""
    if not v.isascii():
        # The same error (and message) as a pattern mismatch, which is what it is.
        raise PydanticCustomError(
            "string_pattern_mismatch", "String should match pattern '{pattern}'",
            {"pattern": DATE_PATTERN})
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


# No docstrings on the argument models: pydantic would put them in the schema the model
# reads, as "description".


class PriceArgs(_Args):  # precio: a ticker and a date
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    fecha: str = Field(pattern=DATE_PATTERN)

    _date = field_validator("fecha")(_ascii_real_date)


class TickerRangeArgs(_Args):
    # buscar_noticias and variacion: a ticker and two dates (the lesson's ArgsNoticias
    # and ArgsVariacion, which were identical; TOOLS gives each tool its lesson name).
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    desde: str = Field(pattern=DATE_PATTERN)
    hasta: str = Field(pattern=DATE_PATTERN)

    _dates = field_validator("desde", "hasta")(_ascii_real_date)


class CalculatorArgs(_Args):  # calculadora: an arithmetic expression
    expresion: str


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and argument schema."""

    name: str
    description: str
    args_model: type[BaseModel]


def _as_seen(model: type[_Args], name: str) -> type[_Args]:
    """``model`` under the class name the model reads: the lesson's (``ArgsPrecio`` ...).

    Pydantic puts the class name in the schema's ``title`` and in the "instance of ..."
    error, so that name is part of what the model reads and stays the lesson's, word for
    word; the Python definitions keep English names.
    """
    return create_model(name, __base__=model)


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "precio",
            "Cierre de una acción en una sesión (la última sesión en o antes de la fecha).",
            _as_seen(PriceArgs, "ArgsPrecio"),
        ),
        ToolSpec(
            "buscar_noticias",
            "Titulares de noticias de una acción entre dos fechas (AAAA-MM-DD).",
            _as_seen(TickerRangeArgs, "ArgsNoticias"),
        ),
        ToolSpec(
            "calculadora",
            "Evalúa una expresión aritmética con + - * / y paréntesis.",
            _as_seen(CalculatorArgs, "ArgsCalculadora"),
        ),
        ToolSpec(
            "variacion",
            "Variación porcentual del cierre de una acción entre dos fechas (AAAA-MM-DD), "
            "calculada con los dos cierres.",
            _as_seen(TickerRangeArgs, "ArgsVariacion"),
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

_MSG_ONLY_ARITHMETIC = "solo números, + - * / y paréntesis"
_MSG_INVALID_EXPRESSION = "expresión no válida"
_MSG_TOO_LONG = "expresión demasiado larga"
_MSG_TOO_COMPLEX = "expresión demasiado compleja"
_MSG_DIVISION_BY_ZERO = "división por cero"
_MSG_NOT_FINITE = "resultado no finito"
_MSG_NUMBER_TOO_LONG = "número demasiado largo"
_MSG_TOO_LARGE = "resultado demasiado grande"

# The only characters an expression may have: ASCII digits, the decimal point, the
# exponent letter, the four operators, parentheses and blanks. Anything else (letters,
# "_" as in 1_000, "x" as in 0x10, "#" comments, non-ASCII digits such as "١" or "１",
# lone surrogates) is refused before parsing with the lesson's message "solo números...";
# control characters (NUL...) with "expresión no válida". "**" gets through this check
# and is refused as a power by the tree check, before anything is evaluated.
_ALLOWED_CHARS = frozenset("0123456789.eE+-*/() \t\n\r")
_DIGIT_RUN = re.compile(r"[0-9]+")


def _finite(x: int | float) -> int | float:
    if isinstance(x, float) and not math.isfinite(x):
        raise CalculatorError(_MSG_NOT_FINITE)
    return x


def _check_text(expression: str) -> None:
    """The checks on the raw text, before ``ast.parse`` sees it."""
    if len(expression) > MAX_EXPRESSION:
        raise CalculatorError(_MSG_TOO_LONG)
    for c in expression:
        if c not in _ALLOWED_CHARS:
            # Control characters (NUL...) are malformed text; anything else is not arithmetic.
            raise CalculatorError(_MSG_INVALID_EXPRESSION if c < " " or c == "\x7f"
                                  else _MSG_ONLY_ARITHMETIC)
    if any(len(m) > MAX_DIGITS for m in _DIGIT_RUN.findall(expression)):
        raise CalculatorError(_MSG_NUMBER_TOO_LONG)
    depth = deepest = 0
    for c in expression:
        if c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
    if deepest > MAX_PARENS:
        raise CalculatorError(_MSG_TOO_COMPLEX)


def _check_tree(root: ast.expr) -> None:
    """Only numbers, + - * / and unary minus; depth and node count capped (iterative)."""
    stack: list[tuple[ast.expr, int]] = [(root, 1)]
    nodes = 0
    while stack:
        n, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH or nodes > MAX_NODES:
            raise CalculatorError(_MSG_TOO_COMPLEX)
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            continue
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            stack.append((n.right, depth + 1))
            stack.append((n.left, depth + 1))
        elif isinstance(n, ast.UnaryOp) and type(n.op) in _OPS:
            stack.append((n.operand, depth + 1))
        else:
            raise CalculatorError(_MSG_ONLY_ARITHMETIC)


def _evaluate(root: ast.expr) -> int | float:
    """The lesson's tree walk, without recursion, every intermediate float finite.

    The tree has been checked by :func:`_check_tree`: it holds only numbers, + - * /
    and unary minus.
    """
    values: list[int | float] = []
    stack: list[tuple[ast.expr, bool]] = [(root, False)]
    while stack:
        n, ready = stack.pop()
        if isinstance(n, ast.Constant):
            values.append(_finite(cast(int | float, n.value)))  # _check_tree: a number
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
        else:  # pragma: no cover - excluded by _check_tree
            raise CalculatorError(_MSG_ONLY_ARITHMETIC)
    return values.pop()


def calculate(expression: str) -> int | float:
    """Arithmetic without eval(): the expression tree is walked (lesson 6.4.1).

    Only ASCII numbers, + - * / and unary minus; the result is rounded to 4 decimals,
    finite, and at most :data:`MAX_RESULT` in magnitude. The caps (length, parenthesis
    depth, digits in a row, tree depth, node count) are checked before anything is
    evaluated, so that every call is fast. Every failure is an :class:`CalculatorError`
    (a ValueError) with a Spanish message for the model; nothing else is raised.
    """
    if not isinstance(expression, str):
        raise CalculatorError(_MSG_INVALID_EXPRESSION)
    expression = str.__str__(expression)  # a plain str, whatever subclass came in
    _check_text(expression)
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError):  # ValueError: NUL bytes, surrogates
        raise CalculatorError(_MSG_INVALID_EXPRESSION) from None
    except (RecursionError, MemoryError):
        raise CalculatorError(_MSG_TOO_COMPLEX) from None
    _check_tree(tree.body)
    try:
        x = _finite(round(_evaluate(tree.body), 4))
    except ZeroDivisionError:
        raise CalculatorError(_MSG_DIVISION_BY_ZERO) from None
    except OverflowError:
        raise CalculatorError(_MSG_NOT_FINITE) from None
    except (RecursionError, MemoryError):  # pragma: no cover - the walk is iterative
        raise CalculatorError(_MSG_TOO_COMPLEX) from None
    if abs(x) > MAX_RESULT:
        raise CalculatorError(_MSG_TOO_LARGE)
    return x


# --------------------------------------------------------------------------- arguments

_MSG_INVALID_JSON = "JSON no válido"
_MSG_NOT_AN_OBJECT = "los argumentos deben ser un objeto JSON"
_MSG_TOO_NESTED = "JSON demasiado anidado"
# Longest integer literal accepted in argument text (Python refuses more than 4300).
_MAX_JSON_DIGITS = 1000


class _ArgumentsError(JSONRefused):
    """Argument text the strict reader refuses (its Spanish message is for the model)."""


def _finite_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise _ArgumentsError(f"número no finito: {text}")
    return x


def _bounded_int(text: str) -> int:
    if len(text) > _MAX_JSON_DIGITS:
        raise _ArgumentsError(_MSG_NUMBER_TOO_LONG)
    return int(text)


def parse_arguments_strict(text: object) -> dict[str, Any] | str:
    """A tool call's argument text as a dict, or a Spanish error message for the model.

    Stricter than ``json.loads``: a key repeated in an object ("clave duplicada: fecha"),
    NaN / Infinity / -Infinity, numbers that overflow to infinity (1e400) and integers of
    more than a thousand digits are refused, and the value must be a JSON object.
    Never raises.
    """
    if not isinstance(text, str):
        return _MSG_INVALID_JSON
    try:
        value = loads_strict(text, parse_float=_finite_float, parse_int=_bounded_int)
    except _ArgumentsError as e:
        return str(e)
    except DuplicateKeyError as e:
        return f"clave duplicada: {e.key}"
    except NonFiniteConstantError as e:
        return f"valor no permitido: {e.name}"
    except RecursionError:
        return _MSG_TOO_NESTED
    except (ValueError, TypeError, MemoryError):
        return _MSG_INVALID_JSON
    if not isinstance(value, dict):
        return _MSG_NOT_AN_OBJECT
    return value


# --------------------------------------------------------------------------- tool box

_NS_PER_UNIT = {"D": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9, "s": 10**9,
                "ms": 10**6, "us": 10**3, "ns": 1}


def _ns(t: pd.Timestamp) -> int:
    """Exact nanoseconds since the epoch (UTC for aware timestamps) as a Python int.

    Works for timestamps outside the datetime64[ns] range too (pandas parses dates
    into microseconds), so comparisons never overflow.
    """
    import numpy as np

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
    import numpy as np

    return [str(s) for s in np.datetime_as_string(values, unit="D")]


#: ToolBoxes of :meth:`ToolBox.shared`, by the sha256 of (prices, news); oldest first.
_SHARED: dict[tuple[str, str], ToolBox] = {}
_SHARED_MAX = 4
_SHARED_LOCK = threading.Lock()


class ToolBox:
    """The tools over one prices frame and one news frame; build it once per process.

    The frames are checked and normalised with :func:`reactlab.data.check_prices` and
    :func:`reactlab.data.check_news` (a bad frame raises :class:`reactlab.core.errors.DataError`).
    """

    def __init__(self, prices: pd.DataFrame, news: pd.DataFrame) -> None:
        import numpy as np

        prices = data.check_prices(prices, "prices")
        news = data.check_news(news, "news")
        self._date_dtype = str(prices["fecha"].dtype)
        self._prices: dict[str, _Series] = {}
        for ticker, g in prices.groupby("ticker", sort=False):
            days = g["fecha"].to_numpy()
            self._prices[str(ticker)] = _Series(
                ns=days.astype(np.int64).tolist(),
                dates=_dates(days),
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

    @classmethod
    def shared(cls, prices_path: Path | str, news_path: Path | str) -> ToolBox:
        """:meth:`from_files`, built once per process for the same file *contents*.

        Run jobs executed as threads of one Snakemake process (docs/workflow.md) would
        otherwise each parse and check the same two parquet files, which was most of a
        simulated job's time. The key is the sha256 of both files' bytes, so a file
        rewritten in place gives a fresh ToolBox; a ToolBox holds no mutable state after
        construction, so threads may share one. At most :data:`_SHARED_MAX` are kept.
        """
        import hashlib

        try:
            blobs = [Path(p).read_bytes() for p in (prices_path, news_path)]
        except OSError:
            return cls.from_files(prices_path, news_path)  # its DataError names the file
        key = (hashlib.sha256(blobs[0]).hexdigest(), hashlib.sha256(blobs[1]).hexdigest())
        with _SHARED_LOCK:
            box = _SHARED.get(key)
            if box is None:
                box = cls.from_files(prices_path, news_path)
                _SHARED[key] = box
                while len(_SHARED) > _SHARED_MAX:
                    _SHARED.pop(next(iter(_SHARED)))
            return box

    @property
    def tickers(self) -> frozenset[str]:
        """The known tickers (those of the prices frame, as in the lesson)."""
        return self._tickers

    # The tools. They raise on failure, like the lesson's functions; execute() turns
    # exceptions into {"error": str(e)}.

    def precio(self, ticker: str, fecha: str) -> dict[str, Any]:
        """Close of the last session on or before ``fecha``."""
        import pandas as pd

        if ticker not in self._tickers:
            raise ToolInputError(f"ticker desconocido: {ticker}")
        # The lesson compares the naive datetime column with the string, which pandas
        # parses with Timestamp(); an unparsable or tz-aware one is an invalid comparison.
        try:
            t = pd.Timestamp(fecha)
            if t is not pd.NaT and t.tzinfo is not None:
                raise ToolInputError(fecha)
        except (ValueError, TypeError):
            raise ToolInputError(
                f"Invalid comparison between dtype={self._date_dtype} "
                f"and {type(fecha).__name__}"
            ) from None
        s = self._prices[ticker]
        # Timestamp("NaT") compares False with everything: no session qualifies.
        i = 0 if t is pd.NaT else bisect.bisect_right(s.ns, _ns(t))
        if i == 0:
            raise ToolInputError(f"sin datos hasta {fecha}")
        return {"ticker": ticker, "fecha": s.dates[i - 1], "cierre": round(s.closes[i - 1], 2)}

    def buscar_noticias(self, ticker: str, desde: str, hasta: str) -> list[dict[str, str]]:
        """At most five distinct headlines of ``ticker`` from ``desde`` to ``hasta``
        (both included, UTC dates), syndicated copies removed, first copy kept."""
        import pandas as pd

        if ticker not in self._tickers:
            raise ToolInputError(f"ticker desconocido: {ticker}")
        start = pd.Timestamp(desde, tz="UTC")
        stop = pd.Timestamp(hasta, tz="UTC") + pd.Timedelta(days=1)
        h = self._news.get(ticker)
        if h is None or start is pd.NaT or stop is pd.NaT:
            return []
        lo = bisect.bisect_left(h.ns, _ns(start))
        hi = bisect.bisect_left(h.ns, _ns(stop))
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
        """The ``calculadora`` tool (its argument keeps the schema's name): :func:`calculate`."""
        return calculate(expresion)

    def variacion(self, ticker: str, desde: str, hasta: str) -> dict[str, Any]:
        """Percentage change of the close between two dates, computed from two closes."""
        a, b = self.precio(ticker, desde), self.precio(ticker, hasta)
        if a["cierre"] == 0:  # a positive close below 0.005 rounds to 0
            raise ToolInputError(f"cierre nulo el {a['fecha']}: no hay variación porcentual")
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
            return {"error": _message_of(e)}
        try:
            json.dumps(out, allow_nan=False)
        except (ValueError, TypeError, RecursionError):
            return {"error": _MSG_NOT_JSON}
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
            errors += [f"{_shorten(k)}: {_MSG_EXTRA_FIELD}" for k in extra[:_MAX_EXTRA_FIELDS]]
            if len(extra) > _MAX_EXTRA_FIELDS:
                errors.append(f"y {len(extra) - _MAX_EXTRA_FIELDS} campos más no permitidos")
        if errors:
            return {"error": "argumentos no válidos: " + "; ".join(errors)}
        try:
            return {"resultado": getattr(self, name)(**a.model_dump())}
        except Exception as e:
            return {"error": _message_of(e)}


_MSG_EXTRA_FIELD = "campo no permitido"
_MAX_EXTRA_FIELDS = 5
_MSG_INTERNAL = "error interno de la herramienta"
_MSG_NOT_JSON = "resultado no representable en JSON"


def _shorten(key: object, n: int = 40) -> str:
    """A field name for an error message, cut to ``n`` characters."""
    k = key if isinstance(key, str) else repr(key)
    return k if len(k) <= n else k[:n] + "…"


def _message_of(e: BaseException) -> str:
    """An exception's message; a fixed one if even that fails."""
    try:
        return str(e)
    except Exception:
        return _MSG_INTERNAL
