"""Figures are deterministic: the same table gives the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from reactlab import config
from reactlab.analysis import figures
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"


@pytest.mark.parametrize("kind,table", [("outcomes", "runs"), ("tokens", "runs"),
                                        ("defences", "runs"),
                                        ("cumulative_tokens", "cumulative_tokens")])
def test_same_table_same_bytes(kind: str, table: str, tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / str(i) / f"{kind}.png"
        if kind == "cumulative_tokens":
            figures.cumulative_tokens(GOLDEN / f"{table}.csv", out,
                                      config.load(ROOT / "config.yaml").figure)
        else:
            getattr(figures, kind)(GOLDEN / f"{table}.csv", out)
        outs.append(out)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    svgs = [o.with_suffix(".svg").read_bytes() for o in outs]
    assert svgs[0] == svgs[1]
    assert b"<dc:date>" not in svgs[0]


def test_a_layout_differing_in_a_last_bit_gives_the_same_svg(tmp_path: Path) -> None:
    """The constrained layout's solver can place an axes a last bit apart in another
    process (seen: tokens.svg differed between a SLURM run and a local one, in its
    clip-path names only). Two axes a last bit apart give the same SVG bytes."""
    from reactlab.analysis import style

    plt = style.pyplot()
    svgs = []
    for i, left in enumerate((0.1, 0.1 + 2.0 ** -52)):
        fig = plt.figure(figsize=(3, 2), dpi=100, layout="none")
        ax = fig.add_axes((left, 0.1, 0.8, 0.8))
        ax.plot([0, 1], [0, 1])
        figures.save(fig, tmp_path / str(i) / "f.png")
        svgs.append((tmp_path / str(i) / "f.svg").read_bytes())
    assert b'<clipPath id="clip0">' in svgs[0]
    assert svgs[0] == svgs[1]


def test_the_style_tells_every_series_of_a_panel_apart() -> None:
    from reactlab.analysis import style

    looks = [style.series(i) for i in range(style.MAX_SERIES)]
    for attr in ("colour", "marker"):
        assert len({getattr(s, attr) for s in looks}) == style.MAX_SERIES, attr
    assert [len(p) for p in style.facets(list(range(12)))] == [6, 6]
    assert [len(p) for p in style.facets(list(range(8)))] == [8]
    # columns that share no row are apart; a shared row joins them
    assert style.components([("a", 1), ("b", 2), ("c", 2), ("d", 3)]) == [
        ["a"], ["b", "c"], ["d"]]


def test_run_panels_keep_agents_apart_and_rows_full() -> None:
    """The golden runs.csv: the lesson loop's backends and the agent frameworks in
    separate panels of at most MAX_SERIES columns, the agent read from its column (no
    scenario glued to an agent), every row of a panel run by most of its columns."""
    import pandas as pd

    from reactlab.analysis import style

    runs = figures._runs_with_agent(pd.read_csv(GOLDEN / "runs.csv"))
    runs["col"] = [figures._column(b, a) for b, a in zip(runs.backend, runs.agent,
                                                         strict=True)]
    panels = figures.run_panels(runs)
    assert {t for t, _ in panels} == {"lesson loop, by backend", "agent frameworks"}
    assert not any("__" in s for s in runs.base)
    cells = 0
    for title, cols in panels:
        assert 1 <= len(cols) <= style.MAX_SERIES
        sel = runs[runs.col.isin(cols)]
        assert set(sel.agent == style.LESSON) == {title.startswith("lesson")}
        cells += len(cols) * sel.groupby(["task", "base"]).ngroups
    # every run in exactly one panel, and most cells of the panels filled (one matrix
    # of every column by every task / scenario would leave most of its cells empty)
    assert sorted(c for _, cols in panels for c in cols) == sorted(set(runs.col))
    one_matrix = runs.col.nunique() * runs.groupby(["task", "scenario"]).ngroups
    assert len(runs) / cells > 0.8 > 0.5 > len(runs) / one_matrix


def test_success_rates_draw_an_interval_only_where_the_table_gives_one() -> None:
    from reactlab.analysis.trial_figures import pooled

    groups = pooled(GOLDEN / "summary_trials.csv")
    with_interval = {k for k, p in groups.items() if p.interval}
    assert with_interval == {("smollm2_sampled", "lesson", "react")}
    assert all(p.deterministic for k, p in groups.items() if k not in with_interval)
    assert ("openai_chat", "langchain", "correcto") in groups
