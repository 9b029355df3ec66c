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
STAGES = ["core", "config", "data", "tools", "trace", "agent", "simulate", "backends", "mcp",
          "frameworks", "runner", "analysis", "suites", "views", "export", "dev"]
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


def module_imports(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Every module of the package → the package modules it imports, at any depth
    (lazy and ``TYPE_CHECKING`` imports included); ``from reactlab.x import y`` counts
    as importing the module ``reactlab.x.y`` when ``y`` is one."""
    modules = {module_name(p): p for p in sorted(root.rglob("*.py"))}
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = {mod for _, mod in imported_modules(path)}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {f"{node.module}.{a.name}" for a in node.names
                          if f"{node.module}.{a.name}" in modules}
        out[name] = {m for m in found if m in modules and m != name}
    return out


def import_cycles(root: Path = PACKAGE) -> list[str]:
    """Pairs of modules that import each other (lazily or not; a package's ``__init__``
    and its own submodules aside), and, within ``suites/``,
    any longer cycle: the registry and the generic modules stay above the benchmarks'
    own, which never import them back."""
    graph = module_imports(root)
    problems = [f"{a} and {b} import each other" for a in sorted(graph)
                for b in sorted(graph[a]) if a < b and a in graph.get(b, ())
                # a package's __init__ and its own submodule: importing the submodule
                # runs the __init__ first anyway (backends/__init__ and its registry)
                and not b.startswith(f"{a}.")]
    suites = {m: {d for d in deps if d.startswith("reactlab.suites.")}
              for m, deps in graph.items() if m.startswith("reactlab.suites.")}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(suites.get(m, ())):
            if state.get(d) == 1:
                cycle = [*path[path.index(d):], d]
                problems.append("import cycle: " + " -> ".join(cycle))
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(suites):
        if m not in state:
            visit(m, [m])
    return problems


def test_no_two_modules_import_each_other():
    assert import_cycles() == []


def test_the_cycle_check_sees_a_lazy_mutual_import(tmp_path):
    pkg = tmp_path / "reactlab"
    (pkg / "suites").mkdir(parents=True)
    for init in ("", "suites"):
        (pkg / init / "__init__.py").write_text("")
    (pkg / "suites" / "a.py").write_text("from reactlab.suites import b\n")
    (pkg / "suites" / "b.py").write_text("def f():\n    from reactlab.suites.a import X\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, pkg
    try:
        problems = import_cycles(pkg)
    finally:
        PACKAGE = saved
    assert problems[0] == "reactlab.suites.a and reactlab.suites.b import each other"


#: Where a built-in benchmark's name may be written outside its own modules
#: (``suites/<name>*.py``) and the registry: each place with its reason. Everything else
#: asks the registry (:mod:`reactlab.suites.registry`).
BENCHMARK_NAME_PLACES: set[str] = set()
#: Places that name a benchmark's *table* or write a config, without branching on it.
BENCHMARK_TABLE_NAMES = {
    "dev/plan_bench.py", "dev/suite_bench.py",  # benchmarks of the BFCL suite's config
    "dev/dtype_invariance.py",  # a measurement on BFCL cases (its config)
    "dev/engine_bench.py",  # the local engines side by side on a BFCL slice (its config)
    "dev/llama_serve.py",  # a BFCL shard in process and through llama.cpp's server (its config)
}


def test_a_benchmarks_name_is_written_in_two_places_at_most():
    names = re.compile(r"""["'](bfcl|agentdojo)["']""")
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        own = rel.startswith(("suites/bfcl", "suites/agentdojo")) or rel == "suites/registry.py"
        if not own and names.search(path.read_text(encoding="utf-8")):
            found.add(rel)
    rules = PACKAGE.parent / "rules"
    found |= {f"rules/{p.name}" for p in sorted(rules.glob("*.smk"))
              if names.search(p.read_text(encoding="utf-8"))}
    assert found - BENCHMARK_TABLE_NAMES == BENCHMARK_NAME_PLACES
    assert len(BENCHMARK_NAME_PLACES) <= 2


def test_one_path_from_spec_to_trace():
    """Issue 28: a suite case runs through the runner like any run. No module outside
    ``backends/`` constructs a session (``...Session(`` of a class the package defines;
    ``dev/`` measures the local session itself), and ``suites/`` silences no type error."""
    sessions = {m.group(1) for p in (PACKAGE / "backends").rglob("*.py")
                for m in re.finditer(r"^class (\w*Session)\b", p.read_text(encoding="utf-8"),
                                     re.MULTILINE)}
    assert "LocalModelSession" in sessions and "OpenAIChatSession" in sessions
    built = re.compile(r"\b(" + "|".join(sorted(sessions)) + r")\(")
    outside = [f"{p.relative_to(PACKAGE)}:{i}" for p in sorted(PACKAGE.rglob("*.py"))
               if p.relative_to(PACKAGE).parts[0] not in ("backends", "dev")
               for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
               if built.search(line) and not line.lstrip().startswith("class ")]
    assert outside == []
    ignored = [f"suites/{p.name}:{i}" for p in sorted((PACKAGE / "suites").glob("*.py"))
               for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
               if "type: ignore" in line]
    assert ignored == []


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


# ------------------------------------------------------------------ weight (issue 38)
#
# The package's weight, measured as /work/wt/weight.py measures it: modules over 500
# lines, functions over 80 (``def`` line to last line, nested functions and methods
# each on their own), ``# type: ignore`` comments, and function-local imports without a
# ``# lazy: <reason>`` comment on the import's first line or the line directly above.
# Each check returns its offenders, one line each, for the failure message.

MODULE_LINES = 500
FUNCTION_LINES = 80
TYPE_IGNORES = 5
LAZY = "# lazy:"


def _sources(root: Path) -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.py"))]


def long_modules(root: Path = PACKAGE, limit: int = MODULE_LINES) -> list[str]:
    """``path: N lines`` for every module of more than ``limit`` lines."""
    return [f"{p.relative_to(root)}: {n} lines" for p, text in _sources(root)
            if (n := len(text.splitlines())) > limit]


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def long_functions(root: Path = PACKAGE, limit: int = FUNCTION_LINES) -> list[str]:
    """``path:line name: N lines`` for every function of more than ``limit`` lines."""
    found = []
    for p, text in _sources(root):
        for fn in _functions(ast.parse(text, filename=str(p))):
            n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if n > limit:
                found.append(f"{p.relative_to(root)}:{fn.lineno} {fn.name}: {n} lines")
    return found


def type_ignores(root: Path = PACKAGE) -> list[str]:
    """``path:line`` of every ``# type: ignore`` comment."""
    return [f"{p.relative_to(root)}:{i}" for p, text in _sources(root)
            for i, line in enumerate(text.splitlines(), 1) if "# type: ignore" in line]


def bare_local_imports(root: Path = PACKAGE) -> list[str]:
    """``path:line: import ...`` for every import inside a function that has no
    ``# lazy: <reason>`` comment on its first line or on the line directly above."""
    found = []
    for p, text in _sources(root):
        lines = text.splitlines()
        seen: set[int] = set()
        for fn in _functions(ast.parse(text, filename=str(p))):
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                    continue
                seen.add(node.lineno)
                here = lines[node.lineno - 1]
                above = lines[node.lineno - 2] if node.lineno > 1 else ""
                if LAZY not in here and not above.strip().startswith(LAZY):
                    found.append(f"{p.relative_to(root)}:{node.lineno}: {here.strip()}")
    return found


def test_no_module_over_500_lines():
    found = long_modules()
    assert not found, ("modules over 500 lines (split them by role):\n  "
                       + "\n  ".join(found))


def test_no_function_over_80_lines():
    found = long_functions()
    assert not found, ("functions over 80 lines (split them by role):\n  "
                       + "\n  ".join(found))


def test_at_most_five_type_ignores():
    found = type_ignores()
    assert len(found) <= TYPE_IGNORES, (
        f"{len(found)} `# type: ignore` comments, at most {TYPE_IGNORES} (type the code "
        "instead: cast(), typed helpers, Protocols):\n  " + "\n  ".join(found))


def test_every_local_import_says_why_it_is_lazy():
    found = bare_local_imports()
    assert not found, (
        "function-local imports without a `# lazy: <reason>` comment (move a light "
        "import to the module top; a heavy or optional one says why):\n  "
        + "\n  ".join(found))


def test_the_weight_checks_catch_each_excess(tmp_path):
    """The checkers themselves, on a small package: each excess is reported, with its
    place; a package within every limit passes all four."""
    pkg = tmp_path / "reactlab"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    clean = ("import json\n\n\n"
             "def short():\n"
             "    import torch  # lazy: heavy (torch)\n"
             "    # lazy: optional extra\n"
             "    from agentdojo import (\n"
             "        task_suite,\n"
             "    )\n"
             "    return json, torch, task_suite\n")
    (pkg / "core" / "ok.py").write_text(clean)
    assert long_modules(pkg) == long_functions(pkg) == type_ignores(pkg) == []
    assert bare_local_imports(pkg) == []

    body = "".join(f"    x{i} = {i}\n" for i in range(79))  # def + 79 + return = 81
    (pkg / "core" / "big.py").write_text(
        "def long():\n" + body + "    return x0\n"
        + "\n" * (MODULE_LINES - 81)  # 500 lines, then 6 with a type: ignore
        + "\n".join(f"y{i} = f()  # type: ignore[name-defined]" for i in range(6)) + "\n")
    (pkg / "core" / "lazy.py").write_text(
        "def f():\n"
        "    import os\n"
        "    # a comment that is not the reason\n"
        "    from pathlib import Path\n"
        "    import sys  # lazy: the reason on the import's own line\n"
        "    return os, Path, sys\n")
    assert long_modules(pkg) == [f"core/big.py: {MODULE_LINES + 6} lines"]
    assert long_functions(pkg) == ["core/big.py:1 long: 81 lines"]
    assert long_functions(pkg, limit=81) == []
    assert len(type_ignores(pkg)) == 6 and type_ignores(pkg)[0] == "core/big.py:501"
    assert bare_local_imports(pkg) == ["core/lazy.py:2: import os",
                                       "core/lazy.py:4: from pathlib import Path"]


# ------------------------------------------------------------------ every test checks

TESTS = ROOT / "tests"
#: Calls that check: ``assert_*`` (unittest, numpy, a mock's ``assert_called_once``),
#: ``check_*`` and ``expect_*`` helpers.
CHECKING_PREFIXES = ("assert_", "check_", "expect_")
#: ``pytest.raises``/``pytest.warns`` (as a context or a call), and ``pytest.fail``.
PYTEST_CHECKS = {"raises", "warns", "fail"}


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else (
        func.attr if isinstance(func, ast.Attribute) else "")


def checks_directly(fn: ast.AST) -> bool:
    """Whether a function's own body (nested blocks included) asserts: an ``assert``,
    ``pytest.raises``/``warns``/``fail``, or a call of an ``assert_``/``check_``/
    ``expect_`` function."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in PYTEST_CHECKS
                    and isinstance(func.value, ast.Name) and func.value.id == "pytest"):
                return True
            if _called_name(node).startswith(CHECKING_PREFIXES):
                return True
    return False


def _module_functions(tree: ast.Module) -> dict[str, ast.AST]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _test_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """``test_*`` functions at module level and in ``Test*`` classes."""
    found = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name.startswith("Test"):
            found += [n for n in cls.body
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [n for n in found if n.name.startswith("test")]


def unchecked_tests(tests: Path = TESTS) -> tuple[int, list[str]]:
    """(how many tests check, ``file:line name`` of those that do not). A test checks
    when its own body does (:func:`checks_directly`) or it calls, by name, a helper
    that does, one level deep: a function of its own module, of ``conftest.py``, or
    one imported from a module of ``tests/`` (``from tests.x import helper``)."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
             for p in sorted(tests.rglob("*.py"))}
    helpers_of = {p: _module_functions(t) for p, t in trees.items()}
    conftest = helpers_of.get(tests / "conftest.py", {})
    checking = 0
    unchecked = []
    for path, tree in trees.items():
        if not path.name.startswith("test_"):
            continue
        helpers = {**conftest}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests."):
                source = tests.joinpath(*node.module.split(".")[1:]).with_suffix(".py")
                for a in node.names:
                    if a.name in helpers_of.get(source, {}):
                        helpers[a.asname or a.name] = helpers_of[source][a.name]
        helpers |= helpers_of[path]
        for fn in _test_functions(tree):
            called = {_called_name(c) for c in ast.walk(fn) if isinstance(c, ast.Call)}
            if checks_directly(fn) or any(
                    checks_directly(helpers[name]) for name in called if name in helpers):
                checking += 1
            else:
                unchecked.append(f"{path.relative_to(tests.parent)}:{fn.lineno} {fn.name}")
    return checking, unchecked


def test_every_test_checks_something():
    """Every test asserts, expects an error, or calls a helper of tests/ that does: a
    test that only runs code passes whatever the code does."""
    _, found = unchecked_tests()
    assert not found, ("tests that assert nothing (add the check they were written "
                       "for):\n  " + "\n  ".join(found))


def test_the_check_finds_a_test_that_asserts_nothing(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text("def check_shared(x):\n    assert x\n")
    (tests / "helpers.py").write_text(
        "def must_hold(x):\n    if not x:\n        raise AssertionError(x)\n"
        "def holds(x):\n    assert x\n")
    (tests / "test_x.py").write_text(
        "import pytest\n"
        "from tests.helpers import holds as h, must_hold\n\n"
        "def verify(x):\n    assert x == 1\n\n"
        "def run(x):\n    return x\n\n"
        "def test_asserts():\n    for i in range(2):\n        assert i >= 0\n\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n\n"
        "def test_prefixed(mock):\n    mock.assert_called_once()\n\n"
        "def test_shared():\n    check_shared(1)\n\n"
        "def test_same_module_helper():\n    verify(1)\n\n"
        "def test_imported_helper():\n    h(1)\n\n"
        "class TestThing:\n    def test_method(self):\n        pytest.fail('no')\n\n"
        "def test_only_runs():\n    run(1)\n\n"
        "def test_helper_that_does_not_assert():\n    must_hold(1)\n\n"
        "class TestOther:\n    def test_prints(self):\n        print(run(2))\n")
    checking, found = unchecked_tests(tests)
    assert checking == 7
    assert found == ["tests/test_x.py:34 test_only_runs",
                     "tests/test_x.py:37 test_helper_that_does_not_assert",
                     "tests/test_x.py:41 test_prints"]
