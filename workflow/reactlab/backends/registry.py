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

Built-in providers are the entries of :data:`PROVIDERS` (their names are also the config
schema's ``provider`` enum, and its ``http_provider`` enum for those with an HTTP layer:
a test checks they agree). Another one is added by :func:`register` alone, from any
module: the config accepts its name from then on (:func:`reactlab.config.declare_provider`),
the server serves its wire API, jobs log its SDK.

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
from reactlab.config import declare_provider
from reactlab.core.errors import ClientError, RecordingError, UsageError
from reactlab.core.joblog import register_loggers
from reactlab.simulate.apis import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    WireApi,
    register_api,
)

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


#: The built-in providers.
PROVIDERS: dict[str, Provider] = {p.name: p for p in (
    Provider("openai", {CONVERSATION: ("reactlab.backends.openai_responses",
                                       "OpenAIResponsesSession")},
             api=OPENAI_RESPONSES, packages=("openai", "httpx"), loggers=("openai",),
             quiet=("httpx", "httpcore")),
    Provider("anthropic",
             {CONVERSATION: ("reactlab.backends.anthropic_messages",
                             "AnthropicMessagesSession")},
             api=ANTHROPIC_MESSAGES, packages=("anthropic", "httpx2"), loggers=("anthropic",),
             quiet=("httpx2", "httpcore2")),
    Provider("openai_chat", {CONVERSATION: ("reactlab.backends.openai_chat",
                                            "OpenAIChatSession")},
             api=OPENAI_CHAT, packages=("openai", "httpx"), loggers=("openai",),
             quiet=("httpx", "httpcore")),
    Provider("local", {CONVERSATION: ("reactlab.backends.local", "open_local"),
                       "plan_execute": ("reactlab.backends.local", "open_plan_execute")},
             packages=("transformers", "torch"),
             models=("reactlab.backends.local.host", "LOCAL_MODELS")),
)}

_REGISTERED: dict[str, Provider] = {}


def register(entry: Provider) -> Provider:
    """Make ``entry`` a provider backends can name (also its wire API, its name in the
    config, its loggers). Registering the same object again is a no-op; another object
    under a taken name is a ValueError."""
    known = _REGISTERED.get(entry.name)
    if known is not None and known != entry:
        raise UsageError(f"a provider named {entry.name!r} is already registered")
    if entry.api is not None:
        register_api(entry.api)
    declare_provider(entry.name, http=entry.http)
    register_loggers(entry.loggers, entry.quiet)
    _REGISTERED[entry.name] = entry
    return entry


for _builtin in PROVIDERS.values():
    register(_builtin)


def providers() -> Mapping[str, Provider]:
    """Every registered provider (the built-in ones first)."""
    return dict(_REGISTERED)


def provider(name: str) -> Provider:
    """The registry entry of ``name``; ValueError naming the known ones otherwise."""
    try:
        return _REGISTERED[name]
    except KeyError:
        raise UsageError(f"unknown provider {name!r} (known: {', '.join(_REGISTERED)})") from None


def slot_resources(provider_of: Callable[[Any], str]) -> dict[str, Callable[[Any], int]]:
    """Snakemake resources of a live run rule: ``<provider>_slots`` is 1 for a job of that
    provider, 0 otherwise (``provider_of(wildcards)`` names the job's provider)."""
    def slot(name: str) -> Callable[[Any], int]:
        return lambda wildcards: int(provider_of(wildcards) == name)

    return {p.resource: slot(p.name) for p in _REGISTERED.values() if p.http}


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
                             f"{' and '.join(n for n, p in _REGISTERED.items() if p.http)} "
                             "backends")
    if model is not None or first_turn is not None:
        local_session: Session = factory(spec, model=model, first_turn=first_turn)
        return local_session
    plain: Session = factory(spec)
    return plain
