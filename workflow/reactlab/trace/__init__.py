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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from reactlab.core.errors import TraceError
from reactlab.core.io import loads_strict, write_bytes_atomic
from reactlab.core.io import write_json_atomic as write_json_atomic  # re-exported
from reactlab.trace.records import (
    BODY_CLASSES,
    RECORD_CLASSES,
    Answer,
    End,
    Error,
    Guardrail,
    Header,
    Record,
    Request,
    ToolCallRecord,
)

__all__ = ["SCHEMA_VERSION", "Answer", "End", "Error", "Guardrail", "Header", "Record",
           "Request", "ToolCallRecord", "Trace", "TraceWriter", "dumps", "read",
           "write_json_atomic"]

SCHEMA_VERSION = 1
RECORD_TYPES = frozenset(RECORD_CLASSES)


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

    def add(self, record: Header | Record) -> None:
        if isinstance(record, End) or not isinstance(record, tuple(RECORD_CLASSES.values())):
            raise TraceError(f"not a record to add: {record!r:.100}")
        if (isinstance(record, Header)) != (not self._chunks):
            raise TraceError("the header must be the first record, and only the first")
        self._chunks.append(_encode(dumps(record.to_json())))

    def close(self, end: End) -> Path:
        """Write the file with ``end`` completed by the record count and the checksum."""
        if not self._chunks:
            raise TraceError("a trace needs a header before its end")
        final = replace(end, records=len(self._chunks), sha256=None).to_json()
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


T = TypeVar("T")


@dataclass(frozen=True)
class Trace:
    """A validated trace: typed header, records and end (see :mod:`reactlab.trace.records`)."""

    path: Path
    header: Header
    records: list[Record]
    end: End

    def of_type(self, kind: type[T]) -> Iterator[T]:
        return (r for r in self.records if isinstance(r, kind))

    @property
    def run(self) -> dict[str, str]:
        return self.header.run

    def tool_calls(self) -> list[ToolCallRecord]:
        return list(self.of_type(ToolCallRecord))

    def requests(self) -> list[Request]:
        return list(self.of_type(Request))

    def errors(self) -> list[Error]:
        return list(self.of_type(Error))


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
    # the checks above leave the header first, the end last and body records between
    typed_header = _typed(path, 1, Header.from_json, header)
    body = [_typed(path, i, _body_record, rec) for i, rec in enumerate(records[1:-1], 2)]
    typed_end = _typed(path, len(records), End.from_json, end)
    return Trace(path=path, header=typed_header, records=body, end=typed_end)


def _body_record(rec: Mapping[str, Any]) -> Record:
    """A record between the header and the end (its ``type`` is one of those)."""
    return BODY_CLASSES[rec["type"]].from_json(rec)


def _typed(path: Path, line: int, build: Callable[[Mapping[str, Any]], T],
           rec: Mapping[str, Any]) -> T:
    """``rec`` (line ``line`` of the trace at ``path``) as its typed record; a TraceError
    says which line is wrong and how."""
    try:
        return build(rec)
    except TraceError as exc:
        raise TraceError(f"{path}: line {line}: {exc}") from exc
