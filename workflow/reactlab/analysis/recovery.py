"""Before any job starts: hold the folder, find damaged or missing results and make a
plain rerun fix them.

Snakemake reruns a job when its output is missing, not when an input of an existing
output vanished or was edited: a deleted trace under an existing table is "Nothing to be
done". :func:`recover` therefore checks every published result against what produced it
and removes what cannot be trusted *together with the aggregates built from it*, so that
Snakemake sees missing outputs and rebuilds the chain:

* a trace must pass its own checksum (:func:`reactlab.trace.read`);
* a run's MCP recording (``results/recordings/{key}.mcp.jsonl``) must pass its own
  checksum (:func:`reactlab.mcp.recording.read`): a damaged one is removed with the
  run's trace and verification, so the run records it again; when its server is set to
  replay (the recording cannot be made again without the server) the run stops naming
  it and the repair;
* a verification must agree with verifying its trace again (microseconds);
* tables, figures and the viewer must match the checksum manifest written when they were
  published (:mod:`reactlab.trace.integrity`).

A trace that cannot be regenerated for free (a live run against a real API) is never
removed: the run stops naming the file and the commands that repair it.

:func:`start` is the one entry point: ``workflow/rules/common.smk`` calls it once, in the
main Snakemake process only (``workflow.is_main_process``: never in the re-parse of a
job's own Snakemake process, local or on a cluster node), and ``reactlab recover`` calls
it by hand. It first takes the folder's lock (:func:`hold_folder`), so nothing is removed
under a running job. Snakemake's own lock and "incomplete" marks are left to Snakemake's
public options (``nolock`` and ``rerun-incomplete`` in ``profiles/default``); see
docs/workflow.md, "Recovery and lints".
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from reactlab import trace as tracemod
from reactlab.analysis.figures import manifest_path
from reactlab.analysis.verify import load_verification
from reactlab.core.errors import DamagedResult, DiskFull, RunActive, TraceError
from reactlab.mcp import recording as mcp_recording
from reactlab.trace.integrity import MANIFEST, check_manifest

__all__ = ["MIN_FREE", "DamagedResult", "Recovery", "disk_full", "hold_folder", "recover",
           "start", "stray_files", "summary"]

#: The lock file every live run of this folder holds (an ``flock``, which the kernel
#: releases when the process ends, however it ends: a killed run leaves no stale lock).
LOCK_FILE = Path(".snakemake") / "reactlab.flock"


def hold_folder(lock_file: str | Path = LOCK_FILE) -> IO[str]:
    """Take the folder's lock for this process and return the open file that holds it
    (keep it open until the run ends). :class:`RunActive`, naming the other process,
    when another run holds it."""
    lock_file = Path(lock_file)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_file, "a+", encoding="utf-8")  # noqa: SIM115 (held for the run)
    # "a+", not "w": opening must not erase the live run's pid
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        pid = handle.read().strip()
        handle.close()
        # Snakemake would see the live run's jobs as "incomplete" and advise
        # --rerun-incomplete, which would rerun files that are being written.
        raise RunActive(
            f"another run is active in this folder ({Path.cwd()}"
            + (f", process {pid}" if pid else "") + "); wait for it to finish (or "
            "stop it), then run again. Nothing was changed.") from None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def start(keys: Iterable[str], *, tables: Sequence[str], figures: Sequence[str],
          viewer: str, costly: Iterable[str] = (), check_data: Callable[[], list[str]]
          | None = None, lock_file: str | Path = LOCK_FILE,
          say: Callable[[str], None] | None = None, apply: bool = True,
          mcp: Mapping[str, bool | None] | None = None) -> IO[str]:
    """Everything that happens once before a run builds its plan, in this order: take the
    folder's lock (:func:`hold_folder`), refuse a nearly full disk (:func:`disk_full`),
    check the user's data files (``check_data`` returns warnings, raises
    :class:`~reactlab.core.errors.DataError`), then :func:`recover` the results (``mcp``:
    its argument). Messages
    go to ``say`` (default: stderr). Returns the lock's open file: keep it open for the
    run. Raises a :class:`~reactlab.core.errors.ReactlabError` for anything that stops
    the run (:class:`RunActive`, :class:`DamagedResult`, ...). With ``apply=False`` (a
    dry run) every check runs but nothing is removed: the messages say what a run would
    remove."""
    if say is None:
        def say(line: str) -> None:
            print(line, file=sys.stderr)
    handle = hold_folder(lock_file)
    try:
        message = disk_full(".")
        if message:
            raise DiskFull(message)
        for line in check_data() if check_data is not None else []:
            say(f"reactlab: warning: {line}")
        found = recover(keys, tables=tables, figures=figures, viewer=viewer, costly=costly,
                        apply=apply, mcp=mcp)
    except BaseException:
        handle.close()
        raise
    for line in summary(found):
        say(line)
    return handle


@dataclass
class Recovery:
    """What :func:`recover` found and did; ``messages`` are for the user. With
    ``applied`` false (a dry run) ``removed`` lists what a run would remove, and nothing
    was."""

    removed: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)
    applied: bool = True


def _remove(path: Path, report: Recovery) -> None:
    if not report.applied:
        if path.exists() or path.is_symlink():
            report.removed.append(str(path))
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    else:
        return
    report.removed.append(str(path))


def recover(keys: Iterable[str], *, tables: Sequence[str], figures: Sequence[str],
            viewer: str, costly: Iterable[str] = (), results: str | Path = "results",
            apply: bool = True, mcp: Mapping[str, bool | None] | None = None) -> Recovery:
    """Check the results of the runs ``keys`` (``task/backend/scenario``) and remove what
    is damaged, with everything derived from it. ``tables``, ``figures`` (PNG and SVG
    paths) and ``viewer`` are the aggregate outputs; ``costly`` are the keys whose traces
    cost real API calls (never removed: :class:`DamagedResult` names file and repair);
    ``mcp`` maps the keys of the runs that record their exchange with an MCP server to
    whether that server replays (None: not known), whose recordings are checked
    (:func:`_check_mcp_recording`).
    Paths are relative to the current directory, as Snakemake's are. ``apply=False``
    checks everything and removes nothing (a dry run): ``removed`` then lists what a run
    would remove.

    A run without a trace *and* without a verification was never made (the config
    gained it): that is not damage, nothing is removed for it. Snakemake builds it
    because ``rule all`` asks for every trace, and rebuilds the tables after it because
    their input is then updated by another job."""
    results = Path(results)
    report = Recovery(applied=apply)
    costly = set(costly)
    keys = list(keys)
    stale = False  # the tables (and so figures and viewer) must be rebuilt
    for key in keys:
        if mcp is not None and key in mcp:
            stale = _check_mcp_recording(results, key, mcp[key], report) or stale
        stale = _check_run(results, key, key in costly, report) or stale
    stale = _check_tables(tables, stale, report)
    _check_figures(figures, stale, report)
    _check_viewer(Path(viewer), report)
    _remove_temporaries(results, report)
    report.stray = stray_files(results, keys)
    return report


def _check_run(results: Path, key: str, costly: bool, report: Recovery) -> bool:
    """Check one run's trace and verification, removing what is damaged; whether the
    tables must be rebuilt for it. A damaged ``costly`` trace is :class:`DamagedResult`."""
    trace_path = results / "traces" / f"{key}.jsonl"
    verified = results / "verified" / f"{key}.json"
    if not trace_path.is_file():
        if verified.exists():  # deleted after it was verified; else not yet made
            report.messages.append(f"{trace_path} is missing: it will be regenerated")
            _remove(verified, report)
            return True
        return False
    try:
        tr = tracemod.read(trace_path)
    except TraceError as exc:
        if costly:
            raise DamagedResult(
                f"{exc}. It is a live run (real API calls), so it is not regenerated "
                f"automatically. To rebuild it offline from its recording: "
                f"`rm {trace_path} {verified}` and run `snakemake --cores 4 "
                f"--configfile workflow/configs/replay.yaml`; to buy it again: `rm "
                f"{trace_path} {verified}` and run `snakemake --cores 4 --configfile "
                f"workflow/configs/live.yaml`") from None
        report.messages.append(f"{exc}: removed, it will be regenerated")
        _remove(trace_path, report)
        _remove(verified, report)
        return True
    if not verified.is_file():
        return True
    try:
        load_verification(tr, verified, str(trace_path))
    except TraceError as exc:
        report.messages.append(f"{str(exc).split('; run the pipeline')[0]}: removed, "
                               f"it will be regenerated")
        _remove(verified, report)
        return True
    return False


def _check_mcp_recording(results: Path, key: str, replaying: bool | None,
                         report: Recovery) -> bool:
    """Check the MCP recording of run ``key``: a damaged one is removed with the run's
    trace and verification (the run records it again); whether the tables must be
    rebuilt. When its server replays (``replaying``; None: not known here) it cannot be
    made again offline: :class:`DamagedResult` names the file and the repair."""
    path = results / "recordings" / f"{key}.mcp.jsonl"
    if not path.is_file():
        return False
    problem = mcp_recording.problem(path)
    if problem is None:
        return False
    if replaying is not False:
        how = ("its MCP server is set to replay (`replay: true`), so no run records it "
               "again" if replaying else "this check does not know whether its MCP "
               "server is set to replay")
        raise DamagedResult(
            f"{problem}. It is not removed: {how}. Restore it from a copy, or `rm {path}` "
            f"and run with `replay: false` on its server (the server runs and records it "
            f"again)")
    report.messages.append(f"{problem}: removed with its run, which records it again")
    trace_path = results / "traces" / f"{key}.jsonl"
    stale = trace_path.exists()
    for p in (path, trace_path, results / "verified" / f"{key}.json"):
        _remove(p, report)
    return stale


def _check_tables(tables: Sequence[str], stale: bool, report: Recovery) -> bool:
    """Remove the tables when ``stale`` or damaged (their manifest fails, one is missing);
    whether they are stale (to be rebuilt)."""
    existing = [Path(t) for t in tables if Path(t).exists()]
    if existing and not stale:
        problems = check_manifest(Path(tables[0]).parent / MANIFEST)
        if problems or len(existing) < len(tables):
            report.messages.append(
                f"{problems[0] if problems else 'a table is missing'}: the tables will be "
                f"rebuilt from the traces")
            stale = True
    if stale and existing:
        for t in tables:
            _remove(Path(t), report)
        _remove(Path(tables[0]).parent / MANIFEST, report)
    return stale


def _check_figures(figures: Sequence[str], stale: bool, report: Recovery) -> None:
    """Remove each figure (PNG, SVG, manifest) when the tables are stale or it is damaged."""
    for png in (f for f in figures if f.endswith(".png")):
        pair = [Path(png), Path(png).with_suffix(".svg")]
        if not any(p.exists() for p in pair):
            continue
        problems = [] if stale else check_manifest(manifest_path(png), Path(png).parent)
        if stale or problems:
            if problems:
                report.messages.append(f"{problems[0]}: the figure will be redrawn")
            for p in (*pair, manifest_path(png)):
                _remove(p, report)


def _check_viewer(view: Path, report: Recovery) -> None:
    """Remove the viewer folder when its files no longer match its manifest."""
    if view.exists():
        problems = check_manifest(view / MANIFEST)
        if problems:
            report.messages.append(f"{problems[0]}: the viewer will be rebuilt")
            _remove(view, report)


def _remove_temporaries(results: Path, report: Recovery) -> None:
    """Temporary files and folders of killed jobs (``.NAME.PID.tmp``, ``.NAME.PID.old``):
    called only while no other run is live, so none of them belongs to a running job."""
    if not results.is_dir():
        return
    for path in sorted(results.rglob(".*")):
        if path.name.endswith((".tmp", ".old")) or ".tmp." in path.name:
            _remove(path, report)


def stray_files(results: str | Path, keys: Iterable[str]) -> list[str]:
    """Files under results/traces and results/verified that belong to no run of the
    matrix (an old scenario, a copied file): never read, but a user should know."""
    results = Path(results)
    keys = set(keys)
    stray = []
    for folder, suffix in (("traces", ".jsonl"), ("verified", ".json")):
        root = results / folder
        if not root.is_dir():
            continue
        for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
            rel = path.relative_to(root).as_posix()
            if not (rel.endswith(suffix) and rel[: -len(suffix)] in keys):
                stray.append(str(path))
    return stray


def summary(report: Recovery, limit: int = 5) -> list[str]:
    """Lines for the user: what was found and removed, and stray files."""
    prefix = "reactlab: " if report.applied else "reactlab: dry run, nothing removed: "
    lines = [f"{prefix}{m}" for m in report.messages]
    if report.stray:
        shown = ", ".join(report.stray[:limit])
        more = f" and {len(report.stray) - limit} more" if len(report.stray) > limit else ""
        lines.append(f"reactlab: warning: {len(report.stray)} file(s) under results/ belong "
                     f"to no run of the config and are ignored: {shown}{more}")
    return lines


#: Free bytes below which a run does not start (a 3-run matrix writes 0.5 MB of results);
#: the variable REACTLAB_MIN_FREE_BYTES overrides it.
MIN_FREE = 16 << 20


def disk_full(path: str | Path = ".", reserve: int | None = None) -> str | None:
    """A message when the file system of ``path`` has less than ``reserve`` bytes free
    (default :data:`MIN_FREE`, or the environment's REACTLAB_MIN_FREE_BYTES)."""
    if reserve is None:
        reserve = int(os.environ.get("REACTLAB_MIN_FREE_BYTES", MIN_FREE))
    free = shutil.disk_usage(path).free
    if free >= reserve:
        return None
    return (f"no space left on device (ENOSPC): {free:,} bytes free on the file system of "
            f"{os.path.abspath(path)}; free some space, then run the same command again "
            f"(published results are intact: every file is written to a temporary name "
            f"and renamed)")
