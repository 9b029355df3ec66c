"""Recording and replay of a run's exchange with an MCP tool server.

The ideas of the live model recordings (:mod:`reactlab.backends.recording`), at the tool
source's boundary: every ``tools/call`` of a run is recorded, in order, with the server's
answer as it came (the JSON-RPC ``result`` object), or the failure it ended in (timeout,
closed, malformed, too large, a JSON-RPC error: ``kind`` and message). The file is JSONL,
written atomically when the run ends (also when it ends in an error): a header, one
record per exchange, and an end record::

    {"mcp_recording": 1, "server": "sqlite",
     "server_info": {"name": "sqlite", "version": "1.30.0"},
     "protocol_version": "2025-06-18", "tools_hash": "<sha256>", "tools": [...]}
    {"exchange": 1, "request": {"method": "tools/call",
                                "params": {"name": "read_query", "arguments": {...}}},
     "response": {"content": [{"type": "text", "text": "..."}], "isError": false}}
    {"exchange": 2, "request": {...}, "failure": {"kind": "timeout", "message": "..."}}
    {"end": true, "exchanges": 2, "sha256": "<sha256 of the lines before it>"}

The header is the server's identity (the config's name for it; the ``serverInfo`` name
and version and the protocol revision it answered ``initialize`` with) and its whole tool
list as the job listed it, with the list's hash (:func:`reactlab.config.mcp.tools_hash`,
the one the run's spec keeps): a replay whose recording's hash is not the run's is
refused before any model turn (:class:`~reactlab.core.errors.ToolServerError`, kind
``changed``), and a server set to ``replay: true`` is planned from these headers, never
started (:mod:`reactlab.config.mcp_lists`). The end record makes a recording
tamper-evident: :func:`read` refuses a truncated, edited or concatenated file, naming it
(and the recovery step removes it, or stops the run: :func:`problem`). A recording holds
no process id, clock or temporary path: a failure's message leaves out the server's exit
status and stderr (:attr:`~reactlab.core.errors.ToolServerError.context`, for the person
only), so the same exchange gives the same bytes.

A replay answers each request with the next recorded answer after checking that the
request is the one that was recorded (:func:`reactlab.backends.recording.first_difference`);
the tool source maps an answer to what the model reads with the same code in both modes,
so the replayed trace is byte-identical. A request that differs, or one more than the
recording holds, raises :class:`~reactlab.core.errors.RecordingError` (a replay that is
not the recorded run is no run at all); so does a run that leaves recorded exchanges
unused (:meth:`ToolReplay.check_finished`).

A framework's own MCP client is recorded in the same format, through the stdio relay it
is given instead of the server (:mod:`reactlab.mcp.relay`): its exchanges are every
request that client sent (the handshake, ``tools/list``, ``tools/call``...) with the
server's JSON-RPC ``result`` or the failure, and a replay's relay answers the client from
them (:meth:`ToolReplay.take`), the server never started.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactlab.backends.recording import first_difference
from reactlab.config.mcp_lists import RECORDING_FORMAT, header_problem, tools_hash
from reactlab.core.errors import RecordingError, ToolServerError
from reactlab.core.io import loads_strict, write_bytes_atomic


def _line(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode(
        "utf-8", errors="backslashreplace")


def header(server: str, initialized: Mapping[str, Any],
           tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A recording's header: the server (the config's name), what it said of itself when
    it answered ``initialize`` (``initialized``), its whole tool list and that list's
    hash."""
    info = initialized.get("serverInfo")
    info = info if isinstance(info, dict) else {}
    return {"mcp_recording": RECORDING_FORMAT, "server": server,
            "server_info": {k: info[k] for k in ("name", "version") if k in info},
            "protocol_version": initialized.get("protocolVersion"),
            "tools_hash": tools_hash(tools), "tools": tools}


def encode(head: Mapping[str, Any], records: list[dict[str, Any]]) -> bytes:
    """The bytes of a recording: ``head``, the exchange ``records``, the end record."""
    body = _line(head) + b"".join(_line(r) for r in records)
    end = {"end": True, "exchanges": len(records), "sha256": hashlib.sha256(body).hexdigest()}
    return body + _line(end)


