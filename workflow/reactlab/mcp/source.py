"""A task's tools from an MCP server: the tool source a run executes its calls with.

:class:`ServerJob` is the server of one job: started once (stdio: one process; Streamable
HTTP: one session) with its ``files`` copied into a temporary folder, its tool list
checked against the one planned (a server whose tools changed since planning is a
:class:`~reactlab.core.errors.ToolServerError` of kind ``changed``: plan again; with the
server's ``changed_list: refuse``, each of the job's runs ends refused, before any model
turn, its trace and recording written), and ended
with the job, its whole process group with it. A job may run several runs: each
:meth:`ServerJob.run` restores the copies to the planned files' bytes first, so what one
run writes there no other run sees (nor a rerun: the copies are never the pipeline's
files). In replay (``replay``) nothing is started.

:class:`McpToolSource` is what one run gets: an :class:`~reactlab.agent.loop.Executor`
that sends each call as ``tools/call`` (through the run's recorder, or answered by its
replay: :mod:`reactlab.mcp.recording`) and maps the answer to the lesson's data:

* ``isError: true`` → ``{"error": <the server's text>}``;
* ``structuredContent`` → ``{"resultado": <it>}``; else the content: one text block →
  ``{"resultado": <its text>}`` (parsed when it is JSON, with the server's
  ``results: json``), several → the list of their texts, a block that is not text →
  ``{"tipo": ..., "mimeType": ...}`` (its data is not passed on);
* with the server's ``results: lesson`` (the project's own tools served over MCP) the one
  text block is the lesson's ``{"resultado"}`` / ``{"error"}`` JSON, taken as it is;
* a failure of the server — no answer within ``timeout``, the server gone, an answer that
  is not JSON-RPC, a message over ``max_result_bytes``, a JSON-RPC error — →
  ``{"error": <Spanish text>}``. After a timeout, a malformed or an oversized answer the
  server is stopped (its stream can no longer be trusted): the run's later calls read
  that it is unavailable. The failure itself (with the server's exit status and stderr)
  is logged for the person (logger ``reactlab.mcp``: the job's log);
* a tool that declares an ``outputSchema``: a result (not ``isError``) whose
  ``structuredContent`` is missing or breaks that schema →
  ``{"error": "el resultado no cumple el esquema declarado por la herramienta: ..."}``,
  with the trace status ``nonconforming`` (:class:`~reactlab.agent.types.StatusResult`).

The Spanish texts are what the model reads, like the lesson's tool errors; nothing the
model reads depends on timings, process ids or the server's stderr, so a trace is a
function of the recorded answers.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from reactlab.agent.types import StatusResult
from reactlab.config.mcp import file_copies, forget, launch, relisted, tools_hash
from reactlab.config.mcp_lists import planned_list, tools_diff
from reactlab.config.tool_parts import McpTools, mcp_tools
from reactlab.core.errors import ToolServerError
from reactlab.core.io import loads_strict
from reactlab.core.mcp_wire import Wire, list_tools
from reactlab.mcp.output_schema import OutputSchemas
from reactlab.mcp.recording import ToolRecorder, ToolReplay, header

log = logging.getLogger("reactlab.mcp")

UNKNOWN = "herramienta desconocida: {name}"
NOT_AN_OBJECT = "argumentos no válidos: se esperaba un objeto JSON"
SERVER_ERROR = "error del servidor de herramientas"
NOT_JSON = "resultado no representable en JSON"
FAILURES = {
    "timeout": "el servidor de herramientas no respondió a tiempo (límite: {timeout:g} s)",
    "closed": "el servidor de herramientas no está disponible (terminó o cerró la conexión)",
    "malformed": "el servidor de herramientas dio una respuesta no válida",
    "too_large": "resultado demasiado grande (máximo: {max_bytes} bytes)",
    "rpc": "el servidor de herramientas rechazó la llamada: {detail}",
}


def failure_text(exc: ToolServerError, part: McpTools) -> str:
    """What the model reads of a failed call (Spanish; no timings, pids or stderr)."""
    template = FAILURES.get(exc.kind, FAILURES["closed"])
    return template.format(timeout=part.timeout, max_bytes=part.max_result_bytes,
                           detail=exc.detail or "sin detalle")


def _content_value(block: Any) -> Any:
    if isinstance(block, dict) and block.get("type") == "text" and isinstance(
            block.get("text"), str):
        return block["text"]
    if isinstance(block, dict):
        return {k: v for k, v in (("tipo", block.get("type")),
                                  ("mimeType", block.get("mimeType"))) if v is not None}
    return {"tipo": "desconocido"}


def _parsed(text: str) -> Any:
    """``text`` as JSON when it is JSON (strict: no duplicate keys, no NaN), else itself."""
    try:
        return loads_strict(text)
    except ValueError:
        return text


def _lesson(texts: list[str]) -> dict[str, Any]:
    """The lesson's own result, written as one JSON text (``results: lesson``)."""
    value = _parsed(texts[0]) if len(texts) == 1 else None
    if (isinstance(value, dict) and len(value) == 1
            and ("resultado" in value or isinstance(value.get("error"), str))):
        return value
    return {"error": FAILURES["malformed"]}


