"""What a Chat Completions request may hold, as the API validates it (:func:`validate`:
fields, messages, tools, the conversation's order), and what it asks of the scripted
model: its turns (:func:`step_of`) and its tool choice (:func:`tool_choice`). The
answers are :mod:`reactlab.simulate.openai_chat`'s."""

from __future__ import annotations

import re
from typing import Any

from reactlab.simulate import RequestInvalid, ToolChoice, answer_fields, count_runs
from reactlab.simulate.base import content_parts

_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
#: Content part types each role may send (the API reference's unions).
_PARTS: dict[str, frozenset[str]] = {
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
    "system": frozenset({"text"}),
    "developer": frozenset({"text"}),
    "tool": frozenset({"text"}),
}
_ALL_PART_TYPES = ("text", "image_url", "input_audio", "refusal", "audio", "file")
_NUMBER = (int, float)
#: Optional top-level fields: (accepted types, what the error says is expected).
_OPTIONAL: dict[str, tuple[type | tuple[type, ...], str]] = {
    "stream": (bool, "a boolean"), "store": (bool, "a boolean"),
    "parallel_tool_calls": (bool, "a boolean"), "logprobs": (bool, "a boolean"),
    "metadata": (dict, "an object"), "tool_choice": ((str, dict), "a string or an object"),
    "temperature": (_NUMBER, "a number"), "top_p": (_NUMBER, "a number"),
    "frequency_penalty": (_NUMBER, "a number"), "presence_penalty": (_NUMBER, "a number"),
    "seed": (int, "an integer"), "n": (int, "an integer"),
    "max_tokens": (int, "an integer"), "max_completion_tokens": (int, "an integer"),
    "top_logprobs": (int, "an integer"), "stop": ((str, list), "a string or an array"),
    "stream_options": (dict, "an object"), "response_format": (dict, "an object"),
    "user": (str, "a string"), "service_tier": (str, "a string"),
    "reasoning_effort": (str, "a string"), "prompt_cache_key": (str, "a string"),
    "prompt_cache_retention": (str, "a string"),
    "prompt_cache_options": (dict, "an object"),
    "safety_identifier": (str, "a string"), "logit_bias": (dict, "an object"),
    "modalities": (list, "an array"), "audio": (dict, "an object"),
    "prediction": (dict, "an object"), "verbosity": (str, "a string"),
    "web_search_options": (dict, "an object"), "moderation": (dict, "an object"),
    "functions": (list, "an array"), "function_call": ((str, dict), "a string or an object"),
}
_KNOWN = frozenset({"model", "messages", "tools", *_OPTIONAL})
#: Inclusive ranges of the numeric fields: (low, high, integer?).
_RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    "temperature": (0, 2, False), "top_p": (0, 1, False),
    "frequency_penalty": (-2, 2, False), "presence_penalty": (-2, 2, False),
    "n": (1, 128, True), "max_tokens": (1, None, True),
    "max_completion_tokens": (1, None, True), "top_logprobs": (0, 20, True),
}
_TOOL_CHOICES = ("none", "auto", "required")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: The members a streamed request adds to the plain one (not counted in usage).
STREAM_MEMBERS = ("stream", "stream_options")


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def step_of(body: dict[str, Any]) -> int:
    """The loop step of a request: 1 + the assistant turns its messages hold."""
    return count_runs([m.get("role") == "assistant" for m in messages_of(body)]) + 1


# --- validation ---------------------------------------------------------------------


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def type_error(param: str, expected: str, value: Any) -> RequestInvalid:
    return RequestInvalid(f"Invalid type for '{param}': expected {expected}, but got "
                          f"{_kind(value)} instead.", param, code="invalid_type")


def missing_parameter(param: str) -> RequestInvalid:
    return RequestInvalid(f"Missing required parameter: '{param}'.", param,
                          code="missing_required_parameter")


def _invalid_value(param: str, value: Any, allowed: Any) -> RequestInvalid:
    options = [f"'{a}'" for a in allowed]
    listed = ", ".join(options[:-1]) + f", and {options[-1]}" if len(options) > 1 else options[0]
    return RequestInvalid(f"Invalid value: '{str(value)[:40]}'. Supported values are: "
                          f"{listed}.", param, code="invalid_value")


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    """isinstance, where a boolean is not a number."""
    if isinstance(value, bool):
        return kind is bool or (isinstance(kind, tuple) and bool in kind)
    return isinstance(value, kind)


