"""Anthropic Messages API adapter (official ``anthropic`` 2.x SDK, ``httpx2`` transport)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anthropic
import httpx2

from reactlab.backends import metering_hook, parse_arguments, result_text, tool_definitions
from reactlab.errors import BackendError
from reactlab.types import BudgetExceeded, ModelTurn, RequestMeter, ToolCall, ToolOutcome

if TYPE_CHECKING:
    from reactlab.config import RunSpec

SIMULATED_BASE_URL = "http://simulado"
DEFAULT_MAX_TOKENS = 500


def _transport(spec: RunSpec) -> httpx2.BaseTransport:
    from reactlab.simulate import ScriptedPolicy
    from reactlab.simulate.anthropic_messages import handler

    policy = ScriptedPolicy({spec.script["model"]: spec.script_obj()}, spec.params, spec.question)
    return httpx2.MockTransport(handler(policy))


def translate_error(exc: Exception, meter: RequestMeter) -> Exception:
    """SDK and transport errors → BudgetExceeded or BackendError (with a kind)."""
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind = ("rate_limit" if status == 429 else
                "server" if status >= 500 or status == 529 else "client")
        msg = str(exc)
        if status == 401:
            msg += " (check the API key)"
        return BackendError(kind, msg, status=status)
    if isinstance(exc, anthropic.APITimeoutError):
        return BackendError("timeout", str(exc))
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, BudgetExceeded):
            return cause
        return BackendError("connection", f"{exc} ({cause!r})")
    return BackendError("protocol", f"unexpected response: {exc!r}")


class AnthropicMessagesSession:
    def __init__(self, spec: RunSpec) -> None:
        self.meter = RequestMeter()
        if spec.backend_config["mode"] != "simulated":
            raise BackendError("client", f"unsupported mode {spec.backend_config['mode']!r}")
        http = httpx2.Client(transport=_transport(spec),
                             event_hooks={"request": [metering_hook(self.meter)]})
        self.client = anthropic.Anthropic(api_key="sk-simulado", base_url=SIMULATED_BASE_URL,
                                          http_client=http, max_retries=0)
        self.model = spec.script["model"]
        self.max_tokens = spec.backend_config.get("max_tokens", DEFAULT_MAX_TOKENS)
        self.history: list[dict[str, Any]] = [{"role": "user", "content": spec.question}]
        self.extra: dict[str, Any] = {}
        if spec.agent["send_tools"]:
            self.extra["tools"] = [{"name": n, "description": d, "input_schema": s}
                                   for n, d, s in tool_definitions(spec)]
        if spec.agent["send_system_prompt"]:
            self.extra["system"] = spec.agent["system_prompt"]

    def request(self, budget_left: int | None) -> ModelTurn:
        self.meter.limit = budget_left
        try:
            r = self.client.messages.create(model=self.model, max_tokens=self.max_tokens,
                                            messages=self.history, **self.extra)
            calls = []
            for b in r.content:
                if b.type == "tool_use":
                    args, raw = parse_arguments(b.input)
                    calls.append(ToolCall(id=b.id, name=b.name, arguments=args, raw=raw))
            text = "".join(b.text for b in r.content if b.type == "text")
            dumped = [b.model_dump(exclude_none=True, warnings=False) for b in r.content]
        except BudgetExceeded:
            raise
        except (anthropic.AnthropicError, ValueError, AttributeError, TypeError,
                KeyError) as exc:
            raise translate_error(exc, self.meter) from exc
        self.history.append({"role": "assistant", "content": dumped})
        counts = self.meter.take()
        return ModelTurn(text=text, calls=tuple(calls), tokens_sent=sum(counts),
                         attempts=len(counts))

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        if not outcomes:
            return
        self.history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": oc.call.id,
             "content": result_text(oc.result), "is_error": oc.is_error}
            for oc in outcomes]})