def result_of(response: Mapping[str, Any], results: str = "text") -> dict[str, Any]:
    """The lesson's ``{"resultado": ...}`` / ``{"error": ...}`` for a ``tools/call``
    answer (a JSON-RPC ``result``). ``results`` (the server's setting): ``text``, the
    content's text as it is; ``json``, each text parsed when it is JSON; ``lesson``, the
    one text block is the lesson's result JSON, taken as it is."""
    content = response.get("content", [])
    if not isinstance(content, list):
        return {"error": FAILURES["malformed"]}
    values = [_content_value(b) for b in content]
    texts = [v for v in values if isinstance(v, str)]
    if results == "lesson":
        return _lesson(texts)
    if response.get("isError") is True:
        return {"error": "\n".join(texts) or SERVER_ERROR}
    if results == "json":
        values = [_parsed(v) if isinstance(v, str) else v for v in values]
    structured = response.get("structuredContent")
    if isinstance(structured, dict):
        out: dict[str, Any] = {"resultado": structured}
    elif len(values) == 1:
        out = {"resultado": values[0]}
    else:
        out = {"resultado": values}
    try:
        json.dumps(out, allow_nan=False)
    except (ValueError, TypeError):
        return {"error": NOT_JSON}
    return out


class McpToolSource:
    """One run's tools on an MCP server (an :class:`~reactlab.agent.loop.Executor`)."""

    def __init__(self, part: McpTools, *, wire: Wire | None = None,
                 recorder: ToolRecorder | None = None,
                 replay: ToolReplay | None = None, refused: str | None = None,
                 wires: Mapping[str, Wire] | None = None) -> None:
        if (wire is None) == (replay is None):
            raise ToolServerError("start", "a tool source has a server or a replay")
        self.part = part
        #: the server refused before the run (:attr:`ServerJob.refused`): nothing is sent
        self.refused = refused
        self.wire = wire
        #: a task of several servers: the wire of each server after the first, by name
        self.wires = dict(wires or {})
        self.recorder = recorder
        self.replay = replay
        #: the part of the server that serves each of the task's tools
        self.owner = {t["name"]: p for p in part.parts() for t in p.tools}
        self.names = frozenset(self.owner)
        self.schemas = OutputSchemas([t for p in part.parts() for t in p.tools])

    def _send(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self.replay is not None:
            return self.replay.answer(request)
        params = request["params"]
        server = self.owner[params["name"]].server
        wire = self.wire if server == self.part.server else self.wires[server]
        assert wire is not None
        if self.recorder is not None:
            return self.recorder.exchange(request,
                                          lambda: wire.request("tools/call", params))
        return wire.request("tools/call", params)

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        """Send the call to the server; every failure comes back as data (a result that
        breaks the tool's declared output schema: a :class:`StatusResult`,
        ``nonconforming``). A tool that is not the task's (or not in ``allowed``) is
        unknown and never sent."""
        if (not isinstance(name, str) or name not in self.names
                or (allowed is not None and name not in allowed)):
            return {"error": UNKNOWN.format(name=name)}
        if not isinstance(args, dict):
            return {"error": NOT_AN_OBJECT}
        request = {"method": "tools/call", "params": {"name": name, "arguments": args}}
        try:
            response = self._send(request)
        except ToolServerError as exc:
            if self.replay is None:  # the person's copy, context included (not recorded)
                log.warning("reactlab: %s", exc)
            return {"error": failure_text(exc, self.owner[name])}
        broken = self.schemas.problem(name, response)
        if broken is not None:
            return StatusResult({"error": broken}, "nonconforming")
        return result_of(response, self.owner[name].results)


def _changes(part: McpTools, tools: list[dict[str, Any]], root: str | Path) -> str:
    """What differs between the run's planned tool list and ``tools``, tool by tool
    (:func:`~reactlab.config.mcp_lists.tools_diff`): against the whole planned list when
    this machine has it (the planning cache, a recording), else against the task's tools
    as the spec keeps them."""
    planned = planned_list(part.server, part.tools_hash, root)
    if planned is not None:
        return tools_diff(planned, tools)
    return tools_diff(part.tools, tools, partial=True)


class ServerJob:
    """The server of one job (or its replay): :meth:`run` gives each run its source."""

    def __init__(self, part: McpTools, *, replay: bool = False,
                 root: str | Path = ".", pin: bool = True) -> None:
        self.part = part
        self.pin = pin  # False: a changed list is taken as listed (no pinning defence)
        self.replaying = replay
        self.root = Path(root)
        self.wire: Wire | None = None
        self._stack = ExitStack()
        self._copies: dict[str, str] = {}
        self._runs = 0
        #: what each run's recording starts with (:func:`reactlab.mcp.recording.header`)
        self.header: dict[str, Any] = {}
        #: why the server is refused (its pinned list changed, ``changed_list: refuse``):
        #: each run's source says so, and the run ends refused (None: not refused)
        self.refused: str | None = None
        #: a task of several servers: the job of each server after the first
        self._others: list[ServerJob] = []

    def __enter__(self) -> ServerJob:
        if self.replaying:
            return self
        try:
            _, self._copies = self._stack.enter_context(file_copies(self.part, self.root))
            wire = launch(self.part, self.part.server, self._copies, self.root)
            self._stack.callback(wire.close)
            self.wire = wire
            listed = list_tools(wire)
        except BaseException:
            self._stack.close()
            raise
        if tools_hash(listed) != self.part.tools_hash and not self.pin:
            self.part = relisted(self.part, listed)
        elif tools_hash(listed) != self.part.tools_hash and self.part.changed_list == "refuse":
            # the pinning defence measured (a tool-poisoning experiment): the server is
            # refused, the run ends so before any model turn, nothing is called
            self.refused = (f"MCP server {self.part.server}: its tools are not the ones "
                            f"planned: {_changes(self.part, listed, self.root)}")
            self._stack.close()
        elif tools_hash(listed) != self.part.tools_hash:
            self._stack.close()
            changes = _changes(self.part, listed, self.root)  # (reads the cached list)
            forget(self.part)  # else the next planning may read the same stale list
            raise ToolServerError("changed", f"MCP server {self.part.server}: its tools are "
                                  f"not the ones planned (the run's spec): {changes}; its "
                                  "cached tool list is removed: run the pipeline again, "
                                  "which plans with the server's tools")
        self.header = header(self.part.server, wire.server, listed)
        if self.refused is None and self.part.also:
            self._enter_others()
        return self

    def _enter_others(self) -> None:
        """A task of several servers: each server after the first started (a job of its
        own, ended with this one), its list checked alike; the first refusal refuses the
        run, a list taken as listed (not pinned) replaces that server's part."""
        parts = []
        for part in self.part.also:
            child = self._stack.enter_context(ServerJob(part, root=self.root, pin=self.pin))
            self._others.append(child)
            parts.append(child.part)
            if child.refused is not None and self.refused is None:
                self.refused = child.refused
        self.part = mcp_tools({**self.part.to_dict(),
                               "also": [p.to_dict() for p in parts]}, "mcp")
        # the recording's header: the first server's, and each other's under `also`
        self.header = {**self.header, "also": [c.header for c in self._others]}

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def pid(self) -> int | None:
        """The server's process id (stdio), for tests that check it is gone."""
        return getattr(self.wire, "pid", None)

    def _restore_files(self) -> None:
        for name, rel in self.part.files.items():
            src = self.root / rel
            if src.is_file():
                shutil.copyfile(src, self._copies[name])
            else:
                Path(self._copies[name]).unlink(missing_ok=True)

    @contextmanager
    def run(self, *, recording: str | Path | None = None,
            replay: str | Path | None = None) -> Iterator[McpToolSource]:
        """One run's source: recorded to ``recording`` (written when the run ends, also on
        an error), or answered from ``replay`` (checked to be used up)."""
        if self.replaying:
            if replay is None:
                raise ToolServerError("start", f"MCP server {self.part.server}: a replay "
                                               "needs the run's recording")
            player = ToolReplay.load(replay)
            check_recorded(self.part, player.header, replay, self.root)
            yield McpToolSource(self.part, replay=player)
            player.check_finished()
            return
        if self._runs and self.refused is None:
            for job in (self, *self._others):
                job._restore_files()
        self._runs += 1
        recorder = ToolRecorder(self.header) if recording is not None else None
        try:
            yield McpToolSource(self.part, wire=self.wire, recorder=recorder,
                                refused=self.refused,
                                wires={j.part.server: j.wire for j in self._others
                                       if j.wire is not None})
        finally:
            if recorder is not None and recording is not None:
                recorder.write(recording)


def check_recorded(part: McpTools, head: Mapping[str, Any], path: str | Path,
                   root: str | Path = ".") -> None:
    """A recording (its header ``head``) of another server, or of other tools than the
    planned ones, is refused before any model turn (ToolServerError, kind ``changed``):
    the lesson loop's replay and a framework's (:mod:`reactlab.mcp.relay`) alike."""
    if head["server"] != part.server:
        raise ToolServerError("changed", f"{path} records MCP server {head['server']!r}, "
                              f"the run's spec names {part.server!r}")
    if head["tools_hash"] != part.tools_hash:
        raise ToolServerError(
            "changed", f"MCP server {part.server}: the tools recorded in {path} are "
            f"not the ones planned (the run's spec): "
            f"{_changes(part, head['tools'], root)}; record the run again "
            "(replay: false), or plan again")
