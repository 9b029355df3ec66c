"""core.io: atomic publication and the strict JSON loader."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reactlab.core.io import (
    DuplicateKeyError,
    NonFiniteConstantError,
    atomic_dir,
    atomic_path,
    dir_tmp_name,
    loads_strict,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_write_bytes_text_json_roundtrip(tmp_path: Path) -> None:
    p = write_bytes_atomic(tmp_path / "sub" / "a.bin", b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    write_text_atomic(tmp_path / "b.txt", "ñ\n")
    assert (tmp_path / "b.txt").read_bytes() == "ñ\n".encode()
    write_json_atomic(tmp_path / "c.json", {"x": "é", "y": [1]})
    want = '{\n "x": "é",\n "y": [\n  1\n ]\n}\n'
    assert (tmp_path / "c.json").read_text(encoding="utf-8") == want
    assert sorted(f.name for f in tmp_path.iterdir()) == ["b.txt", "c.json", "sub"]
    assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_json_refuses_nan_and_leaves_old_file(tmp_path: Path) -> None:
    target = tmp_path / "c.json"
    write_json_atomic(target, {"ok": 1})
    with pytest.raises(ValueError):
        write_json_atomic(target, {"x": float("nan")})
    assert json.loads(target.read_text()) == {"ok": 1}
    assert [f.name for f in tmp_path.iterdir()] == ["c.json"]


def test_atomic_path_failure_keeps_old_and_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "t.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".csv" and tmp.name.startswith(".")
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [f.name for f in tmp_path.iterdir()] == ["t.csv"]
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"
    assert [f.name for f in tmp_path.iterdir()] == ["t.csv"]


def test_atomic_dir(tmp_path: Path) -> None:
    out = tmp_path / "model"
    with pytest.raises(RuntimeError), atomic_dir(out) as tmp:
        (tmp / "f").write_text("x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with atomic_dir(out) as tmp:
        (tmp / "f").write_text("x")
    assert (out / "f").read_text() == "x"
    assert out.stat().st_mode & 0o777 == 0o777 & ~_umask()
    assert (out / "f").stat().st_mode & 0o777 == 0o666 & ~_umask()
    with pytest.raises(FileExistsError), atomic_dir(out):
        pass


def test_atomic_dir_replaces_when_asked(tmp_path: Path) -> None:
    """``replace=True``: the old folder stays whole until the new one is complete; the
    temporary and the moved-aside folders carry the names crash recovery removes."""
    out = tmp_path / "viewer"
    with atomic_dir(out, replace=True) as tmp:
        assert tmp.name == f".viewer.{os.getpid()}.tmp"
        (tmp / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic_dir(out, replace=True) as tmp:
        (tmp / "new.txt").write_text("half")
        raise RuntimeError("killed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["viewer"]
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    with atomic_dir(out, replace=True) as tmp:
        (tmp / "new.txt").write_text("new")
        assert (out / "old.txt").read_text() == "old"  # still in place while writing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["viewer"]
    assert [p.name for p in out.iterdir()] == ["new.txt"]
    assert dir_tmp_name(out, "old").name == f".viewer.{os.getpid()}.old"


@pytest.mark.parametrize("text, exc, attr", [
    ('{"a": 1, "b": {"c": 2, "c": 3}}', DuplicateKeyError, ("key", "c")),
    ('{"a": NaN}', NonFiniteConstantError, ("name", "NaN")),
    ('[-Infinity]', NonFiniteConstantError, ("name", "-Infinity")),
])
def test_loads_strict_refuses(text: str, exc: type[ValueError], attr: tuple[str, str]) -> None:
    with pytest.raises(exc) as info:
        loads_strict(text)
    assert getattr(info.value, attr[0]) == attr[1]
    assert isinstance(info.value, ValueError)


def test_loads_strict_messages_and_plain_values() -> None:
    assert str(DuplicateKeyError("k")) == "duplicate key 'k'"
    assert str(NonFiniteConstantError("NaN")) == "non-standard JSON constant NaN"
    assert loads_strict('{"a": [1, 2.5, {"b": null}]}') == {"a": [1, 2.5, {"b": None}]}
    assert loads_strict(b'{"a": 1}', parse_int=str) == {"a": "1"}
    with pytest.raises(json.JSONDecodeError):
        loads_strict("{")
