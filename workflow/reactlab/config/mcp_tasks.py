"""A task's MCP servers at planning: which servers (``mcp_server``, or several with
``mcp_servers``), which of them serves each of the task's tools, and each server's
side-effecting tools among them (docs/mcp.md).

A task of several servers takes each tool from the one server that lists it: a tool that
none of them lists, or that two of them list, is a ConfigError naming the task's tool
(names are not namespaced: the model reads each tool by the name its server gives it), and
so is a server that serves none of the task's tools. Such a task's runs are not replayed
(``replay: true`` on one of its servers is an error) and no agent framework runs them.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from reactlab.config.tool_parts import McpServerSettings
from reactlab.core.errors import ConfigError


def task_servers(entry: Mapping[str, Any]) -> list[str]:
    """The MCP servers a task (its config entry) takes its tools from, in order: its
    ``mcp_server``, or its ``mcp_servers``; [] for a task of other tools."""
    if "mcp_server" in entry:
        return [entry["mcp_server"]]
    return list(entry.get("mcp_servers") or ())


def server_field(entry: Mapping[str, Any], i: int) -> str:
    """The task's field that names its ``i``-th server (for an error)."""
    return "mcp_server" if "mcp_server" in entry else f"mcp_servers[{i}]"


def check_names(task: str, entry: Mapping[str, Any], known: Sequence[str]) -> None:
    """Each server the task names is one of ``mcp_servers`` (with a suggestion)."""
    for i, name in enumerate(task_servers(entry)):
        if name not in known:
            hint = difflib.get_close_matches(name, list(known), n=1)
            raise ConfigError(f"tasks.{task}.{server_field(entry, i)}",
                              f"no server named {name!r} in mcp_servers"
                              + (f" (did you mean {hint[0]!r}?)" if hint else ""))


def owners(task: str, entry: Mapping[str, Any],
           lists: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, str]:
    """The server that serves each of the task's tools (``lists``: each of the task's
    servers' tool list, in the task's order). ConfigError naming the tool when no server
    lists it or two do, or naming a server that serves none of the task's tools."""
    names = list(lists)
    out: dict[str, str] = {}
    for i, tool in enumerate(entry["tools"]):
        found = [n for n in names if any(t["name"] == tool for t in lists[n])]
        if len(found) == 1:
            out[tool] = found[0]
            continue
        if found:
            raise ConfigError(f"tasks.{task}.tools[{i}]",
                              f"servers {' and '.join(repr(n) for n in found)} both list "
                              f"tool {tool!r}: a task's tools take their servers' names, "
                              "not namespaced, so a name must be one server's")
        listed = [t["name"] for n in names for t in lists[n]]
        hint = difflib.get_close_matches(tool, listed, n=1)
        if len(names) == 1:
            raise ConfigError(f"tasks.{task}.tools[{i}]",
                              f"server {names[0]!r} has no tool {tool!r}"
                              + (f" (did you mean {hint[0]!r}?)" if hint else "")
                              + f"; it lists: {', '.join(listed)}")
        raise ConfigError(f"tasks.{task}.tools[{i}]",
                          f"none of the task's servers ({', '.join(names)}) lists tool "
                          f"{tool!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    for i, name in enumerate(names):
        if name not in out.values():
            raise ConfigError(f"tasks.{task}.{server_field(entry, i)}",
                              f"server {name!r} serves none of the task's tools")
    return out


def check_several(task: str, entry: Mapping[str, Any],
                  servers: Mapping[str, McpServerSettings]) -> None:
    """A task of several servers: none of them replays (one job starts them all)."""
    if len(names := task_servers(entry)) < 2:
        return
    for name in names:
        if servers[name].replay:
            raise ConfigError(f"mcp_servers.{name}.replay",
                              f"task {task!r} takes tools from several servers "
                              f"({', '.join(names)}): its runs are not replayed")


def side_effects(task: str, entry: Mapping[str, Any], name: str,
                 servers: Mapping[str, McpServerSettings],
                 listed: Mapping[str, Any], mine: Sequence[str]) -> dict[str, list[str]]:
    """A server's part's ``side_effects`` (the server's, among ``mine``: the task's tools
    it serves) and ``allowed_side_effects`` (the task's, of those), checked: each a tool
    the server lists, each allowed one a side-effecting tool the task offers on one of its
    servers. Empty when the server names none among them (other runs' hashes stay put)."""
    server = servers[name]
    for i, tool in enumerate(server.side_effects):
        if tool not in listed:
            raise ConfigError(f"mcp_servers.{name}.side_effects[{i}]",
                              f"server {name!r} has no tool {tool!r}; it lists: "
                              + ", ".join(listed))
    every = {t for n in task_servers(entry) for t in servers[n].side_effects}
    allowed = list(entry.get("allow_side_effects") or ())
    for i, tool in enumerate(allowed):
        if tool not in every or tool not in entry["tools"]:
            raise ConfigError(f"tasks.{task}.allow_side_effects[{i}]",
                              f"{tool!r} is not a side-effecting tool the task offers "
                              f"(mcp_servers.{name}.side_effects: "
                              f"{', '.join(server.side_effects) or 'none'})")
    effects = [t for t in mine if t in server.side_effects]
    if not effects:
        return {}
    return {"side_effects": effects,
            "allowed_side_effects": [t for t in allowed if t in server.side_effects]}
