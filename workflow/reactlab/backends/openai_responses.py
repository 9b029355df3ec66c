"""OpenAI Responses API adapter (official ``openai`` SDK, ``httpx`` transport).

Modes: ``simulated`` (the scripted simulator behind an ``httpx.MockTransport``) and
``live`` (a real ``httpx.HTTPTransport``; the model id is ``backend_config["model"]``,
the key comes from the environment variable ``backend_config["api_key_env"]`` names, the
URL is ``backend_config["base_url"]`` or the SDK's default). With ``base_url`` the same
adapter talks to any OpenAI-compatible server that implements ``POST /v1/responses``
(vLLM, llama.cpp's server, Ollama): ``base_url: http://localhost:8000/v1`` and any
non-empty key. Every attempt goes through :mod:`reactlab.backends.recording` (recorded when the
caller asks for it; replayed instead of sent with ``replay``).

Retries are the project's own (:mod:`reactlab.backends.retry`, the same loop as the anthropic
adapter); the SDK client keeps ``max_retries=0``. Every request is one logical step:
``ModelTurn.tokens_sent`` is the tokens of its body once, ``ModelTurn.attempts`` how many
HTTP attempts it took, ``session.last_attempts`` the per-attempt log of the last step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import openai
from openai.types.responses import Response

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

if TYPE_CHECKING:
    from reactlab.backends.recording import Recorder, Replay
    from reactlab.config import RunSpec

SIMULATED_BASE_URL = "http://simulado/v1"
API_KEY_HINT = retry.API_KEY_HINT
# What a broken 200 can raise inside the SDK or while reading the parsed object.
_CAUGHT = (openai.OpenAIError, ValueError, AttributeError, TypeError, KeyError)


def translate_error(exc: Exception, meter: RequestMeter | None = None, *,
                    api_key_hint: str = API_KEY_HINT) -> Exception:
    """SDK and transport errors → BudgetExceeded or BackendError (with a kind).

    ``api_key_hint`` is what a 401 tells the user to check.
    """
    if isinstance(exc, openai.APIStatusError):
        return retry.status_error(exc.status_code, str(exc), api_key_hint=api_key_hint)
    if isinstance(exc, openai.APITimeoutError):
        return RequestTimeoutError(f"{exc} ({exc.__cause__!r})")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, BudgetExceeded | BackendError):  # budget; replay divergence
            return cause
        return NetworkError(f"{exc} ({cause!r})")
    return protocol_error(exc)


def read_response(r: Any) -> tuple[list[ToolCall], str, list[dict[str, Any]]]:
    """(calls, text, output items to keep) of a Response; ProtocolError if the
    object is not a Responses API answer (an HTML page, JSON without ``output`` ...)."""
    if not isinstance(r, Response):
        raise protocol_error(None, f"expected a Responses API object, got {type(r).__name__}"
                                   f" {str(r)[:80]!r}")
    output = getattr(r, "output", None)
    if not isinstance(output, list):
        raise protocol_error(None, "the response has no `output` list")
    calls = []
    for o in output:
        if getattr(o, "type", None) == "function_call":
            args, raw = parse_arguments(o.arguments)
            calls.append(ToolCall(id=o.call_id, name=o.name, arguments=args, raw=raw))
    text = r.output_text
    dumped = [o.model_dump(exclude_none=True) for o in output]
    return calls, text, dumped


class OpenAIResponsesSession(RetryingSession):
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

        def simulated() -> httpx.BaseTransport:
            from reactlab.simulate import openai_responses as sim

            transport, self.faults = simulated_transport(spec, sim, httpx)
            return transport

        transport, key = http_transport(spec, httpx, simulated, recorder=recorder, replay=replay)
        self.stream = bool(spec.backend_config.get("stream", False))
        meter_hook = (streaming.metering_hook if self.stream else metering_hook)(self.meter)
        http = httpx.Client(transport=transport,
                            event_hooks={"request": [meter_hook]})
        base_url = spec.backend_config.get("base_url") if mode == "live" else SIMULATED_BASE_URL
        self.client = openai.OpenAI(api_key=key, base_url=base_url, http_client=http,
                                    max_retries=0)
        self.model = spec.backend_config["model"] if mode == "live" else spec.script["model"]
        self.history: list[Any] = [{"role": "user", "content": spec.question}]
        self.extra: dict[str, Any] = {}
        if spec.agent["send_tools"]:
            self.extra["tools"] = [
                {"type": "function", "name": n, "description": d, "parameters": s}
                for n, d, s in tool_definitions(spec)
            ]
        if spec.agent["send_system_prompt"]:
            self.extra["instructions"] = spec.agent["system_prompt"]
        # Sampling settings of a live backend (the schema allows them nowhere else). The
        # API takes no seed, so a live trial's seed is recorded in its trace only.
        for name in ("temperature", "top_p"):
            if name in spec.backend_config:
                self.extra[name] = spec.backend_config[name]

    def _attempt(self) -> tuple[list[ToolCall], str, list[dict[str, Any]]]:
        if not self.stream:
            r = self.client.responses.create(model=self.model, input=self.history, **self.extra)
            return read_response(r)
        raw = self.client.responses.with_raw_response.create(
            model=self.model, input=self.history, stream=True, **self.extra)
        return read_response(streaming.responses_final(self.client, raw))

    def _remember(self, items: list[dict[str, Any]]) -> None:
        self.history += items

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        for oc in outcomes:
            self.history.append({"type": "function_call_output", "call_id": oc.call.id,
                                 "output": api_result_text(oc)})

