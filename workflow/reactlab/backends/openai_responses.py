"""OpenAI Responses API adapter (official ``openai`` SDK, ``httpx`` transport).

Retries are the project's own (:mod:`reactlab.retry`, the same loop as the anthropic
adapter); the SDK client keeps ``max_retries=0``. Every request is one logical step:
``ModelTurn.tokens_sent`` is the tokens of its body once, ``ModelTurn.attempts`` how many
HTTP attempts it took, ``session.last_attempts`` the per-attempt log of the last step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import openai
from openai.types.responses import Response

from reactlab import retry
from reactlab.backends import (
    metering_hook,
    parse_arguments,
    protocol_error,
    tool_definitions,
)
from reactlab.defences import tool_message
from reactlab.errors import BackendError
from reactlab.faults import FaultPlan
from reactlab.types import BudgetExceeded, ModelTurn, RequestMeter, ToolCall, ToolOutcome

if TYPE_CHECKING:
    from reactlab.config import RunSpec

SIMULATED_BASE_URL = "http://simulado/v1"
API_KEY_HINT = retry.API_KEY_HINT
# What a broken 200 can raise inside the SDK or while reading the parsed object.
_CAUGHT = (openai.OpenAIError, ValueError, AttributeError, TypeError, KeyError)


def _transport(spec: RunSpec) -> tuple[httpx.BaseTransport, FaultPlan]:
    from reactlab.simulate import ScriptedPolicy
    from reactlab.simulate import openai_responses as sim

    policy = ScriptedPolicy({spec.script["model"]: spec.script_obj()}, spec.params, spec.question)
    plan = FaultPlan.from_script(spec.script)
    handle = sim.handler(policy)
    return httpx.MockTransport(sim.with_faults(handle, plan) if plan else handle), plan


def translate_error(exc: Exception, meter: RequestMeter | None = None) -> Exception:
    """SDK and transport errors → BudgetExceeded or BackendError (with a kind)."""
    if isinstance(exc, openai.APIStatusError):
        return retry.status_error(exc.status_code, str(exc), api_key_hint=API_KEY_HINT)
    if isinstance(exc, openai.APITimeoutError):
        return BackendError("timeout", f"{exc} ({exc.__cause__!r})")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, BudgetExceeded):
            return cause
        return BackendError("connection", f"{exc} ({cause!r})")
    return protocol_error(exc)


def read_response(r: Any) -> tuple[list[ToolCall], str, list[dict[str, Any]]]:
    """(calls, text, output items to keep) of a Response; BackendError("protocol") if the
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


class OpenAIResponsesSession:
    def __init__(self, spec: RunSpec, *, sleep: Callable[[float], None] | None = None) -> None:
        self.meter = RequestMeter()
        if spec.backend_config["mode"] != "simulated":
            raise BackendError("client", f"unsupported mode {spec.backend_config['mode']!r}")
        self.retry_policy = retry.RetryPolicy.from_config(spec.backend_config)
        self.sleep = sleep
        self.last_attempts: list[dict[str, Any]] = []
        transport, self.faults = _transport(spec)
        http = httpx.Client(transport=transport,
                            event_hooks={"request": [metering_hook(self.meter)]})
        self.client = openai.OpenAI(api_key="sk-simulado", base_url=SIMULATED_BASE_URL,
                                    http_client=http, max_retries=0)
        self.model = spec.script["model"]
        self.history: list[Any] = [{"role": "user", "content": spec.question}]
        self.extra: dict[str, Any] = {}
        if spec.agent["send_tools"]:
            self.extra["tools"] = [
                {"type": "function", "name": n, "description": d, "parameters": s}
                for n, d, s in tool_definitions(spec)
            ]
        if spec.agent["send_system_prompt"]:
            self.extra["instructions"] = spec.agent["system_prompt"]

    def _attempt(self) -> tuple[list[ToolCall], str, list[dict[str, Any]]]:
        r = self.client.responses.create(model=self.model, input=self.history, **self.extra)
        return read_response(r)

    def request(self, budget_left: int | None) -> ModelTurn:
        self.meter.limit = budget_left
        self.meter.take()
        self.last_attempts = []
        try:
            (calls, text, dumped), self.last_attempts = retry.call(
                self._attempt, translate_error, self.retry_policy, catch=_CAUGHT, sleep=self.sleep)
        except BackendError as exc:
            self.last_attempts = exc.history  # type: ignore[attr-defined]
            raise
        finally:
            counts = self.meter.take()
        self.history += dumped
        return ModelTurn(text=text, calls=tuple(calls), tokens_sent=counts[-1],
                         attempts=len(self.last_attempts))

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        for oc in outcomes:
            self.history.append({"type": "function_call_output", "call_id": oc.call.id,
                                 "output": _sent(oc)})


def _sent(oc: ToolOutcome) -> str:
    """A tool result as this API gets it back: ``json.dumps`` defaults (ASCII escapes),
    marked as data when the delimiting defence is on."""
    return tool_message(oc.result, delimit=oc.delimit, ensure_ascii=True)
