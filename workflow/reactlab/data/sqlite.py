"""The lesson's prices and news as a SQLite database, for a tool server that speaks SQL
(``mcp-server-sqlite``, docs/mcp.md).

Two tables, in the lesson's Spanish::

    precios(ticker TEXT, fecha TEXT, empresa TEXT, cierre REAL)   -- one row per session
    noticias(ticker TEXT, fecha TEXT, titular TEXT, fuente TEXT)  -- one row per headline

``fecha`` is ``AAAA-MM-DD`` (a headline's is the UTC date of its timestamp); ``cierre`` is
rounded to two decimals, as the ``precio`` tool gives it. Rows are inserted in the checked
frames' order into a database built from nothing in a temporary file, with no journal,
then published with one ``os.replace``: the same data and SQLite library give the same
bytes (a test builds it twice).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from reactlab import data
from reactlab.core.io import atomic_path

SCHEMA = (
    "CREATE TABLE precios (ticker TEXT NOT NULL, fecha TEXT NOT NULL, empresa TEXT, "
    "cierre REAL NOT NULL, PRIMARY KEY (ticker, fecha))",
    "CREATE TABLE noticias (ticker TEXT NOT NULL, fecha TEXT NOT NULL, "
    "titular TEXT NOT NULL, fuente TEXT)",
)


def write(prices: str | Path, news: str | Path, out: str | Path) -> Path:
    """Build the database at ``out`` from the two parquet files (checked as the tools
    check them: :func:`reactlab.data.load_prices`, :func:`reactlab.data.load_news`)."""
    p = data.load_prices(prices)
    n = data.load_news(news)
    price_rows = [(t, f.strftime("%Y-%m-%d"), e, round(float(c), 2)) for t, f, e, c in zip(
        p["ticker"], p["fecha"], p["empresa"] if "empresa" in p else [None] * len(p),
        p["cierre"], strict=True)]
    news_rows = [(t, ts.strftime("%Y-%m-%d"), h, s) for t, ts, h, s in zip(
        n["ticker"], n["ts"], n["titular"], n["fuente"] if "fuente" in n else [None] * len(n),
        strict=True)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        with contextlib.closing(sqlite3.connect(tmp, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("BEGIN")
            for statement in SCHEMA:
                db.execute(statement)
            db.executemany("INSERT INTO precios VALUES (?, ?, ?, ?)", price_rows)
            db.executemany("INSERT INTO noticias VALUES (?, ?, ?, ?)", news_rows)
            db.execute("COMMIT")
    return out
