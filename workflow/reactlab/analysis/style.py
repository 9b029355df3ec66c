"""The one style of every figure: a colour-blind-safe palette (Okabe & Ito) with a marker
and a line style per series, so that no two series of a panel look alike even in grey;
at most :data:`MAX_SERIES` series per panel (:func:`facets` splits beyond that); panels
of the columns (backends, agents) that ran the same rows (:func:`components`); a run's
scenario without its agent (:func:`scenario_of`: the agent read from its own column).

Importing it imports no drawing code: matplotlib is set up by :func:`pyplot` (Agg, the
fixed SVG hash salt and font, constrained layout), the only way figures reach it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

#: Okabe & Ito's palette, black last but one; yellow last (faint on white).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#000000",
           "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 2)),
              (0, (8, 2, 2, 2)))
#: Series drawn in one panel, at most: the palette's colours.
MAX_SERIES = len(PALETTE)
#: Verdict colours (Okabe & Ito: bluish green, vermillion, grey), each with its hatch.
VERDICTS = {"verified": ("#009E73", ""), "rejected": ("#D55E00", "//"),
            "no answer": ("#BBBBBB", "..")}
#: Utility and attack success (Okabe & Ito: blue, vermillion), each with its hatch.
UTILITY, ATTACK = ("#0072B2", ""), ("#D55E00", "//")
LESSON = "lesson"

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Series:
    """How series ``i`` of a panel is drawn."""

    colour: str
    marker: str
    linestyle: Any

    def line(self) -> dict[str, Any]:
        return {"color": self.colour, "marker": self.marker, "ls": self.linestyle}


def series(i: int) -> Series:
    """Series ``i`` of a panel (``i`` < :data:`MAX_SERIES`: no two alike)."""
    return Series(PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)],
                  LINESTYLES[i % len(LINESTYLES)])


def facets(items: Sequence[T], most: int = MAX_SERIES) -> list[list[T]]:
    """``items`` in panels of at most ``most``, as even as can be (9 -> 5 + 4)."""
    if not items:
        return []
    n = -(-len(items) // most)
    size = -(-len(items) // n)
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def components(cells: Iterable[tuple[K, Hashable]]) -> list[list[K]]:
    """The columns of ``cells`` ((column, row) pairs) grouped so that two columns that
    share a row are in one group: one panel per group, so that no panel holds a row
    empty in most of its columns. Groups in the order of their first column, each sorted."""
    rows_of: dict[K, set[Hashable]] = {}
    for col, row in cells:
        rows_of.setdefault(col, set()).add(row)
    groups: list[tuple[set[K], set[Hashable]]] = []
    for col in sorted(rows_of, key=str):
        cols, rows = {col}, set(rows_of[col])
        for g in [g for g in groups if g[1] & rows]:
            groups.remove(g)
            cols |= g[0]
            rows |= g[1]
        groups.append((cols, rows))
    out = [sorted(cols, key=str) for cols, _ in groups]
    return sorted(out, key=lambda g: str(g[0]))


def scenario_of(scenario: str, agent: str) -> str:
    """A run's scenario without its agent: a framework's run of ``correcto`` is
    ``correcto__{agent}`` in the tables, whose ``agent`` column names the agent."""
    if agent != LESSON:
        return scenario.removesuffix(f"__{agent}")
    return scenario


def pyplot() -> Any:
    """matplotlib's pyplot, set up for deterministic, readable figures."""
    import matplotlib  # lazy: heavy (matplotlib)

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "reactlab"
    matplotlib.rcParams["font.family"] = "DejaVu Sans"
    matplotlib.rcParams["figure.constrained_layout.use"] = True
    import matplotlib.pyplot as plt  # lazy: heavy (matplotlib)

    return plt
