"""Simulated Anthropic Messages API (``POST /v1/messages``), shapes as in the lesson.

A request is read as the API documents it: a UTF-8 JSON object sent as
``application/json``, validated deeply (:func:`validate`) before the script sees it, so
a malformed request gets the API's 400 shape, never a scripted answer. Tool results
(``tool_result`` blocks, ``content`` a string or a list of ``text`` blocks) are matched to
the ``tool_use`` blocks by ``tool_use_id``, in any order. Every answer carries ``usage``:
``input_tokens`` are the o200k_base tokens of the request body (the count a trace
records for it), ``output_tokens`` those of the answer's text, or of each call's name and
input. ``"stream": true`` gets the same answer as server-sent events (:func:`events`).

Only shapes the API can emit: a ``tool_use.input`` is always an object, so a scripted
call whose arguments are not a JSON object is played as an answer cut off at
``max_tokens`` inside that call (its ``input`` the members complete before the cut; its
streamed ``input_json_delta`` text does not parse). ``tool_choice`` (auto / any / tool /
none) and ``disable_parallel_tool_use`` are obeyed; ``thread`` is refused with
``thread_unsupported_request``; the message ``id`` derives from the request.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any, ClassVar, cast

import httpx2

from reactlab.config.faults import Fault
from reactlab.core.errors import ScriptError
from reactlab.simulate import (
    RequestInvalid,
    ScriptedPolicy,
    ToolChoice,
    content_id,
    count_runs,
    cut_json,
    pair_results,
    parse_tool_output,
    partial_object,
    retry_after_headers,
    text_chunks,
    tokens_of,
)
from reactlab.simulate.base import Simulator

_BLOCK_TYPES = {"text", "image", "document", "tool_use", "tool_result", "thinking",
                "redacted_thinking", "search_result"}
_RESULT_BLOCKS = {"text", "image", "document", "search_result"}
_OPTIONAL: dict[str, tuple[type | tuple[type, ...], str]] = {
    "system": ((str, list), "a valid string or list"), "stream": (bool, "a valid boolean"),
    "metadata": (dict, "a valid dictionary"), "tool_choice": (dict, "a valid dictionary"),
    "temperature": ((int, float), "a valid number"), "top_p": ((int, float), "a valid number"),
    "top_k": (int, "a valid integer"), "stop_sequences": (list, "a valid list"),
    "thinking": (dict, "a valid dictionary"),
}
# What the broken-body faults are cut from: the answer with usage as it was before it
# was counted (zeros), so a fault's bytes, and the traces that quote them, are stable.
_BROKEN_USAGE = {"input_tokens": 0, "output_tokens": 0}


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The Messages API's error shape."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def step_of(body: dict[str, Any]) -> int:
    """The loop step of a request: 1 + the assistant turns its messages hold."""
    return count_runs([m.get("role") == "assistant" for m in _messages(body)]) + 1


# --- validation ---------------------------------------------------------------------


def _bad(where: str, expected: str) -> RequestInvalid:
    return RequestInvalid(f"{where}: Input should be {expected}", where)


def _need(d: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
          where: str) -> Any:
    return SIMULATOR.need(d, key, kind, expected, where)


def _blocks(blocks: Any, where: str, allowed: set[str]) -> None:
    if not isinstance(blocks, list):
        raise _bad(where, "a valid string or list")
    for j, block in enumerate(blocks):
        bw = f"{where}.{j}"
        if not isinstance(block, dict):
            raise _bad(bw, "a valid dictionary")
        kind = _need(block, "type", str, "a valid string", bw)
        if kind not in allowed:
            raise RequestInvalid(f"{bw}.type: Input tag '{kind[:40]}' found using 'type' does "
                                 f"not match any of the expected tags: "
                                 f"{', '.join(sorted(allowed))}", f"{bw}.type")
        if kind == "text":
            _need(block, "text", str, "a valid string", bw)
        elif kind == "tool_use":
            _need(block, "id", str, "a valid string", bw)
            _need(block, "name", str, "a valid string", bw)
            if "input" not in block:
                raise RequestInvalid(f"{bw}.input: Field required", f"{bw}.input")
            if not isinstance(block["input"], dict):
                raise _bad(f"{bw}.input", "a valid dictionary")
        elif kind == "tool_result":
            _need(block, "tool_use_id", str, "a valid string", bw)
            content = block.get("content")
            if content is not None and not isinstance(content, str):
                _blocks(content, f"{bw}.content", _RESULT_BLOCKS)
            if block.get("is_error") is not None and not isinstance(block["is_error"], bool):
                raise _bad(f"{bw}.is_error", "a valid boolean")


THREAD_UNSUPPORTED = "thread_unsupported_request"
_CHOICE_TYPES = ("auto", "any", "tool", "none")


def validate(body: dict[str, Any], *, count_only: bool = False) -> None:
    """RequestInvalid (naming the field, as the API does) for a malformed request body.

    ``count_only``: a ``count_tokens`` body (no ``max_tokens``). A request that continues
    a server-side ``thread`` is refused with ``thread_unsupported_request`` (the scripted
    model keeps no threads; clients then resend the whole conversation).
    """
    if body.get("thread") is not None:
        raise RequestInvalid("thread: this model keeps no server-side threads; resend the "
                             "whole conversation without `thread`", "thread",
                             code=THREAD_UNSUPPORTED)
    required: tuple[tuple[str, type, str], ...] = (
        ("model", str, "a valid string"), ("messages", list, "a valid list"))
    if not count_only:
        required += (("max_tokens", int, "a valid integer"),)
    for name, kind, expected in required:
        value = body.get(name)
        if value is None:
            raise RequestInvalid(f"{name}: Field required", name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _bad(name, expected)
    if not count_only and body["max_tokens"] < 1:
        raise RequestInvalid("max_tokens: Input should be greater than or equal to 1",
                             "max_tokens")
    for name, (kinds, expected) in _OPTIONAL.items():
        value = body.get(name)
        if value is not None and (not isinstance(value, kinds) or (isinstance(value, bool)
                                  and kinds is not bool)):
            raise _bad(name, expected)
    if isinstance(body.get("system"), list):
        _blocks(body["system"], "system", {"text"})
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("tools", "a valid list")
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise _bad(f"tools.{i}", "a valid dictionary")
            _need(tool, "name", str, "a valid string", f"tools.{i}")
    choice = body.get("tool_choice")
    if choice is not None:
        kind = _need(choice, "type", str, "a valid string", "tool_choice")
        if kind not in _CHOICE_TYPES:
            raise RequestInvalid(f"tool_choice.type: Input tag '{kind[:40]}' found using "
                                 "'type' does not match any of the expected tags: 'auto', "
                                 "'any', 'tool', 'none'", "tool_choice.type")
        if kind == "tool":
            _need(choice, "name", str, "a valid string", "tool_choice")
        dp = choice.get("disable_parallel_tool_use")
        if dp is not None and not isinstance(dp, bool):
            raise _bad("tool_choice.disable_parallel_tool_use", "a valid boolean")
    for i, message in enumerate(body["messages"]):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise _bad(where, "a valid dictionary")
        role = _need(message, "role", str, "a valid string", where)
        if role not in ("user", "assistant"):
            raise RequestInvalid(f"{where}.role: Input should be 'user' or 'assistant'",
                                 f"{where}.role")
        if "content" not in message:
            raise RequestInvalid(f"{where}.content: Field required", f"{where}.content")
        content = message["content"]
        if not isinstance(content, str):
            _blocks(content, f"{where}.content", _BLOCK_TYPES)


def tool_choice(body: dict[str, Any]) -> ToolChoice:
    """What a (validated) request lets the model do with its tools (``tool_choice``:
    auto / any / tool / none, and ``disable_parallel_tool_use``)."""
    choice = body.get("tool_choice") or {}
    modes: dict[Any, str] = {"any": "required", "tool": "tool", "none": "none"}
    mode = modes.get(choice.get("type"), "auto")
    offered = tuple(t["name"] for t in body.get("tools") or () if isinstance(t, dict))
    return ToolChoice(mode, choice.get("name") if mode == "tool" else None,
                      choice.get("disable_parallel_tool_use") is not True, offered)


def result_text(content: Any) -> str:
    """A ``tool_result.content`` as text: the string, or its text blocks joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(b["text"] for b in content if b.get("type") == "text")


