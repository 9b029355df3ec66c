"""Checksums recorded when a result is published, and checked before it is trusted.

A *manifest* is a small JSON file ``{"files": {relative path: sha256}}`` written after
the files it lists (so its presence marks a complete publication). Tables, figures and
the viewer each carry one; traces carry their own checksum in their end record.

:func:`publish_dir` writes a whole folder under a temporary name and renames it into
place, manifest included: a reader sees the old folder, no folder, or the complete new
one, never a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from reactlab.core.errors import UsageError
from reactlab.core.io import atomic_dir, write_text_atomic

MANIFEST = ".manifest.json"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_manifest(manifest: str | Path, files: Iterable[str | Path],
                   base: str | Path | None = None) -> Path:
    """Record the sha256 of ``files`` (paths relative to ``base``, default the manifest's
    folder) in ``manifest``, atomically."""
    manifest = Path(manifest)
    base = Path(base) if base is not None else manifest.parent
    entries = {Path(os.path.relpath(f, base)).as_posix(): sha256_file(f) for f in files}
    return write_text_atomic(
        manifest, json.dumps({"files": dict(sorted(entries.items()))}, indent=1) + "\n")


def read_manifest(manifest: str | Path) -> dict[str, str]:
    """The entries of a manifest (relative path → sha256): the one reader.

    Raises FileNotFoundError when there is none, and ValueError (naming the problem)
    when it cannot be read or is not ``{"files": {path: digest}}``.
    """
    try:
        text = Path(manifest).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(str(exc)) from exc
    try:
        obj = json.loads(text)
        entries = obj["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(str(exc)) from exc
    if not isinstance(entries, dict):
        raise UsageError("'files' is not a mapping")
    return entries


def _file_problem(path: Path, digest: object) -> str | None:
    if not path.is_file():
        return f"{path}: missing"
    if sha256_file(path) != digest:
        return f"{path}: checksum mismatch (edited after it was published)"
    return None


def check_manifest(manifest: str | Path, base: str | Path | None = None) -> list[str]:
    """What differs between ``manifest`` and the files on disk (empty list: intact)."""
    manifest = Path(manifest)
    base = Path(base) if base is not None else manifest.parent
    try:
        entries = read_manifest(manifest)
    except FileNotFoundError:
        return [f"{manifest}: no checksum manifest (publication did not complete)"]
    except ValueError as exc:
        return [f"{manifest}: unreadable checksum manifest ({exc})"]
    return [problem for rel, digest in entries.items()
            if (problem := _file_problem(base / rel, digest)) is not None]


def check_published(path: str | Path) -> str | None:
    """The problem with one published file against its folder's manifest, or None when
    it matches (or no manifest lists it: then it was not published by this pipeline)."""
    path = Path(path)
    try:
        entries = read_manifest(path.parent / MANIFEST)
    except (FileNotFoundError, ValueError):
        return None
    if path.name not in entries:
        return None
    return _file_problem(path, entries[path.name])


def publish_dir(out_dir: str | Path, write: Callable[[Path], Iterable[Path]]) -> Path:
    """Build a folder atomically with a checksum manifest: ``write(tmp)`` fills the
    temporary folder of :func:`reactlab.core.io.atomic_dir` and returns the files it
    wrote; a manifest of them is added, then the folder replaces ``out_dir``."""
    out_dir = Path(out_dir)
    with atomic_dir(out_dir, replace=True) as tmp:
        files = list(write(tmp))
        write_manifest(tmp / MANIFEST, files, tmp)
    return out_dir
