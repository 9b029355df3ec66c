"""What a Responses request may hold, as the API validates it (:func:`validate`: fields,
input items, tools, hosted MCP tools, tool choice), and what it asks of the scripted
model: its input items and turns (:func:`step_of`), its tool choice
(:func:`tool_choice`), its hosted MCP servers (:func:`hosted_servers`). The answers are
:mod:`reactlab.simulate.openai_responses`'s."""

from __future__ import annotations

from typing import Any

from reactlab.simulate import (
    RequestInvalid,
    ToolChoice,
    answer_fields,
    count_runs,
    hosted_mcp,
)
from reactlab.simulate.base import OpenAIErrors, content_parts, need

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


def is_assistant(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get("type") in _ASSISTANT_TYPES:
        return True
    return item.get("role") == "assistant"


def items_of(body: dict[str, Any]) -> list[Any]:
    items = body.get("input")
    return [{"role": "user", "content": items}] if isinstance(items, str) else (items or [])


def step_of(body: dict[str, Any]) -> int:
    """The loop step of a request: 1 + the assistant turns its input holds."""
    return assistant_turns(items_of(body)) + 1


def assistant_turns(items: list[Any]) -> int:
    """The scripted model's turns that ``items`` hold: runs of assistant items, plus the
    turns that one answer ran on a hosted MCP server (:func:`hosted_mcp.extra_turns`)."""
    turns = count_runs([is_assistant(x) for x in items])
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
            blocks.append(("other" if is_assistant(x) else "end", None))
    return blocks


# --- validation ---------------------------------------------------------------------


_ERRORS = OpenAIErrors()  # the API's refusals of a missing field or a wrong type


def _type_error(param: str, expected: str, value: Any) -> RequestInvalid:
    return _ERRORS.wrong_type(param, expected, value)


def _need(item: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
          where: str) -> Any:
    return need(item, key, kind, expected, where, _ERRORS.missing, _ERRORS.wrong_type)


def _parts(parts: Any, where: str, allowed: set[str]) -> None:
    if not isinstance(parts, list):
        raise _type_error(where, "a string or an array of content parts", parts)
    for pw, part, kind in content_parts(parts, where, _ERRORS.missing, _ERRORS.wrong_type):
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
    return ToolChoice(mode, name, body.get("parallel_tool_calls") is not False, offered(body),
                      answer_fields((t["name"], t.get("parameters"))
                                    for t in body.get("tools") or ()
                                    if t.get("type") == "function"
                                    and isinstance(t.get("name"), str)))


def output_text(output: Any) -> str:
    """A ``function_call_output.output`` as text: the string, or its text parts joined."""
    if isinstance(output, str):
        return output
    return "".join(p["text"] for p in output if p.get("type") == "input_text")


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
