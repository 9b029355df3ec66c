"""The tools' executor: :class:`ToolBox`, the lesson's tools over one prices frame and one
news frame, indexed by ticker once (a call is a bisection, not a scan), and
:meth:`ToolBox.execute`, which validates a call's arguments and runs it, its failures
returned as ``{"error": ...}`` data, never raised."""

from __future__ import annotations

import bisect
import hashlib
import json
import threading
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from reactlab import data
from reactlab.core.errors import ToolInputError
from reactlab.tools.arguments import TOOLS
from reactlab.tools.calculator import calculate

if TYPE_CHECKING:  # numpy and pandas are imported where they are used (lazy imports)
    import numpy as np
    import pandas as pd

# --------------------------------------------------------------------------- tool box

_NS_PER_UNIT = {"D": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9, "s": 10**9,
                "ms": 10**6, "us": 10**3, "ns": 1}


def _ns(t: pd.Timestamp) -> int:
    """Exact nanoseconds since the epoch (UTC for aware timestamps) as a Python int.

    Works for timestamps outside the datetime64[ns] range too (pandas parses dates
    into microseconds), so comparisons never overflow.
    """
    import numpy as np  # lazy: heavy (numpy)

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
    import numpy as np  # lazy: heavy (numpy)

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
        import numpy as np  # lazy: heavy (numpy)

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
        import pandas as pd  # lazy: heavy (pandas)

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
        import pandas as pd  # lazy: heavy (pandas)

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
