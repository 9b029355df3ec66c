"""The Hermes / Qwen2.5 tool-call text format: render the tools block, parse the calls.

A local model sees its tools as text in the system message and asks for a tool by
writing ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (SmolLM2's own
format, a JSON list of such objects inside one tag, is read too). This module is the
project's own implementation of both halves, in pure stdlib:

* :func:`render_tools_system` writes the system message exactly as Qwen2.5's chat
  template does when it is given ``tools=`` (used for models whose template ignores
  tools, such as SmolLM2's plain ChatML);
* :func:`parse_tool_calls` extracts the calls from the model's generated text and never
  raises: malformed calls come back as invalid :class:`ParsedCall` values with their raw
  text, so that the loop can answer them with an error instead of dropping them.

Only text the model generated is ever parsed. The caller passes the newly generated
text of one turn, never the prompt, so a tool result (or a news headline) containing
``<tool_call>`` cannot be mistaken for a call: it is never given to the parser.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from reactlab.agent.types import ToolCall
from reactlab.core.errors import ReactlabError
from reactlab.core.io import loads_strict

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "MAX_CALLS",
    "MAX_CALL_CHARS",
    "ParseResult",
    "ParsedCall",
    "calls_from_text",
    "parse_tool_calls",
    "render_tool_calls",
    "render_tool_response",
    "render_tools_system",
]

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

# Longest JSON text accepted inside one <tool_call> block (longer ones are invalid and
# never handed to json.loads): bounds the parser's time and memory on hostile output.
MAX_CALL_CHARS = 8192

# Most blocks parsed in one turn; everything from the next <tool_call> on becomes one
# last invalid call (bounds the time spent on output that is nothing but tags).
MAX_CALLS = 32

_TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def render_tools_system(system_prompt: str, tools: list[dict[str, Any]]) -> str:
    """The system message content with the tools block, as Qwen2.5's template writes it.

    ``tools`` are ``{"type": "function", "function": {"name", "description",
    "parameters"}}`` dicts; each is dumped on its own line like the template's ``tojson``
    filter (``ensure_ascii=False``, default separators, keys in insertion order). With no
    tools the system prompt is returned unchanged.
    """
    if not tools:
        return system_prompt
    lines = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
    return system_prompt + _TOOLS_HEADER + lines + _TOOLS_FOOTER


def render_tool_response(content: str) -> str:
    """One tool result wrapped as Qwen's template wraps a ``tool`` message."""
    return f"<tool_response>\n{content}\n</tool_response>"


def render_tool_calls(calls: list[dict[str, Any]]) -> str:
    """Assistant ``tool_calls`` (OpenAI chat shape or ``{"name", "arguments"}``) as text.

    Matches the blocks Qwen's template writes for an assistant message's ``tool_calls``
    (one per call, joined by newlines); used when a template cannot render them itself.
    """
    blocks = []
    for c in calls:
        fn = c.get("function", c)
        args = fn.get("arguments", {})
        if isinstance(args, str):  # OpenAI chat shape: arguments as a JSON string
            with contextlib.suppress(ValueError):
                args = json.loads(args)
        args_text = json.dumps(args, ensure_ascii=False)
        blocks.append(f'{CALL_OPEN}\n{{"name": "{fn.get("name")}", "arguments": {args_text}}}'
                      f"\n{CALL_CLOSE}")
    return "\n".join(blocks)


@dataclass(frozen=True)
class ParsedCall:
    """One ``<tool_call>`` block.

    A valid call has a non-empty string ``name`` and a dict ``arguments``. An invalid one
    has ``arguments`` None (and ``name`` None unless the block held a usable name); its
    text is always kept in ``raw`` (the stripped block content, or everything after an
    unterminated ``<tool_call>``).
    """

    name: str | None
    arguments: dict[str, Any] | None
    raw: str

    @property
    def valid(self) -> bool:
        return self.name is not None and self.arguments is not None


