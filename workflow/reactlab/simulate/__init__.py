"""Scripted simulators of the provider APIs, at the HTTP boundary.

Each simulator is a plain function ``handler(request) -> response`` for an httpx-style
``MockTransport``: it reads the request body the official SDK serialised, asks a
:class:`ScriptedPolicy` for the next action, and answers in the provider's documented
wire shape (the lesson's shapes, field for field). No state is kept between requests:
like a real API, everything the policy needs is in the conversation it is sent (the
server alone keeps Responses answers for ``previous_response_id``: :class:`ResponseStore`).
The scripted model obeys the request's ``tool_choice`` and parallel-call flags
(:class:`ToolChoice`).

Faults (:mod:`reactlab.config.faults`) are injected *around* a handler by :class:`FaultInjector`,
the one stateful piece: it counts the attempts of a run, and on an attempt that meets a
fault answers (or raises) what the fault says instead of, or from, the policy's answer.
"""

from __future__ import annotations

from reactlab.core.errors import RequestInvalid
from reactlab.simulate.faults import (
    HTML_PAGE,
    FaultInjector,
    Handler,
    Renderer,
    broken_body,
    retry_after_headers,
)
from reactlab.simulate.policy import AUTO, ScriptedPolicy, ToolChoice, answer_fields
from reactlab.simulate.reading import (
    MAX_OUTPUT_DEPTH,
    call_number,
    content_id,
    content_type_refused,
    count_runs,
    drop_member,
    pair_results,
    parse_tool_output,
    read_request,
    read_results,
    request_json,
    text_results,
    tokens_of,
    unstreamed,
)
from reactlab.simulate.store import ResponseStore
from reactlab.simulate.streams import cut_json, partial_object, sse, text_chunks

# The names the simulators, the server and the backends import from the package.
__all__ = [
    "AUTO",
    "HTML_PAGE",
    "MAX_OUTPUT_DEPTH",
    "FaultInjector",
    "Handler",
    "Renderer",
    "RequestInvalid",
    "ResponseStore",
    "ScriptedPolicy",
    "ToolChoice",
    "answer_fields",
    "broken_body",
    "call_number",
    "content_id",
    "content_type_refused",
    "count_runs",
    "cut_json",
    "drop_member",
    "pair_results",
    "parse_tool_output",
    "partial_object",
    "read_request",
    "read_results",
    "request_json",
    "retry_after_headers",
    "sse",
    "text_chunks",
    "text_results",
    "tokens_of",
    "unstreamed",
]
