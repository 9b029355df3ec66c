"""Code fingerprints: a hash of exactly the package source a job runs.

Each Snakemake rule carries, as a parameter, the fingerprint of the modules its job
executes: the entry modules it calls and every ``reactlab`` module they import, directly
or not, at any depth (imports inside functions and ``TYPE_CHECKING`` blocks count, so a
lazy import cannot hide a dependency), plus the ``__init__`` of every package on the way.
Editing the viewer therefore changes only the viewer's fingerprint and reruns only the
viewer job; editing a tool changes the run jobs' fingerprint, which reruns the runs and,
through their new outputs, everything after them.

Pure standard library and cheap (``ast`` over a few dozen files, milliseconds): the
Snakefile computes the fingerprints at parse time, once per rule.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "reactlab"


def module_file(root: Path, module: str) -> Path | None:
    """The source file of ``module`` (``reactlab.x.y``) under the package folder ``root``."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = root.joinpath(*parts[1:])
    for path in (base.with_suffix(".py") if len(parts) > 1 else None, base / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return None


def _module_name(root: Path, path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(root: Path, path: Path) -> set[str]:
    """Every ``reactlab`` module ``path`` imports, at any depth of its syntax tree."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_name(root, path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != PACKAGE:
                continue
            found.add(mod)
            # `from reactlab.x import y`: y may be a submodule
            found.update(f"{mod}.{a.name}" for a in node.names
                         if module_file(root, f"{mod}.{a.name}") is not None)
    return found


def closure(root: Path, entries: Iterable[str]) -> list[Path]:
    """The source files of ``entries`` and of everything they import, with the
    ``__init__.py`` of each enclosing package, sorted. An entry that does not exist is
    an error (a rule naming a module that was renamed must not hash nothing)."""
    todo = list(entries)
    for entry in todo:
        if module_file(root, entry) is None:
            raise ValueError(f"fingerprint: no module {entry} under {root}")
    seen: set[Path] = set()
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # the module and each package above it
            path = module_file(root, ".".join(parts[:i]))
            if path is None or path in seen:
                continue
            seen.add(path)
            todo.extend(imports_of(root, path))
    return sorted(seen)


def fingerprint(root: str | Path, *entries: str) -> str:
    """sha256 (16 hex digits) over the paths and bytes of :func:`closure`."""
    root = Path(root)
    h = hashlib.sha256()
    for path in closure(root, entries):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]
