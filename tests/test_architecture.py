"""The package's stages import only down the data flow (ARCHITECTURE.md).

Every module belongs to one stage; a module may import from its own stage or an earlier
one, never from a later one. The check reads the source with ``ast`` (imports inside
functions count too), so a lazy import cannot hide a backward dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "reactlab"

# The stages in data-flow order (ARCHITECTURE.md). Top-level modules (the package root,
# ``__main__`` and ``cli``) are the application: they may import any stage.
STAGES = ["core", "config", "data", "tools", "trace", "agent", "simulate", "backends",
          "runner", "analysis", "suites", "views", "dev"]
APP = {"reactlab", "reactlab.__main__", "reactlab.cli"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of(module: str) -> str | None:
    """The stage of a module of the package, None for the application modules."""
    if module in APP:
        return None
    parts = module.split(".")
    assert parts[0] == "reactlab" and len(parts) > 1, module
    if parts[1] not in STAGES:
        raise AssertionError(f"{module} belongs to no stage: add it to a stage package")
    return parts[1]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every ``reactlab`` import in a file, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("reactlab")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("reactlab"):
                continue
            if mod == "reactlab":  # `from reactlab import config`: the names are modules
                found += [(node.lineno, f"reactlab.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, mod))
    return found


def backward_imports(root: Path = PACKAGE) -> list[str]:
    order = {stage: i for i, stage in enumerate(STAGES)}
    problems = []
    for path in sorted(root.rglob("*.py")):
        here = stage_of(module_name(path))
        if here is None:
            continue
        for line, mod in imported_modules(path):
            there = stage_of(mod)
            if there is None:
                problems.append(f"{path.relative_to(root)}:{line} imports the application "
                                f"module {mod}")
            elif order[there] > order[here]:
                problems.append(f"{path.relative_to(root)}:{line} ({here}) imports {mod} "
                                f"({there}), a later stage")
    return problems


def test_every_module_belongs_to_a_stage():
    for path in PACKAGE.rglob("*.py"):
        stage_of(module_name(path))  # raises for a module outside the stages


def test_imports_point_down_the_data_flow():
    assert backward_imports() == []


def test_the_check_catches_a_backward_import(tmp_path):
    """The checker itself: a tools module importing the verifier is reported."""
    pkg = tmp_path / "reactlab"
    (pkg / "tools").mkdir(parents=True)
    (pkg / "analysis").mkdir()
    for init in ("", "tools", "analysis"):
        (pkg / init / "__init__.py").write_text("")
    (pkg / "analysis" / "verify.py").write_text("X = 1\n")
    (pkg / "tools" / "bad.py").write_text(
        "def f():\n    from reactlab.analysis.verify import X\n    return X\n")
    (pkg / "tools" / "rel.py").write_text("from ..analysis import verify\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, pkg
    try:
        problems = backward_imports(pkg)
    finally:
        PACKAGE = saved
    assert len(problems) == 2, problems
    assert "tools/bad.py:2 (tools) imports reactlab.analysis.verify (analysis)" in problems[0]


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_is_a_package(stage):
    assert (PACKAGE / stage / "__init__.py").is_file()
