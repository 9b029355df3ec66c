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

import dataclasses
import json
from types import ModuleType
from typing import Any, ClassVar, cast

import httpx2

from reactlab.config.faults import Fault
from reactlab.core.errors import ScriptError
from reactlab.simulate import (
    RequestInvalid,
    ScriptedPolicy,
    call_number,
    content_id,
    cut_json,
    hosted_mcp,
    pair_results,
    parse_tool_output,
    partial_object,
    read_results,
    retry_after_headers,
    text_chunks,
    tokens_of,
)
from reactlab.simulate.anthropic_messages_requests import (
    THREAD_UNSUPPORTED,
    admit,
    assistant_turns,
    hosted_servers,
    messages_of,
    missing_field,
    step_of,
    tool_choice,
    validate,
    wrong_type,
)
from reactlab.simulate.base import (
    ANTHROPIC_ERROR_MESSAGES,
    Simulator,
    anthropic_error_body,
    anthropic_error_type,
)

# The request side (validation, beta headers, turns, tool choice, hosted servers) is
# anthropic_messages_requests'; these are this API's names for it.
__all__ = ["THREAD_UNSUPPORTED", "admit", "error_body", "error_type", "events", "handler",
           "hosted_servers", "input_json", "respond", "step_of", "tool_choice", "validate"]

# What the broken-body faults are cut from: the answer with usage as it was before it
# was counted (zeros), so a fault's bytes, and the traces that quote them, are stable.
_BROKEN_USAGE = {"input_tokens": 0, "output_tokens": 0}


error_body = anthropic_error_body  # the Messages API's error shape
error_type = anthropic_error_type  # its error type of a status


# --- answers --------------------------------------------------------------------------


def respond(policy: ScriptedPolicy, body: dict[str, Any],
            input_tokens: int = 0) -> tuple[int, dict[str, Any]]:
    """The simulated answer to one (validated) request body: (status, JSON body).

    With ``mcp_servers`` (beta ``mcp-client-2025-11-20``, or the first connector version
    ``mcp-client-2025-04-04``: :func:`admit`) the simulator connects to each server and
    lists its tools, runs the script's calls to the tools its toolset (or its
    ``tool_configuration``) enables itself (an ``mcp_tool_use`` block and its
    ``mcp_tool_result``) and plays on, in the same answer, until the script answers or
    calls a client-side tool.
    """
    return hosted_mcp.serve(
        hosted_servers(body), lambda session: _respond(policy, body, input_tokens, session),
        # the API's refusal when it cannot reach a server (its words)
        lambda session: (400, error_body(
            "invalid_request_error", "Connection error while communicating with MCP server.")))


def _state(messages: list[dict[str, Any]]) -> tuple[list[str], str, int, int, int]:
    """(tool results in the order of the calls, the text they came in, turns, calls made,
    the ids' number: :func:`call_number`) of a conversation; without result blocks, the
    results a client wrote in its user messages (:func:`read_results`)."""
    blocks = [b for m in messages if isinstance(m.get("content"), list)
              for b in m["content"] if isinstance(b, dict)]
    outputs = pair_results(
        [b["id"] for b in blocks if b.get("type") in ("tool_use", "mcp_tool_use")],
        [(b["tool_use_id"], hosted_mcp.content_text(b.get("content"))) for b in blocks
         if b.get("type") in ("tool_result", "mcp_tool_result")], "tool_use_id")
    uses = [sum(isinstance(b, dict) and b.get("type") in ("tool_use", "mcp_tool_use")
                for b in m["content"]) if isinstance(m.get("content"), list) else 0
            for m in messages]
    found, seen = read_results(outputs, _user_texts(messages))
    n = call_number([(m.get("role") == "assistant", u) for m, u in zip(messages, uses,
                                                                        strict=True)])
    return found, seen, assistant_turns(messages), sum(uses), n


