"""Simulated OpenAI Responses API (``POST /v1/responses``), shapes as in the lesson."""

from __future__ import annotations

import json
from typing import Any

import httpx

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

_ASSISTANT_TYPES = {"function_call", "reasoning"}


def _is_assistant(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get("type") in _ASSISTANT_TYPES:
        return True
    return item.get("role") == "assistant"


def _error(status: int, kind: str, message: str, *, code: str | None = None,
           headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers, json={"error": {
        "message": message, "type": kind, "param": None, "code": code}})


def _items(body: dict[str, Any]) -> list[Any]:
    items = body.get("input")
    return [{"role": "user", "content": items}] if isinstance(items, str) else (items or [])


def step_of(body: dict[str, Any]) -> int:
    """The loop step of a request: 1 + the assistant turns its input holds."""
    return count_runs([_is_assistant(x) for x in _items(body)]) + 1


def respond(policy: ScriptedPolicy, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The simulated answer to one request body: (status, JSON body)."""
    items = _items(body)
    outputs = [x.get("output") for x in items
               if isinstance(x, dict) and x.get("type") == "function_call_output"]
    results = [parse_tool_output(o) for o in outputs]
    seen = "\n".join(o for o in outputs if isinstance(o, str))
    turn = count_runs([_is_assistant(x) for x in items])
    model = body.get("model")
    try:
        action = policy.act(model, turn, results, seen)
    except KeyError:
        return 404, {"error": {"message": f"The model `{model}` does not exist",
                               "type": "invalid_request_error", "param": "model",
                               "code": "model_not_found"}}
    except ScriptError as exc:
        return 400, {"error": {"message": str(exc), "type": "invalid_request_error",
                               "param": None, "code": "script_error"}}
    n = len(results)
    if action.text is not None:
        output = [{"type": "message", "id": "msg_1", "role": "assistant",
                   "status": "completed", "content": [
                       {"type": "output_text", "text": action.text, "annotations": []}]}]
    else:
        output = [{"type": "function_call", "id": f"fc_{n}_{i}", "call_id": f"call_{n}_{i}",
                   "name": c.name, "arguments": c.arguments_text(), "status": "completed"}
                  for i, c in enumerate(action.calls)]
    return 200, {"id": "resp_sim", "object": "response", "created_at": 0,
                 "status": "completed", "model": model, "output": output,
                 "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


def handler(policy: ScriptedPolicy):
    """An ``httpx.MockTransport`` handler serving ``policy``."""

    def handle(request: httpx.Request) -> httpx.Response:
        try:
            body = json.loads(request.content)
        except ValueError:
            return _error(400, "invalid_request_error", "request body is not JSON")
        status, payload = respond(policy, body)
        return httpx.Response(status, json=payload)

    return handle


# The error the real API sends for each status: (type, code, message).
_STATUS_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request (simulated fault)."),
    401: ("invalid_request_error", "invalid_api_key",
          "Incorrect API key provided (simulated fault)."),
    403: ("invalid_request_error", "unsupported_country_region_territory",
          "Country, region, or territory not supported (simulated fault)."),
    404: ("invalid_request_error", "model_not_found",
          "The model does not exist or you do not have access to it (simulated fault)."),
    409: ("invalid_request_error", None, "Conflict (simulated fault)."),
    422: ("invalid_request_error", None, "Unprocessable entity (simulated fault)."),
    429: ("requests", "rate_limit_exceeded",
          "Rate limit reached for requests (simulated fault)."),
    500: ("server_error", None,
          "The server had an error while processing your request (simulated fault)."),
    503: ("server_error", None,
          "The engine is currently overloaded, please try again later (simulated fault)."),
}


def fault_response(fault: Fault, request: httpx.Request, handle: Handler) -> httpx.Response:
    """What the simulated API answers (or the transport raises) on a faulty attempt."""
    if fault.raises == "connect":
        raise httpx.ConnectError("simulated fault: connection refused", request=request)
    if fault.raises == "timeout":
        raise httpx.ReadTimeout("simulated fault: read timed out", request=request)
    if fault.status is not None:
        kind, code, message = _STATUS_ERRORS.get(fault.status, (
            "server_error" if fault.status >= 500 else "invalid_request_error", None,
            f"HTTP {fault.status} (simulated fault)."))
        return _error(fault.status, kind, message, code=code,
                      headers=retry_after_headers(fault))
    real = handle(request)
    content, ctype = broken_body(fault, real.read(), "output")
    return httpx.Response(200, headers={"content-type": ctype}, content=content)


def with_faults(handle: Handler, plan: FaultPlan) -> FaultInjector:
    """``handle`` behind the faults of ``plan`` (which counts this run's attempts)."""
    return FaultInjector(handle, plan, step_of, fault_response)
