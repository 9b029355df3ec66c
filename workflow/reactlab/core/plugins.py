"""Plugins: the project's registries, filled from Python entry points (docs/plugins.md).

Each kind of thing a user brings is one entry-point group (:data:`GROUPS`): agents
(``reactlab.agents``: a framework's entry, :mod:`reactlab.frameworks.registry`), providers
(``reactlab.providers``: :mod:`reactlab.backends.registry`), benchmarks
(``reactlab.benchmarks``: :mod:`reactlab.suites.registry`) and tool sources
(``reactlab.tool_sources``: :mod:`reactlab.tools.sources`). An entry point's name is the
plugin's name, its value ``module:ATTRIBUTE`` the entry object, whose metadata (the
packages it needs, its typed settings, the wire APIs it speaks, the code its runs depend
on) lives beside its code. reactlab's own built-ins are declared the same way, in its own
pyproject.toml: there is no hand-written list. Every process that imports reactlab sees
every installed plugin (a Snakemake job, ``reactlab check``, a SLURM job, the viewer), as
pytest sees its ``pytest11`` plugins.

A :class:`Plugins` registry reads the entry points' metadata once (no import: its
:meth:`~Plugins.names`, :meth:`~Plugins.module` and :meth:`~Plugins.distribution` cost no
plugin's import) and imports an entry only when it is asked for (:meth:`~Plugins.lookup`),
so that a job imports the entries its run names and nothing else: a run's code
fingerprint (:mod:`reactlab.core.fingerprint`) is the runner's plus its own entries'
modules, and editing one agent reruns that agent's runs only.

A name no installed package declares is a :class:`PluginMissing` naming the package to
install when the config says which (an entry's ``package:``). :meth:`Plugins.add` puts an
entry in one process's registry, for a test that defines one in its own module.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any, Generic, Protocol, TypeVar

from reactlab.core.errors import PluginMissing, UsageError

__all__ = ["GROUPS", "OWN", "Named", "PluginMissing", "Plugins", "entry_points_of", "registry"]

#: The distribution whose entry points are the built-ins (listed first, in its order).
OWN = "reactlab"

#: Kind → entry-point group.
GROUPS = {"agent": "reactlab.agents", "provider": "reactlab.providers",
          "benchmark": "reactlab.benchmarks", "tool source": "reactlab.tool_sources"}

_NAME = re.compile(r"[a-z][a-z0-9_]*")


class Named(Protocol):
    """An entry of a registry: anything with a ``name``."""

    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


@cache
def entry_points_of(group: str) -> tuple[metadata.EntryPoint, ...]:
    """The group's entry points, reactlab's own first, then the others, each by name
    (the order of tables, rules and listings: deterministic). A name
    declared by two distributions is a UsageError naming both."""
    points = list(metadata.entry_points(group=group))
    seen: dict[str, metadata.EntryPoint] = {}
    for point in points:
        dist = point.dist.name if point.dist is not None else "?"
        other = seen.get(point.name)
        if other is not None and (other.dist.name if other.dist else "?") != dist:
            raise UsageError(f"{group}: {point.name!r} is declared by two packages, "
                             f"{other.dist.name if other.dist else '?'} and {dist}; "
                             "uninstall one")
        seen[point.name] = point
    return tuple(sorted(seen.values(), key=lambda p: (
        p.dist is None or p.dist.name != OWN, p.name)))


class Plugins(Generic[E]):
    """The entries of one ``kind`` (a key of :data:`GROUPS`), by name (module docstring).

    One object per kind (:func:`registry`), shared by every stage that reads it: the
    config checks an entry's metadata, a later stage runs it. ``vet``: that later stage's
    checks of an entry once loaded (:meth:`set_vet`; a UsageError)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.group = GROUPS[kind]
        self.vet: Callable[[E], None] | None = None
        self._loaded: dict[str, E] = {}
        self._added: dict[str, E] = {}

    def _points(self) -> dict[str, metadata.EntryPoint]:
        return {p.name: p for p in entry_points_of(self.group)}

    def names(self) -> list[str]:
        """Every entry's name (the installed ones, then those added here); no import."""
        return [*self._points(), *(n for n in self._added if n not in self._points())]

    def __contains__(self, name: object) -> bool:
        return name in self._added or name in self._points()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def module(self, name: str) -> str | None:
        """The module of ``name``'s entry (its code, for fingerprints), without importing
        it; None for an entry added in this process."""
        point = self._points().get(name)
        return point.module if point is not None and name not in self._added else None

    def distribution(self, name: str) -> str | None:
        """The distribution that declares ``name`` (None: added in this process)."""
        point = self._points().get(name)
        return point.dist.name if point is not None and point.dist is not None else None

    def lookup(self, name: str, package: str | None = None) -> E:
        """The entry ``name``, imported on first use. :class:`PluginMissing` (naming
        ``package``, the config's word for where it comes from) when nothing declares
        it; a UsageError when its module cannot be imported or it is not the entry that
        its name says."""
        if name in self._added:
            return self._added[name]
        if name in self._loaded:
            return self._loaded[name]
        point = self._points().get(name)
        if point is None:
            raise PluginMissing(self.kind, self.group, name, self.names(), package)
        try:
            entry: E = point.load()
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"{self.kind} {name!r} ({point.value}, from "
                             f"{self.distribution(name)}) cannot be loaded: {exc}") from exc
        if getattr(entry, "name", None) != name:
            raise UsageError(f"{self.group} entry point {name!r} ({point.value}) is an "
                             f"entry named {getattr(entry, 'name', None)!r}")
        if self.vet is not None:
            self.vet(entry)
        self._loaded[name] = entry
        return entry

    def __getitem__(self, name: str) -> E:
        return self.lookup(name)

    def get(self, name: str) -> E | None:
        return self.lookup(name) if name in self else None

    def loaded(self) -> list[E]:
        """The entries imported so far (none imported here)."""
        return [*self._loaded.values(), *self._added.values()]

    def values(self) -> list[E]:
        """Every entry, each imported."""
        return [self.lookup(n) for n in self.names()]

    def items(self) -> list[tuple[str, E]]:
        return [(n, self.lookup(n)) for n in self.names()]

    def set_vet(self, vet: Callable[[E], None]) -> None:
        """Check every entry with ``vet`` from now on, and those already loaded now."""
        self.vet = vet
        for entry in [*self._loaded.values(), *self._added.values()]:
            vet(entry)

    def add(self, entry: E) -> E:
        """Put ``entry`` in this process's registry (a test's own entry), replacing one of
        the same name; its name and the registry's ``vet`` are checked."""
        if not _NAME.fullmatch(entry.name):
            raise UsageError(f"a {self.kind} name is lower-case letters, digits and "
                             f"underscores, not {entry.name!r}")
        if self.vet is not None:
            self.vet(entry)
        self._added[entry.name] = entry
        return entry


_REGISTRIES: dict[str, Plugins[Any]] = {}


def registry(kind: str) -> Plugins[Any]:
    """The one :class:`Plugins` of ``kind`` in this process."""
    if kind not in _REGISTRIES:
        _REGISTRIES[kind] = Plugins(kind)
    return _REGISTRIES[kind]
