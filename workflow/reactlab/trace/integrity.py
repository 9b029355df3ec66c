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
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from reactlab.core.io import write_text_atomic

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


def check_manifest(manifest: str | Path, base: str | Path | None = None) -> list[str]:
    """What differs between ``manifest`` and the files on disk (empty list: intact)."""
    manifest = Path(manifest)
    base = Path(base) if base is not None else manifest.parent
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))["files"]
        if not isinstance(entries, dict):
            raise TypeError("'files' is not a mapping")
    except FileNotFoundError:
        return [f"{manifest}: no checksum manifest (publication did not complete)"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"{manifest}: unreadable checksum manifest ({exc})"]
    problems = []
    for rel, digest in entries.items():
        path = base / rel
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif sha256_file(path) != digest:
            problems.append(f"{path}: checksum mismatch (edited after it was published)")
    return problems


def check_published(path: str | Path) -> str | None:
    """The problem with one published file against its folder's manifest, or None when
    it matches (or no manifest lists it: then it was not published by this pipeline)."""
    path = Path(path)
    manifest = path.parent / MANIFEST
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(entries, dict) or path.name not in entries:
        return None
    if not path.is_file():
        return f"{path}: missing"
    if sha256_file(path) != entries[path.name]:
        return f"{path}: checksum mismatch (edited after it was published)"
    return None


def publish_dir(out_dir: str | Path, write: Callable[[Path], Iterable[Path]]) -> Path:
    """Build a folder atomically: ``write(tmp)`` fills a temporary sibling folder and
    returns the files it wrote; a manifest of them is added, then the folder is renamed
    to ``out_dir`` (an existing one is replaced)."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        files = list(write(tmp))
        write_manifest(tmp / MANIFEST, files, tmp)
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.{os.getpid()}.old")
            os.rename(out_dir, old)
            os.rename(tmp, out_dir)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir
