"""Simulated Anthropic Messages API (``POST /v1/messages``), shapes as in the lesson."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from reactlab.config.faults import Fault, FaultPlan
from reactlab.core.errors import ScriptError
from reactlab.simulate import (
    FaultInjector,
    Handler,
    ScriptedPolicy,
    broken_body,
    count_runs,
    parse_tool_output,
    retry_after_headers,
)


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def step_of(body: dict[str, Any]) -> int:
    """The loop step of a request: 1 + the assistant turns its messages hold."""
    return count_runs([m.get("role") == "assistant" for m in _messages(body)]) + 1


def respond(policy: ScriptedPolicy, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The simulated answer to one request body: (status, JSON body)."""
    messages = _messages(body)
    outputs = [b.get("content") for m in messages
               if m.get("role") == "user" and isinstance(m.get("content"), list)
               for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    results = [parse_tool_output(o) for o in outputs]
    seen = "\n".join(o for o in outputs if isinstance(o, str))
    turn = count_runs([m.get("role") == "assistant" for m in messages])
    model = body.get("model")
    try:
        action = policy.act(model, turn, results, seen)
    except KeyError:
        return 404, {"type": "error", "error": {"type": "not_found_error",
                                                "message": f"model: {model}"}}
    except ScriptError as exc:
        return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                "message": str(exc)}}
    n = len(results)
    if action.text is not None:
        content, stop = [{"type": "text", "text": action.text}], "end_turn"
    else:
        content = []
        for i, c in enumerate(action.calls):
            args: Any = c.arguments if c.raw_arguments is None else c.raw_arguments
            content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c.name,
                            "input": args})
        stop = "tool_use"
    return 200, {"id": "msg_sim", "type": "message", "role": "assistant", "model": model,
                 "content": content, "stop_reason": stop, "stop_sequence": None,
                 "usage": {"input_tokens": 0, "output_tokens": 0}}


def handler(policy: ScriptedPolicy):
    """An ``httpx2.MockTransport`` handler serving ``policy``."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        try:
            body = json.loads(request.content)
        except ValueError:
            return httpx2.Response(400, json={"type": "error", "error": {
                "type": "invalid_request_error", "message": "request body is not JSON"}})
        status, payload = respond(policy, body)
        return httpx2.Response(status, json=payload)

    return handle


# The documented error type of each status (the Messages API's error shapes).
_STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                 402: "billing_error", 403: "permission_error", 404: "not_found_error",
                 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                 504: "timeout_error", 529: "overloaded_error"}
_MESSAGES = {"invalid_request_error": "Invalid request", "authentication_error":
             "invalid x-api-key", "billing_error": "Billing issue",
             "permission_error": "Your API key does not have permission to use the specified "
             "resource", "not_found_error": "Not found", "request_too_large":
             "Request exceeds the maximum allowed number of bytes", "rate_limit_error":
             "Number of requests has exceeded your rate limit", "api_error":
             "Internal server error", "timeout_error": "Request timed out",
             "overloaded_error": "Overloaded"}


def error_type(status: int) -> str:
    return _STATUS_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def fault_response(fault: Fault, request: httpx2.Request, handle: Handler) -> httpx2.Response:
    """What the simulated API answers (or the transport raises) on a faulty attempt."""
    if fault.raises == "connect":
        raise httpx2.ConnectError("simulated fault: connection refused", request=request)
    if fault.raises == "timeout":
        raise httpx2.ReadTimeout("simulated fault: read timed out", request=request)
    if fault.status is not None:
        kind = error_type(fault.status)
        return httpx2.Response(
            fault.status, headers={"request-id": "req_sim", **retry_after_headers(fault)},
            json={"type": "error", "error": {
                "type": kind, "message": f"{_MESSAGES[kind]} (simulated fault)"}})
    real = handle(request)
    content, ctype = broken_body(fault, real.read(), "content")
    return httpx2.Response(200, headers={"content-type": ctype}, content=content)


def with_faults(handle: Handler, plan: FaultPlan) -> FaultInjector:
    """``handle`` behind the faults of ``plan`` (which counts this run's attempts)."""
    return FaultInjector(handle, plan, step_of, fault_response)