# --- answers --------------------------------------------------------------------------


def respond(policy: ScriptedPolicy, body: dict[str, Any],
            input_tokens: int = 0) -> tuple[int, dict[str, Any]]:
    """The simulated answer to one (validated) request body: (status, JSON body)."""
    messages = _messages(body)
    blocks = [b for m in messages if isinstance(m.get("content"), list)
              for b in m["content"] if isinstance(b, dict)]
    try:
        outputs = pair_results(
            [b["id"] for b in blocks if b.get("type") == "tool_use"],
            [(b["tool_use_id"], result_text(b.get("content"))) for b in blocks
             if b.get("type") == "tool_result"], "tool_use_id")
    except RequestInvalid as exc:
        return 400, error_body("invalid_request_error", f"messages: {exc.message}")
    results = [parse_tool_output(o) for o in outputs]
    seen = "\n".join(outputs)
    turn = count_runs([m.get("role") == "assistant" for m in messages])
    calls_made = sum(b.get("type") == "tool_use" for b in blocks)
    model = cast(str, body.get("model"))  # a string: the body is validated
    try:
        action = policy.act(model, turn, results, seen, tool_choice(body), calls_made)
        resolved = policy.resolve(model)
    except KeyError:
        return 404, error_body("not_found_error", f"model: {model}")
    except ScriptError as exc:
        return 400, error_body("invalid_request_error", str(exc))
    except RecursionError:
        return 400, error_body("invalid_request_error",
                               "a tool result is nested too deeply for the scripted model")
    # Call ids number the calls of the conversation (n made before this turn): unique in it.
    n = calls_made
    content: list[dict[str, Any]]
    if action.text is not None:
        content, stop = [{"type": "text", "text": action.text}], "end_turn"
        spent = tokens_of(action.text)
    else:
        content = []
        spent = 0
        stop = "tool_use"
        for i, c in enumerate(action.calls):
            args = c.arguments if c.raw_arguments is None else _object_or_none(c.raw_arguments)
            spent += tokens_of(c.name) + tokens_of(c.arguments_text())
            if args is None:
                # Arguments that are not a JSON object: the API always sends an object, so
                # the scripted model runs out of tokens inside them instead. The answer
                # stops at max_tokens on this block (later calls are cut off); its input is
                # what was complete before the cut (partial_object).
                content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c.name,
                                "input": partial_object(c.arguments_text())})
                stop = "max_tokens"
                break
            content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c.name,
                            "input": args})
    return 200, {"id": f"msg_{content_id(body)}", "type": "message", "role": "assistant",
                 "model": resolved, "content": content, "stop_reason": stop,
                 "stop_sequence": None,
                 "usage": {"input_tokens": input_tokens, "output_tokens": spent}}


