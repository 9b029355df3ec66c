"""Whose results a folder holds: the stamp ``results/.reactlab-config.json``.

A run writes the stamp when it starts (the Snakefile's main process, after recovery):
the config files it runs (``config.yaml`` and its overlays, in order) and the runs and
suite shards they plan. A later run in the same folder may keep or grow that plan (an
edited config.yaml, ``live.yaml`` or ``replay.yaml`` on top of it ...); a run that would
**drop** runs or shards the folder's results were built from (an overlay whose
``matrix:`` or ``suites:`` replaces the default's, run in the default's folder) would
rebuild the tables, figures and viewer without them, or, with a target such as
``results/tables/bfcl.csv``, overwrite one table and leave the figure and the viewer
built from the old one: it is refused before any job, naming both configurations
(docs/configuration.md, "Overlays"). ``REACTLAB_REPLACE_RESULTS=1`` replaces the
folder's results on purpose; a run elsewhere (``--directory DIR``) keeps both.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reactlab.core.errors import ReactlabError
from reactlab.core.io import write_text_atomic

__all__ = ["REPLACE_ENV", "STAMP", "caption", "check", "conflict", "fingerprint", "stamp"]

#: The stamp, relative to the working folder.
STAMP = "results/.reactlab-config.json"
#: The environment variable that lets a run replace another configuration's results.
REPLACE_ENV = "REACTLAB_REPLACE_RESULTS"


def stamp(configs: Sequence[str], runs: Iterable[str], shards: Iterable[str]
          ) -> dict[str, Any]:
    """The stamp of a configuration: its files, its planned runs and suite shards, and
    their :func:`fingerprint`."""
    out: dict[str, Any] = {"configs": list(configs), "runs": sorted(runs),
                           "shards": sorted(shards)}
    out["fingerprint"] = fingerprint(out)
    return out


def fingerprint(new: Mapping[str, Any]) -> str:
    """A short name of a stamp's configuration: the first 12 hex digits of the SHA-256
    of its config files, runs and shards (as JSON, keys sorted). The report's captions
    name it (:func:`caption`), so a figure can be matched with the folder's stamp."""
    body = {k: list(new.get(k, ())) for k in ("configs", "runs", "shards")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def caption(new: Mapping[str, Any], counts: Mapping[str, Any]) -> dict[str, Any]:
    """What a report caption (``workflow/report/*.rst``, a template) says of the results
    it shows: the config files (``configs``, joined by ``+``), the stamp's
    ``fingerprint``, and ``counts`` (the n of each selection of runs, the cases of each
    benchmark: ``workflow/rules/report.smk``)."""
    return {"configs": _names(new["configs"]), "fingerprint": new["fingerprint"],
            **counts}


def _names(configs: Sequence[str]) -> str:
    return " + ".join(configs) or "(none)"


def conflict(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a run of ``new`` must not write into results stamped ``old``: the runs and
    shards it would drop; None when it keeps them all."""
    runs = sorted(set(old.get("runs", ())) - set(new["runs"]))
    shards = sorted(set(old.get("shards", ())) - set(new["shards"]))
    if not runs and not shards:
        return None
    dropped = ", ".join(f"{len(v)} {what}{'s' if len(v) != 1 else ''} (e.g. {v[0]})"
                        for what, v in (("run", runs), ("suite shard", shards)) if v)
    return (f"results/ holds the results of {_names(old.get('configs', []))} ({STAMP}); "
            f"this run of {_names(new['configs'])} plans without {dropped} of them, so its "
            "tables, figures and viewer would replace theirs. Run it in a folder of its "
            "own (snakemake --directory DIR ...), or replace them on purpose with "
            f"{REPLACE_ENV}=1")


def check(new: Mapping[str, Any], *, apply: bool, root: str | Path = ".",
          write: bool = True) -> str | None:
    """Compare ``new`` (:func:`stamp`) with the folder's stamp. A real run (``apply``)
    with a conflict raises ReactlabError unless ``REACTLAB_REPLACE_RESULTS=1``; otherwise it
    writes ``new`` as the folder's stamp (with ``write``; else :func:`write` does it
    later: the Snakefile's ``onstart``, after the checks that may still stop the run). A
    dry run writes nothing and returns the conflict, if any, as a note."""
    path = Path(root) / STAMP
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        old = None
    except (OSError, ValueError):
        old = None  # an unreadable stamp: the run's own replaces it
    why = conflict(old, new) if isinstance(old, Mapping) else None
    if not apply:
        return f"dry run: a run would be refused: {why}" if why else None
    if why and os.environ.get(REPLACE_ENV) != "1":
        raise ReactlabError(why)
    if write:
        write_stamp(new, root)
    return None


def write_stamp(new: Mapping[str, Any], root: str | Path = ".") -> None:
    """``new`` (:func:`stamp`) as the folder's stamp."""
    path = Path(root) / STAMP
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(dict(new), indent=1) + "\n")
