"""Atomic file publication and strict JSON reading: the one implementation of each.

Writing: every file reactlab produces is published by one ``os.replace`` of a complete
temporary file that lives in the *same folder* (so the rename never crosses a file
system), after ``fsync``. A reader therefore sees the old file or the new one, never a
half-written one, even if the writer is killed (Snakemake, SIGKILL). Temporary names
start with a dot and carry the pid and a random suffix, so two writers never share one.
Files get the usual permissions under the process umask (``tempfile.mkstemp`` would
leave 0600).

- :func:`write_bytes_atomic`, :func:`write_text_atomic`, :func:`write_json_atomic`
- :func:`atomic_path`: a context manager yielding a temporary path for writers that want
  a file name (``DataFrame.to_parquet``, ``Figure.savefig``); the suffix is kept so that
  format detection by extension still works.
- :func:`atomic_dir`: the same for a whole folder, published by one rename (an existing
  folder is replaced only when asked); :func:`reactlab.trace.integrity.publish_dir` adds
  a checksum manifest on top of it.

Reading: :func:`loads_strict` is ``json.loads`` that refuses a key repeated in an object
(:class:`DuplicateKeyError`) and the non-standard constants NaN / Infinity / -Infinity
(:class:`NonFiniteConstantError`) instead of accepting them silently.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from reactlab.core.errors import DuplicateKeyError, NonFiniteConstantError  # re-exported

__all__ = [
    "DuplicateKeyError", "NonFiniteConstantError", "atomic_dir", "atomic_path", "dir_tmp_name",
    "loads_strict", "write_bytes_atomic", "write_json_atomic", "write_text_atomic",
]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp{path.suffix}")


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, fsync: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on normal exit publish it as ``path``.

    The caller writes the complete file to the yielded path. On an exception the
    temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    try:
        yield tmp
        if fsync:
            _fsync_file(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: str | Path, data: bytes, *, fsync: bool = True) -> Path:
    """Publish ``data`` as ``path`` atomically; return the path."""
    path = Path(path)
    with atomic_path(path, fsync=False) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
    return path


def write_text_atomic(path: str | Path, text: str, *, errors: str = "strict",
                      fsync: bool = True) -> Path:
    """Publish ``text`` (UTF-8, no newline translation) as ``path`` atomically."""
    return write_bytes_atomic(path, text.encode("utf-8", errors=errors), fsync=fsync)


def write_json_atomic(path: str | Path, obj: Any, *, indent: int | None = 1,
                      fsync: bool = True) -> Path:
    """Publish ``obj`` as a JSON document (UTF-8, no NaN/Infinity, final newline)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=indent) + "\n"
    return write_text_atomic(path, text, fsync=fsync)


def dir_tmp_name(out_dir: Path, kind: str = "tmp") -> Path:
    """The sibling a folder is built under (``kind`` ``tmp``) or moved aside to while it
    is replaced (``old``): ``.NAME.PID.tmp`` / ``.NAME.PID.old``. Crash recovery
    (:func:`reactlab.analysis.recovery.recover`) removes what a killed job left under
    these names."""
    return out_dir.with_name(f".{out_dir.name}.{os.getpid()}.{kind}")


@contextlib.contextmanager
def atomic_dir(out_dir: str | Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``out_dir``; on normal exit rename it to
    ``out_dir``: the one routine that publishes a folder.

    ``out_dir`` must not exist (FileExistsError otherwise) unless ``replace``: then an
    existing folder is moved aside, the new one renamed into place and the old one
    removed, so a reader sees the old folder or the complete new one. The folder and the
    files directly in it get the usual permissions under the umask and are synced. On an
    exception the temporary folder is removed and ``out_dir`` is left as it was.
    """
    out_dir = Path(out_dir)
    if not replace and out_dir.exists():
        raise FileExistsError(f"{out_dir} already exists")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = dir_tmp_name(out_dir)
    shutil.rmtree(tmp, ignore_errors=True)  # left by an earlier process with this pid
    tmp.mkdir()
    try:
        yield tmp
        mask = _umask()
        for f in tmp.iterdir():
            if f.is_file():
                f.chmod(0o666 & ~mask)
                _fsync_file(f)
        tmp.chmod(0o777 & ~mask)
        if replace and out_dir.exists():
            old = dir_tmp_name(out_dir, "old")
            shutil.rmtree(old, ignore_errors=True)
            os.rename(out_dir, old)
            os.rename(tmp, out_dir)
            shutil.rmtree(old)
        else:
            tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise NonFiniteConstantError(name)


def loads_strict(text: str | bytes, *, parse_float: Callable[[str], Any] | None = None,
                 parse_int: Callable[[str], Any] | None = None) -> Any:
    """``json.loads`` refusing duplicate keys and NaN / Infinity / -Infinity.

    Raises :class:`DuplicateKeyError`, :class:`NonFiniteConstantError` (both
    ValueError), ``json.JSONDecodeError`` for malformed text, and whatever
    ``parse_float`` / ``parse_int`` raise.
    """
    return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant,
                      parse_float=parse_float, parse_int=parse_int)