def _object_or_none(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def input_json(value: Any, cut: bool = False) -> str:
    """A tool_use ``input`` as the JSON text its ``input_json_delta``s carry; ``cut``: the
    text of a block cut off at ``max_tokens``, which does not parse (:func:`cut_json`)."""
    if cut:
        return cut_json(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def events(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The documented event sequence that streams ``answer`` (a 200 body of :func:`respond`).

    message_start (usage with the input tokens), per content block content_block_start,
    content_block_delta (text_delta / input_json_delta)…, content_block_stop, then
    message_delta (stop_reason, cumulative usage: input and output tokens) and
    message_stop. A tool_use block cut off at ``max_tokens`` streams JSON that does not
    parse (the members complete before the cut, without the closing brace).
    """
    usage = answer["usage"]
    out: list[dict[str, Any]] = [{"type": "message_start", "message": {
        **answer, "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0}}}]
    last = len(answer["content"]) - 1
    cut_off = answer["stop_reason"] == "max_tokens"
    for i, block in enumerate(answer["content"]):
        if block["type"] == "text":
            out.append({"type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}})
            out += [{"type": "content_block_delta", "index": i,
                     "delta": {"type": "text_delta", "text": piece}}
                    for piece in text_chunks(block["text"])]
        else:
            out.append({"type": "content_block_start", "index": i,
                        "content_block": {**block, "input": {}}})
            out += [{"type": "content_block_delta", "index": i,
                     "delta": {"type": "input_json_delta", "partial_json": piece}}
                    for piece in text_chunks(input_json(block["input"],
                                                        cut_off and i == last))]
        out.append({"type": "content_block_stop", "index": i})
    out.append({"type": "message_delta", "delta": {"stop_reason": answer["stop_reason"],
                                                   "stop_sequence": None},
                "usage": {"input_tokens": usage["input_tokens"],
                          "output_tokens": usage["output_tokens"]}})
    out.append({"type": "message_stop"})
    return out


# The documented error type of each status (the Messages API's error shapes).
_STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                 402: "billing_error", 403: "permission_error", 404: "not_found_error",
                 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                 504: "timeout_error", 529: "overloaded_error"}
_MESSAGES = {"invalid_request_error": "Invalid request", "authentication_error":
             "invalid x-api-key", "billing_error": "Billing issue",
             "permission_error": "Your API key does not have permission to use the specified "
             "resource", "not_found_error": "Not found", "request_too_large":
             "Request exceeds the maximum allowed number of bytes", "rate_limit_error":
             "Number of requests has exceeded your rate limit", "api_error":
             "Internal server error", "timeout_error": "Request timed out",
             "overloaded_error": "Overloaded"}


def error_type(status: int) -> str:
    return _STATUS_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


class MessagesSimulator(Simulator):
    """The Messages API on the simulator base (:mod:`reactlab.simulate.base`)."""

    name = "anthropic"
    http: ClassVar[ModuleType] = httpx2
    broken_member = "content"

    def validate(self, body: dict[str, Any]) -> None:
        validate(body)

    def step_of(self, body: dict[str, Any]) -> int:
        return step_of(body)

    def respond(self, policy: ScriptedPolicy, body: dict[str, Any],
                input_tokens: int = 0) -> tuple[int, dict[str, Any]]:
        return respond(policy, body, input_tokens)

    def events(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        return events(answer)

    def refusal(self, exc: RequestInvalid) -> dict[str, Any]:
        body = error_body(error_type(exc.status), exc.message)
        if exc.code == THREAD_UNSUPPORTED:
            body["error"]["details"] = {"error_code": THREAD_UNSUPPORTED}
        return body

    def status_fault(self, fault: Fault) -> tuple[dict[str, Any], dict[str, str]]:
        assert fault.status is not None
        kind = error_type(fault.status)
        return ({"type": "error", "error": {
                    "type": kind, "message": f"{_MESSAGES[kind]} (simulated fault)"}},
                {"request-id": "req_sim", **retry_after_headers(fault)})

    def broken_source(self, answer: dict[str, Any]) -> dict[str, Any]:
        if "usage" in answer:
            answer["usage"] = _BROKEN_USAGE
        if answer.get("type") == "message":
            answer["id"] = "msg_sim"  # frozen: the fault's bytes depend on the script only
        return answer

    def missing(self, path: str) -> RequestInvalid:
        return RequestInvalid(f"{path}: Field required", path)

    def wrong_type(self, path: str, expected: str, value: Any) -> RequestInvalid:
        return _bad(path, expected)


SIMULATOR = MessagesSimulator()
handler = SIMULATOR.handler
fault_response = SIMULATOR.fault_response
with_faults = SIMULATOR.with_faults
