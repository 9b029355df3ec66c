"""Every error the package raises on purpose is a class of the tree in core/errors.py.

The check reads the source with ``ast``: each ``raise X(...)`` names a class of the tree
(a subclass of ``ReactlabError``), is caught by the ``try`` around it (local control
flow), or is one of the few built-in exceptions a protocol prescribes (:data:`ALLOWED`,
each with its reason). Every exception class the package defines derives from
``ReactlabError`` (but the stops of :data:`STOPS`, each with its reason), and a public
one is defined in core/errors.py and drawn in its
docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "reactlab"
ERRORS = PACKAGE / "core" / "errors.py"

#: Built-in or third-party exceptions raised on purpose, and why they are not in the tree.
ALLOWED: dict[str, str] = {
    "NotImplementedError": "an abstract method's body (Python's convention)",
    "TypeError": "instantiating the abstract BackendError (as for an abstract base class)",
    "KeyError": "a lookup by key that misses (config.Config.run), as a Mapping does",
    "FileExistsError": "the target of an atomic folder or model conversion exists: an "
                       "OSError, as os.mkdir reports it, so callers handle it as one",
    "SystemExit": "a dev command-line script stopping with its message (argparse's way)",
    "ConnectError": "the simulators imitate httpx's transport failure, which the SDKs map",
    "ReadTimeout": "the simulators imitate httpx's transport timeout, which the SDKs map",
    "PydanticCustomError": "pydantic's protocol for a validator's error (tool arguments)",
}

#: Exceptions the package defines on purpose outside the tree, and why: not errors but
#: stops that must cross code the package does not own.
STOPS: dict[str, str] = {
    "HardStop": "the simulator's hard stop on a framework's run (frameworks/kit.py): a "
                "BaseException, so that no framework's own `except Exception` retries or "
                "swallows it; the runner records it as the run's `hard_stop`",
}

EXCEPTION_BASES = {"Exception", "ValueError", "RuntimeError", "TypeError", "KeyError",
                   "OSError", "BaseException"}


def _parse(root: Path) -> dict[str, ast.Module]:
    return {p.relative_to(root).as_posix(): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted(root.rglob("*.py"))}


def _classes(trees: dict[str, ast.Module]) -> dict[str, list[tuple[str, list[str]]]]:
    """class name -> [(module, base names)] for every class of the package."""
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
                out.setdefault(node.name, []).append((module, bases))
    return out


def tree_classes(trees: dict[str, ast.Module]) -> set[str]:
    """The names of ReactlabError and every class deriving from it."""
    classes = _classes(trees)
    tree = {"ReactlabError"}
    grown = True
    while grown:
        grown = False
        for name, defs in classes.items():
            if name not in tree and any(set(b) & tree for _, b in defs):
                tree.add(name)
                grown = True
    return tree


def _caught_here(raise_node: ast.Raise, name: str, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether a ``try`` around ``raise_node`` (in its body) has a handler naming ``name``."""
    child: ast.AST = raise_node
    node = parents.get(child)
    while node is not None and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        if isinstance(node, ast.Try) and child in node.body:
            for handler in node.handlers:
                if handler.type is not None and name in {
                        ast.unparse(n).split(".")[-1] for n in ast.walk(handler.type)}:
                    return True
        child, node = node, parents.get(node)
    return False


def problems(root: Path = PACKAGE) -> list[str]:
    trees = _parse(root)
    tree = tree_classes(trees)
    found: list[str] = []
    for name, defs in _classes(trees).items():
        for module, bases in defs:
            if name in tree:
                if not name.startswith("_") and module != "core/errors.py":
                    found.append(f"{module}: class {name} belongs in core/errors.py")
            elif name in STOPS:
                continue
            elif set(bases) & EXCEPTION_BASES or any(
                    b.endswith(("Error", "Exception")) for b in bases):
                found.append(f"{module}: class {name} is outside the tree")
    for module, mod_tree in trees.items():
        parents = {c: p for p in ast.walk(mod_tree) for c in ast.iter_child_nodes(p)}
        for node in ast.walk(mod_tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = ast.unparse(exc).split(".")[-1]
            if not name[:1].isupper() or name in tree or name in ALLOWED or name in STOPS:
                continue  # a caught value re-raised, a class of the tree, an allowed one
            if _caught_here(node, name, parents):
                continue
            found.append(f"{module}:{node.lineno}: raises {name}, not a class of the tree")
    return found


def test_every_raise_is_a_class_of_the_tree() -> None:
    assert problems() == []


def test_the_docstring_draws_every_class_of_the_tree() -> None:
    import reactlab.core.errors as errors

    drawn = errors.__doc__ or ""
    defined = [n.name for n in ast.parse(ERRORS.read_text()).body
               if isinstance(n, ast.ClassDef)]
    assert defined, "no class found in core/errors.py"
    assert [n for n in defined if f"── {n} " not in drawn and n != "ReactlabError"] == []


def test_a_kept_builtin_subclass_still_catches_as_before() -> None:
    from reactlab.core.errors import CalculatorError, InternalError, UsageError

    assert issubclass(UsageError, ValueError) and issubclass(CalculatorError, ValueError)
    assert issubclass(InternalError, RuntimeError)


@pytest.mark.parametrize(("source", "expected"), [
    ("def f():\n    raise ValueError('x')\n", "raises ValueError"),
    ("class Oops(Exception):\n    pass\n", "class Oops is outside the tree"),
    ("from reactlab.core.errors import ReactlabError\n"
     "class Mine(ReactlabError):\n    pass\n", "class Mine belongs in core/errors.py"),
])
def test_the_check_catches_an_error_outside_the_tree(tmp_path: Path, source: str,
                                                     expected: str) -> None:
    pkg = tmp_path / "reactlab"
    (pkg / "core").mkdir(parents=True)
    (pkg / "core" / "errors.py").write_text("class ReactlabError(Exception):\n    pass\n")
    (pkg / "tools.py").write_text(source)
    (pkg / "ok.py").write_text("def g():\n    try:\n        raise TypeError('t')\n"
                               "    except (TypeError, ValueError):\n        return 1\n")
    found = problems(pkg)
    assert len(found) == 1 and expected in found[0], found
