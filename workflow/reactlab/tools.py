"""The lesson's four deterministic tools: ``precio``, ``buscar_noticias``, ``calculadora``
and ``variacion``.

Argument models, descriptions and every string that reaches the model are word for word
those of lesson 6.4.1 (they are Spanish on purpose: changing them would change the
model's behaviour and its token counts). The behaviour is the lesson's too; only the
implementation differs: prices and news are indexed by ticker once, so that a call is a
bisection instead of a scan of the whole frame, and the calculator is hardened (length
cap, division by zero, overflow, non-finite results) so that it always answers with data.

Tool failures are not exceptions: :meth:`ToolBox.execute` returns ``{"error": ...}`` or
``{"resultado": ...}`` and never raises.
"""

from __future__ import annotations

import ast
import bisect
import math
import operator
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, ValidationError

from reactlab import data

__all__ = [
    "FECHA",
    "MAX_EXPRESION",
    "TOOLS",
    "ArgsCalculadora",
    "ArgsNoticias",
    "ArgsPrecio",
    "ArgsVariacion",
    "ToolBox",
    "ToolSpec",
    "calculadora",
    "json_schema",
]

FECHA = r"^\d{4}-\d{2}-\d{2}$"

# Longest expression the calculator parses (longer ones are refused before parsing).
MAX_EXPRESION = 256


class ArgsPrecio(BaseModel):
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    fecha: str = Field(pattern=FECHA)


class ArgsNoticias(BaseModel):
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    desde: str = Field(pattern=FECHA)
    hasta: str = Field(pattern=FECHA)


class ArgsCalculadora(BaseModel):
    expresion: str


class ArgsVariacion(BaseModel):
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    desde: str = Field(pattern=FECHA)
    hasta: str = Field(pattern=FECHA)


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


def _finite(x: int | float) -> int | float:
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(_NO_FINITO)
    return x


def _evalua(n: ast.AST) -> int | float:
    """The lesson's tree walk, with every intermediate float required to be finite."""
    if isinstance(n, ast.Constant) and type(n.value) in (int, float):
        return _finite(n.value)
    if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
        return _finite(_OPS[type(n.op)](_evalua(n.left), _evalua(n.right)))
    if isinstance(n, ast.UnaryOp) and type(n.op) in _OPS:
        return _finite(_OPS[type(n.op)](_evalua(n.operand)))
    raise ValueError(_SOLO)


def calculadora(expresion: str) -> int | float:
    """Arithmetic without eval(): the expression tree is walked (lesson 6.4.1).

    Only numbers, + - * / and unary minus; the result is rounded to 4 decimals. Every
    failure is a ValueError with a Spanish message for the model.
    """
    if not isinstance(expresion, str):
        raise ValueError(_NO_VALIDA)
    if len(expresion) > MAX_EXPRESION:
        raise ValueError(_LARGA)
    try:
        tree = ast.parse(expresion, mode="eval")
    except (SyntaxError, ValueError):  # ValueError: NUL bytes on some Python versions
        raise ValueError(_NO_VALIDA) from None
    except (RecursionError, MemoryError):
        raise ValueError(_COMPLEJA) from None
    try:
        return _finite(round(_evalua(tree.body), 4))
    except ZeroDivisionError:
        raise ValueError(_DIV_CERO) from None
    except OverflowError:
        raise ValueError(_NO_FINITO) from None
    except (RecursionError, MemoryError):
        raise ValueError(_COMPLEJA) from None


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
    :func:`reactlab.data.check_news` (a bad frame raises :class:`reactlab.errors.DataError`).
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
        return {"desde": a, "hasta": b, "variacion_pct":
                round(100 * (b["cierre"] / a["cierre"] - 1), 2)}

    # Dispatch.

    def execute(
        self, name: str, args: object, allowed: Collection[str] | None = None
    ) -> dict[str, Any]:
        """Validate ``args`` and run tool ``name``; errors come back as data.

        Returns ``{"resultado": ...}`` or ``{"error": ...}`` and never raises. A tool that
        is not in ``allowed`` (when given) is as unknown as one that does not exist.
        """
        try:
            return self._execute(name, args, allowed)
        except Exception as e:  # never raise: a failure is an observation for the model
            return {"error": str(e)}

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
        try:
            a = spec.args_model.model_validate(args)
        except ValidationError as e:
            return {"error": "argumentos no válidos: " + "; ".join(
                f"{x['loc'][0]}: {x['msg']}" if x.get("loc") else x["msg"]
                for x in e.errors())}
        try:
            return {"resultado": getattr(self, name)(**a.model_dump())}
        except Exception as e:
            return {"error": str(e)}
