"""Simulated Anthropic Messages API (``POST /v1/messages``), shapes as in the lesson."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from reactlab.errors import ScriptError
from reactlab.simulate import ScriptedPolicy, count_runs, parse_tool_output


def respond(policy: ScriptedPolicy, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The simulated answer to one request body: (status, JSON body)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    results = [parse_tool_output(b.get("content")) for m in messages
               if m.get("role") == "user" and isinstance(m.get("content"), list)
               for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    turn = count_runs([m.get("role") == "assistant" for m in messages])
    model = body.get("model")
    try:
        action = policy.act(model, turn, results)
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
