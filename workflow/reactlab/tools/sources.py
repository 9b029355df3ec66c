"""Tool sources: a task's tools from an installed plugin (docs/plugins.md).

A tool source is an entry of the plugin group ``reactlab.tool_sources``
(:mod:`reactlab.core.plugins`) with this shape (:class:`ToolSource`): its ``name``, its
typed ``settings`` model (``tool_sources.<n>.settings`` in config.yaml, validated before
any job), the ``packages`` whose versions its runs depend on, :meth:`ToolSource.tools`
(the definitions the model is offered: ``name``, ``description``, ``parameters`` as a
JSON Schema, in the language the model reads) and :meth:`ToolSource.open` (the executor
a run calls: ``execute(name, args, allowed)`` returns a JSON-serialisable dict, a failure
as ``{"error": ...}``, never an exception). A task names a source with ``tool_source:``;
its runs' specs carry the source's tool definitions and settings
(:class:`reactlab.config.settings.ToolSourcePart`), so a change of either reruns them, and
the runner opens the source for the run (:func:`open_source`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from pydantic import BaseModel

from reactlab.core.errors import UsageError
from reactlab.core.plugins import Plugins, registry

__all__ = ["SOURCES", "Executor", "ToolSource", "open_source"]


class Executor(Protocol):
    """What a run calls: one tool call, its result as data."""

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]: ...


class ToolSource(Protocol):
    """An installed tool source (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> type[BaseModel]: ...

    @property
    def packages(self) -> tuple[str, ...]: ...

    def tools(self, settings: Any) -> list[dict[str, Any]]:
        """The tool definitions (``name``, ``description``, ``parameters``)."""
        ...

    def open(self, settings: Any) -> Executor:
        """The executor of one run."""
        ...


#: Every installed tool source (entry-point group ``reactlab.tool_sources``), by name.
SOURCES: Plugins[ToolSource] = registry("tool source")


def open_source(plugin: str, settings: Mapping[str, Any]) -> Executor:
    """The executor of the installed source ``plugin`` on ``settings`` (a run's)."""
    entry = SOURCES.lookup(plugin)
    try:
        typed = entry.settings.model_validate(dict(settings))
    except ValueError as exc:
        raise UsageError(f"tool source {plugin!r}: {exc}") from None
    return entry.open(typed)
