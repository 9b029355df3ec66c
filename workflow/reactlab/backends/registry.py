"""The providers a backend can name, and how to open a session on each.

Adding a provider is one entry here (plus its value in ``provider`` of
``workflow/schemas/config.schema.yaml``; tests/test_backends.py checks that the two
lists agree). An entry names its module and factory as strings, so that looking a
provider up imports nothing: only :func:`open_session` imports the module, and with it
that provider's SDK alone.

A factory is called as ``factory(spec, sleep=..., recorder=..., replay=...)`` when the
provider speaks HTTP (the ``openai``, ``anthropic`` and ``openai_chat`` adapters), as
``factory(spec)`` otherwise.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reactlab.agent.types import Session
    from reactlab.backends.recording import Recorder, Replay
    from reactlab.config import RunSpec


@dataclass(frozen=True)
class Provider:
    """One provider: where its session factory lives and whether it speaks HTTP."""

    name: str
    module: str
    factory: str
    http: bool  # an HTTP layer: recordings, replays and injected faults apply to it

    def load(self) -> Callable[..., Session]:
        """The factory, importing its module (and so its SDK) on first use."""
        return getattr(importlib.import_module(self.module), self.factory)


PROVIDERS: dict[str, Provider] = {p.name: p for p in (
    Provider("openai", "reactlab.backends.openai_responses", "OpenAIResponsesSession",
             http=True),
    Provider("anthropic", "reactlab.backends.anthropic_messages", "AnthropicMessagesSession",
             http=True),
    Provider("openai_chat", "reactlab.backends.openai_chat", "OpenAIChatSession", http=True),
    Provider("local", "reactlab.backends.registry", "open_local", http=False),
)}


def provider(name: str) -> Provider:
    """The registry entry of ``name``; ValueError naming the known ones otherwise."""
    try:
        return PROVIDERS[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r} (known: {', '.join(PROVIDERS)})") from None


def open_local(spec: RunSpec) -> Session:
    """A session on the in-process backend: the scripted one, or the model in ``model``
    mode (which loads the model)."""
    from reactlab.backends import local

    if spec.backend_config["mode"] == "model":
        return local.LocalModelSession(spec, local.load_model(spec))
    return local.LocalScriptedSession(spec)


def open_session(spec: RunSpec, *, sleep: Callable[[float], None] | None = None,
                 recorder: Recorder | None = None, replay: Replay | None = None) -> Session:
    """See :func:`reactlab.backends.open_session`."""
    entry = provider(spec.backend_config["provider"])
    if entry.http:
        if recorder is not None and replay is not None:
            raise ValueError("a session either records or replays, not both")
        return entry.load()(spec, sleep=sleep, recorder=recorder, replay=replay)
    if recorder is not None or replay is not None:
        from reactlab.backends.recording import RecordingError

        raise RecordingError(f"backend {spec.backend!r} ({entry.name}) has no HTTP layer to "
                             "record or replay; recordings are for the "
                             f"{' and '.join(n for n, p in PROVIDERS.items() if p.http)} "
                             "backends")
    return entry.load()(spec)
