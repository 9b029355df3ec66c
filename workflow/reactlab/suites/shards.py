"""A shard's files on disk: its specs, and the manifests that stand for its traces.

A shard's files live under ``results/suites/{suite}/shards/`` (:func:`shard_files`): the
specs its run job writes first and runs (``{shard}.json``), and two checksum manifests
(the format of :mod:`reactlab.trace.integrity`: ``{"files": {path: sha256}}``, paths
relative to the working folder) written by its jobs after their per-case files. The
manifests are the only files Snakemake knows:

* ``{shard}.traces.json`` — the run job's output: one trace per case; for a model shard
  also its ``reproduce`` record: the batches its cases were decoded in, torch's version
  and the CPU kernels it ran (:func:`reactlab.suites.run.reproduction_record`; written
  beside the specs as ``{shard}.reproduce.json`` by the shard's process and moved into
  the manifest by :func:`publish`), what a bfloat16 trace's text depends on;
* ``{shard}.verified.json`` — the verify job's output: one verification per case.

The per-case files are not declared to Snakemake: a 10,000-run suite is then about 500
jobs over 500 files instead of 20,000 files, and planning it costs seconds instead of
tens of seconds (docs/workflow.md, "Planning at scale"). What Snakemake no longer sees,
:func:`recover` checks before every run: a case file that is missing, or whose content no
longer matches its manifest, removes that manifest (and the suite tables), so a plain
rerun regenerates that shard only (its verify job and the tables after it).

Checking a checksum means reading the file; to keep a no-op rerun cheap, the job that
writes a manifest also records each file's size and modification time beside its digest
in a *stat cache* (``.snakemake/reactlab/suites/…``, not a result). A file whose size and
modification time still match the cache, for the digest the manifest lists, is not read
again; any other file is hashed and compared (and the cache refreshed when it matches).
This is the trust ``make`` and ``rsync`` put in a modification time: an edit that keeps
both the size and the nanosecond modification time is not seen until the file is read by
the tables' build, which verifies every trace again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactlab.analysis.latex import csv_to_latex
from reactlab.core.errors import UsageError
from reactlab.core.io import write_json_atomic, write_text_atomic
from reactlab.suites.registry import BENCHMARKS
from reactlab.trace.integrity import read_manifest, sha256_file, write_manifest

__all__ = [
    "ShardFiles",
    "benchmark_of",
    "check",
    "has_latex",
    "latex_paths",
    "listed",
    "publish",
    "recover",
    "reproduction",
    "reproduction_file",
    "shard_files",
    "shards_of",
    "spec_file",
    "stat_cache_path",
    "table_paths",
    "write_latex",
]

RESULTS = "results/suites"
STAT_CACHE = ".snakemake/reactlab/suites"


@dataclass(frozen=True)
class ShardFiles:
    """A shard's specs and its two manifests (the files Snakemake knows)."""

    spec: str
    traces: str
    verified: str


def shard_files(suite: str, shard_id: str, root: str = RESULTS) -> ShardFiles:
    base = f"{root}/{suite}/shards/{shard_id}"
    return ShardFiles(f"{base}.json", f"{base}.traces.json", f"{base}.verified.json")


def spec_file(traces_manifest: str | Path) -> Path:
    """The specs file of the shard whose trace manifest is ``traces_manifest``."""
    m = Path(traces_manifest)
    if not m.name.endswith(".traces.json"):
        raise UsageError(f"{m}: not a shard's trace manifest")
    return m.with_name(m.name[:-len(".traces.json")] + ".json")


def reproduction_file(spec: str | Path) -> Path:
    """Where a model shard's process leaves its reproduction record for :func:`publish`:
    ``{shard}.reproduce.json`` beside the shard's specs ``{shard}.json``."""
    p = Path(spec)
    return p.with_name(p.name.removesuffix(".json") + ".reproduce.json")


