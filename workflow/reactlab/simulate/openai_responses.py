"""Simulated OpenAI Responses API (``POST /v1/responses``), shapes as in the lesson.

A request is read as the API documents it: the body must be a UTF-8 JSON object sent as
``application/json``, and is validated deeply (:func:`validate`) before the script sees
it, so a malformed request gets the API's 400 shape, never a scripted answer. Tool
results (``function_call_output``, ``output`` a string or a list of ``input_text``
parts) are matched to the ``function_call`` items by ``call_id``, in any order. Every
answer carries ``usage``: ``input_tokens`` are the o200k_base tokens of the request body
(the count a trace records for it), ``output_tokens`` those of the answer's text, or of
each call's name and arguments. ``"stream": true`` gets the same answer as server-sent
events (:func:`events`), in the documented order. ``tool_choice`` and
``parallel_tool_calls`` are obeyed and echoed as sent, with ``tools``; the response
``id`` derives from the request; ``previous_response_id`` is served from a server's
:class:`~reactlab.simulate.ResponseStore` (in process there is none: the API's 400
``previous_response_not_found``).
"""

from __future__ import annotations

import dataclasses
import json
from types import ModuleType
from typing import Any, ClassVar, cast

import httpx

from reactlab.simulate import (
    RequestInvalid,
    ResponseStore,
    ScriptedPolicy,
    call_number,
    content_id,
    hosted_mcp,
    pair_results,
    read_results,
    text_chunks,
    tokens_of,
)
from reactlab.simulate.base import OpenAIErrors, Simulator, openai_error_body, openai_play
from reactlab.simulate.openai_responses_requests import (
    assistant_turns,
    hosted_servers,
    is_assistant,
    items_of,
    output_text,
    step_of,
    tool_choice,
    validate,
)

# The request side (validation, turns, tool choice, hosted servers) is
# openai_responses_requests'; these are this API's names for it.
__all__ = ["call_item", "error_body", "events", "expand", "handler", "hosted_servers",
           "listing_item", "mcp_call_text", "output_text", "previous_not_found", "respond",
           "step_of", "tool_choice", "unavailable", "usage", "validate"]

error_body = openai_error_body  # the Responses API's error shape


