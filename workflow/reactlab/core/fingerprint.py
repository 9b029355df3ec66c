"""Code fingerprints: a hash of exactly the package source a job runs.

Each Snakemake rule carries, as a parameter, the fingerprint of the modules its job
executes: the entry modules it calls and every ``reactlab`` module they import, directly
or not, at any depth (imports inside functions and ``TYPE_CHECKING`` blocks count, so a
lazy import cannot hide a dependency), plus the ``__init__`` of every package on the way.
Editing the viewer therefore changes only the viewer's fingerprint and reruns only the
viewer job; editing a tool changes the run jobs' fingerprint, which reruns the runs and,
through their new outputs, everything after them.

A plugin's entry (:mod:`reactlab.core.plugins`) is a module of another installed package:
an entry named here that is not ``reactlab``'s is found by its top package's location
(``importlib.util.find_spec``, which imports nothing of it), and its closure is that
package's modules it imports plus the ``reactlab`` ones. A run's fingerprint is the
runner's and its own entries' (its provider, its agent): editing one agent's module
reruns that agent's runs only.

Pure standard library. The Snakefile computes the fingerprints at parse time, so the
cost counts in every ``snakemake`` call (a no-op rerun included): :func:`fingerprints`
parses each file once for all rules, and an optional cache file keeps the imports found
per file content (keyed by the file's path and sha256, so it can never be stale), which
takes a no-op rerun's fingerprinting from ~0.3 s of parsing to a few milliseconds.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

from reactlab.core.errors import UsageError

PACKAGE = "reactlab"
_DOTTED = re.compile(rf"{PACKAGE}(\.[A-Za-z_]\w*)+")


@cache
def package_folder(top: str) -> Path | None:
    """The folder of the installed top-level package ``top`` (a plugin's), found without
    importing it; None when there is none (a single-file module's parent is not one)."""
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    locations = list(found.submodule_search_locations or ()) if found is not None else []
    return Path(locations[0]) if locations else None


def module_file(root: Path, module: str) -> Path | None:
    """The source file of ``module``: ``reactlab.x.y`` under the package folder ``root``,
    another package's module under that package's own folder (:func:`package_folder`)."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        folder = package_folder(parts[0])
        if folder is None:
            return None
        root = folder
    base = root.joinpath(*parts[1:])
    for path in (base.with_suffix(".py") if len(parts) > 1 else None, base / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return None


def _top(root: Path, path: Path) -> tuple[str, Path]:
    """The top package of ``path`` and its folder: ``reactlab`` under ``root``, else the
    package of the folder it is in (a plugin's)."""
    if path.is_relative_to(root):
        return PACKAGE, root
    folder = path.parent
    while (folder.parent / "__init__.py").is_file():
        folder = folder.parent
    return folder.name, folder


def _label(root: Path, path: Path) -> str:
    """The name a file is hashed under: its path in ``reactlab``, ``top:path`` in a
    plugin's package (so that no plugin file can pass for one of reactlab's)."""
    top, folder = _top(root, path)
    rel = path.relative_to(folder).as_posix()
    return rel if top == PACKAGE else f"{top}:{rel}"


def _module_name(root: Path, path: Path) -> str:
    top, folder = _top(root, path)
    parts = [top, *path.relative_to(folder).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(root: Path, path: Path) -> set[str]:
    """Every ``reactlab`` module ``path`` imports, at any depth of its syntax tree (and,
    for a plugin's file, every module of its own package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_name(root, path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tops = {PACKAGE, here.split(".")[0]}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] in tops)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] not in tops:
                continue
            found.add(mod)
            # `from reactlab.x import y`: y may be a submodule
            found.update(f"{mod}.{a.name}" for a in node.names
                         if module_file(root, f"{mod}.{a.name}") is not None)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and _DOTTED.fullmatch(node.value) and module_file(root, node.value)):
            found.add(node.value)  # a module named for importlib.import_module (a registry)
    return found


def closure(root: Path, entries: Iterable[str],
            imports: Mapping[Path, Iterable[str]] | None = None) -> list[Path]:
    """The source files of ``entries`` and of everything they import, with the
    ``__init__.py`` of each enclosing package, sorted. An entry that does not exist is
    an error (a rule naming a module that was renamed must not hash nothing).
    ``imports``: already known :func:`imports_of` results, by path."""
    todo = list(entries)
    for entry in todo:
        if module_file(root, entry) is None:
            raise UsageError(f"fingerprint: no module {entry} under {root}")
    seen: set[Path] = set()
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # the module and each package above it
            path = module_file(root, ".".join(parts[:i]))
            if path is None or path in seen:
                continue
            seen.add(path)
            todo.extend(imports[path] if imports is not None and path in imports
                        else imports_of(root, path))
    return sorted(seen)


def fingerprint(root: str | Path, *entries: str) -> str:
    """sha256 (16 hex digits) over the paths and bytes of :func:`closure`."""
    return fingerprints(root, {"": entries})[""]


def fingerprints(root: str | Path, rules: Mapping[str, str | Iterable[str]],
                 cache: str | Path | None = None) -> dict[str, str]:
    """{rule: :func:`fingerprint` of its entry module(s)}, each file read and parsed
    once. ``cache``: a JSON file of the imports found per (path, content sha256); read
    if it exists, rewritten (atomically) when it learnt something."""
    root = Path(root)
    files = sorted(root.rglob("*.py"))
    content = {path: path.read_bytes() for path in files}
    digest = {path: hashlib.sha256(data).hexdigest() for path, data in content.items()}
    known: dict[str, list[str]] = {}
    if cache is not None:
        try:
            known = json.loads(Path(cache).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
    imports: dict[Path, Iterable[str]] = {}
    learnt = False
    for path in files:
        key = f"{path.relative_to(root).as_posix()}:{digest[path]}"
        if key not in known:
            known[key] = sorted(imports_of(root, path))
            learnt = True
        imports[path] = known[key]
    if cache is not None and learnt:
        current = {f"{p.relative_to(root).as_posix()}:{digest[p]}" for p in files}
        tmp = Path(f"{cache}.{os.getpid()}.tmp")
        try:
            Path(cache).parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({k: v for k, v in known.items() if k in current}),
                           encoding="utf-8")
            os.replace(tmp, cache)
        except OSError:
            pass  # a read-only checkout: no cache, the result is the same
    out = {}
    for rule, entries in rules.items():
        h = hashlib.sha256()
        for path in closure(root, [entries] if isinstance(entries, str) else entries,
                            imports):
            data = content[path] if path in content else path.read_bytes()
            h.update(_label(root, path).encode() + b"\0" + data + b"\0")
        out[rule] = h.hexdigest()[:16]
    return out