def _take_reproduction(manifest: str | Path) -> dict[str, Any] | None:
    """The record a trace manifest's shard process left (removed once taken), when it was
    written for the specs now beside it; None otherwise (a stale record is dropped)."""
    if not Path(manifest).name.endswith(".traces.json"):
        return None
    spec = spec_file(manifest)
    path = reproduction_file(spec)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        specs = spec.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    finally:
        path.unlink(missing_ok=True)
    if not isinstance(record, dict) or record.get("specs_sha256") != hashlib.sha256(
            specs.encode("utf-8")).hexdigest():
        return None
    return record


def reproduction(manifest: str | Path) -> dict[str, Any] | None:
    """The ``reproduce`` record of a shard's trace manifest (None: a scripted shard, or
    one published without it)."""
    obj = json.loads(Path(manifest).read_text(encoding="utf-8"))
    record = obj.get("reproduce") if isinstance(obj, dict) else None
    return record if isinstance(record, dict) else None


def benchmark_of(shard: Any) -> str:
    """The benchmark a shard's cases come from."""
    return str(shard.specs[0].suite.benchmark)


def shards_of(shards: Sequence[Any]) -> dict[str, list[Any]]:
    """``shards`` per registered benchmark that has some (in registration order): each
    benchmark's tables are built from its own shards."""
    groups = {b: [s for s in shards if benchmark_of(s) == b] for b in BENCHMARKS}
    return {b: group for b, group in groups.items() if group}


def table_paths(shards: Sequence[Any], tables_dir: str = "results/tables") -> list[str]:
    """The suite tables built from ``shards``: those of each benchmark they include
    (:attr:`reactlab.suites.registry.Benchmark.tables`)."""
    return [f"{tables_dir}/{name}.csv" for b in shards_of(shards)
            for name in BENCHMARKS[b].tables]


def has_latex(table: str) -> bool:
    """Whether a benchmark's table gets a LaTeX twin beside its CSV (``<name>.tex``, by
    its table job, :func:`write_latex`): every table but a per-case one (``*_cases``, a
    row per case, as the lesson's per-run tables get none)."""
    return not table.endswith("_cases")


def latex_paths(shards: Sequence[Any], tables_dir: str = "results/tables") -> list[str]:
    """The LaTeX twins of the suite tables built from ``shards`` (:func:`has_latex`)."""
    return [p[:-len(".csv")] + ".tex" for p in table_paths(shards, tables_dir)
            if has_latex(Path(p).stem)]


def write_latex(written: Mapping[str, Path]) -> list[Path]:
    """Beside each table of ``written`` (name: CSV path, a benchmark's ``build_tables``)
    that :func:`has_latex`, its booktabs twin (:func:`reactlab.analysis.latex.csv_to_latex`);
    the twins' paths."""
    out = []
    for name, path in sorted(written.items()):
        if has_latex(name):
            tex = Path(path).with_suffix(".tex")
            write_text_atomic(tex, csv_to_latex(path, f"results/tables/{name}.csv"))
            out.append(tex)
    return out


def stat_cache_path(manifest: str | Path, cache_root: str | Path = STAT_CACHE) -> Path:
    """Where the stat cache of ``manifest`` lives (one small file per manifest)."""
    m = Path(manifest)
    return Path(cache_root) / m.parent.parent.name / m.name


def _stat_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def publish(manifest: str | Path, files: Sequence[str],
            cache_root: str | Path = STAT_CACHE) -> Path:
    """Write ``manifest`` for ``files`` (already written, each atomically): first their
    stat cache, then the manifest itself (atomically: its presence marks the shard's
    files complete). A trace manifest whose shard process left a reproduction record
    (:func:`reproduction_file`, for the same specs) carries it as ``reproduce``; without
    one the manifest is :func:`~reactlab.trace.integrity.write_manifest`'s, byte for byte.
    Returns the manifest's path."""
    digests = {f: sha256_file(f) for f in files}
    cache = {f: [*(_stat_key(f) or (-1, -1)), digest] for f, digest in digests.items()}
    write_json_atomic(stat_cache_path(manifest, cache_root), cache, indent=None)
    record = _take_reproduction(manifest)
    if record is None:
        return write_manifest(manifest, list(files), base=".")
    entries = {Path(os.path.relpath(f, ".")).as_posix(): d for f, d in digests.items()}
    return write_text_atomic(manifest, json.dumps(
        {"files": dict(sorted(entries.items())), "reproduce": record}, indent=1) + "\n")