def _need(d: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
          where: str) -> Any:
    value = d.get(key)
    if value is None:
        raise missing_parameter(f"{where}.{key}")
    if not _is(value, kind):
        raise type_error(f"{where}.{key}", expected, value)
    return value


def _non_empty(param: str, value: list[Any]) -> None:
    if not value:
        raise RequestInvalid(f"Invalid '{param}': empty array. Expected an array with minimum "
                             "length 1, but got an empty array instead.", param,
                             code="empty_array")


def _range(name: str, value: int | float) -> None:
    low, high, integer = _RANGES[name]
    what = "integer" if integer else "decimal"
    if low is not None and value < low:
        raise RequestInvalid(f"Invalid '{name}': {what} below minimum value. Expected a value "
                             f">= {low}, but got {value} instead.", name,
                             code=f"{what}_below_min_value")
    if high is not None and value > high:
        raise RequestInvalid(f"Invalid '{name}': {what} above maximum value. Expected a value "
                             f"<= {high}, but got {value} instead.", name,
                             code=f"{what}_above_max_value")


def _parts(parts: list[Any], where: str, allowed: frozenset[str]) -> None:
    _non_empty(where, parts)
    for pw, part, kind in content_parts(parts, where, missing_parameter, type_error):
        if kind not in allowed:
            raise _invalid_value(f"{pw}.type", kind,
                                 [t for t in _ALL_PART_TYPES if t in allowed])
        if kind == "text":
            _need(part, "text", str, "a string", pw)
        elif kind == "refusal":
            _need(part, "refusal", str, "a string", pw)
        elif kind == "image_url":
            image = _need(part, "image_url", dict, "an object", pw)
            _need(image, "url", str, "a string", f"{pw}.image_url")
            detail = image.get("detail")
            if detail is not None and detail not in ("auto", "low", "high", "original"):
                raise _invalid_value(f"{pw}.image_url.detail", detail,
                                     ("auto", "low", "high", "original"))
        elif kind == "input_audio":
            audio = _need(part, "input_audio", dict, "an object", pw)
            _need(audio, "data", str, "a string", f"{pw}.input_audio")
            fmt = _need(audio, "format", str, "a string", f"{pw}.input_audio")
            if fmt not in ("wav", "mp3"):
                raise _invalid_value(f"{pw}.input_audio.format", fmt, ("wav", "mp3"))
        elif kind == "file":
            file = _need(part, "file", dict, "an object", pw)
            for key in ("file_data", "file_id", "filename"):
                if file.get(key) is not None and not isinstance(file[key], str):
                    raise type_error(f"{pw}.file.{key}", "a string", file[key])


