"""Backend adapters: one module per wire API, imported lazily.

An adapter only translates between the loop's neutral values (:mod:`reactlab.agent.types`) and
its provider's wire shape, keeping the provider-shaped conversation itself so that every
request carries exactly what the official SDK would send. The HTTP adapters share their
base (:mod:`reactlab.backends.adapter`); a provider is one entry of
:mod:`reactlab.backends.registry`. Provider quirks live in the adapter's file (and the
simulator's) and nowhere else. ``import reactlab.backends`` imports no SDK.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from reactlab.agent.types import BudgetExceeded, RequestMeter, ToolCall, ToolOutcome
from reactlab.backends import registry
from reactlab.backends.recording import REPLAY_API_KEY, Recorder
from reactlab.backends.retry import API_KEY_HINT
from reactlab.config.faults import FaultPlan
from reactlab.core.errors import ClientError, ProtocolError
from reactlab.core.tokens import count
from reactlab.simulate import ScriptedPolicy
from reactlab.tools import TOOLS, json_schema, parse_arguments_strict
from reactlab.tools.messages import tool_message

if TYPE_CHECKING:
    from reactlab.agent.types import ModelTurn, Session
    from reactlab.backends.recording import Replay
    from reactlab.backends.registry import LoadedModel
    from reactlab.config import RunSpec

def open_session(spec: RunSpec, *, sleep: Callable[[float], None] | None = None,
                 recorder: Recorder | None = None, replay: Replay | None = None,
                 model: LoadedModel | None = None,
                 first_turn: ModelTurn | None = None) -> Session:
    """A new conversation for ``spec`` on its backend (imports only that backend's SDK).

    The provider is looked up in :mod:`reactlab.backends.registry`. ``sleep`` is what the
    API adapters call to wait between attempts (default
    :func:`reactlab.backends.retry.default_sleep`); tests pass a recorder instead.
    ``recorder`` records every HTTP attempt (:mod:`reactlab.backends.recording`); ``replay``
    answers every request from a recording instead of sending it (no key is needed).
    Both are for the providers that speak HTTP only (RecordingError otherwise). ``model``
    and ``first_turn`` are for an in-process model backend: a model already loaded (an
    outside suite's shard loads it once) and the run's turn decoded in a batch. In live
    mode the key is read here, from the environment variable the backend's
    ``api_key_env`` names: BackendError ("client") before anything is sent when it is
    unset or empty.
    """
    return registry.open_session(spec, sleep=sleep, recorder=recorder, replay=replay,
                                 model=model, first_turn=first_turn)


def api_key(spec: RunSpec) -> str:
    """The live backend's key, from the environment variable its config names.

    ClientError naming the variable when it is unset or empty; the key itself
    is never put in a message.
    """
    name = getattr(spec.backend_config, "api_key_env", None)
    if not name:
        raise ClientError(f"backend {spec.backend!r} runs live but names no "
                          "`api_key_env` (the variable that holds its key)")
    value = os.environ.get(name, "").strip()
    if not value:
        raise ClientError(f"backend {spec.backend!r} needs an API key: set the "
                          f"environment variable {name} (it is read from there "
                          "and never written anywhere)")
    return value


def api_key_hint(spec: RunSpec) -> str:
    """What a 401 tells the user to check (the variable, for a live backend)."""
    name = getattr(spec.backend_config, "api_key_env", None)
    return f"{API_KEY_HINT} in ${name}" if name else API_KEY_HINT


def http_transport(spec: RunSpec, lib: ModuleType, simulated: Callable[[], Any], *,
                   recorder: Recorder | None, replay: Replay | None) -> tuple[Any, str]:
    """(transport, api key) of a session on ``lib`` (httpx or httpx2).

    Replay: answers from the recording, a placeholder key (no environment variable is
    read). Live: ``lib.HTTPTransport()`` behind the recording wrapper (always there: it
    also keeps the key out of what the SDK reads back), the key from the environment.
    Simulated: ``simulated()``, wrapped when a recorder is given.
    """
    if replay is not None:
        return replay.transport(lib), REPLAY_API_KEY
    if spec.backend_config.mode == "live":
        key = api_key(spec)
        return (recorder or Recorder()).wrap(lib, lib.HTTPTransport(), secret=key), key
    transport = simulated()
    return (transport if recorder is None else recorder.wrap(lib, transport)), "sk-simulado"


def metering_hook(meter: RequestMeter) -> Callable[[Any], None]:
    """An httpx/httpx2 request event hook: count the body's tokens, enforce the budget."""
    def hook(request: Any) -> None:
        n = count(request.content.decode("utf-8"))
        if meter.limit is not None and n > meter.limit:
            raise BudgetExceeded(n, meter.limit)
        meter.counts.append(n)

    return hook


def protocol_error(exc: BaseException | None, detail: str | None = None) -> ProtocolError:
    """ProtocolError: a 2xx whose body is not a valid answer of the API."""
    if detail is None:
        if isinstance(exc, json.JSONDecodeError):
            detail = f"the response body is not valid JSON ({exc})"
        else:
            detail = f"unexpected response: {exc!r}"
    return ProtocolError(detail)


class ToolsOf(Protocol):
    """What :func:`tool_definitions` reads (a :class:`~reactlab.config.RunSpec`)."""

    @property
    def tools(self) -> tuple[str, ...]: ...

    @property
    def tool_schemas(self) -> list[dict[str, Any]] | None: ...


def tool_definitions(spec: ToolsOf) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, JSON schema) of the task's tools, in the task's order.

    A run of an outside suite (:mod:`reactlab.suites`) carries its benchmark's own tool
    definitions (``tool_schemas``); every other run offers the project's tools by name."""
    own = spec.tool_schemas
    if own is not None:
        return [(t["name"], t["description"], t["parameters"]) for t in own]
    return [(n, TOOLS[n].description, json_schema(n)) for n in spec.tools]


def parse_arguments(text: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, raw): a JSON object, or None and the raw text when it is not one."""
    if isinstance(text, dict):
        return text, None
    if isinstance(text, str):
        # Strict: duplicate keys, NaN/Infinity and non-finite numbers are refused.
        value = parse_arguments_strict(text)
        return (value, None) if isinstance(value, dict) else (None, text)
    return None, json.dumps(text)


def parsed_call(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A tool call of an answer, its ``arguments`` read by :func:`parse_arguments`."""
    args, raw = parse_arguments(arguments)
    return ToolCall(id=call_id, name=name, arguments=args, raw=raw)


#: How the HTTP adapters write a tool result's JSON: with ASCII escapes (``json.dumps``
#: defaults, as in the lesson). :class:`reactlab.backends.adapter.ApiSession` declares it
#: (``tool_results_ascii``), and so every HTTP run's trace header records it.
API_RESULTS_ASCII = True


def api_result_text(oc: ToolOutcome) -> str:
    """A tool result as the HTTP APIs get it back: ``json.dumps`` defaults (ASCII escapes,
    as in the lesson: :data:`API_RESULTS_ASCII`), marked as data when the delimiting
    defence is on."""
    return tool_message(oc.result, delimit=oc.delimit, ensure_ascii=API_RESULTS_ASCII)


def simulated_transport(spec: RunSpec, sim: ModuleType, lib: ModuleType) -> tuple[Any, Any]:
    """(MockTransport of ``lib`` serving the spec's script through simulator module
    ``sim``, with its fault plan injected; the plan)."""
    policy = ScriptedPolicy.of_run(spec)
    plan = FaultPlan.from_script(spec.script)
    handle = sim.handler(policy)
    return lib.MockTransport(sim.with_faults(handle, plan) if plan else handle), plan
