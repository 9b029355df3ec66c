"""The registry of the pipeline's tables and figures: one entry per kind, read by the
Snakemake rules (``workflow/rules/common.smk``, ``report.smk``) and by the CLI.

A table is written by :func:`reactlab.analysis.tables.build` (all tables at once); a
figure is drawn from one table by its ``draw`` function. Adding a figure is one entry
in :data:`FIGURES` (its drawing function and its caption ``workflow/report/<kind>.rst``);
the rule, the CLI choice and the target list follow from it.

A benchmark's figures, drawn from its own tables, are its own (``Benchmark.figures``,
:mod:`reactlab.suites.registry`, a later stage): the functions here that handle them take
them as a parameter (:func:`suite_figures`, :func:`draw`), so that nothing here knows a
benchmark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.analysis import figures, poisoning
from reactlab.analysis.figure_kinds import Figure, without_section
from reactlab.analysis.trial_figures import success_rates
from reactlab.core.errors import UsageError

if TYPE_CHECKING:
    from reactlab.config import RunSpec


@dataclass(frozen=True)
class Table:
    """A CSV table under ``results/tables/``; ``caption`` names its ``workflow/report``
    page (without ``.rst``). A key table (``latex``) is also written as LaTeX beside it
    (:mod:`reactlab.analysis.latex`), by the same job."""

    name: str
    caption: str
    latex: bool = False

    @property
    def path(self) -> str:
        return self.file("csv")

    @property
    def latex_path(self) -> str:
        """Its LaTeX twin's path (a key table's: ``latex``)."""
        return self.file("tex")

    def file(self, ext: str) -> str:
        """The table's file of extension ``ext`` under ``results/tables/``."""
        return f"results/tables/{self.name}.{ext}"


#: Every table, in the order ``tables.build`` writes them.
TABLES: tuple[Table, ...] = (
    Table("runs", "runs"),
    Table("summary_by_scenario", "summary_by_scenario", latex=True),
    Table("summary_by_backend", "summary_by_backend", latex=True),
    Table("summary_by_defences", "summary_by_defences", latex=True),
    Table("steps", "steps"),
    Table("cumulative_tokens", "cumulative_tokens_table"),
    Table("trials", "trials"),
    Table("summary_trials", "summary_trials", latex=True),
    Table("paired", "paired", latex=True),
    Table("agents", "agents", latex=True),
)

#: Every figure by kind, with the table it is drawn from.
FIGURES: dict[str, Figure] = {f.kind: f for f in (
    Figure("cumulative_tokens", "cumulative_tokens", figures.cumulative_tokens,
           uses_figure_section=True),
    Figure("outcomes", "runs", without_section(figures.outcomes)),
    Figure("tokens", "runs", without_section(figures.tokens)),
    Figure("defences", "runs", without_section(figures.defences)),
    Figure("success_rates", "summary_trials", without_section(success_rates)),
    Figure("agents_tokens", "steps", figures.agents_tokens, uses_figure_section=True),
)}

#: The tool-poisoning table (docs/mcp.md, "Tool poisoning"), written by the same job only
#: when some run's tools come from the poisoned MCP server
#: (:func:`reactlab.analysis.poisoning.on_poisoned_server`): the default run has none.
POISONING = Table(poisoning.TABLE, poisoning.TABLE, latex=True)


def tables_for(runs: Iterable[RunSpec] = ()) -> tuple[Table, ...]:
    """The tables a config's ``runs`` give: every one of :data:`TABLES`, then
    :data:`POISONING` when one of them runs on the poisoned server."""
    poisoned = any(poisoning.on_poisoned_server(r) for r in runs)
    return TABLES + ((POISONING,) if poisoned else ())


def table_paths(runs: Iterable[RunSpec] = ()) -> list[str]:
    """Every table's CSV, then the key tables' LaTeX (``latex``), of the tables ``runs``
    give (:func:`tables_for`)."""
    tables = tables_for(runs)
    return [t.path for t in tables] + [t.latex_path for t in tables if t.latex]


def latex_paths(runs: Iterable[RunSpec] = ()) -> list[str]:
    """The LaTeX twin of every key table of those ``runs`` give (``Table.latex``)."""
    return [t.latex_path for t in tables_for(runs) if t.latex]


def latex_names() -> list[str]:
    """The name of every key table, the conditional ones too: what the tables job is asked
    to write as LaTeX (one it does not build, it skips: :func:`reactlab.analysis.tables.build`)."""
    return [t.name for t in (*TABLES, POISONING) if t.latex]


def figure_paths() -> list[str]:
    """Every figure's PNG and SVG, figure by figure (the lesson's tables' figures)."""
    return [p for f in FIGURES.values() for p in f.paths]


def suite_figures(tables: list[str], suite: Iterable[Figure]) -> list[Figure]:
    """The figures of ``suite`` (the benchmarks': ``reactlab.suites.registry.figures``)
    whose source table is among ``tables`` (paths of suite tables): a suite's figures are
    made only when the config runs that suite (``workflow/rules/suites.smk``)."""
    names = {Path(t).stem for t in tables}
    return [f for f in suite if f.source in names]


def figure_entry(kind: str, suite: Iterable[Figure] = ()) -> Figure:
    """The figure ``kind``: one of :data:`FIGURES` or of ``suite`` (the benchmarks'); a
    UsageError naming every known kind otherwise."""
    known = {**FIGURES, **{f.kind: f for f in suite}}
    try:
        return known[kind]
    except KeyError:
        raise UsageError(f"unknown figure kind {kind!r} (known: {', '.join(known)})"
                         ) from None


def draw(kind: str, table_csv: str | Path, out_png: str | Path,
         figure: Mapping[str, Any], suite: Iterable[Figure] = ()) -> Path:
    """Draw figure ``kind`` (:func:`figure_entry`: the lesson's or one of ``suite``) from
    ``table_csv`` into ``out_png`` (and its SVG twin), after checking that the table is
    the one the tables job published."""
    entry = figure_entry(kind, suite)
    figures.check_source(table_csv)
    return entry.draw(table_csv, out_png, figure)
