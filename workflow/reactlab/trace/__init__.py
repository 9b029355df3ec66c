"""JSONL traces: one file per run, written atomically, read back with validation.

A trace is a ``header`` record, the run's records (``request``, ``tool_call``,
``guardrail``, ``answer``, ``error``), and an ``end`` record that carries the number of
records before it and a sha256 over their bytes and the end record's own fields. A
reader therefore rejects a truncated, edited, concatenated or re-encoded file with a
specific reason instead of trusting it.

The writer keeps the records in memory and publishes the file with one ``os.replace``
at the end: a job killed half-way leaves no trace file at all, never half of one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactlab.core.errors import TraceError
from reactlab.core.io import loads_strict, write_bytes_atomic
from reactlab.core.io import write_json_atomic as write_json_atomic  # re-exported

SCHEMA_VERSION = 1
RECORD_TYPES = frozenset({"header", "request", "tool_call", "guardrail", "answer", "error", "end"})


def dumps(record: Mapping[str, Any]) -> str:
    """One record as one JSON line. Refuses NaN/Infinity; keeps non-ASCII text readable."""
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise TraceError(f"record is not valid JSON ({exc}): {record!r:.200}") from exc


def _encode(line: str) -> bytes:
    # A lone surrogate cannot be UTF-8; backslashreplace writes it as the JSON escape
    # \udXXX, which json.loads reads back as the same string.
    return (line + "\n").encode("utf-8", errors="backslashreplace")


class TraceWriter:
    """Collects records and writes the trace atomically on :meth:`close`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._chunks: list[bytes] = []

    def add(self, record: Mapping[str, Any]) -> None:
        if record.get("type") not in RECORD_TYPES - {"end"}:
            raise TraceError(f"unknown record type {record.get('type')!r}")
        self._chunks.append(_encode(dumps(record)))

    def close(self, end: Mapping[str, Any]) -> Path:
        final = {"type": "end", **end, "records": len(self._chunks)}
        dumps(final)  # refuse NaN / Infinity with a TraceError before hashing
        final["sha256"] = _digest(self._chunks, final)
        data = b"".join(self._chunks) + _encode(dumps(final))
        return write_bytes_atomic(self.path, data)


def _digest(chunks: list[bytes], end: Mapping[str, Any]) -> str:
    """sha256 of the records' bytes and of the end record's own fields (but the hash)."""
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk)
    own = {k: v for k, v in end.items() if k != "sha256"}
    h.update(json.dumps(own, sort_keys=True, ensure_ascii=False, allow_nan=False).encode(
        "utf-8", errors="backslashreplace"))
    return h.hexdigest()


@dataclass(frozen=True)
class Trace:
    path: Path
    header: dict[str, Any]
    records: list[dict[str, Any]]
    end: dict[str, Any]

    def of_type(self, kind: str) -> Iterator[dict[str, Any]]:
        return (r for r in self.records if r["type"] == kind)

    @property
    def run(self) -> dict[str, str]:
        return self.header["run"]

    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.of_type("tool_call"))

    def requests(self) -> list[dict[str, Any]]:
        return list(self.of_type("request"))


def read(path: str | Path) -> Trace:
    """Read and validate a trace; raise TraceError saying exactly what is wrong."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from exc
    if not data:
        raise TraceError(f"{path}: empty file")
    if b"\r" in data:
        raise TraceError(f"{path}: contains carriage returns (CRLF-rewritten?)")
    if not data.endswith(b"\n"):
        raise TraceError(f"{path}: truncated (last line has no newline)")
    lines = data.split(b"\n")[:-1]
    records = []
    for i, line in enumerate(lines, 1):
        try:
            rec = loads_strict(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise TraceError(f"{path}: line {i} is not valid JSON ({exc})") from exc
        if not isinstance(rec, dict) or rec.get("type") not in RECORD_TYPES:
            raise TraceError(f"{path}: line {i} is not a trace record")
        records.append(rec)
    header, end = records[0], records[-1]
    if header["type"] != "header":
        raise TraceError(f"{path}: first record is {header['type']!r}, not a header")
    if header.get("schema_version") != SCHEMA_VERSION:
        raise TraceError(f"{path}: schema version {header.get('schema_version')!r}, "
                         f"this reader understands {SCHEMA_VERSION}")
    ends = [i for i, r in enumerate(records) if r["type"] == "end"]
    if not ends:
        raise TraceError(f"{path}: truncated (no end record)")
    if ends != [len(records) - 1] or sum(r["type"] == "header" for r in records) != 1:
        raise TraceError(f"{path}: more than one trace in the file (concatenated?)")
    if end.get("records") != len(records) - 1:
        raise TraceError(f"{path}: end record counts {end.get('records')} records, "
                         f"the file has {len(records) - 1}")
    digest = _digest([line + b"\n" for line in lines[:-1]], end)
    if end.get("sha256") != digest:
        raise TraceError(f"{path}: checksum mismatch (the file was edited after it was written)")
    return Trace(path=path, header=header, records=records[1:-1], end=end)
