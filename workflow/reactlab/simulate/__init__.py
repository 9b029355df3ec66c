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
from dataclasses import dataclass, field
from typing import Any

from reactlab.config.faults import Fault, FaultPlan
from reactlab.config.scripts import Action, Script
from reactlab.core.errors import RequestInvalid, UsageError

HTML_PAGE = ("<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>"
             "<h1>Please sign in to continue</h1>"
             "<p>You are being redirected by the network proxy.</p></body></html>\n")


@dataclass(frozen=True)
class ScriptedPolicy:
    """Scripts by model name, and the task they play."""

    scripts: Mapping[str, Script]
    params: Mapping[str, Any]
    question: str
    #: The model name an answer gives for a requested name (default: the name itself);
    #: the server answers an alias with the script that plays, as a real API would.
    answer_names: Mapping[str, str] = field(default_factory=dict)

    def act(self, model: str, turn: int, results: Sequence[Mapping[str, Any]],
            seen: str = "") -> Action:
        """Raises KeyError for an unknown model, ScriptError when the script cannot go on."""
        return self.scripts[model].action(turn, self.params, self.question, results, seen)

    def resolve(self, model: str) -> str:
        """The answer's ``model`` for a request for ``model`` (KeyError when not served)."""
        self.scripts[model]
        return self.answer_names.get(model, model)


#: Deepest JSON nesting a tool output may have for the simulated model to read it as JSON;
#: deeper output is read as text (a repr of it in an error message would recurse).
MAX_OUTPUT_DEPTH = 64


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def parse_tool_output(text: Any) -> Any:
    """A tool result as the simulated model reads it back (JSON, else the raw text).

    Output marked as data by the delimiting defence is unwrapped first: the model can
    still read the data, only the instructions inside it are defused.
    """
    from reactlab.tools.messages import unwrap

    if not isinstance(text, str):
        return text
    try:
        value = json.loads(unwrap(text))
    except (ValueError, RecursionError):
        return {"texto": text}
    return value if _depth(value) <= MAX_OUTPUT_DEPTH else {"texto": text}


def read_request(raw: bytes, content_type: str | None) -> dict[str, Any]:
    """The JSON object of a request body; RequestInvalid for anything else.

    A declared content type must be ``application/json`` (a ``charset`` other than UTF-8
    is refused; a request without the header is read as JSON), and the body UTF-8 JSON:
    ``json.loads`` would otherwise guess UTF-16/32 from the bytes. JSON nested past
    Python's recursion limit is refused, not crashed on.
    """
    media, _, params = (content_type or "application/json").partition(";")
    if media.strip().lower() != "application/json":
        raise RequestInvalid("Content-Type must be application/json (got "
                             f"{(content_type or 'none')[:80]!r})", status=400,
                             code="invalid_content_type")
    charset = params.strip().lower().removeprefix("charset=").strip('"')
    if params.strip() and charset not in ("utf-8", "utf8"):
        raise RequestInvalid(f"unsupported charset {charset[:40]!r}: the body must be UTF-8",
                             code="invalid_content_type")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestInvalid(f"the request body is not valid UTF-8 (byte {exc.start})",
                             code="invalid_json") from None
    try:
        body = json.loads(text)
    except RecursionError:
        raise RequestInvalid("the request body is nested too deeply",
                             code="invalid_json") from None
    except ValueError:
        raise RequestInvalid("request body is not JSON", code="invalid_json") from None
    if not isinstance(body, dict):
        raise RequestInvalid("the request body must be a JSON object",
                             code="invalid_type")
    return body


def pair_results(call_ids: Sequence[str], outputs: Sequence[tuple[str, str]],
                 what: str) -> list[str]:
    """Tool outputs in the order of the calls they answer, matched by id.

    ``outputs`` is (id, text) in conversation order. An id that matches no call, or a
    second output for the same call, is RequestInvalid; a call without an output yet is
    skipped (the client has not run it). ``what`` names the id field in messages.
    """
    known = set(call_ids)
    by_id: dict[str, str] = {}
    for i, (cid, text) in enumerate(outputs):
        if cid not in known:
            raise RequestInvalid(f"{what} {cid[:80]!r} (result {i}) matches no tool call "
                                 "in the conversation", code="invalid_value")
        if cid in by_id:
            raise RequestInvalid(f"{what} {cid[:80]!r} has more than one result",
                                 code="invalid_value")
        by_id[cid] = text
    return [by_id[c] for c in dict.fromkeys(call_ids) if c in by_id]


def text_chunks(text: str, size: int = 24) -> list[str]:
    """The deltas a streamed text is sent in: fixed-size pieces (deterministic)."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def sse(events: Sequence[Mapping[str, Any]]) -> bytes:
    """Server-sent events: ``event: TYPE`` and a compact JSON ``data:`` line each."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n"
                    .encode() for e in events)


_MEMBERS = (b',"stream":true', b'"stream":true,', b', "stream": true', b'"stream": true, ')


def unstreamed(content: bytes) -> bytes:
    """``content`` without its top-level ``"stream": true`` member (unchanged without one):
    what a client sends for the same request unstreamed. Usage (and a trace) counts that.

    Each textual occurrence is tried until removing it leaves exactly the other members,
    so a ``"stream":true`` inside a string or a nested object is never the one removed.
    """
    try:
        body = json.loads(content)
    except ValueError:
        return content
    if not isinstance(body, dict) or body.get("stream") is not True:
        return content
    expected = {k: v for k, v in body.items() if k != "stream"}
    for member in _MEMBERS:
        at = content.find(member)
        while at >= 0:
            candidate = content[:at] + content[at + len(member):]
            try:
                if json.loads(candidate) == expected:
                    return candidate
            except ValueError:
                pass
            at = content.find(member, at + 1)
    raise UsageError("cannot locate the request body's \"stream\" member")


def tokens_of(text: str) -> int:
    """o200k_base tokens of ``text`` (the count the trace uses for request bodies)."""
    from reactlab.core.tokens import count

    return count(text)


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
