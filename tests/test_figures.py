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
