"""What a figure is, apart from how it is drawn: :class:`Figure` (its kind, its source
table, its drawing function) and :func:`without_section`. Its own module, importing no
drawing code, so that what only names figures (a benchmark's entry, the viewer through
the benchmarks' registry) does not take the drawing modules into its code fingerprint:
editing a figure's drawing reruns that figure, not the viewer
(:mod:`reactlab.core.fingerprint`; the registry of figures is
:mod:`reactlab.analysis.outputs`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any

__all__ = ["Draw", "Figure", "without_section"]

#: ``draw(table_csv, out_png, figure_section) -> out_png``: writes the PNG and its SVG.
Draw = Callable[[str | Path, str | Path, Mapping[str, Any]], Path]


@dataclass(frozen=True)
class Figure:
    """A figure drawn from the table ``source``; ``draw`` is its drawing function, which
    reads the config's ``figure`` section when ``uses_figure_section``."""

    kind: str
    source: str
    draw: Draw
    uses_figure_section: bool = False

    @property
    def caption(self) -> str:
        return self.kind

    @property
    def paths(self) -> tuple[str, str]:
        """Its PNG and SVG under ``results/figures/``."""
        return (f"results/figures/{self.kind}.png", f"results/figures/{self.kind}.svg")


def without_section(draw: Callable[[str | Path, str | Path], Path]) -> Draw:
    """A drawing function that does not read the config's ``figure`` section, as a
    :data:`Draw` (its name and module kept: a rule's code fingerprint reads the module)."""
    @wraps(draw)
    def drawn(table: str | Path, out: str | Path, figure: Mapping[str, Any]) -> Path:
        return draw(table, out)

    return drawn
