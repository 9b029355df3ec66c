"""Hosted MCP in the simulators: the provider's side of a remote MCP server.

OpenAI's Responses API (a tool ``{"type": "mcp", "server_label", "server_url", ...}``)
and Anthropic's Messages API (``mcp_servers`` with an ``mcp_toolset`` tool, beta
``mcp-client-2025-11-20``) connect to an MCP server themselves: they list its tools, run
the calls the model makes to them and go on sampling, all inside one answer, which
carries the listing and each call with its result as output items (``mcp_list_tools``,
``mcp_call``) or content blocks (``mcp_tool_use``, ``mcp_tool_result``). The simulators
do the same with the scripted model, so that a client's hosted-MCP path can be tested
offline against a local server (docs/simulators.md, "Hosted MCP").

This module is what both APIs share: the connection to each server of a request over
Streamable HTTP (the project's one MCP client, :mod:`reactlab.core.mcp_wire`), its tool
listing, one call and its outcome, and how the calls of one conversation are numbered
into model turns. Each API's module shapes them on its wire.

Ids are deterministic, as every id the simulators give: a hosted call is numbered like a
client-side one (``mcp_{n}_{i}`` / ``mcptoolu_{n}_{i}``: ``n`` the calls made in the
conversation before its turn, ``i`` its index in the turn), which is also how a later
request tells the model turns of one answer apart (:func:`turn_of`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reactlab.core.errors import ToolServerError
from reactlab.core.mcp_wire import list_tools, open_wire

#: The Messages API beta that enables ``mcp_servers`` and ``mcp_toolset`` tools.
ANTHROPIC_BETA = "mcp-client-2025-11-20"
#: The connector's first version, still sent by clients (pydantic-ai 2.68's
#: ``MCPServerTool``): no ``mcp_toolset`` tools; a server's ``tool_configuration``
#: (``enabled``, ``allowed_tools``) says which of its tools the model may use.
ANTHROPIC_BETA_2025_04 = "mcp-client-2025-04-04"
#: Seconds the simulator waits for a hosted server's answer to one request.
TIMEOUT = 30.0
#: Hosted calls one answer may run when the request sets no limit (``max_tool_calls``
#: on the Responses API): past it the scripted model answers without calling, so a
#: script that calls forever (``bucle``) still ends its answer.
MAX_CALLS = 32
#: The largest message a hosted server may send (bytes).
MAX_BYTES = 1_000_000

_TURN_ID = re.compile(r"^(?:call|fc|mcp|toolu|mcptoolu)_([0-9]+)_[0-9]+$")


def requested(body: Mapping[str, Any]) -> bool:
    """Whether a request asks for hosted MCP (a Responses ``mcp`` tool, Messages
    ``mcp_servers``): its answer waits on MCP servers, so the server runs it off its
    event loop."""
    tools = body.get("tools")
    return bool(body.get("mcp_servers")) or (isinstance(tools, list) and any(
        isinstance(t, dict) and t.get("type") == "mcp" for t in tools))


def turn_of(call_id: Any) -> int | None:
    """The turn key of a call id the simulators gave (``n`` of ``<prefix>_{n}_{i}``: the
    calls made before its turn), None for any other id."""
    if not isinstance(call_id, str):
        return None
    m = _TURN_ID.match(call_id)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Outcome:
    """One hosted call's outcome.

    ``content``: the result's content blocks as the server sent them (``[]`` on a
    failure); ``is_error``: the server's ``isError``, or a failure; ``failure``: for a
    call that got no result, ``("mcp_protocol_error", code, message)`` (a JSON-RPC error
    answer) or ``("http_error", status, message)`` (the server's HTTP refusal or the
    connection lost), else None.
    """

    content: list[dict[str, Any]]
    is_error: bool
    failure: tuple[str, int, str] | None = None

    @property
    def text(self) -> str:
        """What the scripted model reads: the text blocks joined; for a failure, the
        lesson's ``{"error": ...}`` JSON with its message."""
        if self.failure is not None:
            return json.dumps({"error": self.failure[2]}, ensure_ascii=False)
        return content_text(self.content)