def _content(message: dict[str, Any], where: str, role: str) -> None:
    content = message.get("content")
    if content is None:
        if role == "assistant":
            return
        raise missing_parameter(f"{where}.content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise type_error(f"{where}.content", "one of a string or array of objects", content)
    _parts(content, f"{where}.content", _PARTS[role])


def _tool_calls(calls: Any, where: str) -> None:
    if not isinstance(calls, list):
        raise type_error(f"{where}.tool_calls", "an array", calls)
    _non_empty(f"{where}.tool_calls", calls)
    for j, call in enumerate(calls):
        cw = f"{where}.tool_calls[{j}]"
        if not isinstance(call, dict):
            raise type_error(cw, "an object", call)
        _need(call, "id", str, "a string", cw)
        kind = _need(call, "type", str, "a string", cw)
        if kind == "function":
            fn = _need(call, "function", dict, "an object", cw)
            _need(fn, "name", str, "a string", f"{cw}.function")
            if fn.get("arguments") is None:
                raise missing_parameter(f"{cw}.function.arguments")
            if not isinstance(fn["arguments"], str):
                raise type_error(f"{cw}.function.arguments", "a string", fn["arguments"])
        elif kind == "custom":
            custom = _need(call, "custom", dict, "an object", cw)
            _need(custom, "name", str, "a string", f"{cw}.custom")
            _need(custom, "input", str, "a string", f"{cw}.custom")
        else:
            raise _invalid_value(f"{cw}.type", kind, ("function", "custom"))


def _message(message: Any, i: int) -> None:
    where = f"messages[{i}]"
    if not isinstance(message, dict):
        raise type_error(where, "an object", message)
    role = message.get("role")
    if role is None:
        raise missing_parameter(f"{where}.role")
    if not isinstance(role, str):
        raise type_error(f"{where}.role", "a string", role)
    if role not in _ROLES:
        raise _invalid_value(f"{where}.role", role, _ROLES)
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise type_error(f"{where}.name", "a string", name)
    if role == "function":
        _need(message, "name", str, "a string", where)
        if "content" not in message:
            raise missing_parameter(f"{where}.content")
        if message["content"] is not None and not isinstance(message["content"], str):
            raise type_error(f"{where}.content", "a string", message["content"])
        return
    if role == "tool":
        tcid = message.get("tool_call_id")
        if tcid is None:
            raise RequestInvalid("Missing parameter 'tool_call_id': messages with role 'tool' "
                                 "must have a 'tool_call_id'.", f"messages.[{i}].tool_call_id")
        if not isinstance(tcid, str):
            raise type_error(f"{where}.tool_call_id", "a string", tcid)
    _content(message, where, role)
    if role != "assistant":
        return
    for key in ("refusal",):
        if message.get(key) is not None and not isinstance(message[key], str):
            raise type_error(f"{where}.{key}", "a string", message[key])
    if message.get("audio") is not None:
        _need(_need(message, "audio", dict, "an object", where), "id", str, "a string",
              f"{where}.audio")
    if message.get("tool_calls") is not None:
        _tool_calls(message["tool_calls"], where)
    elif message.get("function_call") is not None:
        fc = _need(message, "function_call", dict, "an object", where)
        _need(fc, "name", str, "a string", f"{where}.function_call")
        _need(fc, "arguments", str, "a string", f"{where}.function_call")
    elif message.get("content") is None and message.get("audio") is None:
        raise RequestInvalid("Invalid value for 'content': expected a string, got null.",
                             f"messages.[{i}].content")


def _tools(tools: Any) -> list[str]:
    """The names of the tools offered (RequestInvalid for a malformed tool list)."""
    if not isinstance(tools, list):
        raise type_error("tools", "an array", tools)
    names = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise type_error(where, "an object", tool)
        kind = _need(tool, "type", str, "a string", where)
        if kind not in ("function", "custom"):
            raise _invalid_value(f"{where}.type", kind, ("function", "custom"))
        spec = _need(tool, kind, dict, "an object", where)
        name = _need(spec, "name", str, "a string", f"{where}.{kind}")
        if not _NAME.match(name):
            raise RequestInvalid(f"Invalid '{where}.{kind}.name': string does not match "
                                 "pattern. Expected a string that matches the pattern "
                                 "'^[a-zA-Z0-9_-]+$'.", f"{where}.{kind}.name",
                                 code="invalid_value")
        if spec.get("description") is not None and not isinstance(spec["description"], str):
            raise type_error(f"{where}.{kind}.description", "a string", spec["description"])
        if kind == "function":
            params = spec.get("parameters")
            if params is not None and not isinstance(params, dict):
                raise type_error(f"{where}.function.parameters", "an object", params)
            strict = spec.get("strict")
            if strict is not None and not isinstance(strict, bool):
                raise type_error(f"{where}.function.strict", "a boolean", strict)
        names.append(name)
    return names


def _tool_choice(choice: Any, names: list[str]) -> None:
    if isinstance(choice, str):
        if choice not in _TOOL_CHOICES:
            raise _invalid_value("tool_choice", choice, _TOOL_CHOICES)
        return
    kind = _need(choice, "type", str, "a string", "tool_choice")
    if kind in ("function", "custom"):
        named = _need(_need(choice, kind, dict, "an object", "tool_choice"), "name", str,
                      "a string", f"tool_choice.{kind}")
        if named not in names:
            raise RequestInvalid(f"Invalid value for 'tool_choice': tool '{named[:64]}' is not "
                                 "among the 'tools' of the request.", "tool_choice",
                                 code="invalid_value")
    elif kind == "allowed_tools":
        allowed = _need(choice, "allowed_tools", dict, "an object", "tool_choice")
        mode = _need(allowed, "mode", str, "a string", "tool_choice.allowed_tools")
        if mode not in ("auto", "required"):
            raise _invalid_value("tool_choice.allowed_tools.mode", mode, ("auto", "required"))
        _need(allowed, "tools", list, "an array", "tool_choice.allowed_tools")
    else:
        raise _invalid_value("tool_choice.type", kind, ("function", "custom", "allowed_tools"))


def _conversation(messages: list[dict[str, Any]]) -> None:
    """The ordering rules: a tool message answers a call of the assistant message before
    it; every call is answered before the next non-tool message."""
    pending: list[str] | None = None  # calls of the last assistant message not yet answered
    opened = 0  # index of that assistant message
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            if pending is None or message["tool_call_id"] not in pending:
                raise RequestInvalid("Invalid parameter: messages with role 'tool' must be a "
                                     "response to a preceeding message with 'tool_calls'.",
                                     f"messages.[{i}].role")
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            raise _unanswered(pending, i)
        pending = None
        if role == "assistant" and message.get("tool_calls"):
            pending = [c["id"] for c in message["tool_calls"]]
            opened = i
    if pending:
        raise _unanswered(pending, opened)


def _unanswered(ids: list[str], i: int) -> RequestInvalid:
    return RequestInvalid("An assistant message with 'tool_calls' must be followed by tool "
                          "messages responding to each 'tool_call_id'. The following "
                          f"tool_call_ids did not have response messages: {', '.join(ids)}",
                          f"messages.[{i}].role")


def validate(body: dict[str, Any]) -> None:
    """RequestInvalid (with the API's message, param and code) for a malformed body."""
    unknown = [k for k in body if k not in _KNOWN]
    if unknown:
        raise RequestInvalid(f"Unrecognized request argument supplied: {unknown[0][:80]}")
    model = body.get("model")
    if model is None:
        raise missing_parameter("model")
    if not isinstance(model, str):
        raise type_error("model", "a string", model)
    messages = body.get("messages")
    if messages is None:
        raise missing_parameter("messages")
    if not isinstance(messages, list):
        raise type_error("messages", "an array", messages)
    _non_empty("messages", messages)
    for name, (kind, expected) in _OPTIONAL.items():
        value = body.get(name)
        if value is not None and not _is(value, kind):
            raise type_error(name, expected, value)
        if value is not None and name in _RANGES:
            _range(name, value)
    if body.get("stream_options") is not None and body.get("stream") is not True:
        raise RequestInvalid("The 'stream_options' parameter is only allowed when 'stream' is "
                             "enabled.", "stream_options")
    for key in ("include_usage", "include_obfuscation"):
        value = (body.get("stream_options") or {}).get(key)
        if value is not None and not isinstance(value, bool):
            raise type_error(f"stream_options.{key}", "a boolean", value)
    names = _tools(body["tools"]) if body.get("tools") is not None else None
    for name in ("tool_choice", "parallel_tool_calls"):
        if body.get(name) is not None and not names:
            raise RequestInvalid(f"Invalid value for '{name}': '{name}' is only allowed when "
                                 "'tools' are specified.", name)
    if body.get("tool_choice") is not None:
        _tool_choice(body["tool_choice"], names or [])
    for i, message in enumerate(messages):
        _message(message, i)
    _conversation(messages)


def offered(body: dict[str, Any]) -> tuple[str, ...]:
    """The names of the function tools a (validated) request offers, in order."""
    return tuple(t["function"]["name"] for t in body.get("tools") or ()
                 if isinstance(t, dict) and t.get("type") == "function"
                 and isinstance(t.get("function"), dict)
                 and isinstance(t["function"].get("name"), str))


def tool_choice(body: dict[str, Any]) -> ToolChoice:
    """What a (validated) request lets the model do with its tools: ``tool_choice``
    (``none`` / ``auto`` / ``required`` / a named function / ``allowed_tools`` in
    ``required`` mode) and ``parallel_tool_calls``. The scripted model calls only
    function tools: a named ``custom`` tool leaves the choice to the script, as
    ``auto`` does, and so does the deprecated ``function_call``."""
    choice, mode, name = body.get("tool_choice"), "auto", None
    if choice in ("none", "required"):
        mode = choice
    elif isinstance(choice, dict) and choice.get("type") == "function":
        mode, name = "tool", choice["function"]["name"]
    elif isinstance(choice, dict) and choice.get("type") == "allowed_tools" and (
            choice["allowed_tools"].get("mode") == "required"):
        mode = "required"
    return ToolChoice(mode, name, body.get("parallel_tool_calls") is not False, offered(body),
                      answer_fields((t["function"]["name"], t["function"].get("parameters"))
                                    for t in body.get("tools") or ()
                                    if isinstance(t, dict) and t.get("type") == "function"
                                    and isinstance(t.get("function"), dict)
                                    and isinstance(t["function"].get("name"), str)))


def content_text(content: Any) -> str:
    """A message ``content`` as text: the string, or its text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p.get("type") == "text")

