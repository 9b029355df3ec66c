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

from reactlab.core.errors import ScriptError
from reactlab.simulate import (
    RequestInvalid,
    ResponseStore,
    ScriptedPolicy,
    ToolChoice,
    content_id,
    count_runs,
    hosted_mcp,
    pair_results,
    parse_tool_output,
    text_chunks,
    tokens_of,
)
from reactlab.simulate.base import OpenAIErrors, Simulator, openai_error_body

_ASSISTANT_TYPES = {"function_call", "reasoning", "mcp_call"}
_ROLES = {"user", "assistant", "system", "developer"}
_ITEM_TYPES = {"message", "function_call", "function_call_output", "reasoning",
               "item_reference", "mcp_call", "mcp_list_tools"}
_TEXT_PARTS = {"input_text", "output_text"}
_OTHER_PARTS = {"input_image", "input_file", "input_audio", "refusal", "summary_text",
                "reasoning_text"}
_OPTIONAL: dict[str, tuple[type | tuple[type, ...], str]] = {
    "instructions": (str, "a string"), "stream": (bool, "a boolean"),
    "store": (bool, "a boolean"), "parallel_tool_calls": (bool, "a boolean"),
    "metadata": (dict, "an object"), "tool_choice": ((str, dict), "a string or an object"),
    "temperature": ((int, float), "a number"), "top_p": ((int, float), "a number"),
    "include": (list, "an array"), "text": (dict, "an object"),
    "reasoning": (dict, "an object"), "stream_options": (dict, "an object"),
    "truncation": (str, "a string"), "user": (str, "a string"),
    "service_tier": (str, "a string"), "prompt_cache_key": (str, "a string"),
    "max_tool_calls": (int, "an integer"),
}


