"""The providers a backend can name: one registered :class:`Provider` object each.

A provider bundles everything the package needs to know about it:

* ``sessions``: its session factories by the session kind a strategy declares
  (:attr:`reactlab.agent.strategies.Strategy.session`: ``conversation`` for ReAct,
  ``plan_execute``), as (module, attribute) names, so that looking a provider up
  imports nothing (and :mod:`reactlab.core.fingerprint` still sees the module): only
  :func:`open_session` imports the module, and with it that provider's SDK alone. An
  HTTP adapter class (:class:`reactlab.backends.adapter.ApiSession`) brings its request
  building, answer reading, stream reader (``read_stream``) and SDK error translation;
* ``api``: its wire API (:mod:`reactlab.simulate.apis`: routes, simulator, SSE events,
  error shapes), None for a provider without an HTTP layer; the server serves it, the
  ``simulated`` mode runs its simulator;
* ``packages``: the distributions its sessions import (their versions go into the trace
  header), ``loggers`` (the SDK loggers whose records belong in a job's log) and
  ``quiet`` (per-request loggers kept at WARNING), registered with
  :mod:`reactlab.core.joblog`;
* its modes (``simulated``/``live`` with an HTTP layer, ``scripted``/``model`` without)
  and its Snakemake resource ``<name>_slots`` (``--resources openai_slots=2`` caps its
  parallel live jobs).

The providers are plugins (:mod:`reactlab.core.plugins`, group ``reactlab.providers``):
the built-in ones (:mod:`reactlab.backends.providers`) are reactlab's own entry points,
and a provider in another package is one entry point in its own pyproject
(docs/plugins.md). The config fills its provider enums from them; once loaded, a
provider's wire API is served and simulated, and its SDK's loggers go to the job logs.

A factory is called as ``factory(spec, sleep=..., recorder=..., replay=...)`` when the
provider speaks HTTP, as ``factory(spec)`` otherwise; an in-process provider that loads a
model also takes ``model=`` (one already loaded: an outside suite's shard loads it once for
its cases) and ``first_turn=`` (the run's turn, decoded in a batch with other runs').
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from reactlab.agent.strategies import strategy_named
from reactlab.core.errors import ClientError, RecordingError, UsageError
from reactlab.core.joblog import register_loggers
from reactlab.core.plugins import Plugins, registry
from reactlab.simulate.apis import WireApi, register_api

if TYPE_CHECKING:
    from reactlab.agent.types import ModelTurn, Session
    from reactlab.backends.adapter import ApiSession
    from reactlab.backends.recording import Recorder, Replay
    from reactlab.config import RunSpec

#: The session kind of a strategy that lets the model propose the calls (ReAct).
CONVERSATION = "conversation"


class LoadedModel(Protocol):
    """A model an in-process provider loaded once for many runs (an outside suite's
    shard): its sessions take it as ``model=`` (:func:`open_session`)."""

    @property
    def name(self) -> str: ...


class ModelHost(Protocol):
    """What a provider that runs its model in process offers a suite's shard
    (:attr:`Provider.models`): the model loaded once, the cases' first turns decoded
    ``batch_size`` at a time (None: a case its session decodes alone; ``layout`` receives
    each batch's case ids in decoding order), and what a reader needs to reproduce the
    traces beside the specs (:func:`reactlab.suites.run.reproduction_record`)."""

    def load(self, spec: RunSpec) -> LoadedModel: ...

    def first_turns(self, model: LoadedModel, specs: Sequence[RunSpec], batch_size: int,
                    layout: list[list[str]]) -> list[ModelTurn | None]: ...

    def describe(self, model: LoadedModel) -> dict[str, Any]:
        """The model's ``model`` (name) and ``dtype`` (its weights')."""

    def runtime(self) -> dict[str, Any]:
        """The runtime the greedy text depends on (library versions, CPU kernels)."""


@dataclass(frozen=True)
class Provider:
    """One provider (see the module docstring)."""

    name: str
    #: session kind → (module, attribute) of its factory.
    sessions: Mapping[str, tuple[str, str]]
    #: The wire API (simulator, routes, error shapes); None: no HTTP layer.
    api: WireApi | None = None
    #: Distributions its sessions import (their versions go into the trace header).
    packages: tuple[str, ...] = ()
    #: Loggers whose INFO records belong in a job's log, and per-request ones kept quiet.
    loggers: tuple[str, ...] = ()
    quiet: tuple[str, ...] = field(default=())
    #: (module, attribute) of its :class:`ModelHost`, for a provider that loads its model
    #: in process (a suite's shard loads it once through :meth:`model_host`); None: none.
    models: tuple[str, str] | None = None

    @property
    def http(self) -> bool:
        """An HTTP layer: recordings, replays and injected faults apply to it."""
        return self.api is not None

    @property
    def modes(self) -> tuple[str, ...]:
        return ("simulated", "live") if self.http else ("scripted", "model")

    @property
    def resource(self) -> str:
        """The Snakemake resource its live jobs take one unit of."""
        return f"{self.name}_slots"

    def load(self, session: str = CONVERSATION) -> Callable[..., Any]:
        """The factory of ``session``, importing its module (and so its SDK) on first use;
        ClientError when the provider has no such session."""
        target = self.sessions.get(session)
        if target is None:
            raise ClientError(f"provider {self.name!r} has no {session!r} session (it has: "
                              f"{', '.join(self.sessions)})")
        module, attr = target
        factory: Callable[..., Any] = getattr(importlib.import_module(module), attr)
        return factory

    def model_host(self) -> ModelHost:
        """Its :class:`ModelHost` (importing its module on first use); a UsageError for a
        provider that loads no model in process."""
        if self.models is None:
            raise UsageError(f"provider {self.name!r} loads no model in process")
        module, attr = self.models
        host: ModelHost = getattr(importlib.import_module(module), attr)
        return host

    def stream_reader(self) -> Callable[[Any, Any], Any]:
        """Its adapter's reader of a streamed answer (HTTP providers)."""
        return self.adapter().read_stream

    def adapter(self) -> type[ApiSession]:
        """Its HTTP adapter class (an HTTP provider's conversation factory is its
        :class:`~reactlab.backends.adapter.ApiSession` subclass)."""
        if not self.http:
            raise UsageError(f"provider {self.name!r} has no HTTP adapter")
        return cast("type[ApiSession]", self.load())


