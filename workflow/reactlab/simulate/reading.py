"""Reading a request as the simulated APIs do: its JSON body (content type, charset,
nesting), the tool results it carries, its id, its token count and its unstreamed form."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reactlab.core.errors import RequestInvalid, UsageError
from reactlab.core.tokens import count
from reactlab.tools.messages import unwrap

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
    canonical = json.dumps({k: v for k, v in body.items() if k != "stream"},
                           sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:size]


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
    return count(text)


def count_runs(flags: Sequence[bool]) -> int:
    """Number of maximal runs of True in ``flags`` (assistant turns in a conversation)."""
    runs, previous = 0, False
    for flag in flags:
        if flag and not previous:
            runs += 1
        previous = flag
    return runs


def call_number(turns: Sequence[tuple[bool, int]]) -> int:
    """The ``n`` of the call ids an answer gives (``call_{n}_{i}``), from the conversation
    before it: ``turns`` is (assistant?, calls it carries) per message or item, in order.

    ``n`` is the calls the assistant made in the conversation, plus one for each of its
    turns (a maximal run of assistant messages) that carries no call: a client that
    writes the model's turns back as text (its calls parsed, never echoed as call items)
    still gets ids that differ from turn to turn, while a client that echoes every call
    gets ``n`` = the calls made before this turn, as always (so its bodies, and traces,
    keep their bytes). Each turn adds at least one to ``n``: the ids of a run whose
    history only grows are unique."""
    n, run_calls, in_run = 0, 0, False
    for assistant, calls in turns:
        if assistant:
            run_calls, in_run = run_calls + calls, True
            continue
        if in_run:
            n += max(run_calls, 1)
        run_calls, in_run = 0, False
    return n + (max(run_calls, 1) if in_run else 0)


_DECODER = json.JSONDecoder()


def text_results(texts: Sequence[str]) -> list[str]:
    """The tool results a client wrote into text (ReAct-style agents, code agents): every
    JSON object in ``texts`` (the client's messages after the model's first turn, in
    order), outermost first, left to right, each as the JSON text it was written in
    (``Observation: {"resultado": 26.19}`` gives ``{"resultado": 26.19}``). A brace that
    opens no JSON object is text."""
    found: list[str] = []
    for text in texts:
        at = text.find("{")
        while at >= 0:
            try:
                value, end = _DECODER.raw_decode(text, at)
            except (ValueError, RecursionError):
                at = text.find("{", at + 1)
                continue
            if isinstance(value, dict):
                found.append(text[at:end])
            at = text.find("{", end)
    return found


def read_results(outputs: list[str], client_texts: Sequence[str]) -> tuple[list[str], str]:
    """(tool results, the text they were sent in) of a conversation, wherever the client
    put them: its tool messages / result items / result blocks (``outputs``, in the order
    of the calls), else, when it carries none, the JSON objects of the text it wrote
    after the model's first turn (``client_texts``: :func:`text_results`). The text is
    what a scripted ``branch`` looks for (``if_seen``)."""
    if outputs:
        return outputs, "\n".join(outputs)
    found = text_results(client_texts)
    return found, "\n".join(client_texts) if found else ""


def request_json(content: bytes) -> Any:
    """The JSON of a request body, or None when it is not JSON."""
    try:
        return json.loads(content)
    except ValueError:
        return None
