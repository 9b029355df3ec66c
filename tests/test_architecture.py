"""The package's stages import only down the data flow (ARCHITECTURE.md).

Every module belongs to one stage; a module may import from its own stage or an earlier
one, never from a later one. The check reads the source with ``ast`` (imports inside
functions count too), so a lazy import cannot hide a backward dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "reactlab"

# The stages in data-flow order (ARCHITECTURE.md). Top-level modules (the package root,
# ``__main__``, ``cli`` and ``jobs``) are the application: they may import any stage.
STAGES = ["core", "config", "data", "tools", "trace", "agent", "simulate", "backends",
          "runner", "analysis", "suites", "views", "export", "dev"]
APP = {"reactlab", "reactlab.__main__", "reactlab.cli", "reactlab.jobs"}


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


# ------------------------------------------------------------------ ARCHITECTURE.md

ROOT = PACKAGE.parents[1]
_TICKED = re.compile(r"`([^`]+)`")
_FILE_SUFFIXES = (".py", ".smk", ".yaml", ".yml", ".md", ".rst", ".toml", ".json")


def _section(title: str) -> str:
    """The text of one ``## title`` section of ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"ARCHITECTURE.md has no section {title!r}"
    return match.group(1)


def _table_rows(section: str) -> list[list[str]]:
    """The body rows of the first Markdown table of a section, split into cells."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(rows) > 2, "no table in the section"
    return [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows[2:]]


def named_paths(cell: str) -> list[str]:
    """Backticked tokens of a cell that name a file or folder: they contain a slash or
    end in a file suffix (``config.yaml``, ``tools/__init__.py``, ``views/``), and hold
    nothing but path characters (``CODE[...]``, ``scenarios:`` or ``job_log(...)`` are
    not paths)."""
    out = []
    for token in _TICKED.findall(cell):
        if not re.fullmatch(r"[\w./*-]+", token):
            continue
        if "/" in token or token.endswith(_FILE_SUFFIXES):
            out.append(token)
    return out


def resolve(path: str) -> list[Path]:
    """Where a path of the table may live: the repository root, or the package (the
    table writes package modules relative to ``workflow/reactlab/``); a ``*`` globs."""
    found = []
    for base in (ROOT, PACKAGE):
        found += [p for p in base.glob(path.rstrip("/")) if p.exists()]
    return found


def test_named_paths_parses_backticks():
    cell = ("`config.yaml` only (`scenarios:` and `matrix:`); `tools/__init__.py`, "
            "`views/`, `CODE[...]`, `job_log(log[0], ...)`, `workflow/rules/*.smk`")
    assert named_paths(cell) == ["config.yaml", "tools/__init__.py", "views/",
                                 "workflow/rules/*.smk"]
    assert resolve("tools/__init__.py") == [PACKAGE / "tools" / "__init__.py"]
    assert resolve("no/such/module.py") == []


def test_where_a_change_goes_names_files_that_exist():
    """Every row of the "Where a change goes" table names at least one file or folder,
    and every path it names exists (at the repository root or in the package)."""
    rows = _table_rows(_section("Where a change goes"))
    assert len(rows) >= 10
    problems = []
    for want, edit in rows:
        paths = named_paths(edit)
        if not paths:
            problems.append(f"{want!r}: names no file")
        problems += [f"{want!r}: {p} does not exist" for p in paths if not resolve(p)]
    assert problems == []


def test_stage_table_matches_the_stages():
    """The stage table lists the stage packages in import order, each one exists, and
    every module it names lives in that stage (a file at the root, such as
    ``config.yaml``, is found there)."""
    rows = _table_rows(_section("The stages"))
    listed = [named_paths(stage)[0].rstrip("/") for _, stage, _ in rows]
    assert listed == STAGES
    problems = []
    for stage, (_, _, holds) in zip(STAGES, rows, strict=True):
        for name in named_paths(holds):
            where = PACKAGE / stage
            if not ((where / name).exists() or list(where.rglob(name.rstrip("/")))
                    or resolve(name)):
                problems.append(f"{stage}/: {name} not found")
    assert problems == []