def content_text(content: Any) -> str:
    """The text of content blocks (MCP's, or a Messages ``tool_result``'s), or the string
    itself, joined; "" for anything else (None)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content
                   if isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(b.get("text"), str))


@dataclass
class Server:
    """One hosted server of a request: its name (``server_label`` / ``name``), URL,
    headers and tool filter, its listing once connected."""

    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    #: the tool names the request lets the model use (None: every tool listed)
    allowed: frozenset[str] | None = None
    #: only the tools the server annotates ``readOnlyHint: true`` (Responses filter)
    read_only: bool = False
    #: whether a tool is enabled when ``overrides`` does not say (a Messages toolset's
    #: ``default_config.enabled``), and per tool (its ``configs``)
    default_on: bool = True
    overrides: dict[str, bool] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    wire: Any = None

    def connect(self) -> None:
        """Handshake and ``tools/list`` (every page); ToolServerError on failure."""
        try:
            self.wire = open_wire(name=self.name, url=self.url, headers=self.headers,
                                  timeout=TIMEOUT, max_bytes=MAX_BYTES)
            listed = list_tools(self.wire)
        except ToolServerError:
            self.close()
            raise
        self.tools = [t for t in listed
                      if (self.allowed is None or t["name"] in self.allowed)
                      and (not self.read_only or _read_only(t))
                      and self.overrides.get(t["name"], self.default_on)]

    def names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    def call(self, name: str, arguments: Mapping[str, Any]) -> Outcome:
        """``tools/call``; a failure is an outcome (the model reads it), never raised."""
        try:
            result = self.wire.request("tools/call", {"name": name,
                                                      "arguments": dict(arguments)})
        except ToolServerError as exc:
            if exc.kind == "rpc" and exc.http_status is None:
                return Outcome([], True, ("mcp_protocol_error",
                                          exc.code if exc.code is not None else -32603,
                                          exc.detail or str(exc)))
            return Outcome([], True, ("http_error", exc.http_status or 502, str(exc)))
        content = result.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content,
                                                                           list) else []
        if not blocks and "structuredContent" in result:
            blocks = [{"type": "text", "text": json.dumps(result["structuredContent"],
                                                          ensure_ascii=False)}]
        return Outcome(blocks, result.get("isError") is True)

    def close(self) -> None:
        if self.wire is not None:
            wire, self.wire = self.wire, None
            wire.close()


def _read_only(tool: Mapping[str, Any]) -> bool:
    annotations = tool.get("annotations")
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


class Session:
    """The hosted servers of one request: :meth:`open` connects them in order (on a
    failure ``failed`` names the server that could not be listed: the API answers its
    own refusal, Responses 424 ``external_connector_error``, Messages 400);
    :meth:`close` closes them all."""

    def __init__(self, servers: Iterable[Server]) -> None:
        self.servers = list(servers)
        self.failed: str | None = None
        self._by_tool: dict[str, Server] = {}

    def open(self) -> None:
        """Connect and list every server; ToolServerError (all closed) on a failure."""
        for server in self.servers:
            try:
                server.connect()
            except ToolServerError:
                self.failed = server.name
                self.close()
                raise
            for name in server.names():
                self._by_tool.setdefault(name, server)

    def close(self) -> None:
        for server in self.servers:
            server.close()

    def server_of(self, tool: str) -> Server | None:
        """The server whose listing offers ``tool`` (the first one), or None."""
        return self._by_tool.get(tool)

    def tool_names(self) -> tuple[str, ...]:
        return tuple(self._by_tool)


def extra_turns(blocks: Iterable[tuple[str, Any]]) -> int:
    """Model turns that assistant answers hold beyond the one each is counted as: a
    hosted call's result followed, in the same answer, by anything but another call of
    its turn is a boundary between two turns of the scripted model.

    ``blocks`` is ``(kind, call_id)`` in conversation order, ``kind`` one of ``call`` (a
    client-side or hosted call), ``result`` (a hosted call's result, in the answer),
    ``other`` (anything else the assistant said) and ``end`` (where an assistant answer
    ends: a user turn, a tool result the client sent). A call id the simulators did not
    give has no turn, so whatever follows its result counts as a new turn.
    """
    extra, pending = 0, None
    for kind, call_id in blocks:
        if kind == "end":
            pending = None
        elif kind == "result":
            key = turn_of(call_id)
            pending = -1 if key is None else key
        else:
            if pending is not None and not (kind == "call" and turn_of(call_id) == pending):
                extra += 1
            pending = None
    return extra


_T = TypeVar("_T")


def serve(servers: Sequence[Server], respond: Callable[[Session | None], _T],
          refuse: Callable[[Session], _T]) -> _T:
    """An answer with the request's hosted servers open: ``respond(None)`` when it names
    none; else a :class:`Session` on them, ``refuse(session)`` (the API's refusal) when one
    cannot be reached, ``respond(session)`` otherwise, the session closed after it."""
    if not servers:
        return respond(None)
    session = Session(servers)
    try:
        session.open()
    except ToolServerError:
        return refuse(session)
    try:
        return respond(session)
    finally:
        session.close()
