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

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reactlab.config.faults import Fault, FaultPlan
from reactlab.config.scripts import Action, Script, ScriptedCall
from reactlab.core.errors import RequestInvalid as RequestInvalid  # re-exported for the simulators
from reactlab.core.errors import UsageError

HTML_PAGE = ("<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>"
             "<h1>Please sign in to continue</h1>"
             "<p>You are being redirected by the network proxy.</p></body></html>\n")


#: The answer tool of agents with a submit step (Inspect's ``react()``): when a request
#: offers a tool of this name and tool calls are allowed, the scripted model gives an
#: answer step as one call to it, ``{"answer": text}`` (docs/simulators.md).
ANSWER_TOOL = "submit"


@dataclass(frozen=True)
class ScriptedPolicy:
    """Scripts by model name, and the task they play."""

    scripts: Mapping[str, Script]
    params: Mapping[str, Any]
    question: str
    #: The model name an answer gives for a requested name (default: the name itself);
    #: the server answers an alias with the script that plays, as a real API would.
    answer_names: Mapping[str, str] = field(default_factory=dict)

    def act(self, model: str, turn: int, results: Sequence[Any], seen: str = "",
            choice: ToolChoice | None = None, calls_made: int = 0) -> Action:
        """The scripted model's action on assistant turn ``turn``, obeying ``choice``.

        ``calls_made`` is the number of tool calls the assistant already made in the
        conversation (what a script played one call per turn has reached). Raises
        KeyError for an unknown model, ScriptError when the script cannot go on.
        """
        script = self.scripts[model]
        choice = choice or AUTO
        # A conversation that carries fewer tool results than the calls made so far (by the
        # assistant, or by the script's steps before this turn: a client that keeps the
        # model's calls and their results as plain text, outside tool-call items and tool
        # messages) is valid for the API: the scripted model reads what it got, and a field
        # the results it got cannot fill is written ``?`` (as for results not shaped like
        # the lesson's), instead of a script error.
        scripted = sum(len(script.steps[k].get("calls", ()))
                       for k in range(min(turn, len(script.steps))))
        lenient = True if len(results) < max(calls_made, scripted) else None
        if choice.parallel:
            action = script.action(turn, self.params, self.question, results, seen,
                                   lenient=lenient)
        else:
            action = self._one_call_per_turn(script, calls_made, results, seen, lenient)
        action = choice.apply(action, script, turn, self.params, self.question, results, seen)
        if action.text is not None and choice.mode != "none" and ANSWER_TOOL in choice.offered:
            # an agent with a submit step (Inspect's react()) asks for the answer through
            # its answer tool: the scripted model gives it there, as its prompt says
            return Action(calls=(ScriptedCall(ANSWER_TOOL, {"answer": action.text}),))
        return action

    def _one_call_per_turn(self, script: Script, calls_made: int, results: Sequence[Any],
                           seen: str, lenient: bool | None = None) -> Action:
        """The script played one call per turn: the step that ``calls_made`` reaches,
        and in it the first call not made yet (an answer step is played as it is)."""
        left, step = calls_made, 0
        while True:
            action = script.action(step, self.params, self.question, results, seen,
                                   lenient=lenient)
            if action.text is not None or left < len(action.calls):
                return action if action.text is not None else Action(
                    calls=(action.calls[left],))
            left -= len(action.calls)
            step += 1

    def resolve(self, model: str) -> str:
        """The answer's ``model`` for a request for ``model`` (KeyError when not served)."""
        self.scripts[model]
        return self.answer_names.get(model, model)


