"""Recording and replay of a run's exchange with an MCP tool server.

The ideas and the file format of the live model recordings
(:mod:`reactlab.backends.recording`), at the tool source's boundary: every ``tools/call``
of a run is recorded, in order, with the server's answer as it came (the JSON-RPC
``result`` object), or the failure it ended in (timeout, closed, malformed, too large, a
JSON-RPC error: ``kind`` and message). The file is JSONL, written atomically when the run
ends (also when it ends in an error), one record per exchange::

    {"exchange": 1, "request": {"method": "tools/call",
                                "params": {"name": "read_query", "arguments": {...}}},
     "response": {"content": [{"type": "text", "text": "..."}], "isError": false}}

    {"exchange": 2, "request": {...}, "failure": {"kind": "timeout", "message": "..."}}

A replay answers each request with the next recorded answer after checking that the
request is the one that was recorded (:func:`reactlab.backends.recording.first_difference`);
the tool source maps an answer to what the model reads with the same code in both modes,
so the replayed trace is byte-identical. A request that differs, or one more than the
recording holds, raises :class:`~reactlab.core.errors.RecordingError` (a replay that is
not the recorded run is no run at all); so does a run that leaves recorded exchanges
unused (:meth:`ToolReplay.check_finished`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reactlab.backends.recording import first_difference, read_numbered
from reactlab.core.errors import RecordingError, ToolServerError
from reactlab.core.io import write_bytes_atomic


def _line(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode(
        "utf-8", errors="backslashreplace")


class ToolRecorder:
    """Collects a run's exchanges; :meth:`write` publishes them atomically."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def exchange(self, request: Mapping[str, Any],
                 send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``send()``'s answer to ``request``, recorded (and its failure, re-raised)."""
        rec: dict[str, Any] = {"exchange": len(self.records) + 1, "request": dict(request)}
        try:
            rec["response"] = send()
        except ToolServerError as exc:
            rec["failure"] = {"kind": exc.kind, "message": str(exc),
                              **({"detail": exc.detail} if exc.detail is not None else {})}
            self.records.append(rec)
            raise
        self.records.append(rec)
        return dict(rec["response"])

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        write_bytes_atomic(path, b"".join(_line(r) for r in self.records))
        return path


def read(path: str | Path) -> list[dict[str, Any]]:
    """The records of a tool recording; RecordingError says what is wrong with the file."""
    return read_numbered(path, "tool recording", "exchange",
                         lambda rec: isinstance(rec.get("request"), dict)
                         and ("response" in rec) != ("failure" in rec)
                         and isinstance(rec.get("response", rec.get("failure")), dict))


class ToolReplay:
    """Answers a run's tool calls from a recording, in order, checking each request."""

    def __init__(self, records: list[dict[str, Any]], source: str = "the recording") -> None:
        self.records = records
        self.source = source
        self.used = 0

    @classmethod
    def load(cls, path: str | Path) -> ToolReplay:
        return cls(read(path), str(path))

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
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
