"""Cross-checks of the ``agents:`` section and of the matrix's ``agents`` factor (the
schema checks their shape; docs/agents.md).

An agent is the project's own loop (``lesson``, the default of every matrix block) or an
entry of ``agents:`` naming a registered framework. A framework's run plays the scenario's
script on a simulated API through the framework's own client, so the check here is that
the framework exists, takes the settings given, and speaks the wire API of every backend
it is crossed with. The frameworks it knows are the built-in ones (:data:`BUILTIN`, plain
names: this module imports no framework) and those declared by
:func:`reactlab.config.declare_framework`, which the frameworks' registry calls for each
one it registers (:mod:`reactlab.frameworks.registry`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from reactlab.core.errors import ConfigError

__all__ = ["BUILTIN", "FRAMEWORKS", "LESSON", "check_agents"]

#: The project's own loop: the agent of every run that names none.
LESSON = "lesson"

#: Each built-in framework's providers (the wire APIs its client speaks), the
#: ``settings`` it takes and the MCP transports its own MCP client is given (``mcp``:
#: none, or stdio) (tests/test_agents.py checks they match the registry's entries).
BUILTIN: dict[str, dict[str, tuple[str, ...]]] = {
    "langchain": {"providers": ("openai_chat", "openai", "anthropic"),
                  "settings": ("recursion_limit", "max_retries", "timeout"), "mcp": ()},
    "openai_agents": {
        "providers": ("openai", "openai_chat"),
        "settings": ("max_turns", "max_retries", "timeout", "tool_not_found_behavior",
                     "strict_json_schema"),
        "mcp": ("stdio",),
    },
    "pydantic_ai": {"providers": ("openai", "openai_chat", "anthropic"),
                    "settings": ("request_limit", "tool_retries", "max_retries", "timeout",
                                 "request_timeout"),
                    "mcp": ("stdio",)},
    "inspect_react": {"providers": ("openai", "openai_chat", "anthropic"),
                      "settings": ("turn_limit", "message_limit", "token_limit", "max_retries",
                                   "timeout", "sdk_max_retries"),
                      "mcp": ("stdio",)},
}
#: The frameworks the check accepts: the built-in ones and the declared ones.
FRAMEWORKS: dict[str, dict[str, tuple[str, ...]]] = dict(BUILTIN)


def check_agents(raw: Mapping[str, Any]) -> None:
    """Raise ConfigError naming the field of the first agent or matrix block that cannot
    run."""
    agents = raw.get("agents") or {}
    for name, entry in agents.items():
        framework = FRAMEWORKS.get(entry["framework"])
        if framework is None:
            hint = difflib.get_close_matches(entry["framework"], list(FRAMEWORKS), n=1)
            raise ConfigError(f"agents.{name}.framework",
                              f"no framework named {entry['framework']!r}"
                              + (f" (did you mean {hint[0]!r}?)" if hint else "")
                              + f"; registered: {', '.join(FRAMEWORKS) or 'none'}")
        for key in entry.get("settings", {}):
            if key not in framework["settings"]:
                raise ConfigError(f"agents.{name}.settings.{key}",
                                  f"{entry['framework']} takes no setting {key!r} (it takes: "
                                  f"{', '.join(framework['settings']) or 'none'})")
    for i, block in enumerate(raw["matrix"]):
        for j, name in enumerate(block.get("agents", ())):
            if name == LESSON:
                continue
            if name not in agents:
                hint = difflib.get_close_matches(name, [LESSON, *agents], n=1)
                raise ConfigError(f"matrix[{i}].agents[{j}]",
                                  f"no agent named {name!r}"
                                  + (f" (did you mean {hint[0]!r}?)" if hint else ""))
            framework = FRAMEWORKS[agents[name]["framework"]]
            for task in block["tasks"]:
                server = (raw["tasks"].get(task) or {}).get("mcp_server")
                if server is None:
                    continue
                entry = (raw.get("mcp_servers") or {}).get(server) or {}
                problem = (
                    f"its framework {agents[name]['framework']!r} takes no MCP tools"
                    if not framework.get("mcp") else
                    f"its framework starts the server itself, over stdio, and MCP server "
                    f"{server!r} is reached by url" if "command" not in entry else
                    f"its framework's own MCP client calls the server, which a replay of "
                    f"MCP server {server!r} never starts" if entry.get("replay") else None)
                if problem is not None:
                    raise ConfigError(f"matrix[{i}].agents[{j}]",
                                      f"agent {name!r} cannot run task {task!r}, whose tools "
                                      f"come from an MCP server: {problem} (docs/mcp.md)")
            for backend in block["backends"]:
                cfg = raw["backends"].get(backend) or {}
                if cfg.get("mode") != "simulated":
                    raise ConfigError(
                        f"matrix[{i}].agents[{j}]",
                        f"agent {name!r} runs its framework against a simulated API, and "
                        f"backend {backend!r} is in {cfg.get('mode')!r} mode")
                if cfg.get("provider") not in framework["providers"]:
                    raise ConfigError(
                        f"matrix[{i}].agents[{j}]",
                        f"agent {name!r} ({agents[name]['framework']}) speaks "
                        f"{', '.join(framework['providers'])}, not backend {backend!r}'s "
                        f"{cfg.get('provider')}")