# --- answers --------------------------------------------------------------------------


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """The Responses API's ``usage`` object (``input_tokens_details`` with both its
    required counts: the SDK's ``Response`` type refuses one without ``cache_write_tokens``)."""
    return {"input_tokens": input_tokens,
            "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


def _state(items: list[Any]) -> tuple[list[str], str, int, int, int]:
    """(tool outputs in the order of the calls, the text they came in, turns, calls made,
    the ids' number: :func:`call_number`) of a conversation: ``function_call`` items
    answered by ``function_call_output`` items (RequestInvalid for an output that answers
    no call), ``mcp_call`` items carrying their own; without any, the results a client
    wrote in its user messages (:func:`read_results`)."""
    call_ids: list[str] = []
    outputs: list[tuple[str, str]] = []
    for x in items:
        kind = x.get("type") if isinstance(x, dict) else None
        if kind == "function_call":
            call_ids.append(x["call_id"])
        elif kind == "function_call_output":
            outputs.append((x["call_id"], output_text(x["output"])))
        elif kind == "mcp_call":
            call_ids.append(x["id"])
            outputs.append((x["id"], mcp_call_text(x)))
    is_call = [isinstance(x, dict) and x.get("type") in ("function_call", "mcp_call")
               for x in items]
    found, seen = read_results(pair_results(call_ids, outputs, "call_id"), _user_texts(items))
    n = call_number([(is_assistant(x), int(c)) for x, c in zip(items, is_call, strict=True)])
    return found, seen, assistant_turns(items), sum(is_call), n


def _user_texts(items: list[Any]) -> list[str]:
    """The text of the user messages after the model's first turn."""
    first = next((i for i, x in enumerate(items) if is_assistant(x)), len(items))
    texts = []
    for x in items[first:]:
        if isinstance(x, dict) and x.get("type", "message") == "message" and (
                x.get("role") == "user"):
            content = x.get("content")
            texts.append(content if isinstance(content, str) else "".join(
                p.get("text", "") for p in content or () if isinstance(p, dict)
                and p.get("type") == "input_text"))
    return texts


def mcp_call_text(item: dict[str, Any]) -> str:
    """What the scripted model read from an ``mcp_call`` item: its ``output``; for a
    failed call its error's content (a tool's error) or ``{"error": message}``."""
    error = item.get("error")
    if isinstance(error, dict):
        if error.get("type") == "mcp_tool_execution_error":
            return hosted_mcp.content_text(error.get("content"))
        return json.dumps({"error": str(error.get("message", ""))}, ensure_ascii=False)
    if isinstance(error, str):
        return json.dumps({"error": error}, ensure_ascii=False)
    output = item.get("output")
    return output if isinstance(output, str) else ""


def listing_item(key: str, j: int, server: hosted_mcp.Server) -> dict[str, Any]:
    """The ``mcp_list_tools`` output item of a server's listing (``tools`` as the API
    gives them: name, description, input_schema, annotations)."""
    return {"id": f"mcpl_{key}_{j}", "type": "mcp_list_tools", "server_label": server.name,
            "tools": [{"name": t["name"], "description": t.get("description"),
                       "input_schema": t.get("inputSchema", {}),
                       "annotations": t.get("annotations")} for t in server.tools]}


def call_item(call_id: str, server: hosted_mcp.Server, name: str, arguments: str,
              outcome: hosted_mcp.Outcome) -> dict[str, Any]:
    """The ``mcp_call`` output item of one hosted call: ``output`` the result's text;
    a tool's error (``isError``) an ``mcp_tool_execution_error`` with the server's
    content, a JSON-RPC error an ``mcp_protocol_error``, an HTTP failure an
    ``http_error`` (the error shapes of the SDK's ``McpCall.error``)."""
    error: dict[str, Any] | None = None
    output: str | None = hosted_mcp.content_text(outcome.content)
    if outcome.failure is not None:
        kind, code, message = outcome.failure
        error, output = {"type": kind, "code": code, "message": message}, None
    elif outcome.is_error:
        error, output = {"type": "mcp_tool_execution_error", "content": outcome.content}, None
    return {"id": call_id, "type": "mcp_call", "server_label": server.name, "name": name,
            "arguments": arguments, "output": output, "error": error,
            "approval_request_id": None, "status": "failed" if error else "completed"}


def unavailable(name: str) -> dict[str, Any]:
    """The API's answer when a hosted server cannot be listed (HTTP 424)."""
    return error_body("external_connector_error",
                      f"Error retrieving tool list from MCP server: '{name}'. "
                      "Http status code: 424 (Failed Dependency)", "tools", "http_error")


def respond(policy: ScriptedPolicy, body: dict[str, Any],
            input_tokens: int = 0) -> tuple[int, dict[str, Any]]:
    """The simulated answer to one (validated) request body: (status, JSON body).

    With hosted MCP tools (``{"type": "mcp", ...}``) the simulator connects to each
    server, lists its tools (an ``mcp_list_tools`` item, unless the input holds that
    server's listing already), runs the script's calls to them itself (``mcp_call``
    items) and plays on until the script answers or calls a client-side tool.
    """
    return hosted_mcp.serve(
        hosted_servers(body), lambda session: _respond(policy, body, input_tokens, session),
        lambda session: (424, unavailable(session.failed or "")))


def _respond(policy: ScriptedPolicy, body: dict[str, Any], input_tokens: int,
             session: hosted_mcp.Session | None) -> tuple[int, dict[str, Any]]:
    items = items_of(body)
    model = cast(str, body.get("model"))  # a string: the body is validated
    key = content_id(body)
    choice = tool_choice(body)
    output: list[dict[str, Any]] = []
    if session is not None:
        listed = {x.get("server_label") for x in items if isinstance(x, dict)
                  and x.get("type") == "mcp_list_tools" and not x.get("error")}
        output += [listing_item(key, j, s) for j, s in enumerate(session.servers)
                   if s.name not in listed]
        choice = dataclasses.replace(choice, offered=choice.offered + tuple(
            n for n in session.tool_names() if n not in choice.offered))
    limit = body.get("max_tool_calls")
    budget = hosted_mcp.MAX_CALLS if limit is None else limit
    spent = 0
    while True:
        if session is not None and budget <= 0:
            # past the answer's hosted-call budget (checked per turn), further calls are
            # ignored: the scripted model answers with what it has (max_tool_calls)
            choice = dataclasses.replace(choice, mode="none")
        conversation = items + output
        try:
            outputs, seen, turn, calls_made, n = _state(conversation)
        except RequestInvalid as exc:
            return 400, error_body("invalid_request_error", exc.message, "input", exc.code)
        unknown = RequestInvalid(f"The model `{model}` does not exist", "model", status=404,
                                 code="model_not_found")
        try:
            action, resolved = openai_play(policy, model, outputs, turn, choice, calls_made,
                                           unknown=unknown, where="input", seen=seen)
        except RequestInvalid as exc:
            return exc.status, error_body("invalid_request_error", exc.message, exc.param,
                                          exc.code)
        # Call ids number the calls of the conversation (call_number), so they are unique
        # in it; the answer's ids derive from the request (content_id).
        if action.text is not None:
            output.append({"type": "message", "id": f"msg_{key}", "role": "assistant",
                           "status": "completed", "content": [
                               {"type": "output_text", "text": action.text,
                                "annotations": []}]})
            spent += tokens_of(action.text)
            break
        hosted = [session.server_of(c.name) if session is not None else None
                  for c in action.calls]
        for i, (c, server) in enumerate(zip(action.calls, hosted, strict=True)):
            arguments = c.arguments_text()
            spent += tokens_of(c.name) + tokens_of(arguments)
            if server is None:
                output.append({"type": "function_call", "id": f"fc_{n}_{i}",
                               "call_id": f"call_{n}_{i}", "name": c.name,
                               "arguments": arguments, "status": "completed"})
                continue
            outcome = (server.call(c.name, c.arguments) if isinstance(c.arguments, dict)
                       and c.raw_arguments is None else _unparsed(arguments))
            output.append(call_item(f"mcp_{n}_{i}", server, c.name, arguments, outcome))
            budget -= 1
        if any(s is None for s in hosted) or not action.calls:
            break
    return 200, {"id": f"resp_{key}", "object": "response", "created_at": 0,
                 "status": "completed", "model": resolved, "output": output,
                 "parallel_tool_calls": body.get("parallel_tool_calls", True),
                 "previous_response_id": body.get("previous_response_id"),
                 "store": body.get("store", True),
                 "tool_choice": body.get("tool_choice", "auto"),
                 "tools": [_echoed(t) for t in body.get("tools", [])],
                 "usage": usage(input_tokens, spent)}


def _unparsed(arguments: str) -> hosted_mcp.Outcome:
    """The outcome of a hosted call whose arguments are not a JSON object: the API sends
    no such call to the server (a protocol error, as a server refuses it)."""
    return hosted_mcp.Outcome([], True, ("mcp_protocol_error", -32602,
                                         f"Invalid arguments: {arguments[:200]}"))


def _echoed(tool: Any) -> Any:
    """A request's tool as the answer echoes it: an MCP tool without its secrets
    (``headers``, ``authorization``)."""
    if isinstance(tool, dict) and tool.get("type") == "mcp":
        return {k: v for k, v in tool.items() if k not in ("headers", "authorization")}
    return tool


# The members a broken-body fault's bytes are cut from are frozen at these values: the
# fault stands for a proxy's damage, whose bytes (quoted by traces) must not depend on the
# request's tools or on the answer's ids.
_BROKEN_FROZEN = {"id": "resp_sim", "parallel_tool_calls": True, "tool_choice": "auto",
                  "tools": []}


def previous_not_found(prev: str) -> RequestInvalid:
    """The API's refusal of an unknown ``previous_response_id``."""
    return RequestInvalid(f"Previous response with id '{prev[:80]}' not found.",
                          "previous_response_id", code="previous_response_not_found")


def expand(body: dict[str, Any], store: ResponseStore | None) -> dict[str, Any] | None:
    """``body`` with the conversation of its ``previous_response_id`` put before its
    input (the stored request's input, then that answer's output); None without one."""
    prev = body.get("previous_response_id")
    if prev is None:
        return None
    stored = store.get(prev) if store is not None else None
    if stored is None:
        raise previous_not_found(prev)
    conversation, answer = stored
    return {**body, "input": [*conversation, *answer["output"], *items_of(body)],
            "previous_response_id": prev}


def events(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The documented event sequence that streams ``answer`` (a 200 body of :func:`respond`).

    response.created, response.in_progress; per output item: output_item.added, then for
    a message content_part.added, output_text.delta…, output_text.done,
    content_part.done, for a call function_call_arguments.delta…, …done, for a hosted
    MCP listing mcp_list_tools.in_progress and .completed, for a hosted MCP call
    mcp_call.in_progress, mcp_call_arguments.delta…, .done, mcp_call.completed (or
    .failed); then output_item.done; finally response.completed with the whole answer.
    """
    out: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        out.append({"type": kind, "sequence_number": len(out), **fields})

    pending = {**answer, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for i, item in enumerate(answer["output"]):
        at = {"item_id": item["id"], "output_index": i}
        if item["type"] == "message":
            emit("response.output_item.added", output_index=i,
                 item={**item, "status": "in_progress", "content": []})
            for j, part in enumerate(item["content"]):
                emit("response.content_part.added", **at, content_index=j,
                     part={**part, "text": ""})
                for piece in text_chunks(part["text"]):
                    emit("response.output_text.delta", **at, content_index=j, delta=piece,
                         logprobs=[])
                emit("response.output_text.done", **at, content_index=j, text=part["text"],
                     logprobs=[])
                emit("response.content_part.done", **at, content_index=j, part=part)
        elif item["type"] == "mcp_list_tools":
            emit("response.output_item.added", output_index=i, item={**item, "tools": []})
            emit("response.mcp_list_tools.in_progress", **at)
            emit("response.mcp_list_tools.completed", **at)
        elif item["type"] == "mcp_call":
            emit("response.output_item.added", output_index=i,
                 item={**item, "status": "in_progress", "arguments": "", "output": None,
                       "error": None})
            emit("response.mcp_call.in_progress", **at)
            for piece in text_chunks(item["arguments"]):
                emit("response.mcp_call_arguments.delta", **at, delta=piece)
            emit("response.mcp_call_arguments.done", **at, arguments=item["arguments"])
            emit("response.mcp_call.failed" if item["error"] else "response.mcp_call.completed",
                 **at)
        else:
            emit("response.output_item.added", output_index=i,
                 item={**item, "status": "in_progress", "arguments": ""})
            for piece in text_chunks(item["arguments"]):
                emit("response.function_call_arguments.delta", **at, delta=piece)
            emit("response.function_call_arguments.done", **at, name=item["name"],
                 arguments=item["arguments"])
        emit("response.output_item.done", output_index=i, item=item)
    emit("response.completed", response=answer)
    return out


class ResponsesSimulator(OpenAIErrors, Simulator):
    """The Responses API on the simulator base (:mod:`reactlab.simulate.base`)."""

    name = "openai"
    http: ClassVar[ModuleType] = httpx
    broken_member = "output"

    def broken_source(self, answer: dict[str, Any]) -> dict[str, Any]:
        # Cut from the answer as it was before usage was counted (no `usage` key) and with
        # the request-dependent members frozen, so a fault's bytes, and the traces that
        # quote them, depend on the script's answer only.
        answer.pop("usage", None)
        if "output" in answer:
            answer.pop("previous_response_id", None)
            answer.pop("store", None)
            answer.update(_BROKEN_FROZEN)
            answer["output"] = [{**o, "id": "msg_1"} if o.get("type") == "message" else o
                                for o in answer["output"]]
        return answer

    def expand(self, body: dict[str, Any],
               store: ResponseStore | None) -> dict[str, Any] | None:
        return expand(body, store)

    def remember(self, store: ResponseStore, body: dict[str, Any],
                 answer: dict[str, Any]) -> None:
        if body.get("store") is not False:
            store.put(answer["id"], items_of(body), answer)


SIMULATOR = ResponsesSimulator(validate, step_of, respond, events)
handler = SIMULATOR.handler
fault_response = SIMULATOR.fault_response
with_faults = SIMULATOR.with_faults
