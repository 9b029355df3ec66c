"""Simulated OpenAI Responses API (``POST /v1/responses``), shapes as in the lesson."""

from __future__ import annotations

import json
from typing import Any

import httpx

from reactlab.errors import ScriptError
from reactlab.simulate import ScriptedPolicy, count_runs, parse_tool_output

_ASSISTANT_TYPES = {"function_call", "reasoning"}


def _is_assistant(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get("type") in _ASSISTANT_TYPES:
        return True
    return item.get("role") == "assistant"


def _error(status: int, kind: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {
        "message": message, "type": kind, "param": None, "code": None}})


def respond(policy: ScriptedPolicy, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The simulated answer to one request body: (status, JSON body)."""
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else (items or [])
    results = [parse_tool_output(x.get("output")) for x in items
               if isinstance(x, dict) and x.get("type") == "function_call_output"]
    turn = count_runs([_is_assistant(x) for x in items])
    model = body.get("model")
    try:
        action = policy.act(model, turn, results)
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
