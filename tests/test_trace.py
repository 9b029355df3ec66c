"""Tests of reactlab.trace: atomic JSONL traces and a reader that says what is wrong."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reactlab import trace
from reactlab.core.errors import TraceError
from reactlab.trace import SCHEMA_VERSION, TraceWriter, write_json_atomic

HEADER: dict[str, Any] = {"type": "header", "schema_version": SCHEMA_VERSION,
                          "run": {"task": "t", "backend": "b", "scenario": "s"}}
RECORDS: list[dict[str, Any]] = [
    {"type": "request", "step": 1, "tokens_sent": 100, "text": "", "n_calls": 1},
    {"type": "tool_call", "step": 1, "id": "c1", "name": "precio",
     "arguments": {"ticker": "BUSI", "fecha": "2024-03-15"}, "status": "ok",
     "result": {"resultado": {"cierre": 20.25}}},
    {"type": "request", "step": 2, "tokens_sent": 150, "text": "Sí: 20,25 €", "n_calls": 0},
    {"type": "answer", "step": 2, "text": "Sí: 20,25 €"},
]
END: dict[str, Any] = {"termination": "answer", "steps": 2, "answer": "Sí: 20,25 €",
                       "tokens_sent": 250, "calls": 1, "errors": 0}


def _write(path: Path, header: dict[str, Any] = HEADER,
           records: list[dict[str, Any]] = RECORDS, end: dict[str, Any] = END) -> Path:
    w = TraceWriter(path)
    w.add(header)
    for r in records:
        w.add(r)
    return w.close(end)


def _damaged(tmp_path: Path, damage: Callable[[bytes], bytes]) -> Path:
    path = _write(tmp_path / "t.jsonl")
    path.write_bytes(damage(path.read_bytes()))
    return path


def _reason(path: Path) -> str:
    with pytest.raises(TraceError) as info:
        trace.read(path)
    return str(info.value)


# --------------------------------------------------------------------------- round trip


def test_round_trip(tmp_path: Path) -> None:
    path = _write(tmp_path / "sub" / "t.jsonl")
    assert path == tmp_path / "sub" / "t.jsonl"
    tr = trace.read(path)
    assert tr.header == HEADER
    assert tr.records == RECORDS
    assert tr.run == {"task": "t", "backend": "b", "scenario": "s"}
    assert [r["step"] for r in tr.requests()] == [1, 2]
    assert tr.tool_calls() == [RECORDS[1]]
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) - 1 == 2 + len(RECORDS)
    body = b"".join(line + b"\n" for line in lines[:-2])  # every record before the end
    own = {"type": "end", **END, "records": 1 + len(RECORDS)}
    canonical = json.dumps(own, sort_keys=True, ensure_ascii=False).encode()
    assert tr.end == {**own, "sha256": hashlib.sha256(body + canonical).hexdigest()}
    # non-ASCII text is written as UTF-8, not as \u escapes
    assert "Sí: 20,25 €".encode() in path.read_bytes()


def test_empty_trace_round_trip(tmp_path: Path) -> None:
    tr = trace.read(_write(tmp_path / "t.jsonl", records=[]))
    assert tr.records == []
    assert tr.end["records"] == 1


# --------------------------------------------------------------------------- damaged files


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    assert "empty file" in _reason(path)


def test_missing_file(tmp_path: Path) -> None:
    assert "cannot read" in _reason(tmp_path / "nada.jsonl")


def test_truncated_mid_line(tmp_path: Path) -> None:
    path = _damaged(tmp_path, lambda b: b[: b.index(b"tool_call") + 5])
    assert "truncated (last line has no newline)" in _reason(path)


def test_cut_after_a_full_line(tmp_path: Path) -> None:
    def cut(b: bytes) -> bytes:
        lines = b.split(b"\n")
        return b"\n".join(lines[:3]) + b"\n"

    path = _damaged(tmp_path, cut)
    assert "truncated (no end record)" in _reason(path)


def test_edited_value(tmp_path: Path) -> None:
    path = _damaged(tmp_path, lambda b: b.replace(b'"cierre": 20.25', b'"cierre": 20.26'))
    assert "checksum mismatch" in _reason(path)


def test_edited_end_record(tmp_path: Path) -> None:
    path = _damaged(tmp_path, lambda b: b.replace(b'"answer": "S\xc3\xad: 20,25',
                                                  b'"answer": "S\xc3\xad: 99,99'))
    assert b"99,99" in path.read_bytes()
    assert "checksum mismatch" in _reason(path)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_writer_refuses_non_finite_numbers(tmp_path: Path, bad: float) -> None:
    w = TraceWriter(tmp_path / "t.jsonl")
    w.add(HEADER)
    with pytest.raises(TraceError, match="not valid JSON"):
        w.add({"type": "request", "step": 1, "tokens_sent": bad})
    with pytest.raises(TraceError, match="not valid JSON"):
        w.close({**END, "tokens_sent": bad})
    assert list(tmp_path.iterdir()) == []


def test_writer_refuses_unknown_and_end_record_types(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "t.jsonl")
    with pytest.raises(TraceError, match="unknown record type 'cosa'"):
        w.add({"type": "cosa"})
    with pytest.raises(TraceError, match="unknown record type 'end'"):
        w.add({"type": "end"})


def test_lone_surrogate_survives(tmp_path: Path) -> None:
    text = "antes \ud800 después \\\udfff"
    rec = {"type": "answer", "step": 1, "text": text}
    path = _write(tmp_path / "t.jsonl", records=[rec], end={**END, "answer": text})
    path.read_bytes().decode("utf-8")  # the file itself is valid UTF-8
    tr = trace.read(path)
    assert tr.records[0]["text"] == text
    assert tr.end["answer"] == text


def test_no_file_without_close(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "t.jsonl")
    w.add(HEADER)
    for r in RECORDS:
        w.add(r)
    del w  # the job was killed before close()
    assert list(tmp_path.iterdir()) == []


def test_no_temp_files_after_close(tmp_path: Path) -> None:
    _write(tmp_path / "t.jsonl")
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]
    # rewriting replaces the trace, still without leftovers
    _write(tmp_path / "t.jsonl", records=RECORDS[:1])
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]
    assert trace.read(tmp_path / "t.jsonl").records == RECORDS[:1]


# --------------------------------------------------------------------------- write_json_atomic


def test_write_json_atomic(tmp_path: Path) -> None:
    path = tmp_path / "a" / "v.json"
    obj = {"verified": True, "texto": "año", "n": [1, 2.5]}
    write_json_atomic(path, obj)
    assert json.loads(path.read_text(encoding="utf-8")) == obj
    assert "año" in path.read_text(encoding="utf-8")
    assert path.read_text(encoding="utf-8").endswith("}\n")
    write_json_atomic(path, {"verified": False})
    assert json.loads(path.read_text(encoding="utf-8")) == {"verified": False}
    assert [p.name for p in path.parent.iterdir()] == ["v.json"]


def test_write_json_atomic_refuses_nan_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_json_atomic(tmp_path / "v.json", {"x": float("nan")})
    assert list(tmp_path.iterdir()) == []