def _on_load(entry: Provider) -> None:
    """What a provider brings once loaded: its wire API to the server and simulators,
    its SDK's loggers to the job logs."""
    if not isinstance(entry, Provider):
        raise UsageError(f"provider entry {entry!r} is not a reactlab.backends.registry."
                         "Provider")
    if entry.api is not None:
        register_api(entry.api)
    register_loggers(entry.loggers, entry.quiet)


#: Every installed provider (entry-point group ``reactlab.providers``; the built-in ones:
#: :mod:`reactlab.backends.providers`), by name.
PROVIDERS: Plugins[Provider] = registry("provider")
PROVIDERS.set_vet(_on_load)


def register(entry: Provider) -> Provider:
    """Add ``entry`` to this process's registry (a test's own provider; an installed one
    is an entry point, docs/plugins.md)."""
    return PROVIDERS.add(entry)


def providers() -> Mapping[str, Provider]:
    """Every installed provider, each loaded (the built-in ones first)."""
    return dict(PROVIDERS.items())


def provider(name: str) -> Provider:
    """The installed provider ``name`` (a UsageError naming the installed ones if none)."""
    return PROVIDERS.lookup(name)


def slot_resources(provider_of: Callable[[Any], str]) -> dict[str, Callable[[Any], int]]:
    """Snakemake resources of a live run rule: ``<provider>_slots`` is 1 for a job of that
    provider, 0 otherwise (``provider_of(wildcards)`` names the job's provider)."""
    def slot(name: str) -> Callable[[Any], int]:
        return lambda wildcards: int(provider_of(wildcards) == name)

    return {p.resource: slot(p.name) for p in PROVIDERS.values() if p.http}


def open_session(spec: RunSpec, *, sleep: Callable[[float], None] | None = None,
                 recorder: Recorder | None = None, replay: Replay | None = None,
                 model: LoadedModel | None = None,
                 first_turn: ModelTurn | None = None) -> Session:
    """See :func:`reactlab.backends.open_session`."""
    entry = provider(spec.backend_config.provider)
    factory = entry.load(strategy_named(spec.script.strategy).session)
    if entry.http:
        if recorder is not None and replay is not None:
            raise UsageError("a session either records or replays, not both")
        if model is not None or first_turn is not None:
            raise UsageError(f"provider {entry.name!r} serves its model over HTTP: it "
                             "takes no loaded model or batched turn")
        session: Session = factory(spec, sleep=sleep, recorder=recorder, replay=replay)
        return session
    if recorder is not None or replay is not None:
        raise RecordingError(f"backend {spec.backend!r} ({entry.name}) has no HTTP layer to "
                             "record or replay; recordings are for the "
                             f"{' and '.join(n for n, p in PROVIDERS.items() if p.http)} "
                             "backends")
    if model is not None or first_turn is not None:
        local_session: Session = factory(spec, model=model, first_turn=first_turn)
        return local_session
    plain: Session = factory(spec)
    return plain
