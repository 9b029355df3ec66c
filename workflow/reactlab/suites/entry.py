"""A built-in benchmark's registry entry: the benchmark made of its own modules' functions.

:class:`BenchmarkEntry` holds what :class:`reactlab.suites.registry.Benchmark` asks of a
benchmark (its name, tables, categories, policies, the fields only it takes, its modules
per step) and, for each step, the function of its own modules that does it; BFCL
(:mod:`reactlab.suites.bfcl_suite`) and AgentDojo (:mod:`reactlab.suites.agentdojo`) are
one each. :class:`RunCase` is how one case runs (what a shard job hands
:func:`reactlab.suites.run.run_shard`). Apart from :mod:`reactlab.suites.types`, so that
a verify or table job's code fingerprint does not take in the model backend these
annotations name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from reactlab.analysis.figure_kinds import Figure
from reactlab.config import RunSpec
from reactlab.config.settings import CaseFields, SuiteSettings
from reactlab.suites.summaries import Summary

if TYPE_CHECKING:
    from reactlab.agent.types import ModelTurn
    from reactlab.backends.registry import LoadedModel
    from reactlab.trace import Trace

__all__ = ["BenchmarkEntry", "RunCase"]


class RunCase(Protocol):
    """How one case runs (:meth:`reactlab.suites.registry.Benchmark.run_case`): the spec,
    its trace path, the shard's model, the case's batched first turn and an HTTP case's
    recording to write or to answer from → the end record's data."""

    def __call__(self, spec: RunSpec, out: str | Path, *, model: LoadedModel | None = None,
                 turn: ModelTurn | None = None, recording: str | None = None,
                 replay: str | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True, eq=False)
class BenchmarkEntry:
    """A benchmark whose steps are functions of its own modules (a built-in one's registry
    entry): the members of :class:`reactlab.suites.registry.Benchmark`, each step the
    function that does it. Compared and hashed by identity, as an entry object is."""

    name: str
    tables: tuple[str, ...]
    categories: tuple[str, ...]
    policies: tuple[str, ...]
    only: tuple[str, ...]
    code: Mapping[str, str]
    case_fields: type[CaseFields]
    figures: tuple[Figure, ...]
    summaries: Mapping[str, Summary]
    specs: Callable[[str, SuiteSettings, Mapping[str, Any]], list[RunSpec]]
    run_case: RunCase
    record: Callable[[Trace, str], dict[str, Any]]
    build_tables: Callable[[Iterable[tuple[str, str]], str | Path], dict[str, Path]]
    #: Its own settings' model (a suite entry's ``settings:``); None: it takes none.
    settings: type[BaseModel] | None = None
