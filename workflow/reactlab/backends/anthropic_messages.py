"""Anthropic Messages API adapter (official ``anthropic`` 2.x SDK, ``httpx2`` transport).

Modes: ``simulated`` (the scripted simulator behind an ``httpx2.MockTransport``) and
``live`` (a real ``httpx2.HTTPTransport``; the model id is ``backend_config["model"]``,
the key comes from the environment variable ``backend_config["api_key_env"]`` names, the
URL is ``backend_config["base_url"]`` or the SDK's default). Every attempt goes through
:mod:`reactlab.backends.recording` (recorded when the caller asks for it; replayed instead of sent
with ``replay``).

Retries are the project's own (:mod:`reactlab.backends.retry`, the same loop as the openai
adapter); the SDK client keeps ``max_retries=0``. Every request is one logical step:
``ModelTurn.tokens_sent`` is the tokens of its body once, ``ModelTurn.attempts`` how many
HTTP attempts it took, ``session.last_attempts`` the per-attempt log of the last step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2
from anthropic.types import Message

from reactlab.agent.types import BudgetExceeded, RequestMeter, ToolCall, ToolOutcome
from reactlab.backends import (
    RetryingSession,
    api_key_hint,
    api_result_text,
    http_transport,
    metering_hook,
    parse_arguments,
    protocol_error,
    retry,
    simulated_transport,
    streaming,
    tool_definitions,
)
from reactlab.config.faults import FaultPlan
from reactlab.core.errors import BackendError, ClientError, NetworkError, RequestTimeoutError
from reactlab.simulate import cut_json

if TYPE_CHECKING:
    from reactlab.backends.recording import Recorder, Replay
    from reactlab.config import RunSpec

SIMULATED_BASE_URL = "http://simulado"
DEFAULT_MAX_TOKENS = 500
API_KEY_HINT = retry.API_KEY_HINT
# What a broken 200 can raise inside the SDK or while reading the parsed object.
_CAUGHT = (anthropic.AnthropicError, ValueError, AttributeError, TypeError, KeyError)


def translate_error(exc: Exception, meter: RequestMeter | None = None, *,
                    api_key_hint: str = API_KEY_HINT) -> Exception:
    """SDK and transport errors → BudgetExceeded or BackendError (with a kind).

    ``api_key_hint`` is what a 401 tells the user to check.
    """
    if isinstance(exc, anthropic.APIStatusError):
        return retry.status_error(exc.status_code, str(exc), api_key_hint=api_key_hint)
    if isinstance(exc, anthropic.APITimeoutError):
        return RequestTimeoutError(f"{exc} ({exc.__cause__!r})")
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, BudgetExceeded | BackendError):  # budget; replay divergence
            return cause
        return NetworkError(f"{exc} ({cause!r})")
    return protocol_error(exc)


def read_message(r: Any) -> tuple[list[ToolCall], str, list[dict[str, Any]]]:
    """(calls, text, content blocks to keep) of a Message; ProtocolError if the
    object is not a Messages API answer (an HTML page, JSON without ``content`` ...)."""
    if not isinstance(r, Message):
        raise protocol_error(None, f"expected a Messages API object, got {type(r).__name__}"
                                   f" {str(r)[:80]!r}")
    content = getattr(r, "content", None)
    if not isinstance(content, list):
        raise protocol_error(None, "the response has no `content` list")
    calls = []
    cut_off = getattr(r, "stop_reason", None) == "max_tokens"
    for i, b in enumerate(content):
        if getattr(b, "type", None) == "tool_use":
            if cut_off and i == len(content) - 1 and isinstance(b.input, dict):
                # The answer ran out of tokens inside this call: its input holds only the
                # members complete before the cut, so the call is malformed. `raw` is that
                # input as text cut before its closing brace (what a stream carries).
                calls.append(ToolCall(id=b.id, name=b.name, arguments=None,
                                      raw=cut_json(b.input)))
                continue
            args, raw = parse_arguments(b.input)
            calls.append(ToolCall(id=b.id, name=b.name, arguments=args, raw=raw))
    text = "".join(b.text for b in content if getattr(b, "type", None) == "text")
    dumped = [b.model_dump(exclude_none=True, warnings=False) for b in content]
    return calls, text, dumped


class AnthropicMessagesSession(RetryingSession):
    catch = _CAUGHT

    def __init__(self, spec: RunSpec, *, sleep: Callable[[float], None] | None = None,
                 recorder: Recorder | None = None, replay: Replay | None = None) -> None:
        self.meter = RequestMeter()
        mode = spec.backend_config["mode"]
        if mode not in ("simulated", "live"):
            raise ClientError(f"unsupported mode {mode!r}")
        self.retry_policy = retry.RetryPolicy.from_config(spec.backend_config)
        self.sleep = sleep
        self.last_attempts: list[dict[str, Any]] = []
        self.faults = FaultPlan()
        self.translate = functools.partial(translate_error, api_key_hint=api_key_hint(spec))

        def simulated() -> httpx2.BaseTransport:
            from reactlab.simulate import anthropic_messages as sim

            transport, self.faults = simulated_transport(spec, sim, httpx2)
            return transport

        transport, key = http_transport(spec, httpx2, simulated, recorder=recorder, replay=replay)
        self.stream = bool(spec.backend_config.get("stream", False))
        meter_hook = (streaming.metering_hook if self.stream else metering_hook)(self.meter)
        http = httpx2.Client(transport=transport,
                             event_hooks={"request": [meter_hook]})
        base_url = spec.backend_config.get("base_url") if mode == "live" else SIMULATED_BASE_URL
        self.client = anthropic.Anthropic(api_key=key, base_url=base_url, http_client=http,
                                          max_retries=0)
        self.model = spec.backend_config["model"] if mode == "live" else spec.script["model"]
        self.max_tokens = spec.backend_config.get("max_tokens", DEFAULT_MAX_TOKENS)
        self.history: list[dict[str, Any]] = [{"role": "user", "content": spec.question}]
        self.extra: dict[str, Any] = {}
        if spec.agent["send_tools"]:
            self.extra["tools"] = [{"name": n, "description": d, "input_schema": s}
                                   for n, d, s in tool_definitions(spec)]
        if spec.agent["send_system_prompt"]:
            self.extra["system"] = spec.agent["system_prompt"]
        # Sampling settings of a live backend (the schema allows them nowhere else). The
        # API takes no seed, so a live trial's seed is recorded in its trace only.
        for name in ("temperature", "top_p"):
            if name in spec.backend_config:
                self.extra[name] = spec.backend_config[name]

    def _attempt(self) -> tuple[list[ToolCall], str, list[dict[str, Any]]]:
        if not self.stream:
            r = self.client.messages.create(model=self.model, max_tokens=self.max_tokens,
                                            messages=self.history, **self.extra)
            return read_message(r)
        raw = self.client.messages.with_raw_response.create(
            model=self.model, max_tokens=self.max_tokens, messages=self.history, stream=True,
            **self.extra)
        return read_message(streaming.messages_final(self.client, raw))

    def _remember(self, items: list[dict[str, Any]]) -> None:
        self.history.append({"role": "assistant", "content": items})

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        if not outcomes:
            return
        self.history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": oc.call.id,
             "content": api_result_text(oc), "is_error": oc.is_error}
            for oc in outcomes]})

