"""Deterministic synthetic stand-ins for the level 6 data, and schema-checked loaders.

The lesson works on two parquet files of the course, ``acciones6_precios.parquet`` (daily
closes of 120 companies) and ``noticias6_corpus.parquet`` (a Spanish news corpus).
:func:`generate` builds synthetic versions of both as a pure function of a seed, pinned so
that every figure the lesson prints comes out the same (BUSI = "Busmar Hogar", its closes on
2024-01-03, 2024-03-01, 2024-03-15 and 2024-03-22, and the single takeover headline of
2024-03-19). :func:`load_prices` and :func:`load_news` read either these files or the
course's own and check their schema, so that the real files can be dropped in.

Dtypes (both of :func:`generate` and of the loaders):

* prices: ``fecha`` datetime64[ns] (naive, midnight), ``ticker`` str, ``empresa`` str,
  ``cierre`` float64; sorted by ticker, fecha.
* news: ``ts`` datetime64[ns, UTC], ``ticker`` str, ``titular`` str, ``fuente`` str;
  sorted by ts, ticker.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reactlab.config import GENERATED_DATA
from reactlab.core.io import atomic_path
from reactlab.data.frames import (
    NEWS_COLUMNS,
    PRICE_COLUMNS,
    check_news,
    check_prices,
    check_user_files,
    lesson_warnings,
    load_news,
    load_prices,
)
from reactlab.data.pins import (
    BUSI_ANCHORS,
    BUSI_EVENT,
    BUSI_NAME,
    BUSI_TICKER,
)
from reactlab.data.synthetic import (
    BUSI_APRIL_HEADLINE,
    FIRST_DAY,
    INJECTION_FIGURE,
    INJECTION_MARKER,
    INJECTION_WINDOW,
    LAST_DAY,
    N_COMPANIES,
    generate,
    injection_target,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BUSI_ANCHORS",
    "BUSI_APRIL_HEADLINE",
    "BUSI_EVENT",
    "BUSI_NAME",
    "BUSI_TICKER",
    "FIRST_DAY",
    "INJECTION_FIGURE",
    "INJECTION_MARKER",
    "INJECTION_WINDOW",
    "LAST_DAY",
    "NEWS_COLUMNS",
    "NEWS_FILE",
    "N_COMPANIES",
    "PRICES_FILE",
    "PRICE_COLUMNS",
    "check_news",
    "check_prices",
    "check_user_files",
    "generate",
    "injection_target",
    "lesson_warnings",
    "load_news",
    "load_prices",
    "write",
]

PRICES_FILE = GENERATED_DATA["prices"]
NEWS_FILE = GENERATED_DATA["news"]


def _write_atomic(df: pd.DataFrame, path: Path) -> None:
    """Publish ``df`` as the parquet file ``path`` (see :func:`reactlab.core.io.atomic_path`)."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write(out_dir: Path, seed: int) -> tuple[Path, Path]:
    """Generate the data for ``seed`` and write both parquet files atomically into
    ``out_dir`` (created if needed). Same seed, same bytes. Returns (prices, news) paths.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prices, news = generate(seed)
    prices_path = out_dir / PRICES_FILE
    news_path = out_dir / NEWS_FILE
    _write_atomic(prices, prices_path)
    _write_atomic(news, news_path)
    return prices_path, news_path
