"""Tests of reactlab.trace: atomic JSONL traces and a reader that says what is wrong."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reactlab import trace
from reactlab.core.errors import TraceError
from reactlab.trace import SCHEMA_VERSION, TraceWriter, write_json_atomic
from reactlab.trace.records import (
    Answer,
    End,
    Error,
    Guardrail,
    Header,
    Record,
    Request,
    ToolCallRecord,
    record_from_json,
)

HEADER = Header(schema_version=SCHEMA_VERSION,
                run={"task": "t", "backend": "b", "scenario": "s"}, key="t/b/s",
                config_hash="0" * 64, versions={"python": "3.11"},
                spec={"question": "¿Cierre de BUSI?", "agent": {}})
RECORDS: list[Record] = [
    Request(step=1, tokens_sent=100, cumulative_tokens=100, tokens_out=5, attempts=1,
            text="", n_calls=1),
    ToolCallRecord(step=1, id="c1", name="precio",
                   arguments={"ticker": "BUSI", "fecha": "2024-03-15"}, status="ok",
                   result={"resultado": {"cierre": 20.25}}),
    Request(step=2, tokens_sent=150, cumulative_tokens=250, tokens_out=7, attempts=1,
            text="Sí: 20,25 €", n_calls=0),
    Answer(step=2, text="Sí: 20,25 €"),
]
END = End(termination="answer", steps=2, answer="Sí: 20,25 €", tokens_sent=250, calls=1,
          errors=0)


def _write(path: Path, header: Header = HEADER,
           records: list[Record] = RECORDS, end: End = END) -> Path:
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
    assert [r.step for r in tr.requests()] == [1, 2]
    assert tr.tool_calls() == [RECORDS[1]]
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) - 1 == 2 + len(RECORDS)
    body = b"".join(line + b"\n" for line in lines[:-2])  # every record before the end
    own = {**END.to_json(), "records": 1 + len(RECORDS)}
    canonical = json.dumps(own, sort_keys=True, ensure_ascii=False).encode()
    assert tr.end.to_json() == {**own, "sha256": hashlib.sha256(body + canonical).hexdigest()}
    # non-ASCII text is written as UTF-8, not as \u escapes
    assert "Sí: 20,25 €".encode() in path.read_bytes()


def test_empty_trace_round_trip(tmp_path: Path) -> None:
    tr = trace.read(_write(tmp_path / "t.jsonl", records=[]))
    assert tr.records == []
    assert tr.end.records == 1


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
        w.add(Request(step=1, tokens_sent=bad, cumulative_tokens=0,  # type: ignore[arg-type]
                      tokens_out=0, attempts=1, text="", n_calls=0))
    with pytest.raises(TraceError, match="not valid JSON"):
        w.close(replace(END, tokens_sent=bad))  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_writer_refuses_dicts_end_records_and_a_late_header(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "t.jsonl")
    with pytest.raises(TraceError, match="not a record"):
        w.add({"type": "answer", "step": 1, "text": "x"})  # type: ignore[arg-type]
    with pytest.raises(TraceError, match="not a record"):
        w.add(END)  # type: ignore[arg-type]
    with pytest.raises(TraceError, match="header must be the first"):
        w.add(RECORDS[0])
    w.add(HEADER)
    with pytest.raises(TraceError, match="header must be the first"):
        w.add(HEADER)


def test_lone_surrogate_survives(tmp_path: Path) -> None:
    text = "antes \ud800 después \\\udfff"
    rec = Answer(step=1, text=text)
    path = _write(tmp_path / "t.jsonl", records=[rec], end=replace(END, answer=text))
    path.read_bytes().decode("utf-8")  # the file itself is valid UTF-8
    tr = trace.read(path)
    assert tr.records[0] == rec
    assert tr.end.answer == text


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


# --------------------------------------------------------------------------- typed records

EVERY_KIND: list[Record] = [
    *RECORDS,
    ToolCallRecord(step=3, id="c2", name=None, arguments=None, status="invalid",
                   result={"error": "llamada con JSON no válido"}, raw='{"a": '),
    Guardrail(step=3, rule="repeated_call", id="c2"),
    Guardrail(step=3, rule="token_budget", tokens_refused=900, tokens_left=-3),
    Guardrail(step=3, rule="plan_failed", detail="fecha no válida"),
    Guardrail(step=4, rule="step_limit"),
    Error(step=4, kind="server", status=None, message="caído", attempts=3, retryable=True,
          history=[{"attempt": 1, "status": 503}]),
]


def test_every_record_kind_round_trips_through_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", records=EVERY_KIND)
    tr = trace.read(path)
    assert (tr.header, tr.records) == (HEADER, EVERY_KIND)
    lines = path.read_bytes().split(b"\n")[:-1]
    for line in lines:  # from_json -> to_json gives back the same bytes
        obj = json.loads(line)
        assert trace.dumps(record_from_json(obj).to_json()).encode() == line


def test_optional_fields_are_left_out_not_written_as_null() -> None:
    assert Guardrail(step=1, rule="step_limit").to_json() == {
        "type": "guardrail", "step": 1, "rule": "step_limit"}
    assert "raw" not in RECORDS[1].to_json()
    assert list(END.to_json()) == ["type", "termination", "steps", "answer", "tokens_sent",
                                   "calls", "errors"]


def test_the_header_records_what_the_session_sent_and_reads_a_header_without_it(
        tmp_path: Path) -> None:
    """``system_prompt_sent`` / ``tool_results_ascii`` go last in the header when a session
    stated them; a header without them (a trace written before, a suite's) still reads."""
    stated = replace(HEADER, system_prompt_sent=True, tool_results_ascii=False)
    assert list(stated.to_json())[-2:] == ["system_prompt_sent", "tool_results_ascii"]
    assert list(HEADER.to_json())[-1] == "spec"
    for header in (stated, HEADER):
        assert trace.read(_write(tmp_path / "t.jsonl", header=header)).header == header


@pytest.mark.parametrize(("obj", "reason"), [
    ({"type": "answer", "step": 1}, "answer record lacks the field 'text'"),
    ({**HEADER.to_json(), "tool_results_ascii": "yes"},
     "field 'tool_results_ascii' is str 'yes', expected"),
    ({"type": "answer", "step": 1, "text": "x", "extra": 1}, "unknown field(s) extra"),
    ({"type": "answer", "step": "1", "text": "x"}, "field 'step' is str"),
    ({"type": "request", "step": True, "tokens_sent": 1, "cumulative_tokens": 1,
      "tokens_out": 0, "attempts": 1, "text": "", "n_calls": 0}, "field 'step' is bool"),
    ({"type": "cosa"}, "unknown record type 'cosa'"),
    ({"type": "tool_call", "step": 1, "id": "c", "name": "precio", "arguments": None,
      "status": "aceptada", "result": {}},
     "field 'status' is str 'aceptada', expected one of 'ok', 'error', 'invalid', "
     "'unknown', 'repeated', 'blocked'"),
    ({"type": "guardrail", "step": 1, "rule": "otra"}, "field 'rule' is str 'otra'"),
    ({"type": "end", "termination": "done", "steps": 1, "answer": None, "tokens_sent": 0,
      "calls": 0, "errors": 0}, "field 'termination' is str 'done'"),
    ({"type": "error", "step": 1, "kind": "server<x>", "status": None, "message": "",
      "attempts": 1, "retryable": False, "history": []}, "field 'kind' is str 'server<x>'"),
])
def test_malformed_records_are_named(obj: dict[str, Any], reason: str) -> None:
    with pytest.raises(TraceError, match=re.escape(reason)):
        record_from_json(obj)


def test_reader_names_the_line_of_a_malformed_record(tmp_path: Path) -> None:
    # a record the writer would never make, with a valid checksum: found by the typed read
    w = TraceWriter(tmp_path / "t.jsonl")
    w.add(HEADER)
    w._chunks.append(b'{"type": "answer", "step": 1}\n')
    w.close(END)
    assert "line 2: answer record lacks the field 'text'" in _reason(tmp_path / "t.jsonl")


def test_an_annotation_the_reader_cannot_check_is_an_error() -> None:
    """A record field typed with something the reader does not know (a float, a class)
    raises instead of accepting any value; every shipped record class is checkable."""
    from typing import get_type_hints

    from reactlab.trace.records import RECORD_CLASSES, _type_ok

    for annotation in (float, Path, tuple[int, int]):
        with pytest.raises(TypeError, match="is not one the trace reader can check"):
            _type_ok(annotation, 1.5)
    for cls in RECORD_CLASSES.values():
        for name, annotation in get_type_hints(cls).items():
            if name != "type" and not name.startswith("_"):
                _type_ok(annotation, None)  # raises for an unknown annotation


def test_one_manifest_reader_for_folders_and_single_files(tmp_path: Path) -> None:
    """check_manifest (a whole folder) and check_published (one file) read a manifest
    the same way: intact, edited, missing, unreadable."""
    from reactlab.trace.integrity import (
        MANIFEST,
        check_manifest,
        check_published,
        read_manifest,
        write_manifest,
    )

    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("1\n")
    b.write_text("2\n")
    write_manifest(tmp_path / MANIFEST, [a, b])
    assert set(read_manifest(tmp_path / MANIFEST)) == {"a.csv", "b.csv"}
    assert check_manifest(tmp_path / MANIFEST) == [] and check_published(a) is None
    a.write_text("edited\n")
    assert check_manifest(tmp_path / MANIFEST) == [
        f"{a}: checksum mismatch (edited after it was published)"]
    assert check_published(a) == f"{a}: checksum mismatch (edited after it was published)"
    b.unlink()
    assert check_published(b) == f"{b}: missing"
    assert check_published(tmp_path / "unlisted.csv") is None
    (tmp_path / MANIFEST).write_text('{"files": [1]}')
    with pytest.raises(ValueError, match="'files' is not a mapping"):
        read_manifest(tmp_path / MANIFEST)
    assert "unreadable checksum manifest" in check_manifest(tmp_path / MANIFEST)[0]
    assert check_published(a) is None  # no usable manifest: not published by the pipeline
    (tmp_path / MANIFEST).unlink()
    assert "no checksum manifest" in check_manifest(tmp_path / MANIFEST)[0]


def test_the_header_gives_its_spec_typed_and_the_bytes_stay_the_dict(tmp_path: Path) -> None:
    """``Header.run_spec``: the spec as the RunSpec it was written from (typed settings,
    attributes instead of string keys); the file keeps the dict as written."""
    from reactlab.config import RunSpec
    from reactlab.config.settings import SimulatedBackend

    golden = Path(__file__).parent / "golden/exports/input/traces/variacion_busi/openai"
    tr = trace.read(golden / "correcto.jsonl")
    spec = tr.header.run_spec
    assert isinstance(spec, RunSpec)
    assert spec.to_dict() == tr.header.spec and spec.key == tr.header.key
    assert isinstance(spec.backend_config, SimulatedBackend)
    assert spec.backend_config.provider == "openai" and spec.script.model == "correcto"
    assert tr.header.run_spec is spec  # validated once
    # the header still writes the dict as read: same bytes
    line = (golden / "correcto.jsonl").read_text(encoding="utf-8").splitlines()[0]
    assert trace.dumps(tr.header.to_json()) == line


def test_a_header_whose_spec_is_no_run_spec_is_a_trace_error() -> None:
    with pytest.raises(TraceError, match=r"t/b/s: the header's spec is no run spec"):
        _ = HEADER.run_spec  # a question alone (a hand-written trace)
    assert HEADER.question == "¿Cierre de BUSI?"  # what the verifier reads still reads


def test_no_reader_takes_the_header_spec_apart_by_string_keys() -> None:
    """Readers use ``Header.run_spec``; only the header's own ``question`` (which the
    verifier reads on a hand-written trace) reads the dict."""
    package = Path(__file__).resolve().parents[1] / "workflow" / "reactlab"
    keyed = re.compile(r"""\.spec(\[["']|\.get\()|header\.spec\b(?!\s*[,}])""")
    found = [f"{path.relative_to(package)}:{n}"
             for path in package.rglob("*.py") if path.parts[-2] != "config"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if keyed.search(line) and "self.spec[\"question\"]" not in line]
    assert found == []