@dataclass(frozen=True)
class ToolChoice:
    """What a request lets the scripted model do with its tools, neutral across APIs.

    ``mode``: ``auto`` (the script decides), ``none`` (no call: the model answers),
    ``required`` (at least one call), ``tool`` (a call to ``name``); ``parallel``: False
    when the request allows one call per turn (Responses / Chat ``parallel_tool_calls:
    false``, Messages ``disable_parallel_tool_use: true``); ``offered``: the names of
    the tools the request offers, in order.

    How the scripted model obeys (:meth:`apply`):

    * ``none`` — a step with calls is replaced by the script's next answer (rendered
      leniently: a field the results cannot fill yet is written ``?``); a script with no
      answer ahead (``bucle``) answers with empty text;
    * ``required`` — an answer step is replaced by the calls of the latest calls step
      before it (the model calls again instead of answering; the loop's repeated-call
      guard sees them); a script without a calls step calls the first offered tool with
      ``{}``;
    * ``tool`` — only the step's calls to ``name`` are kept; when it has none, the
      script's first call to ``name`` in any step, else ``name`` with ``{}``;
    * ``parallel`` False — at most one call per turn: the script's calls are played one
      per turn, in order (:meth:`ScriptedPolicy.act`), and a forced choice keeps its
      first call.
    """

    mode: str = "auto"
    name: str | None = None
    parallel: bool = True
    offered: tuple[str, ...] = ()

    def apply(self, action: Action, script: Script, turn: int, params: Mapping[str, Any],
              question: str, results: Sequence[Any], seen: str) -> Action:
        """``action`` (what the script does on ``turn``) as this choice lets it be."""
        if self.mode == "none" and action.text is None:
            action = self._next_answer(script, turn, params, question, results, seen)
        elif self.mode == "required" and action.text is not None:
            action = self._earlier_calls(script, turn, params, question, results, seen)
        elif self.mode == "tool" and self.name is not None:
            kept = tuple(c for c in action.calls if c.name == self.name)
            action = Action(calls=kept) if kept else self._call_to(
                self.name, script, params, question, results, seen)
        if not self.parallel and len(action.calls) > 1:
            action = Action(calls=action.calls[:1])
        return action

    @staticmethod
    def _next_answer(script: Script, turn: int, params: Mapping[str, Any], question: str,
                     results: Sequence[Any], seen: str) -> Action:
        for k in range(turn, len(script.steps)):
            step = script.step_at(k, seen)
            if "answer" in step:
                return script.play(step, k, params, question, results, lenient=True)
        return Action(text="")

    def _earlier_calls(self, script: Script, turn: int, params: Mapping[str, Any],
                       question: str, results: Sequence[Any], seen: str) -> Action:
        for k in range(min(turn, len(script.steps)) - 1, -1, -1):
            step = script.step_at(k, seen)
            if "calls" in step:
                return script.play(step, k, params, question, results, lenient=True)
        first = self.offered[0] if self.offered else None
        return Action(calls=(ScriptedCall(first, {}),)) if first else Action(text="")

    @staticmethod
    def _call_to(name: str, script: Script, params: Mapping[str, Any], question: str,
                 results: Sequence[Any], seen: str) -> Action:
        for k, step in enumerate(script.steps):
            step = script.step_at(k, seen)
            if "calls" in step and any(c.get("name") == name for c in step["calls"]):
                calls = script.play(step, k, params, question, results, lenient=True).calls
                return Action(calls=tuple(c for c in calls if c.name == name)[:1])
        return Action(calls=(ScriptedCall(name, {}),))


AUTO = ToolChoice()


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


def content_type_refused(content_type: str | None) -> RequestInvalid:
    """The refusal of a body not declared ``application/json`` (Messages API wording)."""
    return RequestInvalid("Content-Type must be application/json (got "
                          f"{(content_type or 'none')[:80]!r})", status=400,
                          code="invalid_content_type")


def read_request(raw: bytes, content_type: str | None,
                 refuse: Callable[[str | None], RequestInvalid] = content_type_refused,
                 ) -> dict[str, Any]:
    """The JSON object of a request body; RequestInvalid for anything else.

    The content type must be ``application/json`` (``refuse(content_type)`` is raised
    otherwise, a missing header included; a ``charset`` other than UTF-8 is refused),
    and the body UTF-8 JSON: ``json.loads`` would otherwise guess UTF-16/32 from the
    bytes. JSON nested past Python's recursion limit is refused, not crashed on.
    """
    media, _, params = (content_type or "").partition(";")
    if media.strip().lower() != "application/json":
        raise refuse(content_type)
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


def content_id(body: Mapping[str, Any], size: int = 40) -> str:
    """A deterministic id of a request (hex digits of a SHA-256 of its JSON, without its
    ``stream`` member): unique per conversation, equal for the streamed and the plain
    request, never random (an id can reach a trace)."""
    import hashlib

    canonical = json.dumps({k: v for k, v in body.items() if k != "stream"},
                           sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:size]


