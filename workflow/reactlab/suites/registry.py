"""The registry of benchmarks: one :class:`Benchmark` object per benchmark a suite can run.

Everything that differs between benchmarks is a member of its entry: the tables it
publishes (``results/tables/{table}.csv``), its cases as :class:`~reactlab.config.RunSpec`
runs (:meth:`Benchmark.specs`: its data, the tools from its own schemas, its policies as
scenarios whose steps it writes for each case), how one case runs through the runner
(:meth:`Benchmark.run_case`), its scorer
(:meth:`Benchmark.record`: a case's verification record, a pure function of its trace)
and its tables (:meth:`Benchmark.build_tables`). Planning (:mod:`reactlab.suites.plan`),
a shard job (:mod:`reactlab.suites.run`), the verification (:mod:`reactlab.suites.score`),
the shards' tables (:mod:`reactlab.suites.shards`), the rules (one table rule per
registered benchmark, ``workflow/rules/suites.smk``), ``jobs.suite_tables`` and the
viewer ask the registry; none of them branches on a benchmark's name.

The benchmarks are plugins (:mod:`reactlab.core.plugins`, group ``reactlab.benchmarks``):
the built-in BFCL (:mod:`reactlab.suites.bfcl_suite`) and AgentDojo
(:mod:`reactlab.suites.agentdojo`) are reactlab's own entry points, and a benchmark in
another package is one entry point in its own pyproject (docs/plugins.md). The config
checks a suite against its entry's categories, policies and fields; a job imports only the
benchmark its suite names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from reactlab.analysis.figure_kinds import Figure
from reactlab.config.settings import CaseFields
from reactlab.core.errors import ConfigError, TraceError, UsageError
from reactlab.core.plugins import Plugins, registry
from reactlab.suites.summaries import Summary
from reactlab.suites.types import checked_record

if TYPE_CHECKING:
    from reactlab.agent.types import ModelTurn
    from reactlab.backends.registry import LoadedModel
    from reactlab.config import RunSpec
    from reactlab.config.settings import SuiteSettings
    from reactlab.trace import Trace

__all__ = ["BENCHMARKS", "Benchmark", "benchmark", "case_fields", "figures",
           "load_suite_verification", "register",
           "run_case", "suite_record"]


class Benchmark(Protocol):
    """What a benchmark tells the pipeline (see the module docstring)."""

    @property
    def name(self) -> str:
        """The ``benchmark:`` value of a suite entry (and the case specs' ``suite.benchmark``)."""

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables it publishes, ``results/tables/{name}.csv``; the first is its main
        one (its rule's report entry, its caption ``workflow/report/{name}.rst``)."""

    @property
    def categories(self) -> tuple[str, ...]:
        """The categories a suite entry may take (its default: all of them)."""

    @property
    def policies(self) -> tuple[str, ...]:
        """The scripted policies a scripted backend plays (its default: all of them)."""

    @property
    def only(self) -> tuple[str, ...]:
        """The fields of a suite entry that only this benchmark takes."""

    @property
    def case_fields(self) -> type[CaseFields]:
        """The model of its own fields of a case (the spec's ``suite.case``: what its
        checker needs), an unknown field refused: each of its cases is checked against it
        when planned, run and scored (:func:`case_fields`)."""

    @property
    def settings(self) -> type[BaseModel] | None:
        """The model of its own settings (a suite entry's ``settings:``, checked before
        any job, the field named); None: it takes none."""

    @property
    def figures(self) -> tuple[Figure, ...]:
        """Its figures, each drawn from one of its :attr:`tables` (its presentation: the
        rules make one when its table is made, the CLI draws it; :func:`figures`)."""

    @property
    def summaries(self) -> Mapping[str, Summary]:
        """Its tables' summaries on the viewer's index, by table name
        (:mod:`reactlab.suites.summaries`); a table without one is shown as it is."""

    @property
    def code(self) -> Mapping[str, str]:
        """The package modules that ``run`` a case, ``verify`` (score) a trace and build
        the ``tables``: each shard rule's code fingerprint is the generic module's and
        these (``workflow/rules/suites.smk``), so editing one benchmark's scorer reruns
        that benchmark's verify jobs only. A benchmark outside the package leaves a step
        out (the generic module alone is fingerprinted)."""

    def specs(self, suite_name: str, entry: SuiteSettings,
              raw: Mapping[str, Any]) -> list[RunSpec]:
        """Every case of one suite entry (its typed settings) as a
        :class:`~reactlab.config.RunSpec` with its ``suite`` part; ``raw`` is the whole
        config (its backends). A backend that plays
        scripts gets one spec per policy (a :class:`~reactlab.config.settings.PolicyScript`),
        one that runs a model one spec (scenario ``react``). A UsageError names what
        cannot run."""

    def run_case(self, spec: RunSpec, out: str | Path, *, model: LoadedModel | None = None,
                 turn: ModelTurn | None = None, recording: str | None = None,
                 replay: str | None = None) -> dict[str, Any]:
        """Run one case through :func:`reactlab.runner.run_to_trace` (a policy's steps
        written first: :func:`reactlab.suites.types.played`), its trace to ``out``
        atomically; the end record's data. ``model``: the shard's loaded model (a local
        model backend); ``turn``: the case's first model turn, already decoded in a batch
        (:mod:`reactlab.backends.local.batch`); ``recording``/``replay``: an HTTP case's
        recording to write, or to answer from."""

    def record(self, trace: Trace, trace_path: str) -> dict[str, Any]:
        """The verification record of one of its traces (a pure function of the trace):
        the fields of :class:`reactlab.analysis.verify.Verification` plus its own."""

    def build_tables(self, pairs: Iterable[tuple[str, str]],
                     out_dir: str | Path) -> dict[str, Path]:
        """Write its :attr:`tables` under ``out_dir`` from (trace, verification) pairs,
        each verification checked against its trace; table name → path."""


#: Every installed benchmark (entry-point group ``reactlab.benchmarks``), by name: the
#: built-in ones are declared in reactlab's pyproject.toml, a plugin's in its own.
BENCHMARKS: Plugins[Benchmark] = registry("benchmark")


def _own_tables(entry: Benchmark) -> None:
    """A UsageError unless ``entry`` publishes a table and no table of another benchmark
    loaded so far."""
    if not entry.tables:
        raise UsageError(f"benchmark {entry.name!r} publishes no table")
    for other in BENCHMARKS.loaded():
        clash = set(other.tables) & set(entry.tables) if other.name != entry.name else set()
        if clash:
            raise UsageError(f"benchmark {entry.name!r}: table {sorted(clash)[0]!r} is "
                             f"already {other.name}'s")


BENCHMARKS.set_vet(_own_tables)


def register(entry: Benchmark) -> Benchmark:
    """Add ``entry`` to this process's registry (a test's own benchmark; an installed one
    is an entry point, docs/plugins.md). Its tables must be its own: a table name another
    benchmark publishes is a UsageError."""
    return BENCHMARKS.add(entry)


def benchmark(name: str) -> Benchmark:
    """The registered benchmark ``name`` (a UsageError naming the known ones if none)."""
    return BENCHMARKS.lookup(name)


def figures() -> dict[str, Figure]:
    """Every registered benchmark's figures, by kind (what ``reactlab.analysis.outputs``
    takes as ``suite``: :func:`~reactlab.analysis.outputs.suite_figures`, ``draw``)."""
    return {f.kind: f for entry in BENCHMARKS.values() for f in entry.figures}


def run_case(spec: RunSpec, out: str | Path, *, model: LoadedModel | None = None,
             turn: ModelTurn | None = None, recording: str | None = None,
             replay: str | None = None) -> dict[str, Any]:
    """Run one case by its benchmark (the spec's ``suite.benchmark``): what a shard job
    hands :func:`reactlab.suites.run.run_shard`."""
    case_fields(spec)
    assert spec.suite is not None
    return benchmark(spec.suite.benchmark).run_case(spec, out, model=model, turn=turn,
                                                     recording=recording, replay=replay)


def case_fields(spec: RunSpec) -> CaseFields:
    """The case's own fields, typed by its benchmark's model
    (:attr:`Benchmark.case_fields`): a UsageError for a spec of no suite case, a
    ConfigError naming a field its benchmark does not declare."""
    if spec.suite is None:
        raise UsageError(f"{spec.key} is no suite case")
    return benchmark(spec.suite.benchmark).case_fields.of(spec.suite)


def suite_record(tr: Trace, trace_path: str) -> dict[str, Any]:
    """The verification record of one suite trace by its benchmark's scorer (the trace
    header's ``suite.benchmark``); a TraceError for a trace of no registered benchmark."""
    spec = tr.header.run_spec
    name = spec.suite.benchmark if spec.suite is not None else None
    if name is None or name not in BENCHMARKS:
        raise TraceError(f"{trace_path}: not a suite trace of a registered benchmark "
                         f"({name!r})")
    try:
        case_fields(spec)
    except ConfigError as exc:
        raise TraceError(f"{trace_path}: {exc}") from exc
    return BENCHMARKS[name].record(tr, trace_path)


def load_suite_verification(tr: Trace, verified_path: str | Path,
                            trace_path: str) -> dict[str, Any]:
    """The record of ``tr``, recomputed, after checking the stored file agrees with it."""
    return checked_record(tr, verified_path, trace_path, suite_record)
