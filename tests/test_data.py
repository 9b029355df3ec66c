"""Tests of reactlab.data: the synthetic level 6 data and the schema-checked loaders."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reactlab import data
from reactlab.core.errors import DataError


@pytest.fixture(scope="session")
def prices(data_files: tuple[Path, Path]) -> pd.DataFrame:
    return data.load_prices(data_files[0])


@pytest.fixture(scope="session")
def news(data_files: tuple[Path, Path]) -> pd.DataFrame:
    return data.load_news(data_files[1])


def _close(prices: pd.DataFrame, ticker: str, day: str) -> float:
    row = prices[(prices.ticker == ticker) & (prices.fecha == pd.Timestamp(day))]
    assert len(row) == 1
    return float(row.cierre.iloc[0])


# --------------------------------------------------------------------------- files


def test_file_names(data_files: tuple[Path, Path]) -> None:
    assert data_files[0].name == "acciones6_precios.parquet"
    assert data_files[1].name == "noticias6_corpus.parquet"
    assert all(p.is_file() for p in data_files)
    # Nothing left behind by the atomic write.
    folder = data_files[0].parent
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in data_files)


def test_files_get_normal_permissions(data_files: tuple[Path, Path], tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    for p in data_files:
        assert p.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def test_failed_write_leaves_old_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    old = data.write(out, seed=6)
    before = [p.read_bytes() for p in old]
    prices, news = data.generate(6)
    broken = prices.assign(cierre=[1, "x"] * (len(prices) // 2))  # pyarrow cannot write it
    monkeypatch.setattr(data, "generate", lambda seed=6: (broken, news))
    with pytest.raises(Exception):  # noqa: B017 - whatever pyarrow raises
        data.write(out, seed=6)
    assert [p.read_bytes() for p in old] == before
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in old)


def test_same_seed_same_bytes(data_files: tuple[Path, Path], data_seed: int,
                              tmp_path: Path) -> None:
    again = data.write(tmp_path / "again", seed=data_seed)
    for a, b in zip(data_files, again, strict=True):
        assert a.read_bytes() == b.read_bytes()


def test_other_seed_other_bytes(data_files: tuple[Path, Path], tmp_path: Path) -> None:
    other = data.write(tmp_path / "other", seed=7)
    for a, b in zip(data_files, other, strict=True):
        assert a.read_bytes() != b.read_bytes()


def test_write_replaces_existing_files(tmp_path: Path) -> None:
    first = data.write(tmp_path, seed=7)
    before = [p.read_bytes() for p in first]
    second = data.write(tmp_path, seed=6)
    assert first == second
    assert [p.read_bytes() for p in second] != before
    assert len(list(tmp_path.iterdir())) == 2


def test_generate_is_pure() -> None:
    a = data.generate(6)
    b = data.generate(6)
    for x, y in zip(a, b, strict=True):
        pd.testing.assert_frame_equal(x, y)


def test_roundtrip_equals_generate(
    prices: pd.DataFrame, news: pd.DataFrame
) -> None:
    gp, gn = data.generate(6)
    pd.testing.assert_frame_equal(prices, gp)
    pd.testing.assert_frame_equal(news, gn)


# --------------------------------------------------------------------------- prices


def test_prices_schema(prices: pd.DataFrame) -> None:
    assert list(prices.columns) == ["fecha", "ticker", "empresa", "cierre"]
    assert prices["fecha"].dtype == np.dtype("datetime64[ns]")
    assert pd.api.types.is_string_dtype(prices["ticker"])
    assert pd.api.types.is_string_dtype(prices["empresa"])
    assert prices["cierre"].dtype == np.dtype("float64")
    assert prices.notna().all().all()
    assert (prices["cierre"] > 0).all()
    assert (prices["cierre"] == prices["cierre"].round(2)).all()
    assert (prices["fecha"] == prices["fecha"].dt.normalize()).all()
    ordered = prices.sort_values(["ticker", "fecha"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(prices, ordered)


def test_tickers(prices: pd.DataFrame) -> None:
    tickers = set(prices["ticker"])
    assert len(tickers) == 120
    assert all(re.fullmatch(r"[A-Z]{4}", t) for t in tickers)
    assert "ACME" not in tickers
    assert "BUSI" in tickers
    # One name per ticker, all distinct.
    names = prices.groupby("ticker")["empresa"].nunique()
    assert (names == 1).all()
    assert prices.drop_duplicates("ticker")["empresa"].is_unique


@pytest.mark.parametrize("seed", [0, 1, 6, 123])
def test_acme_never_generated(seed: int) -> None:
    p, _ = data.generate(seed)
    assert "ACME" not in set(p["ticker"])
    assert p["ticker"].nunique() == 120


def test_business_days(prices: pd.DataFrame) -> None:
    days = pd.bdate_range("2023-01-02", "2024-12-31")
    assert (prices["fecha"].dt.day_of_week < 5).all()
    assert not (prices["fecha"] == pd.Timestamp("2024-03-16")).any()  # a Saturday
    for _, g in prices.groupby("ticker"):
        assert list(g["fecha"]) == list(days)


def test_busi_pins(prices: pd.DataFrame) -> None:
    busi = prices[prices.ticker == "BUSI"]
    assert set(busi["empresa"]) == {"Busmar Hogar"}
    assert _close(prices, "BUSI", "2024-01-03") == 27.75
    assert _close(prices, "BUSI", "2024-03-01") == 25.20
    assert _close(prices, "BUSI", "2024-03-15") == 26.19
    assert _close(prices, "BUSI", "2024-03-22") == 27.88


@pytest.mark.parametrize("seed", [0, 7])
def test_busi_pins_hold_for_any_seed(seed: int) -> None:
    p, n = data.generate(seed)
    for day, value in data.BUSI_ANCHORS.items():
        assert _close(p, "BUSI", day) == value
    window = n[(n.ticker == "BUSI") & (n.ts >= pd.Timestamp("2024-03-18", tz="UTC"))
               & (n.ts < pd.Timestamp("2024-03-21", tz="UTC"))]
    assert set(window["titular"]) == {"Un fondo ofrece comprar Busmar Hogar"}


def test_busi_path_is_smooth(prices: pd.DataFrame) -> None:
    """The anchors are reached by the walk, not by one-day spikes."""
    busi = prices[prices.ticker == "BUSI"].set_index("fecha")["cierre"]
    r = np.log(busi).diff().dropna()
    assert r.abs().max() < 0.12
    for day in data.BUSI_ANCHORS:
        i = busi.index.get_loc(pd.Timestamp(day))
        assert abs(r.iloc[i - 1]) < 0.06  # into the anchor
        if i < len(r):
            assert abs(r.iloc[i]) < 0.06  # out of it


def test_other_series_are_plausible(prices: pd.DataFrame) -> None:
    r = prices.groupby("ticker")["cierre"].transform(lambda s: np.log(s).diff()).dropna()
    assert r.abs().max() < 0.25
    assert 0.005 < r.std() < 0.05


# --------------------------------------------------------------------------- news


def test_news_schema(news: pd.DataFrame) -> None:
    assert list(news.columns) == ["ts", "ticker", "titular", "fuente"]
    assert isinstance(news["ts"].dtype, pd.DatetimeTZDtype)
    assert str(news["ts"].dt.tz) == "UTC"
    assert news.notna().all().all()
    ordered = news.sort_values(["ts", "ticker"], kind="mergesort").reset_index(drop=True)
    pd.testing.assert_frame_equal(news, ordered)
    assert news["ts"].min() >= pd.Timestamp("2023-01-01", tz="UTC")
    assert news["ts"].max() < pd.Timestamp("2025-01-01", tz="UTC")


def test_news_tickers_are_known(prices: pd.DataFrame, news: pd.DataFrame) -> None:
    assert set(news["ticker"]) <= set(prices["ticker"])


def test_news_size_and_syndication(news: pd.DataFrame) -> None:
    copies = news.groupby("titular").size()
    assert 300 <= len(copies) <= 5000
    assert (copies >= 2).sum() >= 100  # many syndicated headlines
    assert copies.max() <= 4
    # Copies of a headline come from different sources, minutes apart, same ticker.
    for _, g in news[news.titular.isin(copies[copies >= 2].index)].groupby("titular"):
        assert g["fuente"].is_unique
        assert g["ticker"].nunique() == 1
        span = g["ts"].max() - g["ts"].min()
        assert pd.Timedelta(0) < span <= pd.Timedelta(hours=1)


def test_busi_takeover_headline(news: pd.DataFrame) -> None:
    ini = pd.Timestamp("2024-03-18", tz="UTC")
    fin = pd.Timestamp("2024-03-21", tz="UTC")
    window = news[(news.ticker == "BUSI") & (news.ts >= ini) & (news.ts < fin)]
    assert set(window["titular"]) == {"Un fondo ofrece comprar Busmar Hogar"}
    assert len(window) >= 3
    assert set(window["ts"].dt.strftime("%Y-%m-%d")) == {"2024-03-19"}
    assert window["fuente"].is_unique
    # It is the only headline with that text.
    assert set(news[news.titular == "Un fondo ofrece comprar Busmar Hogar"]["ticker"]) == {"BUSI"}
    # The invented headline of exercise 1 does not exist.
    assert not (news.titular == "Busmar Hogar dispara su beneficio un 40 %").any()


def test_busi_has_other_news(news: pd.DataFrame) -> None:
    busi = news[news.ticker == "BUSI"]
    assert busi["titular"].nunique() > 1


# --------------------------------------------------------------------------- loaders


def _write(df: pd.DataFrame, path: Path) -> Path:
    df.to_parquet(path, index=False)
    return path


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "acciones6_precios.parquet"
    with pytest.raises(DataError, match=re.escape(str(path))):
        data.load_prices(path)
    with pytest.raises(DataError, match="not found"):
        data.load_news(tmp_path / "noticias6_corpus.parquet")


def test_not_parquet(tmp_path: Path) -> None:
    path = tmp_path / "acciones6_precios.parquet"
    path.write_text("fecha,ticker,cierre\n")
    with pytest.raises(DataError, match="cannot be read as parquet"):
        data.load_prices(path)


def test_missing_column_message(prices: pd.DataFrame, tmp_path: Path) -> None:
    path = _write(prices.drop(columns="cierre"), tmp_path / "acciones6_precios.parquet")
    with pytest.raises(DataError) as e:
        data.load_prices(path)
    assert str(e.value) == (
        f"{path}: column 'cierre' is missing (expected columns: fecha, ticker, cierre)"
    )


def test_missing_news_column(news: pd.DataFrame, tmp_path: Path) -> None:
    path = _write(news.drop(columns=["titular", "ts"]), tmp_path / "n.parquet")
    with pytest.raises(DataError, match="columns 'ts', 'titular' are missing"):
        data.load_news(path)


def test_optional_columns(prices: pd.DataFrame, news: pd.DataFrame, tmp_path: Path) -> None:
    p = data.load_prices(_write(prices.drop(columns="empresa"), tmp_path / "p.parquet"))
    assert list(p.columns) == ["fecha", "ticker", "cierre"]
    n = data.load_news(_write(news.drop(columns="fuente"), tmp_path / "n.parquet"))
    assert list(n.columns) == ["ts", "ticker", "titular"]


@pytest.mark.parametrize("column", ["fecha", "ticker", "cierre"])
def test_null_in_prices(prices: pd.DataFrame, tmp_path: Path, column: str) -> None:
    bad = prices.head(50).copy()
    bad[column] = bad[column].astype(object)
    bad.loc[3, column] = None
    path = _write(bad, tmp_path / "p.parquet")
    with pytest.raises(DataError, match=f"column '{column}' has 1 null"):
        data.load_prices(path)


@pytest.mark.parametrize("column", ["ts", "ticker", "titular"])
def test_null_in_news(news: pd.DataFrame, tmp_path: Path, column: str) -> None:
    bad = news.head(50).copy()
    bad[column] = bad[column].astype(object)
    bad.loc[7, column] = None
    path = _write(bad, tmp_path / "n.parquet")
    with pytest.raises(DataError, match=f"column '{column}' has 1 null"):
        data.load_news(path)


@pytest.mark.parametrize("value", [-1.5, 0.0, np.inf, np.nan])
def test_bad_close(prices: pd.DataFrame, tmp_path: Path, value: float) -> None:
    bad = prices.head(50).copy()
    bad.loc[5, "cierre"] = value
    path = _write(bad, tmp_path / "p.parquet")
    with pytest.raises(DataError, match=f"{re.escape(str(path))}: column 'cierre'"):
        data.load_prices(path)


def test_non_numeric_close(prices: pd.DataFrame, tmp_path: Path) -> None:
    bad = prices.head(10).copy()
    bad["cierre"] = "caro"
    with pytest.raises(DataError, match="column 'cierre' is not numeric"):
        data.load_prices(_write(bad, tmp_path / "p.parquet"))


def test_bad_dates(prices: pd.DataFrame, news: pd.DataFrame, tmp_path: Path) -> None:
    bad = prices.head(10).copy()
    bad["fecha"] = "ayer"
    with pytest.raises(DataError, match="column 'fecha' cannot be read as dates"):
        data.load_prices(_write(bad, tmp_path / "p.parquet"))
    bad = news.head(10).copy()
    bad["ts"] = 12345
    with pytest.raises(DataError, match="column 'ts' cannot be read as UTC timestamps"):
        data.load_news(_write(bad, tmp_path / "n.parquet"))


def test_duplicate_sessions(prices: pd.DataFrame, tmp_path: Path) -> None:
    bad = pd.concat([prices.head(10), prices.head(1)], ignore_index=True)
    with pytest.raises(DataError, match="duplicate"):
        data.load_prices(_write(bad, tmp_path / "p.parquet"))


def test_coercions(prices: pd.DataFrame, news: pd.DataFrame, tmp_path: Path) -> None:
    """Course-like variants are accepted: string dates, microsecond units, integer
    closes, naive or non-UTC timestamps, unsorted rows."""
    p = prices.head(30).copy()
    p["fecha"] = p["fecha"].dt.strftime("%Y-%m-%d")
    p["cierre"] = p["cierre"].round().astype("int64")
    p = p.iloc[::-1]
    out = data.load_prices(_write(p, tmp_path / "p.parquet"))
    assert out["fecha"].dtype == np.dtype("datetime64[ns]")
    assert out["cierre"].dtype == np.dtype("float64")
    assert list(out["fecha"]) == sorted(out["fecha"])

    n = news.head(30).copy()
    n["ts"] = n["ts"].dt.tz_localize(None).astype("datetime64[us]")  # naive = UTC
    out = data.load_news(_write(n, tmp_path / "n.parquet"))
    pd.testing.assert_series_equal(out["ts"], news.head(30)["ts"])

    n = news.head(30).copy()
    n["ts"] = n["ts"].dt.tz_convert("Europe/Madrid")
    out = data.load_news(_write(n, tmp_path / "n2.parquet"))
    pd.testing.assert_series_equal(out["ts"], news.head(30)["ts"])


def test_aware_dates_keep_wall_clock(prices: pd.DataFrame) -> None:
    p = prices.head(5).copy()
    p["fecha"] = p["fecha"].dt.tz_localize("Europe/Madrid")
    out = data.check_prices(p)
    assert list(out["fecha"]) == list(prices.head(5)["fecha"])
