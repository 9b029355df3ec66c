"""Fault injection around a simulator's handler (:mod:`reactlab.config.faults`): the
stateful :class:`FaultInjector` and the pieces of a faulty answer."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from reactlab.config.faults import Fault, FaultPlan
from reactlab.simulate.reading import request_json

HTML_PAGE = ("<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>"
             "<h1>Please sign in to continue</h1>"
             "<p>You are being redirected by the network proxy.</p></body></html>\n")

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
