"""The registry of tables and figures (reactlab.analysis.outputs): what the rules and the
CLI read agrees with what the code writes and draws."""

from __future__ import annotations

from pathlib import Path

import pytest

from reactlab.analysis import outputs
from reactlab.core.errors import UsageError
from tests.conftest import ROOT
from tests.test_damage import FIGURE, _one_run


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, toolbox) -> dict[str, Path]:
    from reactlab.analysis import tables

    tmp = tmp_path_factory.mktemp("outputs")
    trace, verified = _one_run(tmp, toolbox)
    return tables.build([(str(trace), str(verified))], FIGURE, tmp / "tables")


def test_the_registry_lists_the_tables_build_writes(built: dict[str, Path]) -> None:
    assert list(built) == [t.name for t in outputs.TABLES]
    assert outputs.table_paths() == [f"results/tables/{name}.csv" for name in built]


def test_every_figure_is_drawn_through_the_registry(built: dict[str, Path],
                                                    tmp_path: Path) -> None:
    for kind, figure in outputs.FIGURES.items():
        assert figure.source in built, kind
        png = outputs.draw(kind, built[figure.source], tmp_path / f"{kind}.png", FIGURE)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", kind
        assert b"<svg" in png.with_suffix(".svg").read_bytes()[:2000], kind
    with pytest.raises(UsageError, match="unknown figure kind 'pie'"):
        outputs.draw("pie", built["runs"], tmp_path / "pie.png", FIGURE)


def test_every_table_and_figure_has_its_caption() -> None:
    pages = [t.caption for t in outputs.TABLES] + [f.caption for f in outputs.FIGURES.values()]
    assert [p for p in pages if not (ROOT / "workflow" / "report" / f"{p}.rst").is_file()] == []


def test_the_cli_offers_the_registrys_figures(built: dict[str, Path], tmp_path: Path) -> None:
    from reactlab import cli

    parser = cli.build_parser()
    figure = next(a for a in parser._subparsers._group_actions[0].choices["figure"]._actions
                  if a.dest == "kind")
    assert list(figure.choices) == list(outputs.FIGURES)
    out = tmp_path / "o.png"
    assert cli.main(["figure", "--kind", "outcomes", "--table", str(built["runs"]),
                     "--out", str(out)]) == 0
    assert out.is_file()
