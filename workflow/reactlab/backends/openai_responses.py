"""OpenAI Responses API adapter (official ``openai`` SDK, ``httpx`` transport)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import openai

from reactlab.backends import metering_hook, parse_arguments, result_text, tool_definitions
from reactlab.errors import BackendError
from reactlab.types import BudgetExceeded, ModelTurn, RequestMeter, ToolCall, ToolOutcome

if TYPE_CHECKING:
    from reactlab.config import RunSpec

SIMULATED_BASE_URL = "http://simulado/v1"


def _transport(spec: RunSpec) -> httpx.BaseTransport:
    from reactlab.simulate import ScriptedPolicy
    from reactlab.simulate.openai_responses import handler

    policy = ScriptedPolicy({spec.script["model"]: spec.script_obj()}, spec.params, spec.question)
    return httpx.MockTransport(handler(policy))


def translate_error(exc: Exception, meter: RequestMeter) -> Exception:
    """SDK and transport errors → BudgetExceeded or BackendError (with a kind)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        kind = "rate_limit" if status == 429 else "server" if status >= 500 else "client"
        msg = str(exc)
        if status == 401:
            msg += " (check the API key)"
        return BackendError(kind, msg, status=status)
    if isinstance(exc, openai.APITimeoutError):
        return BackendError("timeout", str(exc))
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, BudgetExceeded):
            return cause
        return BackendError("connection", f"{exc} ({cause!r})")
    return BackendError("protocol", f"unexpected response: {exc!r}")


class OpenAIResponsesSession:
    def __init__(self, spec: RunSpec) -> None:
        self.meter = RequestMeter()
        if spec.backend_config["mode"] != "simulated":
            raise BackendError("client", f"unsupported mode {spec.backend_config['mode']!r}")
        http = httpx.Client(transport=_transport(spec),
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

    def request(self, budget_left: int | None) -> ModelTurn:
        self.meter.limit = budget_left
        try:
            r = self.client.responses.create(model=self.model, input=self.history, **self.extra)
            calls = []
            for o in r.output:
                if o.type == "function_call":
                    args, raw = parse_arguments(o.arguments)
                    calls.append(ToolCall(id=o.call_id, name=o.name, arguments=args, raw=raw))
            text = r.output_text
            dumped = [o.model_dump(exclude_none=True) for o in r.output]
        except BudgetExceeded:
            raise
        except (openai.OpenAIError, ValueError, AttributeError, TypeError, KeyError) as exc:
            raise translate_error(exc, self.meter) from exc
        self.history += dumped
        counts = self.meter.take()
        return ModelTurn(text=text, calls=tuple(calls), tokens_sent=sum(counts),
                         attempts=len(counts))

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        for oc in outcomes:
            self.history.append({"type": "function_call_output", "call_id": oc.call.id,
                                 "output": result_text(oc.result)})



