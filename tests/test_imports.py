"""Import hygiene: the core modules stay light, and each backend imports only its own SDK.

Each check runs in a fresh interpreter so that what other tests imported does not count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workflow" / "reactlab"
HEAVY = ("openai", "anthropic", "torch", "transformers", "pandas", "numpy", "matplotlib",
         "xgrammar", "tiktoken")
#: The stages below `backends` (ARCHITECTURE.md): none of their modules imports an SDK,
#: pandas, numpy, torch or matplotlib at module top. pydantic (the tools' argument
#: models) and httpx/starlette (the simulators' transports and server) are allowed:
#: ARCHITECTURE.md, "Conventions".
LIGHT_STAGES = ("core", "config", "data", "tools", "trace", "agent", "simulate")


def _loaded_after(code: str) -> set[str]:
    """Top-level module names in sys.modules after running ``code`` in a new interpreter."""
    script = (f"import sys, json\n{code}\n"
              "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_helper_sees_imports() -> None:
    # guard against a helper that would pass vacuously
    assert "json" in _loaded_after("import json")
    assert "yaml" in _loaded_after("import yaml")


def test_core_modules_import_nothing_heavy() -> None:
    loaded = _loaded_after("import reactlab, reactlab.config, reactlab.backends, "
                           "reactlab.agent.loop, reactlab.trace, reactlab.analysis.verify")
    assert "reactlab" in loaded
    assert sorted(loaded & set(HEAVY)) == []


def stage_modules(stage: str) -> list[str]:
    """Every module of a stage, as an importable name."""
    names = []
    for path in sorted((PACKAGE / stage).rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


@pytest.mark.parametrize("stage", LIGHT_STAGES)
def test_every_module_below_backends_imports_nothing_heavy(stage: str) -> None:
    modules = stage_modules(stage)
    assert modules, stage
    loaded = _loaded_after("\n".join(f"import {m}" for m in modules))
    assert "reactlab" in loaded
    assert sorted(loaded & set(HEAVY)) == [], f"{stage}: {modules}"


def test_the_stage_check_sees_a_heavy_import() -> None:
    # the check is not vacuous: a module that imports numpy at its top is seen
    assert "numpy" in _loaded_after("import reactlab.core\nimport numpy")


OPEN_SESSION = """
from reactlab.backends import open_session
from reactlab.config import load
spec = load("config.yaml").run("variacion_busi", {backend!r}, "correcto")
session = open_session(spec)
print(type(session).__name__, file=sys.stderr)
"""


@pytest.mark.parametrize(("backend", "own", "other"), [("openai", "openai", "anthropic"),
                                                         ("anthropic", "anthropic", "openai")])
def test_a_session_imports_only_its_own_sdk(backend: str, own: str, other: str) -> None:
    loaded = _loaded_after(OPEN_SESSION.format(backend=backend))
    assert own in loaded
    assert other not in loaded
    assert not {"torch", "transformers", "matplotlib"} & loaded


def test_the_command_line_starts_without_the_config_package() -> None:
    """`reactlab --help`, `show`, `check`'s parser: the CLI module imports no pydantic
    (the config package's models, ~0.3 s); each command that needs it imports it."""
    assert "pydantic" not in _loaded_after("import reactlab.cli")