@dataclass(frozen=True)
class ParseResult:
    """The calls of one generated turn, in order, and the text around them.

    ``errors`` holds one message per invalid call (same order), then one message if there
    were stray ``</tool_call>`` tags without an opening tag (they stay in ``content``);
    errors are diagnostics for logs and traces, not text for the model. ``content``
    is the text with every call block removed, stripped of surrounding whitespace.
    """

    calls: list[ParsedCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    content: str = ""


class _Invalid(ReactlabError):
    pass


def _loads(text: str) -> Any:
    """json.loads with a length cap, no duplicate keys, and every failure turned into
    :class:`_Invalid`."""
    if len(text) > MAX_CALL_CHARS:
        raise _Invalid(f"JSON of {len(text)} characters (limit {MAX_CALL_CHARS})")
    try:
        return loads_strict(text)
    except RecursionError:
        raise _Invalid("JSON nested too deeply") from None
    except (ValueError, TypeError) as e:  # JSONDecodeError, int-digit limit, ...
        raise _Invalid(f"invalid JSON: {str(e)[:120]}") from None


def _strip_fence(text: str) -> str:
    """Drop a Markdown code fence around the JSON (```json ... ```), if any."""
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        inner = text[3:-3]
        nl = inner.find("\n")
        head = inner[:nl].strip() if nl >= 0 else None
        if head is not None and (head == "" or head.isalnum()):  # ```json
            inner = inner[nl + 1:]
        return inner.strip()
    return text


def _is_call_list(obj: Any) -> bool:
    """SmolLM2's own format: a non-empty JSON list of objects inside one tag."""
    return isinstance(obj, list) and bool(obj) and all(isinstance(x, dict) for x in obj)


def _parse_block(raw: str, room: int) -> list[tuple[ParsedCall, str | None]]:
    """The calls of one closed block: one (Hermes object), or one per element of
    SmolLM2's list form ``[{...}, {...}]``, at most ``room`` of them (the elements past
    that become one invalid call). Any other content is one call, as :func:`_parse_call`
    reads it."""
    try:
        obj = _loads(_strip_fence(raw))
    except _Invalid:
        return [_parse_call(raw)]
    if not _is_call_list(obj):
        return [_parse_call(raw, obj)]
    out = []
    for item in obj[:room]:
        out.append(_parse_call(json.dumps(item, ensure_ascii=False), item))
    if len(obj) > room:
        rest = json.dumps(obj[room:], ensure_ascii=False)
        out.append((ParsedCall(None, None, rest), f"more than {MAX_CALLS} calls"))
    return out


_UNPARSED = object()


def _parse_call(raw: str, parsed: Any = _UNPARSED) -> tuple[ParsedCall, str | None]:
    """(call, error message or None) for the stripped content of one block (``parsed``:
    its JSON value when the caller already decoded it)."""
    name: str | None = None
    try:
        obj = _loads(_strip_fence(raw)) if parsed is _UNPARSED else parsed
        if not isinstance(obj, dict):
            raise _Invalid(f"the call is a JSON {type(obj).__name__}, not an object")
        n = obj.get("name")
        if not isinstance(n, str) or not n.strip():
            raise _Invalid("missing or empty tool name")
        name = n
        if "arguments" not in obj:
            return ParsedCall(name, {}, raw), None
        args = obj["arguments"]
        if isinstance(args, str):  # some models send the arguments as a JSON string
            args = _loads(args)
        if not isinstance(args, dict):
            raise _Invalid(f"arguments is a JSON {type(args).__name__}, not an object")
        return ParsedCall(name, args, raw), None
    except _Invalid as e:
        return ParsedCall(name, None, raw), str(e)
    except Exception as e:  # never raise, whatever the text
        return ParsedCall(None, None, raw), f"invalid call: {type(e).__name__}"


def parse_tool_calls(text: str) -> ParseResult:
    """Extract the ``<tool_call>`` blocks of one generated turn. Never raises.

    * several blocks per turn, in order; text around them goes to ``content``;
    * a block without ``"arguments"`` gets ``{}``; arguments given as a JSON string that
      holds an object are decoded; any other non-object arguments make the call invalid;
    * invalid JSON, a missing or empty name, more than :data:`MAX_CALL_CHARS` characters
      or excessive nesting make an invalid call (``arguments`` None, ``raw`` kept);
    * a ``<tool_call>`` with no ``</tool_call>`` before the next ``<tool_call>`` or the
      end of the text is an invalid call whose ``raw`` is the rest of that span;
    * after :data:`MAX_CALLS` blocks, the rest of the text (from the next
      ``<tool_call>``) is one last invalid call;
    * SmolLM2's own list form, ``<tool_call>[{...}, {...}]</tool_call>`` (a non-empty JSON
      list of objects), gives one call per object, each read like a Hermes object, its
      ``raw`` the object's JSON (``ensure_ascii=False``); the calls count towards
      :data:`MAX_CALLS` (the elements past it, and the text after the block, make the
      last invalid call). Any other list is one invalid call.

    ``raw`` is never truncated: the generated text is already bounded by the caller's
    ``max_new_tokens``.

    Pass only the model's newly generated text, never the prompt or tool results (see
    the module docstring).
    """
    try:
        return _parse(text)
    except Exception as e:  # defensive: the scan itself is not expected to fail
        raw = text if isinstance(text, str) else repr(text)
        return ParseResult([ParsedCall(None, None, raw[:MAX_CALL_CHARS])],
                           [f"unparseable text: {type(e).__name__}"], "")


def _parse(text: str) -> ParseResult:
    calls: list[ParsedCall] = []
    errors: list[str] = []
    kept: list[str] = []
    n = len(text)
    pos = 0
    start = text.find(CALL_OPEN)
    close = -2  # cached position of the next </tool_call> (-2: not searched, -1: none)
    while start >= 0:
        kept.append(text[pos:start])
        if len(calls) == MAX_CALLS:
            calls.append(ParsedCall(None, None, text[start:]))
            errors.append(f"more than {MAX_CALLS} {CALL_OPEN} blocks")
            pos = n
            break
        body = start + len(CALL_OPEN)
        if close != -1 and close < body:  # each search starts past the previous one: O(n)
            close = text.find(CALL_CLOSE, body)
        reopen = text.find(CALL_OPEN, body)
        if close >= 0 and (reopen < 0 or close < reopen):
            found = _parse_block(text[body:close].strip(), MAX_CALLS - len(calls))
            pos = close + len(CALL_CLOSE)
            start = reopen
            for call, err in found:
                calls.append(call)
                if err is not None:
                    errors.append(err)
            if len(calls) > MAX_CALLS:  # a list ran past the limit: the rest of the text
                last = calls[-1]      # joins the last invalid call
                calls[-1] = ParsedCall(None, None, last.raw + text[pos:])
                pos = n
                break
            continue
        else:
            end = reopen if reopen >= 0 else n
            call, err = _parse_call(text[body:end].strip())
            if err is None:  # well-formed JSON but no closing tag: still not a call
                call = ParsedCall(None, None, call.raw)
            err = f"unterminated {CALL_OPEN}: " + (err or f"no {CALL_CLOSE}")
            pos = end
        start = reopen
        calls.append(call)
        if err is not None:
            errors.append(err)
    kept.append(text[pos:])
    content = "".join(kept)
    stray = content.count(CALL_CLOSE)
    if stray:
        times = f" ({stray} times)" if stray > 1 else ""
        errors.append(f"{CALL_CLOSE} without {CALL_OPEN}{times}")
    return ParseResult(calls, errors, content.strip())


def calls_from_text(parsed: ParseResult, turn: int) -> tuple[ToolCall, ...]:
    """The loop's tool calls of one parsed turn: ids ``call_<turn>_<i>``; an invalid call
    keeps its text in ``raw`` and has no arguments (answered with an error, never run)."""
    return tuple(ToolCall(id=f"call_{turn}_{i}", name=c.name,
                          arguments=c.arguments if c.valid else None,
                          raw=None if c.valid else c.raw)
                 for i, c in enumerate(parsed.calls))
