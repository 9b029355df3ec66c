"""What an overlay changes: the one meaning of ``--configfile`` (docs/configuration.md,
"Overlays"), said back by ``reactlab check``.

An overlay is merged into the config as ``snakemake --configfile`` merges it
(:func:`reactlab.config.loading.merge`): a mapping (``backends:``, ``agent:``, ``tasks:``
...) is merged key by key, recursively; anything else, a list above all (``matrix:``,
a suite's ``backends:``), **replaces** the base's value whole. An overlay's ``matrix:``
is therefore the whole matrix of the run, never blocks added to the base's.

:func:`describe` says, for each top-level key an overlay sets, whether it replaces or
merges (and, for a merge, which entries it adds and which it changes); :func:`run_changes`
compares the runs of the base and of the merged config.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["describe", "run_changes", "summary"]

#: How many names a line lists before it says "and N more".
SHOWN = 6


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _size(value: Any) -> str:
    if isinstance(value, list):
        return f"{len(value)} item{'s' if len(value) != 1 else ''}"
    return repr(value) if not isinstance(value, Mapping) else f"{len(value)} entries"


def _key_change(key: str, base: Mapping[str, Any], value: Any) -> str:
    """One top-level key of an overlay, as it changes ``base``."""
    old = base.get(key)
    if isinstance(value, Mapping) and isinstance(old, Mapping):
        added = sorted(str(k) for k in value if k not in old)
        changed = sorted(str(k) for k in value if k in old)
        parts = [f"adds {_names(added)}" if added else "",
                 f"changes {_names(changed)}" if changed else ""]
        return f"{key}: merged ({'; '.join(p for p in parts if p) or 'nothing'})"
    if key not in base:
        return f"{key}: added ({_size(value)})"
    return f"{key}: replaced ({_size(old)} -> {_size(value)})"


def describe(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> list[str]:
    """Each top-level key ``overlay`` sets, in its order: ``replaced`` (a list or a value:
    the base's is dropped whole), ``merged`` (a mapping: the entries it adds and changes)
    or ``added`` (a key the base does not have)."""
    return [_key_change(str(key), base, value) for key, value in overlay.items()]


def run_changes(base_keys: Iterable[str], keys: Iterable[str]) -> tuple[int, list[str],
                                                                         list[str]]:
    """(kept, added, removed): how many runs of the base the merged config keeps, and the
    run keys it adds and removes, sorted."""
    before, after = set(base_keys), set(keys)
    return len(before & after), sorted(after - before), sorted(before - after)


def summary(kept: int, added: Sequence[str], removed: Sequence[str]) -> str:
    """The run changes as one line."""
    line = f"runs: {kept} kept, {len(added)} added, {len(removed)} removed"
    if added:
        line += f"; added: {_names(added)}"
    if removed:
        line += f"; removed: {_names(removed)}"
    return line
