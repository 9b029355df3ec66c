"""Reading and checking the prices and news frames, the generated ones or the user's own
(:func:`load_prices`, :func:`load_news`): required columns, dtypes, no nulls, positive
finite closes, no duplicate sessions; and what the user's data lacks of the lesson's
pinned values (:func:`lesson_warnings`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reactlab.core.errors import DataError
from reactlab.data.pins import BUSI_ANCHORS, BUSI_EVENT, BUSI_TICKER

if TYPE_CHECKING:  # pandas is imported where it is used (lazy imports)
    import pandas as pd

PRICE_COLUMNS = ("fecha", "ticker", "empresa", "cierre")
NEWS_COLUMNS = ("ts", "ticker", "titular", "fuente")
_PRICES_REQUIRED = ("fecha", "ticker", "cierre")
_NEWS_REQUIRED = ("ts", "ticker", "titular")

def canonical_prices(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in PRICE_COLUMNS if c in df.columns]
    return df[cols].sort_values(["ticker", "fecha"], kind="mergesort").reset_index(drop=True)


def canonical_news(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in NEWS_COLUMNS if c in df.columns]
    return df[cols].sort_values(["ts", "ticker"], kind="mergesort").reset_index(drop=True)


def _require_columns(df: pd.DataFrame, required: tuple[str, ...], source: str) -> None:
    missing = [c for c in required if c not in df.columns]
    if not missing:
        return
    expected = ", ".join(required)
    if len(missing) == 1:
        what = f"column '{missing[0]}' is missing"
    else:
        what = "columns " + ", ".join(f"'{c}'" for c in missing) + " are missing"
    raise DataError(f"{source}: {what} (expected columns: {expected})")


def _not_empty(df: pd.DataFrame, source: str) -> None:
    if df.empty:
        raise DataError(f"{source}: the file has no rows (every tool call would fail)")


def lesson_warnings(prices: pd.DataFrame | None, news: pd.DataFrame | None) -> list[str]:
    """What the user's own (checked) data lacks of the values the lesson pins.

    The lesson's figures need BUSI's four anchor closes and the takeover headline; data
    without them is usable, but its tables cannot match the lesson's (or tests/golden).
    ``None`` stands for a generated file, which holds them by construction.
    """
    import pandas as pd  # lazy: heavy (pandas)

    missing = []
    if prices is not None:
        busi = prices[prices.ticker == BUSI_TICKER].set_index("fecha")["cierre"]
        for day, close in BUSI_ANCHORS.items():
            got = busi.get(pd.Timestamp(day))
            if got is None or round(float(got), 2) != close:
                missing.append(f"{BUSI_TICKER} close {close} on {day}"
                               + ("" if got is None else f" (found {float(got):g})"))
    if news is not None and not (
            (news.ticker == BUSI_TICKER) & (news.titular == BUSI_EVENT)).any():
        missing.append(f"the headline {BUSI_EVENT!r}")
    if not missing:
        return []
    return [f"your data lacks the lesson's pinned values ({'; '.join(missing)}): runs work, "
            f"but the tables will not reproduce the lesson's figures"]


def check_user_files(prices: Path | str | None, news: Path | str | None) -> list[str]:
    """Load the user's files with every check (DataError if one is unusable, e.g. empty)
    and return warnings about them. ``None``: that file is generated, not the user's."""
    return lesson_warnings(load_prices(prices) if prices is not None else None,
                           load_news(news) if news is not None else None)


def _no_nulls(s: pd.Series, source: str) -> None:
    n = int(s.isna().sum())
    if n:
        raise DataError(f"{source}: column '{s.name}' has {n} null value(s)")


def _as_text(s: pd.Series, source: str) -> pd.Series:
    import pandas as pd  # lazy: heavy (pandas)

    _no_nulls(s, source)
    if not (pd.api.types.is_string_dtype(s) or s.dtype == object):
        raise DataError(f"{source}: column '{s.name}' must hold text, not {s.dtype}")
    bad = [v for v in s.unique() if not isinstance(v, str)]
    if bad:
        raise DataError(f"{source}: column '{s.name}' must hold text, found {bad[0]!r}")
    return s.astype("str")


