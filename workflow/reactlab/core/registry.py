"""A registry of named entries: the one shape of the project's plug-in registries.

A :class:`Registry` is a ``dict`` from an entry's ``name`` to the entry, in registration
order, that checks a name when an entry is added (lower-case letters, digits and
underscores) and, on a lookup of a name it does not hold, raises a
:class:`~reactlab.core.errors.UsageError` naming the ones it holds. The frameworks
(:mod:`reactlab.frameworks.registry`) and the benchmarks (:mod:`reactlab.suites.registry`)
are each one; what registering declares beyond that (to the config) stays theirs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol, TypeVar

from reactlab.core.errors import UsageError

__all__ = ["Named", "Registry"]


class Named(Protocol):
    """An entry of a registry: anything with a ``name``."""

    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


class Registry(dict[str, E]):
    """Entries of one ``kind`` (``"framework"``, ``"benchmark"``) by name; ``missing``: how
    a lookup's error says the name is not there (``"is not registered here"``)."""

    def __init__(self, kind: str, missing: str = "is not registered here") -> None:
        super().__init__()
        self.kind = kind
        self.missing = missing

    def add(self, entry: E, vet: Callable[[E], None] | None = None) -> E:
        """Add ``entry`` (replacing one of the same name) once its name is checked and
        ``vet`` (the registry's own checks, raising a UsageError) has passed it."""
        if not re.fullmatch(r"[a-z][a-z0-9_]*", entry.name):
            raise UsageError(f"a {self.kind} name is lower-case letters, digits and "
                             f"underscores, not {entry.name!r}")
        if vet is not None:
            vet(entry)
        self[entry.name] = entry
        return entry

    def lookup(self, name: str) -> E:
        """The entry ``name`` (a UsageError naming the registered ones if none)."""
        try:
            return self[name]
        except KeyError:
            raise UsageError(f"{self.kind} {name!r} {self.missing} (registered: "
                             f"{', '.join(self) or 'none'})") from None
