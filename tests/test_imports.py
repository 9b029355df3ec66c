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
HEAVY = ("openai", "anthropic", "torch", "transformers", "pandas", "matplotlib")


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
