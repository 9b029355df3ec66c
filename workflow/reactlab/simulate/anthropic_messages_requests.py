"""What a Messages request may hold, as the API validates it (:func:`validate`: fields,
messages and their blocks, tools, MCP servers and toolsets; :func:`admit`: the beta
headers they need), and what it asks of the scripted model: its turns
(:func:`step_of`), its tool choice (:func:`tool_choice`), its hosted MCP servers
(:func:`hosted_servers`). The answers are :mod:`reactlab.simulate.anthropic_messages`'s."""

from __future__ import annotations

from typing import Any

from reactlab.simulate import (
    RequestInvalid,
    ToolChoice,
    answer_fields,
    count_runs,
    hosted_mcp,
)
from reactlab.simulate.base import need

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


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def step_of(body: dict[str, Any]) -> int:
    """The loop step of a request: 1 + the assistant turns its messages hold."""
    return assistant_turns(messages_of(body)) + 1


def assistant_turns(messages: list[dict[str, Any]]) -> int:
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


def bad_type(where: str, expected: str) -> RequestInvalid:
    return RequestInvalid(f"{where}: Input should be {expected}", where)


def missing_field(path: str) -> RequestInvalid:
    """The API's refusal of a required field that is absent (or null)."""
    return RequestInvalid(f"{path}: Field required", path)


def wrong_type(path: str, expected: str, value: Any) -> RequestInvalid:
    """The API's refusal of a field of the wrong type (the value is not quoted)."""
    return bad_type(path, expected)


def _need(d: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
          where: str) -> Any:
    return need(d, key, kind, expected, where, missing_field, wrong_type)


def _blocks(blocks: Any, where: str, allowed: set[str]) -> None:
    if not isinstance(blocks, list):
        raise bad_type(where, "a valid string or list")
    for j, block in enumerate(blocks):
        bw = f"{where}.{j}"
        if not isinstance(block, dict):
            raise bad_type(bw, "a valid dictionary")
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
                raise bad_type(f"{bw}.input", "a valid dictionary")
        elif kind in ("tool_result", "mcp_tool_result"):
            _need(block, "tool_use_id", str, "a valid string", bw)
            content = block.get("content")
            if content is not None and not isinstance(content, str):
                _blocks(content, f"{bw}.content", _RESULT_BLOCKS)
            if block.get("is_error") is not None and not isinstance(block["is_error"], bool):
                raise bad_type(f"{bw}.is_error", "a valid boolean")


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
            raise bad_type(name, expected)
    if not count_only and body["max_tokens"] < 1:
        raise RequestInvalid("max_tokens: Input should be greater than or equal to 1",
                             "max_tokens")
    for name, (kinds, expected) in _OPTIONAL.items():
        value = body.get(name)
        if value is not None and (not isinstance(value, kinds) or (isinstance(value, bool)
                                  and kinds is not bool)):
            raise bad_type(name, expected)
    if isinstance(body.get("system"), list):
        _blocks(body["system"], "system", {"text"})
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise bad_type("tools", "a valid list")
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise bad_type(f"tools.{i}", "a valid dictionary")
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
            raise bad_type("tool_choice.disable_parallel_tool_use", "a valid boolean")
    for i, message in enumerate(body["messages"]):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise bad_type(where, "a valid dictionary")
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
            raise bad_type(f"{where}.{key}", "a valid dictionary")
    configs = [tool.get("default_config") or {}, *(tool.get("configs") or {}).values()]
    for config in configs:
        if not isinstance(config, dict) or not isinstance(config.get("enabled", True), bool):
            raise bad_type(f"{where}.configs", "a valid dictionary of tool configurations")


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
            raise bad_type(where, "a valid dictionary")
        if _need(server, "type", str, "a valid string", where) != "url":
            raise RequestInvalid(f"{where}.type: Input should be 'url'", f"{where}.type")
        url = _need(server, "url", str, "a valid string", where)
        if not url.startswith(("http://", "https://")):
            raise RequestInvalid(f"{where}.url: URL must use http or https", f"{where}.url")
        name = _need(server, "name", str, "a valid string", where)
        token = server.get("authorization_token")
        if token is not None and not isinstance(token, str):
            raise bad_type(f"{where}.authorization_token", "a valid string")
        if name in names:
            raise RequestInvalid(f"mcp_servers: duplicate server name '{name[:64]}'",
                                 "mcp_servers")
        names.append(name)
        config = server.get("tool_configuration")
        if config is not None and not (
                isinstance(config, dict)
                and isinstance(config.get("enabled", True), bool)
                and isinstance(config.get("allowed_tools") or [], list)):
            raise bad_type(f"{where}.tool_configuration", "a valid dictionary")
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
                      choice.get("disable_parallel_tool_use") is not True, offered,
                      answer_fields((t["name"], t.get("input_schema"))
                                    for t in body.get("tools") or () if isinstance(t, dict)
                                    and isinstance(t.get("name"), str)))
