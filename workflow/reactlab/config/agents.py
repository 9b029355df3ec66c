"""Cross-checks of the ``agents:`` section and of the matrix's ``agents`` factor (the
schema checks their shape; docs/agents.md).

An agent is the project's own loop (``lesson``, the default of every matrix block) or an
entry of ``agents:`` naming an installed framework: a plugin of the group
``reactlab.agents`` (:mod:`reactlab.core.plugins`; the built-in ones are reactlab's own
entry points). A framework's run plays the scenario's script on a simulated API through
the framework's own client, so the check here is that the framework is installed (else
the error names the entry's ``package:``), that the packages it imports are, that its own
typed settings model accepts the settings given, and that it speaks the wire API of every
backend it is crossed with. Only the frameworks the config names are imported.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from pydantic import ValidationError

from reactlab.config.schema import plugin_entry
from reactlab.core.errors import ConfigError

__all__ = ["LESSON", "check_agents", "framework_entry"]

#: The project's own loop: the agent of every run that names none.
LESSON = "lesson"


def framework_entry(name: str, where: str, package: str | None = None) -> Any:
    """The installed framework ``name``; ConfigError at ``where`` otherwise
    (:func:`reactlab.config.schema.plugin_entry`)."""
    return plugin_entry("agent", name, where, package)


def _check_entry(name: str, entry: Mapping[str, Any]) -> Any:
    """The framework of agent ``name``, once its packages and settings are checked."""
    framework = framework_entry(entry["framework"], f"agents.{name}.framework",
                                entry.get("package"))
    for package in framework.packages:
        try:
            metadata.version(package)
        except metadata.PackageNotFoundError:
            raise ConfigError(f"agents.{name}.framework",
                              f"{entry['framework']} needs the package {package!r}, which "
                              f"is not installed (pip install {package}; reactlab's "
                              "built-in frameworks: make env)") from None
    try:
        framework.settings.model_validate(entry.get("settings") or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = str(err["loc"][0]) if err["loc"] else "?"  # the field (no union tag)
        taken = ", ".join(framework.settings.model_fields) or "none"
        message = (f"{entry['framework']} takes no setting {where!r} (it takes: {taken})"
                   if err["type"] == "extra_forbidden" else err["msg"])
        raise ConfigError(f"agents.{name}.settings.{where}", message) from None
    return framework


def check_agents(raw: Mapping[str, Any]) -> None:
    """Raise ConfigError naming the field of the first agent or matrix block that cannot
    run."""
    agents = raw.get("agents") or {}
    frameworks = {name: _check_entry(name, entry) for name, entry in agents.items()}
    for i, block in enumerate(raw["matrix"]):
        for j, name in enumerate(block.get("agents", ())):
            if name == LESSON:
                continue
            if name not in agents:
                hint = difflib.get_close_matches(name, [LESSON, *agents], n=1)
                raise ConfigError(f"matrix[{i}].agents[{j}]",
                                  f"no agent named {name!r}"
                                  + (f" (did you mean {hint[0]!r}?)" if hint else ""))
            framework = frameworks[name]
            for task in block["tasks"]:
                if (raw["tasks"].get(task) or {}).get("tool_source") is not None:
                    raise ConfigError(f"matrix[{i}].agents[{j}]",
                                      f"agent {name!r} cannot run task {task!r}, whose tools "
                                      "come from a tool source: a framework builds its own "
                                      "typed tools from the project's (docs/plugins.md)")
                server = (raw["tasks"].get(task) or {}).get("mcp_server")
                if (raw["tasks"].get(task) or {}).get("mcp_servers"):
                    raise ConfigError(f"matrix[{i}].agents[{j}]",
                                      f"agent {name!r} cannot run task {task!r}, whose tools "
                                      "come from several MCP servers (`mcp_servers`): a "
                                      "framework's own client starts one (docs/mcp.md)")
                if server is None:
                    continue
                entry = (raw.get("mcp_servers") or {}).get(server) or {}
                problem = (
                    f"its framework {agents[name]['framework']!r} takes no MCP tools"
                    if not framework.mcp else
                    f"its framework starts the server itself, over stdio, and MCP server "
                    f"{server!r} is reached by url" if "command" not in entry else None)
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
                if cfg.get("provider") not in framework.providers:
                    raise ConfigError(
                        f"matrix[{i}].agents[{j}]",
                        f"agent {name!r} ({agents[name]['framework']}) speaks "
                        f"{', '.join(framework.providers)}, not backend {backend!r}'s "
                        f"{cfg.get('provider')}")
