"""Scripted simulators of the provider APIs, at the HTTP boundary.

Each simulator is a plain function ``handler(request) -> response`` for an httpx-style
``MockTransport``: it reads the request body the official SDK serialised, asks a
:class:`ScriptedPolicy` for the next action, and answers in the provider's documented
wire shape (the lesson's shapes, field for field). No state is kept between requests:
like a real API, everything the policy needs is in the conversation it is sent.

Faults (:mod:`reactlab.config.faults`) are injected *around* a handler by :class:`FaultInjector`,
the one stateful piece: it counts the attempts of a run, and on an attempt that meets a
fault answers (or raises) what the fault says instead of, or from, the policy's answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reactlab.config.faults import Fault, FaultPlan
from reactlab.config.scripts import Action, Script

HTML_PAGE = ("<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>"
             "<h1>Please sign in to continue</h1>"
             "<p>You are being redirected by the network proxy.</p></body></html>\n")


@dataclass(frozen=True)
class ScriptedPolicy:
    """Scripts by model name, and the task they play."""

    scripts: Mapping[str, Script]
    params: Mapping[str, Any]
    question: str

    def act(self, model: str, turn: int, results: Sequence[Mapping[str, Any]],
            seen: str = "") -> Action:
        """Raises KeyError for an unknown model, ScriptError when the script cannot go on."""
        return self.scripts[model].action(turn, self.params, self.question, results, seen)


def parse_tool_output(text: Any) -> Any:
    """A tool result as the simulated model reads it back (JSON, else the raw text).

    Output marked as data by the delimiting defence is unwrapped first: the model can
    still read the data, only the instructions inside it are defused.
    """
    import json

    from reactlab.tools.messages import unwrap

    if not isinstance(text, str):
        return text
    try:
        return json.loads(unwrap(text))
    except ValueError:
        return {"texto": text}


def count_runs(flags: Sequence[bool]) -> int:
    """Number of maximal runs of True in ``flags`` (assistant turns in a conversation)."""
    runs, previous = 0, False
    for flag in flags:
        if flag and not previous:
            runs += 1
        previous = flag
    return runs


def request_json(content: bytes) -> Any:
    """The JSON of a request body, or None when it is not JSON."""
    try:
        return json.loads(content)
    except ValueError:
        return None


Handler = Callable[[Any], Any]
Renderer = Callable[[Fault, Any, Handler], Any]


class FaultInjector:
    """A handler wrapped with a run's fault plan.

    ``step_of(body)`` is the loop step of a request body (1 + assistant turns in it);
    ``render(fault, request, handler)`` builds the faulty response or raises.
    """

    def __init__(self, handle: Handler, plan: FaultPlan, step_of: Callable[[Any], int],
                 render: Renderer) -> None:
        self.handle = handle
        self.plan = plan
        self.step_of = step_of
        self.render = render

    def __call__(self, request: Any) -> Any:
        body = request_json(request.content)
        fault = self.plan.next(self.step_of(body) if isinstance(body, dict) else 0)
        if fault is None:
            return self.handle(request)
        return self.render(fault, request, self.handle)


def retry_after_headers(fault: Fault) -> dict[str, str]:
    """``retry-after`` (whole seconds, rounded up) and ``retry-after-ms`` for a fault."""
    if fault.retry_after is None:
        return {}
    import math

    return {"retry-after": str(math.ceil(fault.retry_after)),
            "retry-after-ms": f"{fault.retry_after * 1000:.0f}"}


def broken_body(fault: Fault, payload_json: bytes, drop: str) -> tuple[bytes, str]:
    """(content, content type) of a protocol-broken 200 built from the real answer."""
    if fault.body == "truncated":
        return payload_json[: len(payload_json) // 2], "application/json"
    if fault.body == "html":
        return HTML_PAGE.encode(), "text/html; charset=utf-8"
    if fault.body == "missing_fields":
        payload = json.loads(payload_json)
        payload.pop(drop, None)
        return json.dumps(payload).encode(), "application/json"
    return b"", "application/json"  # empty
