"""The registry of agent frameworks: one :class:`Framework` object per framework.

An entry says what the pipeline needs without importing the framework: its ``name`` (an
agent's ``framework:``), the ``providers`` whose wire API its client speaks, the
``settings`` it takes (an agent's ``settings:``; anything else is a config error naming
the field), the ``packages`` whose versions go into the trace header, and :meth:`run`,
which imports the framework and runs one conversation with a
:class:`~reactlab.frameworks.kit.Kit`. The entries are plugins (:mod:`reactlab.core.plugins`):
the config reads an entry's metadata, the runner imports the one entry its run names.

What :meth:`Framework.run` must do: build the framework's own typed tools from
``kit.tools`` (their pydantic argument models where the framework takes them, so that
argument validation is the framework's own; or, with ``mcp`` true and ``kit.mcp`` set,
connect its own MCP client to the stdio server that command line starts), its own
client on ``kit.http_client()`` with ``kit.base_url`` and ``kit.model``, run to
completion with the framework's own loop (``kit.capped``: the run's step limit
``kit.max_steps`` in the framework's own setting; as shipped otherwise), with nothing
that phones home (a framework whose model answers through a tool of its own names it in
``kit.answer_tool``), and return how it ended (:class:`~reactlab.frameworks.kit.Ending`).
The simulator's hard stop (``kit.max_requests``) is raised from the transport as
:class:`~reactlab.frameworks.kit.HardStop`, a ``BaseException`` that a framework's own
``except Exception`` does not swallow; the runner records it.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel

from reactlab.core.plugins import Plugins, registry
from reactlab.frameworks.kit import Ending, Kit

__all__ = ["FRAMEWORKS", "Ending", "Framework", "framework", "register"]


class Framework(Protocol):
    """What an agent framework tells the pipeline (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def providers(self) -> tuple[str, ...]: ...

    @property
    def settings(self) -> type[BaseModel]:
        """Its typed settings (an agent's ``settings:``), every field optional: a key it
        does not declare, or a value of the wrong type, is a config error naming it."""
        ...

    @property
    def packages(self) -> tuple[str, ...]: ...

    @property
    def mcp(self) -> bool:
        """Whether it takes a task's tools from an MCP server through its own MCP client
        (``kit.mcp``: the stdio command that starts the server)."""
        ...

    def run(self, kit: Kit) -> Ending:
        """Run one conversation (see the module docstring)."""
        ...


#: Every installed framework (entry-point group ``reactlab.agents``), by name: the
#: built-in ones are declared in reactlab's pyproject.toml, a plugin's in its own.
FRAMEWORKS: Plugins[Framework] = registry("agent")


def register(entry: Framework) -> Framework:
    """Add ``entry`` to this process's registry (a test's own framework; an installed one
    is an entry point, docs/plugins.md)."""
    return FRAMEWORKS.add(entry)


def framework(name: str) -> Framework:
    """The installed framework ``name`` (a UsageError naming the installed ones if none)."""
    return FRAMEWORKS.lookup(name)