class ResponseStore:
    """A bounded in-memory store of answers by id (least recently used dropped): what a
    server keeps for ``GET /v1/responses/{id}`` and ``previous_response_id``."""

    def __init__(self, limit: int = 1024) -> None:
        import threading
        from collections import OrderedDict

        self.limit = limit
        self._items: OrderedDict[str, tuple[list[Any], dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: str, conversation: list[Any], answer: dict[str, Any]) -> None:
        """Keep ``answer`` and the input ``conversation`` it answered."""
        with self._lock:
            self._items[key] = (conversation, answer)
            self._items.move_to_end(key)
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get(self, key: str) -> tuple[list[Any], dict[str, Any]] | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item


def _string_end(text: str, start: int) -> int | None:
    """The index after the string literal opening at ``start`` (None if it is cut off)."""
    i, n = start + 1, len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return None


_SCALAR = re.compile(r"-?[0-9][0-9.eE+-]*|true|false|null")


def partial_object(text: str) -> dict[str, Any]:
    """The object a JSON text cut off part-way holds so far: the members complete before
    the cut (an incomplete last member is dropped), as an SDK's partial parsing reads a
    tool call's streamed arguments cut off at ``max_tokens``. ``{}`` when no object
    begins. One pass, no recursion.
    """
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    else:
        return whole if isinstance(whole, dict) else {}
    stack: list[str] = []
    keyed: list[bool] = []  # per open object: its key is read, its value not yet
    cut: tuple[int, str] | None = None

    def mark(pos: int) -> None:
        nonlocal cut
        cut = (pos, "".join("}" if c == "{" else "]" for c in reversed(stack)))

    def value_done(pos: int) -> None:
        if stack and stack[-1] == "{":
            keyed[-1] = False
        mark(pos)

    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n:,":
            i += 1
        elif ch == '"':
            end = _string_end(text, i)
            if end is None:
                break
            if stack and stack[-1] == "{" and not keyed[-1]:
                keyed[-1] = True
            else:
                value_done(end)
            i = end
        elif ch in "{[":
            stack.append(ch)
            keyed.append(False)
            mark(i + 1)
            i += 1
        elif ch in "}]" and stack:
            stack.pop()
            keyed.pop()
            value_done(i + 1)
            i += 1
        else:
            m = _SCALAR.match(text, i)
            if m is None or m.end() >= n:
                break  # not JSON here, or a scalar the cut may have shortened
            value_done(m.end())
            i = m.end()
    if cut is None or not text.lstrip().startswith("{"):
        return {}
    try:
        value = json.loads(text[:cut[0]] + cut[1])
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def cut_json(value: Mapping[str, Any]) -> str:
    """A tool call's arguments as text cut off before its closing brace: what a stream
    cut off at ``max_tokens`` carries (:func:`partial_object` reads it back)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))[:-1]


def text_chunks(text: str, size: int = 24) -> list[str]:
    """The deltas a streamed text is sent in: fixed-size pieces (deterministic)."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def sse(events: Sequence[Mapping[str, Any]]) -> bytes:
    """Server-sent events: ``event: TYPE`` and a compact JSON ``data:`` line each."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n"
                    .encode() for e in events)


def unstreamed(content: bytes) -> bytes:
    """``content`` without its top-level ``"stream": true`` member (unchanged without one):
    what a client sends for the same request unstreamed. Usage (and a trace) counts that.
    """
    try:
        body = json.loads(content)
    except ValueError:
        return content
    if not isinstance(body, dict) or body.get("stream") is not True:
        return content
    return drop_member(content, "stream", True,
                       {k: v for k, v in body.items() if k != "stream"})


def drop_member(content: bytes, key: str, value: Any, expected: dict[str, Any]) -> bytes:
    """``content`` (a JSON object's bytes) without its top-level member ``key: value``,
    as compact or spaced JSON writes it. Each textual occurrence is tried until removing
    it leaves exactly ``expected``, so a look-alike inside a string or a nested object is
    never the one removed; UsageError when none does."""
    forms: list[bytes] = []
    for sep in ((",", ":"), (", ", ": ")):
        for ascii_ in (True, False):
            member = (json.dumps(key) + sep[1]
                      + json.dumps(value, separators=sep, ensure_ascii=ascii_)).encode()
            forms += [sep[0].encode() + member, member + sep[0].encode(), member]
    for member in dict.fromkeys(forms):
        at = content.find(member)
        while at >= 0:
            candidate = content[:at] + content[at + len(member):]
            try:
                if json.loads(candidate) == expected:
                    return candidate
            except ValueError:
                pass
            at = content.find(member, at + 1)
    raise UsageError(f"cannot locate the request body's {key!r} member")


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
