"""What a streamed answer is made of: text deltas, server-sent events, and the JSON of a
tool call cut off part-way (as written, and as an SDK's partial parsing reads it)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any


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
