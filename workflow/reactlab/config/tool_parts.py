"""The tool part of the config and of a run's spec: how to reach an MCP tool server
(``mcp_servers:``, :class:`McpServerSettings`), and what a run whose task takes its tools
from elsewhere than the project's carries: an MCP server's (:class:`McpTools`) or a tool
source's (:class:`ToolSourcePart`, a plugin: :mod:`reactlab.tools.sources`). Typed
settings (:mod:`reactlab.config.settings`), apart from the runs' other settings."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from reactlab.config.settings import Number, Settings, SortedTools, _Builder, _section

__all__ = ["ChangedList", "McpServerSettings", "McpTools", "ResultsFormat", "ToolSourcePart",
           "mcp_server_settings", "mcp_tools", "tool_source_part"]

_mcp = _section("mcp_servers")
#: How an MCP result's text becomes what the model reads (the schema's enum).
ResultsFormat = Literal["text", "json", "lesson"]
#: What a job does when its pinned server lists other tools (the schema's enum).
ChangedList = Literal["stop", "refuse"]


class McpServerSettings(Settings):
    """One entry of the ``mcp_servers:`` section (docs/mcp.md): how to reach an MCP tool
    server — ``command`` and ``args`` (stdio; ``env`` added to the environment) or ``url``
    (Streamable HTTP) —, the ``files`` each job works on a copy of (``{name}`` in ``args``
    and ``env`` is the copy's path), the extra paths whose change means its tool list
    may have changed (``watch``), the per-request ``timeout`` in seconds, the largest
    message it may send (``max_result_bytes``), how a result's text becomes what the model
    reads (``results``: :func:`reactlab.mcp.source.result_of`), what a job does when the
    server lists other tools than planned (``changed_list``:
    :class:`reactlab.mcp.source.ServerJob`), and ``replay``: its runs answered from their
    recordings, the server never started. Defaults and bounds: the schema's."""

    command: str | None = _mcp("command", optional=True)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = _mcp("url", optional=True)
    files: dict[str, str] = Field(default_factory=dict)
    watch: list[str] = Field(default_factory=list)
    side_effects: list[str] = Field(default_factory=list)
    timeout: Number = _mcp("timeout")
    max_result_bytes: int = _mcp("max_result_bytes")
    results: ResultsFormat = _mcp("results")
    changed_list: ChangedList = _mcp("changed_list")
    replay: bool = _mcp("replay")


class McpTools(Settings):
    """The tool part of a run whose task takes its tools from an MCP server: the server's
    name and how to reach it (what of :class:`McpServerSettings` a run needs; ``replay``
    and ``watch`` stay out, so that a replayed run has the recorded run's spec), the
    definitions of the task's tools as the server lists them (``name``, ``description``,
    ``parameters``: its ``inputSchema``), and the sha256 of the server's whole tool list
    (:func:`reactlab.config.mcp.tools_hash`). Planning fills it
    (:func:`reactlab.config.mcp.plan_tools`); a change of the server's tools changes the
    run's config hash, so the run runs again."""

    server: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    timeout: Number
    max_result_bytes: int
    results: ResultsFormat = "text"
    #: ``refuse``: a job whose pinned list changed ends its run refused (given only then,
    #: so that other runs' hashes stay put)
    changed_list: ChangedList = "stop"
    tools: SortedTools
    tools_hash: str
    #: the server's side-effecting tools among the task's, and those the task allows
    #: (``mcp_servers.<s>.side_effects``, ``tasks.<t>.allow_side_effects``; given only
    #: when the server names some, so that other runs' hashes stay put)
    side_effects: list[str] = Field(default_factory=list)
    allowed_side_effects: list[str] = Field(default_factory=list)
    #: a task of several servers (``tasks.<t>.mcp_servers``): the part of each server after
    #: the first (this part is the first's), each with the task's tools it lists (given
    #: only then, so that other runs' hashes stay put)
    also: list[McpTools] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if "also" in out:
            out["also"] = [p.to_dict() for p in self.also]
        return out

    def parts(self) -> list[McpTools]:
        """Every server's part: this one, then :attr:`also`'s."""
        return [self, *self.also]

    def refused(self) -> frozenset[str]:
        """The side-effecting tools the task does not allow (the allowlist defence), on
        every server of the task."""
        return frozenset().union(*(frozenset(p.side_effects) - frozenset(
            p.allowed_side_effects) for p in self.parts()))

    def described(self, sanitize: bool) -> list[dict[str, Any]]:
        """The task's tool definitions as the model reads them, server after server: with
        ``sanitize`` (the defence), each description cut by :func:`sanitized_description`."""
        tools = [t for p in self.parts() for t in p.tools]
        if not sanitize:
            return tools
        return [{**t, "description": sanitized_description(t.get("description") or "")}
                for t in tools]


#: Markup (a tag such as ``<IMPORTANT>``) or a sentence's end: a description is kept up to
#: the first of them.
_CUT = re.compile(r"<|(?<=[.!?])\s")
#: The longest sanitized description (characters).
SANITIZED_MAX = 200


def sanitized_description(text: str) -> str:
    """A tool description as the sanitizing defence lets the model read it: its first
    sentence, cut before any markup, at most :data:`SANITIZED_MAX` characters. What an
    attacker writes after that never reaches the model; an instruction in the first
    sentence does (docs/mcp.md)."""
    first = _CUT.split(text.strip(), maxsplit=1)[0].strip()
    return first[:SANITIZED_MAX]


class ToolSourcePart(Settings):
    """The tool part of a run whose task takes its tools from a tool source (a plugin,
    :mod:`reactlab.tools.sources`): the config's name for the source, the plugin, its
    settings as given, and the definitions of the task's tools as the source lists them
    (a change of either changes the run's config hash)."""

    name: str
    plugin: str
    settings: dict[str, Any] = Field(default_factory=dict)
    tools: SortedTools

    def only(self, names: list[str]) -> ToolSourcePart:
        """This part with the tools ``names`` alone, in that order."""
        by_name = {t["name"]: t for t in self.tools}
        return tool_source_part({**self.to_dict(), "tools": [by_name[n] for n in names]},
                                "tool_source")


mcp_server_settings = _Builder(McpServerSettings, "mcp_servers")
mcp_tools = _Builder(McpTools, "mcp")
tool_source_part = _Builder(ToolSourcePart, "tool_source")