def _user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of the user messages after the model's first turn (a string content, or
    its ``text`` blocks)."""
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"),
                 len(messages))
    return [m["content"] if isinstance(m.get("content"), str) else "".join(
        b.get("text", "") for b in m.get("content") or () if isinstance(b, dict)
        and b.get("type") == "text") for m in messages[first:] if m.get("role") == "user"]


def _respond(policy: ScriptedPolicy, body: dict[str, Any], input_tokens: int,
             session: hosted_mcp.Session | None) -> tuple[int, dict[str, Any]]:
    messages = messages_of(body)
    model = cast(str, body.get("model"))  # a string: the body is validated
    choice = tool_choice(body)
    if session is not None:
        choice = dataclasses.replace(choice, offered=choice.offered + tuple(
            n for n in session.tool_names() if n not in choice.offered))
    content: list[dict[str, Any]] = []
    spent, budget, stop = 0, hosted_mcp.MAX_CALLS, "end_turn"
    while True:
        if budget <= 0:  # past the answer's hosted-call budget the model answers
            choice = dataclasses.replace(choice, mode="none")
        conversation = messages + ([{"role": "assistant", "content": content}]
                                   if content else [])
        try:
            outputs, seen, turn, calls_made, n = _state(conversation)
        except RequestInvalid as exc:
            return 400, error_body("invalid_request_error", f"messages: {exc.message}")
        results = [parse_tool_output(o) for o in outputs]
        try:
            action = policy.act(model, turn, results, seen, choice, calls_made)
            resolved = policy.resolve(model)
        except KeyError:
            return 404, error_body("not_found_error", f"model: {model}")
        except ScriptError as exc:
            return 400, error_body("invalid_request_error", str(exc))
        except RecursionError:
            return 400, error_body("invalid_request_error",
                                   "a tool result is nested too deeply for the scripted model")
        # Call ids number the calls of the conversation (call_number): unique in it.
        if action.text is not None:
            content.append({"type": "text", "text": action.text})
            spent += tokens_of(action.text)
            stop = "end_turn"
            break
        stop = "tool_use"
        client_side = False
        for i, c in enumerate(action.calls):
            server = session.server_of(c.name) if session is not None else None
            args = c.arguments if c.raw_arguments is None else _object_or_none(c.raw_arguments)
            spent += tokens_of(c.name) + tokens_of(c.arguments_text())
            use: dict[str, Any] = (
                {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c.name} if server is None
                else {"type": "mcp_tool_use", "id": f"mcptoolu_{n}_{i}", "name": c.name,
                      "server_name": server.name})
            if args is None:
                # Arguments that are not a JSON object: the API always sends an object, so
                # the scripted model runs out of tokens inside them instead. The answer
                # stops at max_tokens on this block (later calls are cut off); its input is
                # what was complete before the cut (partial_object).
                content.append({**use, "input": partial_object(c.arguments_text())})
                stop = "max_tokens"
                break
            content.append({**use, "input": args})
            if server is None:
                client_side = True
                continue
            outcome = server.call(c.name, args)
            budget -= 1
            content.append({"type": "mcp_tool_result", "tool_use_id": use["id"],
                            "is_error": outcome.is_error,
                            "content": [{"type": "text", "text": outcome.text}]})
        if stop == "max_tokens" or client_side or not action.calls:
            break
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
        elif block["type"] == "mcp_tool_result":  # sent whole, as the API sends it
            out.append({"type": "content_block_start", "index": i, "content_block": block})
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


class MessagesSimulator(Simulator):
    """The Messages API on the simulator base (:mod:`reactlab.simulate.base`)."""

    name = "anthropic"
    http: ClassVar[ModuleType] = httpx2
    broken_member = "content"

    def admit(self, body: dict[str, Any], headers: Any) -> None:
        admit(body, headers)

    def refusal(self, exc: RequestInvalid) -> dict[str, Any]:
        body = error_body(anthropic_error_type(exc.status), exc.message)
        if exc.code == THREAD_UNSUPPORTED:
            body["error"]["details"] = {"error_code": THREAD_UNSUPPORTED}
        return body

    def status_fault(self, fault: Fault) -> tuple[dict[str, Any], dict[str, str]]:
        assert fault.status is not None
        kind = anthropic_error_type(fault.status)
        return (error_body(kind, f"{ANTHROPIC_ERROR_MESSAGES[kind]} (simulated fault)"),
                {"request-id": "req_sim", **retry_after_headers(fault)})

    def broken_source(self, answer: dict[str, Any]) -> dict[str, Any]:
        if "usage" in answer:
            answer["usage"] = _BROKEN_USAGE
        if answer.get("type") == "message":
            answer["id"] = "msg_sim"  # frozen: the fault's bytes depend on the script only
        return answer

    def missing(self, path: str) -> RequestInvalid:
        return missing_field(path)

    def wrong_type(self, path: str, expected: str, value: Any) -> RequestInvalid:
        return wrong_type(path, expected, value)


SIMULATOR = MessagesSimulator(validate, step_of, respond, events)
handler = SIMULATOR.handler
fault_response = SIMULATOR.fault_response
with_faults = SIMULATOR.with_faults
