"""Cross-checks of the ``tool_sources:`` section and of the tasks that name one (the
schema checks their shape; docs/plugins.md).

A tool source is an installed plugin (group ``reactlab.tool_sources``,
:mod:`reactlab.core.plugins`): the check imports the ones the config names, validates each
entry's ``settings`` with the source's own typed model (the field named), and checks that
every tool a task offers, and every tool its ``expected_calls`` name, is one the source
lists. :func:`tool_source_part` gives a task's runs their tool part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from reactlab.config.schema import plugin_entry
from reactlab.config.tool_parts import ToolSourcePart, tool_source_part
from reactlab.core.errors import ConfigError

__all__ = ["ToolSources"]


class ToolSources:
    """The config's tool sources, each loaded and listed once."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self._parts: dict[str, ToolSourcePart] = {}

    def _source(self, name: str) -> ToolSourcePart:
        if name in self._parts:
            return self._parts[name]
        entry = (self.raw.get("tool_sources") or {})[name]
        source = plugin_entry("tool source", entry["plugin"], f"tool_sources.{name}.plugin",
                              entry.get("package"))
        given = entry.get("settings") or {}
        try:
            settings = source.settings.model_validate(given)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = str(err["loc"][0]) if err["loc"] else "?"  # the field (no union tag)
            raise ConfigError(f"tool_sources.{name}.settings.{where}", err["msg"]) from None
        part = tool_source_part({"name": name, "plugin": entry["plugin"],
                                 "settings": dict(given), "tools": source.tools(settings)},
                                f"tool_sources.{name}")
        self._parts[name] = part
        return part

    def part(self, task: str) -> ToolSourcePart | None:
        """The tool part of ``task``'s runs (None: not a tool source's task); ConfigError
        naming the field that cannot run."""
        entry = self.raw["tasks"][task]
        name = entry.get("tool_source")
        if name is None:
            return None
        if name not in (self.raw.get("tool_sources") or {}):
            raise ConfigError(f"tasks.{task}.tool_source", f"no tool source named {name!r}")
        part = self._source(name)
        offered = [t["name"] for t in part.tools]
        named = [(f"tasks.{task}.tools[{j}]", t) for j, t in enumerate(entry["tools"])]
        named += [(f"tasks.{task}.expected_calls[{j}].name", c["name"])
                  for j, c in enumerate(entry.get("expected_calls") or ())]
        for where, tool in named:
            if tool not in offered:
                raise ConfigError(where, f"tool source {name!r} has no tool {tool!r} "
                                         f"(it has: {', '.join(offered)})")
        return part.only(entry["tools"])