def _to_datetime(s: pd.Series, source: str, *, utc: bool) -> pd.Series:
    """Coerce ``s`` to datetime64[ns] (naive) or datetime64[ns, UTC] (``utc=True``).

    A naive input is taken as UTC when ``utc``; an aware input keeps its wall-clock time
    when ``not utc``.
    """
    import pandas as pd  # lazy: heavy (pandas)

    _no_nulls(s, source)
    try:
        if isinstance(s.dtype, pd.DatetimeTZDtype):
            out = s.dt.tz_convert("UTC") if utc else s.dt.tz_localize(None)
        elif pd.api.types.is_datetime64_dtype(s):
            out = s.dt.tz_localize("UTC") if utc else s
        elif pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            raise TypeError(f"{s.dtype} is not a date type")
        else:
            values = s.map(lambda v: v.isoformat() if hasattr(v, "isoformat") else v)
            out = pd.to_datetime(values, format="ISO8601", utc=utc)
            if not utc and isinstance(out.dtype, pd.DatetimeTZDtype):
                out = out.dt.tz_localize(None)
        return out.astype("datetime64[ns, UTC]" if utc else "datetime64[ns]")
    except (TypeError, ValueError, OverflowError) as e:
        kind = "UTC timestamps" if utc else "dates"
        raise DataError(f"{source}: column '{s.name}' cannot be read as {kind} ({e})") from e


def check_prices(df: pd.DataFrame, source: str = "prices") -> pd.DataFrame:
    """Validate and normalise a prices frame; ``source`` names it in error messages.

    Returns a new frame with columns fecha (datetime64[ns], normalised to midnight),
    ticker (str), empresa (str, if present) and cierre (float64), sorted by ticker, fecha.
    """
    import numpy as np  # lazy: heavy (numpy)
    import pandas as pd  # lazy: heavy (pandas)

    _require_columns(df, _PRICES_REQUIRED, source)
    _not_empty(df, source)
    out = pd.DataFrame(index=df.index)
    out["fecha"] = _to_datetime(df["fecha"], source, utc=False).dt.normalize()
    out["ticker"] = _as_text(df["ticker"], source)
    if "empresa" in df.columns:
        out["empresa"] = df["empresa"].astype("str")
    _no_nulls(df["cierre"], source)
    try:
        cierre = pd.to_numeric(df["cierre"], errors="raise").astype("float64")
    except (TypeError, ValueError) as e:
        raise DataError(f"{source}: column 'cierre' is not numeric ({e})") from e
    values = cierre.to_numpy()
    if not np.isfinite(values).all():
        raise DataError(f"{source}: column 'cierre' has non-finite values")
    if not (values > 0).all():
        bad = float(values[values <= 0][0])
        raise DataError(f"{source}: column 'cierre' must be > 0 (found {bad:g})")
    out["cierre"] = cierre
    dup = out.duplicated(["ticker", "fecha"])
    if dup.any():
        row = out[dup].iloc[0]
        raise DataError(
            f"{source}: columns 'ticker', 'fecha' have duplicate rows "
            f"(e.g. {row['ticker']} {row['fecha']:%Y-%m-%d})"
        )
    return canonical_prices(out)


def check_news(df: pd.DataFrame, source: str = "news") -> pd.DataFrame:
    """Validate and normalise a news frame; ``source`` names it in error messages.

    Returns a new frame with columns ts (datetime64[ns, UTC]; naive input is read as
    UTC), ticker (str), titular (str) and fuente (str, if present), sorted by ts, ticker
    with a stable sort (rows of one ticker keep their relative order on equal ts).
    """
    import pandas as pd  # lazy: heavy (pandas)

    _require_columns(df, _NEWS_REQUIRED, source)
    _not_empty(df, source)
    out = pd.DataFrame(index=df.index)
    out["ts"] = _to_datetime(df["ts"], source, utc=True)
    out["ticker"] = _as_text(df["ticker"], source)
    out["titular"] = _as_text(df["titular"], source)
    if "fuente" in df.columns:
        out["fuente"] = df["fuente"].astype("str")
    return canonical_news(out)


def _read(path: Path | str) -> tuple[pd.DataFrame, str]:
    import pandas as pd  # lazy: heavy (pandas)

    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise DataError(f"{source}: file not found")
    try:
        return pd.read_parquet(path), source
    except Exception as e:  # pyarrow raises several unrelated types for bad files
        raise DataError(f"{source}: cannot be read as parquet ({e})") from e


def load_prices(path: Path | str) -> pd.DataFrame:
    """Read a prices parquet file (ours or the course's) and check its schema."""
    df, source = _read(path)
    return check_prices(df, source)


def load_news(path: Path | str) -> pd.DataFrame:
    """Read a news parquet file (ours or the course's) and check its schema."""
    df, source = _read(path)
    return check_news(df, source)