def _is_assistant(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get("type") in _ASSISTANT_TYPES:
        return True
    return item.get("role") == "assistant"


error_body = openai_error_body  # the Responses API's error shape


def _items(body: dict[str, Any]) -> list[Any]:
    items = body.get("input")
    return [{"role": "user", "content": items}] if isinstance(items, str) else (items or [])


def step_of(body: dict[str, Any]) -> int:
    """The loop step of a request: 1 + the assistant turns its input holds."""
    return _turns(_items(body)) + 1


def _turns(items: list[Any]) -> int:
    """The scripted model's turns that ``items`` hold: runs of assistant items, plus the
    turns that one answer ran on a hosted MCP server (:func:`hosted_mcp.extra_turns`)."""
    turns = count_runs([_is_assistant(x) for x in items])
    if any(isinstance(x, dict) and x.get("type") == "mcp_call" for x in items):
        turns += hosted_mcp.extra_turns(_turn_blocks(items))
    return turns


def _turn_blocks(items: list[Any]) -> list[tuple[str, Any]]:
    blocks: list[tuple[str, Any]] = []
    for x in items:
        kind = x.get("type") if isinstance(x, dict) else None
        if kind == "mcp_call":
            blocks += [("call", x.get("id")), ("result", x.get("id"))]
        elif kind == "function_call":
            blocks.append(("call", x.get("call_id")))
        elif kind == "mcp_list_tools":
            continue
        else:
            blocks.append(("other" if _is_assistant(x) else "end", None))
    return blocks


# --- validation ---------------------------------------------------------------------


def _type_error(param: str, expected: str, value: Any) -> RequestInvalid:
    return SIMULATOR.wrong_type(param, expected, value)


def _need(item: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
          where: str) -> Any:
    return SIMULATOR.need(item, key, kind, expected, where)


def _parts(parts: Any, where: str, allowed: set[str]) -> None:
    if not isinstance(parts, list):
        raise _type_error(where, "a string or an array of content parts", parts)
    for j, part in enumerate(parts):
        pw = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise _type_error(pw, "an object", part)
        kind = _need(part, "type", str, "a string", pw)
        if kind not in allowed:
            raise RequestInvalid(f"Invalid value: '{kind[:40]}'. Supported values are: "
                                 f"{', '.join(sorted(allowed))}.", f"{pw}.type",
                                 code="invalid_value")
        if kind in _TEXT_PARTS:
            _need(part, "text", str, "a string", pw)


def validate(body: dict[str, Any]) -> None:
    """RequestInvalid (with the documented param path) for a malformed request body."""
    for name, kind, expected in (("model", str, "a string"),
                                 ("input", (str, list), "a string or an array")):
        value = body.get(name)
        if value is None:
            raise RequestInvalid(f"Missing required parameter: '{name}'.", name,
                                 code="missing_required_parameter")
        if not isinstance(value, kind):
            raise _type_error(name, expected, value)
    for name, (kinds, expected) in _OPTIONAL.items():
        value = body.get(name)
        if value is not None and (not isinstance(value, kinds) or (
                isinstance(value, bool) and kinds in ((int, float),))):
            raise _type_error(name, expected, value)
    mot = body.get("max_output_tokens")
    if mot is not None:
        if not isinstance(mot, int) or isinstance(mot, bool):
            raise _type_error("max_output_tokens", "an integer", mot)
        if mot < 16:
            raise RequestInvalid("Invalid 'max_output_tokens': integer below minimum value. "
                                 f"Expected a value >= 16, but got {mot} instead.",
                                 "max_output_tokens", code="integer_below_min_value")
    prev = body.get("previous_response_id")
    if prev is not None and not isinstance(prev, str):
        raise _type_error("previous_response_id", "a string", prev)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _type_error("tools", "an array", tools)
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise _type_error(f"tools[{i}]", "an object", tool)
            kind = _need(tool, "type", str, "a string", f"tools[{i}]")
            if kind == "function":
                _need(tool, "name", str, "a string", f"tools[{i}]")
            elif kind == "mcp":
                _validate_mcp_tool(tool, f"tools[{i}]")
        labels = [t["server_label"] for t in tools if t.get("type") == "mcp"]
        for label in labels:
            if labels.count(label) > 1:
                raise RequestInvalid(f"Duplicate MCP server_label '{label[:64]}'.",
                                     "tools", code="invalid_value")
    _validate_tool_choice(body)
    if isinstance(body["input"], str):
        return
    for i, item in enumerate(body["input"]):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise _type_error(where, "an object", item)
        kind = item.get("type", "message")
        if not isinstance(kind, str) or kind not in _ITEM_TYPES:
            raise RequestInvalid(f"Invalid value: {str(kind)[:40]!r}. Supported values are: "
                                 f"{', '.join(sorted(_ITEM_TYPES))}.", f"{where}.type",
                                 code="invalid_value")
        if kind == "message":
            role = _need(item, "role", str, "a string", where)
            if role not in _ROLES:
                raise RequestInvalid(f"Invalid value: '{role[:40]}'. Supported values are: "
                                     f"{', '.join(sorted(_ROLES))}.", f"{where}.role",
                                     code="invalid_value")
            content = item.get("content")
            if not isinstance(content, str):
                _parts(content, f"{where}.content", _TEXT_PARTS | _OTHER_PARTS)
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                _need(item, key, str, "a string", where)
        elif kind == "function_call_output":
            _need(item, "call_id", str, "a string", where)
            output = item.get("output")
            if not isinstance(output, str):
                _parts(output, f"{where}.output", {"input_text", "input_image", "input_file"})
        elif kind == "item_reference":
            _need(item, "id", str, "a string", where)
        elif kind == "mcp_call":
            for key in ("id", "name", "arguments", "server_label"):
                _need(item, key, str, "a string", where)
        elif kind == "mcp_list_tools":
            _need(item, "server_label", str, "a string", where)
            _need(item, "tools", list, "an array", where)


def _validate_mcp_tool(tool: dict[str, Any], where: str) -> None:
    """A hosted MCP tool as the simulator can serve it: a ``server_url`` (no connector or
    tunnel), ``require_approval: "never"`` (the simulator asks no approvals; the API's
    default is ``always``), string ``headers``, an ``allowed_tools`` list or filter."""
    _need(tool, "server_label", str, "a string", where)
    url = _need(tool, "server_url", str, "a string", where)
    if not url.startswith(("http://", "https://")):
        raise RequestInvalid(f"Invalid 'server_url': {url[:80]!r} is not an http(s) URL.",
                             f"{where}.server_url", code="invalid_value")
    headers = tool.get("headers")
    if headers is not None and not (isinstance(headers, dict) and all(
            isinstance(v, str) for v in headers.values())):
        raise _type_error(f"{where}.headers", "an object of strings", headers)
    for key in ("authorization", "server_description"):
        if tool.get(key) is not None and not isinstance(tool[key], str):
            raise _type_error(f"{where}.{key}", "a string", tool[key])
    allowed = tool.get("allowed_tools")
    names = allowed.get("tool_names") if isinstance(allowed, dict) else allowed
    if allowed is not None and not (isinstance(names, list | type(None)) and all(
            isinstance(n, str) for n in names or ())):
        raise _type_error(f"{where}.allowed_tools", "an array of strings or a filter "
                          "object", allowed)
    if tool.get("require_approval") != "never":
        raise RequestInvalid(
            "The simulator runs hosted MCP tools without approval requests: set "
            "'require_approval' to 'never' (the API's default is 'always').",
            f"{where}.require_approval", code="invalid_value")


_CHOICES = ("none", "auto", "required")


def _validate_tool_choice(body: dict[str, Any]) -> None:
    choice = body.get("tool_choice")
    if isinstance(choice, str) and choice not in _CHOICES:
        raise RequestInvalid(f"Invalid value: '{choice[:40]}'. Supported values are: "
                             "'none', 'auto', and 'required'.", "tool_choice",
                             code="invalid_value")
    if isinstance(choice, dict):
        kind = _need(choice, "type", str, "a string", "tool_choice")
        if kind == "function":
            name = _need(choice, "name", str, "a string", "tool_choice")
            if name not in offered(body):
                raise RequestInvalid(f"Tool choice '{name[:64]}' not found in 'tools' "
                                     "parameter.", "tool_choice")


def offered(body: dict[str, Any]) -> tuple[str, ...]:
    """The names of the function tools a (validated) request offers, in order."""
    return tuple(t["name"] for t in body.get("tools") or ()
                 if t.get("type") == "function" and isinstance(t.get("name"), str))


def tool_choice(body: dict[str, Any]) -> ToolChoice:
    """What a (validated) request lets the model do with its tools: ``tool_choice``
    (``none`` / ``auto`` / ``required`` / a function / ``allowed_tools`` in ``required``
    mode) and ``parallel_tool_calls``."""
    choice, mode, name = body.get("tool_choice"), "auto", None
    if choice in ("none", "required"):
        mode = choice
    elif isinstance(choice, dict) and choice.get("type") == "function":
        mode, name = "tool", choice["name"]
    elif isinstance(choice, dict) and choice.get("type") == "allowed_tools" and (
            choice.get("mode") == "required"):
        mode = "required"
    return ToolChoice(mode, name, body.get("parallel_tool_calls") is not False, offered(body))


def output_text(output: Any) -> str:
    """A ``function_call_output.output`` as text: the string, or its text parts joined."""
    if isinstance(output, str):
        return output
    return "".join(p["text"] for p in output if p.get("type") == "input_text")


# --- answers --------------------------------------------------------------------------


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """The Responses API's ``usage`` object (``input_tokens_details`` with both its
    required counts: the SDK's ``Response`` type refuses one without ``cache_write_tokens``)."""
    return {"input_tokens": input_tokens,
            "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


def _state(items: list[Any]) -> tuple[list[str], int, int]:
    """(tool outputs in the order of the calls, turns, calls made) of a conversation:
    ``function_call`` items answered by ``function_call_output`` items (RequestInvalid
    for an output that answers no call), ``mcp_call`` items carrying their own."""
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
    calls_made = sum(isinstance(x, dict) and x.get("type") in ("function_call", "mcp_call")
                     for x in items)
    return pair_results(call_ids, outputs, "call_id"), _turns(items), calls_made


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


def hosted_servers(body: dict[str, Any]) -> list[hosted_mcp.Server]:
    """The hosted MCP servers of a (validated) request: its ``mcp`` tools, in order."""
    servers = []
    for tool in body.get("tools") or ():
        if tool.get("type") != "mcp":
            continue
        headers = dict(tool.get("headers") or {})
        if tool.get("authorization"):
            headers["authorization"] = f"Bearer {tool['authorization']}"
        allowed = tool.get("allowed_tools")
        names = allowed.get("tool_names") if isinstance(allowed, dict) else allowed
        servers.append(hosted_mcp.Server(
            tool["server_label"], tool["server_url"], headers,
            None if names is None else frozenset(names),
            read_only=isinstance(allowed, dict) and allowed.get("read_only") is True))
    return servers


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
    items = _items(body)
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
            outputs, turn, calls_made = _state(conversation)
        except RequestInvalid as exc:
            return 400, error_body("invalid_request_error", exc.message, "input", exc.code)
        results = [parse_tool_output(o) for o in outputs]
        try:
            action = policy.act(model, turn, results, "\n".join(outputs), choice, calls_made)
            resolved = policy.resolve(model)
        except KeyError:
            return 404, error_body("invalid_request_error",
                                   f"The model `{model}` does not exist", "model",
                                   "model_not_found")
        except ScriptError as exc:
            return 400, error_body("invalid_request_error", str(exc), None, "script_error")
        except RecursionError:
            return 400, error_body("invalid_request_error", "a tool output is nested too "
                                   "deeply for the scripted model", "input", "script_error")
        # Call ids number the calls of the conversation (n calls made before this turn), so
        # they are unique in it; the answer's ids derive from the request (content_id).
        n = calls_made
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
    return {**body, "input": [*conversation, *answer["output"], *_items(body)],
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

    def validate(self, body: dict[str, Any]) -> None:
        validate(body)

    def step_of(self, body: dict[str, Any]) -> int:
        return step_of(body)

    def respond(self, policy: ScriptedPolicy, body: dict[str, Any],
                input_tokens: int = 0) -> tuple[int, dict[str, Any]]:
        return respond(policy, body, input_tokens)

    def events(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        return events(answer)

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
            store.put(answer["id"], _items(body), answer)


SIMULATOR = ResponsesSimulator()
handler = SIMULATOR.handler
fault_response = SIMULATOR.fault_response
with_faults = SIMULATOR.with_faults