def listed(manifest: str | Path) -> list[str]:
    """The files a shard manifest lists (paths relative to the working folder), sorted."""
    return sorted(read_manifest(manifest))


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def check(manifest: str | Path, expected: Iterable[str] | None = None,
          cache_root: str | Path = STAT_CACHE, *, refresh: bool = True) -> list[str]:
    """The problems of one shard manifest against the files on disk (empty: intact).
    ``expected``: the files the plan says the manifest must list (another set is a
    problem too). Files whose stat matches the cache are not read; others are hashed,
    and the cache is refreshed when they still match (unless ``refresh`` is False: a dry
    run writes nothing)."""
    try:
        entries = read_manifest(manifest)
    except FileNotFoundError:
        return []  # not built yet: Snakemake sees the missing output itself
    except ValueError as exc:
        return [f"{manifest}: unreadable manifest ({exc})"]
    if expected is not None and set(entries) != set(expected):
        return [f"{manifest}: lists other files than the shard's cases"]
    cache_file = stat_cache_path(manifest, cache_root)
    cache = _read_cache(cache_file)
    problems: list[str] = []
    refreshed = False
    for path, digest in entries.items():
        key = _stat_key(path)
        if key is None:
            problems.append(f"{path} is missing")
            continue
        cached = cache.get(path)
        if (isinstance(cached, list) and len(cached) == 3 and tuple(cached[:2]) == key
                and cached[2] == digest):
            continue
        if sha256_file(path) != digest:
            problems.append(f"{path}: checksum mismatch (edited after it was written)")
            continue
        cache[path] = [*key, digest]
        refreshed = True
    if refreshed and refresh and not problems:
        write_json_atomic(cache_file, cache, indent=None)
    return problems


def recover(shards: Sequence[Any], tables: Sequence[str], root: str = RESULTS,
            cache_root: str | Path = STAT_CACHE, apply: bool = True) -> list[str]:
    """Before any job starts (the Snakefile's main process, with the folder to itself):
    every built shard's manifests are checked against their files (:func:`check`). A
    damaged or missing trace removes the shard's two manifests, a damaged or missing
    verification the verify manifest; either removes the suite ``tables``. A plain rerun
    then regenerates exactly those shards, and the tables.

    A shard whose manifest lists other cases than the plan's (the config changed its
    cases) is not damaged: its manifests are removed so that it is rerun, but the tables
    stay (``rule all`` asks for every manifest, so Snakemake rebuilds the tables after the
    shard). With ``apply=False`` (a dry run) nothing is removed: the messages say what a
    run would do. Returns the messages for the user."""
    messages: list[str] = []
    stale = False

    def remove(*paths: str) -> None:
        if apply:
            for name in paths:
                Path(name).unlink(missing_ok=True)

    for shard in shards:
        files = shard_files(shard.suite, shard.id, root)
        expected = shard.traces(root)
        try:
            outdated = set(read_manifest(files.traces)) != set(expected)
        except (FileNotFoundError, ValueError):
            outdated = False  # not built yet, or unreadable: check() says which
        if outdated:
            remove(files.traces, files.verified)
            messages.append(f"shard {shard.id}: its cases changed in the config: it will "
                            "be rerun")
            continue
        problems = check(files.traces, expected, cache_root, refresh=apply)
        if problems:
            remove(files.traces, files.verified)
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            messages.append(f"{problems[0]}{more}: shard {shard.id} will be rerun")
            stale = True
            continue
        problems = check(files.verified, shard.verified(root), cache_root, refresh=apply)
        if problems:
            remove(files.verified)
            messages.append(f"{problems[0]}: shard {shard.id} will be verified again")
            stale = True
    if stale:
        for t in tables:
            if Path(t).exists():
                remove(t)
                messages.append(f"{t} will be rebuilt")
    return messages