class ToolRecorder:
    """Collects a run's exchanges; :meth:`write` publishes them atomically, after the
    ``header`` (:func:`header`)."""

    def __init__(self, head: Mapping[str, Any]) -> None:
        self.header = dict(head)
        self.records: list[dict[str, Any]] = []

    def exchange(self, request: Mapping[str, Any],
                 send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``send()``'s answer to ``request``, recorded (and its failure, re-raised). The
        failure's message is recorded without its context (exit status, stderr)."""
        rec: dict[str, Any] = {"exchange": len(self.records) + 1, "request": dict(request)}
        try:
            rec["response"] = send()
        except ToolServerError as exc:
            rec["failure"] = {"kind": exc.kind, "message": exc.message,
                              **({"detail": exc.detail} if exc.detail is not None else {})}
            self.records.append(rec)
            raise
        self.records.append(rec)
        return dict(rec["response"])

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        write_bytes_atomic(path, encode(self.header, self.records))
        return path


@dataclass(frozen=True)
class Recording:
    """A checked recording: its header and its exchanges."""

    path: Path
    header: dict[str, Any]
    records: list[dict[str, Any]]


def _exchange_ok(rec: Any, n: int) -> bool:
    return (isinstance(rec, dict) and rec.get("exchange") == n
            and isinstance(rec.get("request"), dict)
            and ("response" in rec) != ("failure" in rec)
            and isinstance(rec.get("response", rec.get("failure")), dict))


def _lines(path: Path) -> tuple[bytes, list[bytes]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordingError(f"cannot read the tool recording {path}: {exc.strerror}") from exc
    problem = ("empty file, not an MCP recording" if not data else None
               if data.endswith(b"\n") else "truncated (its last line has no newline)")
    if problem is not None:
        raise RecordingError(f"{path}: {problem}")
    return data, data.split(b"\n")[:-1]


def _json(path: Path, i: int, line: bytes) -> Any:
    try:
        return loads_strict(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordingError(f"{path}: line {i} is not valid JSON ({exc})") from exc


def read(path: str | Path) -> Recording:
    """A tool recording, checked: its header, its end record's count and checksum, each
    exchange's number and shape. RecordingError names the file and what is wrong (a
    recording without a header, from an older reactlab, is refused so)."""
    path = Path(path)
    data, lines = _lines(path)
    head = _json(path, 1, lines[0])
    problem = header_problem(head)
    if problem is not None:
        raise RecordingError(f"{path}: not a usable MCP recording: {problem}")
    end = _json(path, len(lines), lines[-1])
    if len(lines) < 2 or not isinstance(end, dict) or end.get("end") is not True:
        raise RecordingError(f"{path}: truncated (no end record)")
    body = data[:len(data) - len(lines[-1]) - 1]
    if end.get("sha256") != hashlib.sha256(body).hexdigest():
        raise RecordingError(f"{path}: checksum mismatch (the file was edited after it "
                             "was written)")
    if end.get("exchanges") != len(lines) - 2:
        raise RecordingError(f"{path}: its end record counts {end.get('exchanges')} "
                             f"exchanges, the file has {len(lines) - 2}")
    records = [_json(path, i, line) for i, line in enumerate(lines[1:-1], 2)]
    for n, rec in enumerate(records, 1):
        if not _exchange_ok(rec, n):
            raise RecordingError(f"{path}: line {n + 1} is not the record of exchange {n}")
    return Recording(path, head, records)


def problem(path: str | Path) -> str | None:
    """What is wrong with the recording at ``path`` (None: it reads back whole)."""
    try:
        read(path)
    except RecordingError as exc:
        return str(exc)
    return None


class ToolReplay:
    """Answers a run's tool calls from a recording, in order, checking each request."""

    def __init__(self, records: list[dict[str, Any]], source: str = "the recording",
                 head: Mapping[str, Any] | None = None) -> None:
        self.records = records
        self.source = source
        self.header = dict(head or {})
        self.used = 0

    @classmethod
    def load(cls, path: str | Path) -> ToolReplay:
        rec = read(path)
        return cls(rec.records, str(path), rec.header)

    def take(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The next recorded exchange, once ``request`` is checked to be its request
        (RecordingError naming the recording: another request, or one more than it
        holds)."""
        n = self.used + 1
        if n > len(self.records):
            raise RecordingError(f"tool replay ran out: {self.source} holds "
                                 f"{len(self.records)} exchanges and the run made another "
                                 f"call ({json.dumps(dict(request))[:200]})")
        rec = self.records[n - 1]
        diff = first_difference(rec["request"], dict(request))
        if diff is not None:
            raise RecordingError(f"tool replay diverged at exchange {n} of {self.source}: "
                                 f"{diff}")
        self.used = n
        return rec

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The recorded answer to ``request`` (:meth:`take`); a recorded failure is
        raised again (ToolServerError)."""
        rec = self.take(request)
        if "failure" in rec:
            failure = rec["failure"]
            raise ToolServerError(str(failure.get("kind")), str(failure.get("message")),
                                  detail=failure.get("detail"))
        return dict(rec["response"])

    def check_finished(self) -> None:
        """RecordingError when the run left recorded exchanges unused."""
        if self.used != len(self.records):
            raise RecordingError(
                f"tool replay of {self.source}: the run ended after {self.used} of the "
                f"{len(self.records)} recorded exchanges; it is not the run that was recorded")
