"""Tests of the command line (``python -m reactlab``): one-line errors, exit status 2."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import yaml

from reactlab.trace import SCHEMA_VERSION, TraceWriter
from reactlab.trace.records import Answer, End, Header, ToolCallRecord
from tests.conftest import offline_blocks

ROOT = Path(__file__).resolve().parents[1]


def reactlab(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reactlab", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("reactlab: error: ")
    return lines[0]


def test_check_bad_config(tmp_path: Path, raw_config: dict) -> None:
    raw_config["agent"]["max_step"] = 5
    bad = tmp_path / "BAD.yaml"
    bad.write_text(yaml.safe_dump(raw_config, allow_unicode=True), encoding="utf-8")
    proc = reactlab("check", "--config", bad)
    line = _one_error_line(proc)
    assert line.startswith("reactlab: error: config: agent.max_step: unknown key")
    assert "did you mean 'max_steps'" in line
    assert proc.stdout == ""


def test_check_missing_config(tmp_path: Path) -> None:
    line = _one_error_line(reactlab("check", "--config", tmp_path / "nada.yaml"))
    assert "cannot read" in line and "nada.yaml" in line


def test_check_duplicate_key(tmp_path: Path) -> None:
    bad = tmp_path / "dup.yaml"
    bad.write_text("agent: {max_steps: 6}\nagent: {max_steps: 7}\n", encoding="utf-8")
    line = _one_error_line(reactlab("check", "--config", bad))
    assert "duplicate key 'agent' at line 2" in line


def test_check_list_prints_every_run_key(raw_config: dict) -> None:
    proc = reactlab("check", "--config", ROOT / "config.yaml", "--list")
    assert proc.returncode == 0, proc.stderr
    expected = {f"{t}/{b}/{s}" + (f"__{a}" if a != "lesson" else "")
                + (f"/t{i}" if block.get("trials", 1) > 1 else "")
                for block in offline_blocks(raw_config)
                for t, b, s, a in itertools.product(block["tasks"], block["backends"],
                                                    block["scenarios"],
                                                    block.get("agents", ["lesson"]))
                for i in range(1, block.get("trials", 1) + 1)}
    printed = proc.stdout.splitlines()
    assert sorted(printed) == sorted(expected)
    assert f"valid; {len(expected)} runs" in proc.stderr


def _hand_trace(path: Path, answer: str) -> Path:
    question = "¿Cuál fue el cierre de ACME el 2024-03-15?"
    w = TraceWriter(path)
    w.add(Header(schema_version=SCHEMA_VERSION,
                 run={"task": "cierre_acme", "backend": "openai", "scenario": "x"},
                 key="cierre_acme/openai/x", config_hash="", versions={},
                 spec={"question": question}))
    w.add(ToolCallRecord(step=1, id="c1", name="precio",
                         arguments={"ticker": "ACME", "fecha": "2024-03-15"}, status="ok",
                         result={"resultado": {"ticker": "ACME", "fecha": "2024-03-15",
                                               "cierre": 87.25}}))
    w.add(Answer(step=2, text=answer))
    return w.close(End(termination="answer", steps=2, answer=answer, tokens_sent=10,
                       calls=1, errors=0))


def test_verify_good_trace(tmp_path: Path) -> None:
    tr = _hand_trace(tmp_path / "t.jsonl", "El cierre de ACME fue 87.25.")
    out = tmp_path / "v" / "t.json"
    proc = reactlab("verify", "--trace", tr, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "verified" in proc.stderr
    rec = json.loads(out.read_text(encoding="utf-8"))
    assert rec["verified"] is True
    assert rec["findings"] == []
    assert rec["run"] == {"task": "cierre_acme", "backend": "openai", "scenario": "x"}


def test_verify_damaged_trace(tmp_path: Path) -> None:
    tr = _hand_trace(tmp_path / "t.jsonl", "El cierre de ACME fue 87.25.")
    tr.write_bytes(tr.read_bytes().replace(b"87.25}", b"99.99}"))
    out = tmp_path / "v.json"
    line = _one_error_line(reactlab("verify", "--trace", tr, "--out", out))
    assert str(tr) in line
    assert "checksum mismatch" in line
    assert not out.exists()


def test_verify_truncated_trace(tmp_path: Path) -> None:
    tr = _hand_trace(tmp_path / "t.jsonl", "El cierre de ACME fue 87.25.")
    tr.write_bytes(tr.read_bytes()[:-10])
    out = tmp_path / "v.json"
    line = _one_error_line(reactlab("verify", "--trace", tr, "--out", out))
    assert "truncated" in line
    assert not out.exists()
