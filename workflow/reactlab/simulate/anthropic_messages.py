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
    ToolChoice,
    content_id,
    count_runs,
    cut_json,
    hosted_mcp,
    pair_results,
    parse_tool_output,
    partial_object,
    retry_after_headers,
    text_chunks,
    tokens_of,
)
from reactlab.simulate.base import Simulator

_BLOCK_TYPES = {"text", "image", "document", "tool_use", "tool_result", "thinking",
                "redacted_thinking", "search_result", "mcp_tool_use", "mcp_tool_result"}
_RESULT_BLOCKS = {"text", "image", "document", "search_result"}
_OPTIONAL: dict[str, tuple[type | tuple[type, ...], str]] = {
    "system": ((str, list), "a valid string or list"), "stream": (bool, "a valid boolean"),
    "metadata": (dict, "a valid dictionary"), "tool_choice": (dict, "a valid dictionary"),
    "temperature": ((int, float), "a valid number"), "top_p": ((int, float), "a valid number"),
    "top_k": (int, "a valid integer"), "stop_sequences": (list, "a valid list"),
    "thinking": (dict, "a valid dictionary"), "mcp_servers": (list, "a valid list"),
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
    return _turns(_messages(body)) + 1


def _turns(messages: list[dict[str, Any]]) -> int:
    """The scripted model's turns that ``messages`` hold: runs of assistant messages,
    plus the turns that one answer ran on a hosted MCP server
    (:func:`hosted_mcp.extra_turns`)."""
    turns = count_runs([m.get("role") == "assistant" for m in messages])
    blocks: list[tuple[str, Any]] = []
    for m in messages:
        content = m.get("content")
        if m.get("role") != "assistant" or not isinstance(content, list):
            blocks.append(("end", None))
            continue
        for b in content:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind in ("tool_use", "mcp_tool_use"):
                blocks.append(("call", b.get("id")))
            elif kind == "mcp_tool_result":
                blocks.append(("result", b.get("tool_use_id")))
            else:
                blocks.append(("other", None))
    if any(k == "result" for k, _ in blocks):
        turns += hosted_mcp.extra_turns(blocks)
    return turns


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
        elif kind in ("tool_use", "mcp_tool_use"):
            _need(block, "id", str, "a valid string", bw)
            _need(block, "name", str, "a valid string", bw)
            if kind == "mcp_tool_use":
                _need(block, "server_name", str, "a valid string", bw)
            if "input" not in block:
                raise RequestInvalid(f"{bw}.input: Field required", f"{bw}.input")
            if not isinstance(block["input"], dict):
                raise _bad(f"{bw}.input", "a valid dictionary")
        elif kind in ("tool_result", "mcp_tool_result"):
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
            if tool.get("type") == "mcp_toolset":
                _validate_toolset(tool, f"tools.{i}")
            else:
                _need(tool, "name", str, "a valid string", f"tools.{i}")
    _validate_mcp_servers(body)
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


def _validate_toolset(tool: dict[str, Any], where: str) -> None:
    _need(tool, "mcp_server_name", str, "a valid string", where)
    for key in ("default_config", "configs"):
        if tool.get(key) is not None and not isinstance(tool[key], dict):
            raise _bad(f"{where}.{key}", "a valid dictionary")
    configs = [tool.get("default_config") or {}, *(tool.get("configs") or {}).values()]
    for config in configs:
        if not isinstance(config, dict) or not isinstance(config.get("enabled", True), bool):
            raise _bad(f"{where}.configs", "a valid dictionary of tool configurations")


def _validate_mcp_servers(body: dict[str, Any]) -> None:
    """``mcp_servers`` (URL servers with unique names, the 2025-04-04 connector's
    ``tool_configuration``) and the ``mcp_toolset`` tools: a server is configured by one
    toolset at most, and a toolset names a server (:func:`admit`: which the beta needs)."""
    servers = body.get("mcp_servers")
    toolsets = [t for t in body.get("tools") or () if t.get("type") == "mcp_toolset"]
    names: list[str] = []
    for i, server in enumerate(servers or ()):
        where = f"mcp_servers.{i}"
        if not isinstance(server, dict):
            raise _bad(where, "a valid dictionary")
        if _need(server, "type", str, "a valid string", where) != "url":
            raise RequestInvalid(f"{where}.type: Input should be 'url'", f"{where}.type")
        url = _need(server, "url", str, "a valid string", where)
        if not url.startswith(("http://", "https://")):
            raise RequestInvalid(f"{where}.url: URL must use http or https", f"{where}.url")
        name = _need(server, "name", str, "a valid string", where)
        token = server.get("authorization_token")
        if token is not None and not isinstance(token, str):
            raise _bad(f"{where}.authorization_token", "a valid string")
        if name in names:
            raise RequestInvalid(f"mcp_servers: duplicate server name '{name[:64]}'",
                                 "mcp_servers")
        names.append(name)
        config = server.get("tool_configuration")
        if config is not None and not (
                isinstance(config, dict)
                and isinstance(config.get("enabled", True), bool)
                and isinstance(config.get("allowed_tools") or [], list)):
            raise _bad(f"{where}.tool_configuration", "a valid dictionary")
    used = [t["mcp_server_name"] for t in toolsets]
    for name in used:
        if name not in names:
            raise RequestInvalid(f"tools: mcp_toolset references MCP server '{name[:64]}', "
                                 "which is not defined in mcp_servers", "tools")
        if used.count(name) > 1:
            raise RequestInvalid(f"tools: MCP server '{name[:64]}' is configured by more "
                                 "than one mcp_toolset", "tools")


def admit(body: dict[str, Any], headers: Any) -> None:
    """``mcp_servers`` needs the MCP connector's beta header (``anthropic-beta``): with the
    current version every server is configured by an ``mcp_toolset`` tool; with the first
    (2025-04-04) there are no toolsets, a server's ``tool_configuration`` says which of
    its tools the model may use."""
    if body.get("mcp_servers") is None:
        return
    betas = {b.strip() for b in str(headers.get("anthropic-beta") or "").split(",")}
    used = {t["mcp_server_name"] for t in body.get("tools") or ()
            if t.get("type") == "mcp_toolset"}
    if hosted_mcp.ANTHROPIC_BETA in betas:
        for server in body["mcp_servers"]:
            if server["name"] not in used:
                raise RequestInvalid(f"mcp_servers: MCP server '{server['name'][:64]}' is "
                                     "not referenced by any mcp_toolset in tools",
                                     "mcp_servers")
    elif hosted_mcp.ANTHROPIC_BETA_2025_04 in betas:
        if used:
            raise RequestInvalid(f"tools: mcp_toolset needs the beta header 'anthropic-beta: "
                                 f"{hosted_mcp.ANTHROPIC_BETA}'", "tools")
    else:
        raise RequestInvalid("mcp_servers: the MCP connector needs the beta header "
                             f"'anthropic-beta: {hosted_mcp.ANTHROPIC_BETA}'", "mcp_servers")


def hosted_servers(body: dict[str, Any]) -> list[hosted_mcp.Server]:
    """The hosted MCP servers of a (validated) request (``mcp_servers``), each with the
    tools its ``mcp_toolset`` enables (``default_config`` / ``configs``)."""
    toolsets = {t["mcp_server_name"]: t for t in body.get("tools") or ()
                if t.get("type") == "mcp_toolset"}
    servers = []
    for server in body.get("mcp_servers") or ():
        toolset = toolsets.get(server["name"], {})
        legacy = server.get("tool_configuration") or {}  # the 2025-04-04 connector's
        allowed = legacy.get("allowed_tools")
        token = server.get("authorization_token")
        servers.append(hosted_mcp.Server(
            server["name"], server["url"],
            {"authorization": f"Bearer {token}"} if token else {},
            None if allowed is None else frozenset(allowed),
            default_on=(toolset.get("default_config") or {}).get(
                "enabled", legacy.get("enabled", True)),
            overrides={k: v.get("enabled", True)
                       for k, v in (toolset.get("configs") or {}).items()}))
    return servers


def tool_choice(body: dict[str, Any]) -> ToolChoice:
    """What a (validated) request lets the model do with its tools (``tool_choice``:
    auto / any / tool / none, and ``disable_parallel_tool_use``)."""
    choice = body.get("tool_choice") or {}
    modes: dict[Any, str] = {"any": "required", "tool": "tool", "none": "none"}
    mode = modes.get(choice.get("type"), "auto")
    offered = tuple(t["name"] for t in body.get("tools") or () if isinstance(t, dict)
                    and isinstance(t.get("name"), str))
    return ToolChoice(mode, choice.get("name") if mode == "tool" else None,
                      choice.get("disable_parallel_tool_use") is not True, offered)


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


def _state(messages: list[dict[str, Any]]) -> tuple[list[str], int, int]:
    """(tool results in the order of the calls, turns, calls made) of a conversation."""
    blocks = [b for m in messages if isinstance(m.get("content"), list)
              for b in m["content"] if isinstance(b, dict)]
    outputs = pair_results(
        [b["id"] for b in blocks if b.get("type") in ("tool_use", "mcp_tool_use")],
        [(b["tool_use_id"], hosted_mcp.content_text(b.get("content"))) for b in blocks
         if b.get("type") in ("tool_result", "mcp_tool_result")], "tool_use_id")
    calls_made = sum(b.get("type") in ("tool_use", "mcp_tool_use") for b in blocks)
    return outputs, _turns(messages), calls_made


def _respond(policy: ScriptedPolicy, body: dict[str, Any], input_tokens: int,
             session: hosted_mcp.Session | None) -> tuple[int, dict[str, Any]]:
    messages = _messages(body)
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
            outputs, turn, calls_made = _state(conversation)
        except RequestInvalid as exc:
            return 400, error_body("invalid_request_error", f"messages: {exc.message}")
        results = [parse_tool_output(o) for o in outputs]
        try:
            action = policy.act(model, turn, results, "\n".join(outputs), choice, calls_made)
            resolved = policy.resolve(model)
        except KeyError:
            return 404, error_body("not_found_error", f"model: {model}")
        except ScriptError as exc:
            return 400, error_body("invalid_request_error", str(exc))
        except RecursionError:
            return 400, error_body("invalid_request_error",
                                   "a tool result is nested too deeply for the scripted model")
        # Call ids number the calls of the conversation (n made before this turn): unique.
        n = calls_made
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

    def admit(self, body: dict[str, Any], headers: Any) -> None:
        admit(body, headers)

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
