"""Plugins by entry points (reactlab.core.plugins; docs/plugins.md): the built-ins are
reactlab's own entry points, a name nothing installed declares is one line naming its
package, a plugin's settings are checked by its own model, and a plugin's own package is
part of its runs' code fingerprint."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from reactlab.config import ConfigError, load_yaml, parse
from reactlab.core.fingerprint import fingerprint
from reactlab.core.plugins import GROUPS, OWN, registry
from tests.conftest import ROOT

PACKAGE = ROOT / "workflow" / "reactlab"
#: The example plugin (examples/plugin), which this checkout does not install; the names
#: below are none of its entries' (another test module adds those to its own process).
EXAMPLE = "reactlab-example-plugin"


def test_the_built_ins_are_reactlabs_own_entry_points() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    for kind, group in GROUPS.items():
        plugins = registry(kind)
        own = [n for n in plugins.names() if plugins.distribution(n) == OWN]
        assert own == sorted(declared.get(group, {})), kind
        for name in own:  # each loads, and is the entry its name says
            assert plugins.lookup(name).name == name
            assert plugins.module(name) == declared[group][name].split(":")[0]


def _config(**sections: Any) -> dict[str, Any]:
    raw = load_yaml(ROOT / "config.yaml")
    for key, value in sections.items():
        raw[key] = {**(raw.get(key) or {}), **value}
    return raw


@pytest.mark.parametrize(("sections", "matrix", "field"), [
    ({"agents": {"texto": {"framework": "ausente", "package": EXAMPLE}}},
     {"backends": ["openai_chat"], "agents": ["texto"]}, "agents.texto.framework"),
    ({"suites": {"mio": {"benchmark": "ausente", "package": EXAMPLE,
                         "backends": ["local"]}}}, None, "suites.mio.benchmark"),
    ({"backends": {"propio": {"provider": "ausente", "mode": "simulated", "package": EXAMPLE}}},
     None, "backends.propio.provider"),
    ({"tool_sources": {"fx": {"plugin": "ausente", "package": EXAMPLE}},
      "tasks": {"cambio": {"question": "¿?", "tool_source": "fx", "tools": ["tipo_cambio"],
                           "params": {}}}},
     {"tasks": ["cambio"], "backends": ["openai"]}, "tool_sources.fx.plugin"),
])
def test_a_plugin_that_is_not_installed_is_one_line_naming_its_package(
        sections: dict[str, Any], matrix: dict[str, Any] | None, field: str) -> None:
    raw = _config(**sections)
    if matrix is not None:
        raw["matrix"].append({"tasks": ["variacion_busi"], "scenarios": ["correcto"], **matrix})
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert info.value.field == field
    text = str(info.value)
    assert "\n" not in text and f"pip install {EXAMPLE}" in text and "is installed" in text


def test_reactlab_check_says_it_in_one_line_and_deletes_nothing(tmp_path: Path) -> None:
    overlay = tmp_path / "plugin.yaml"
    overlay.write_text("agents:\n  texto: {framework: ausente, package: " + EXAMPLE + "}\n"
                       "matrix:\n  - {tasks: [variacion_busi], backends: [openai_chat], "
                       "scenarios: [correcto], agents: [texto]}\n", encoding="utf-8")
    results = tmp_path / "results"
    (results / "traces").mkdir(parents=True)
    (results / "traces" / "kept.jsonl").write_text("{}\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "reactlab", "check", "--config",
                           str(ROOT / "config.yaml"), "--configfile", str(overlay)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "agents.texto.framework" in lines[0] and EXAMPLE in lines[0]
    assert (results / "traces" / "kept.jsonl").read_text(encoding="utf-8") == "{}\n"


def test_a_benchmark_without_a_settings_model_takes_no_settings() -> None:
    raw = load_yaml(ROOT / "config.yaml")
    raw["suites"]["bfcl"]["settings"] = {"max_steps": 3}
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert info.value.field == "suites.bfcl.settings" and "takes no settings" in str(info.value)


@pytest.mark.parametrize(("settings", "field", "words"), [
    ({"max_turns": True}, "agents.oa.settings.max_turns", "integer"),
    ({"max_turn": 3}, "agents.oa.settings.max_turn", "takes no setting 'max_turn'"),
    ({"tool_not_found_behavior": "ignore"}, "agents.oa.settings.tool_not_found_behavior",
     "raise_error"),
])
def test_a_frameworks_settings_are_checked_by_its_own_model(
        settings: dict[str, Any], field: str, words: str) -> None:
    raw = _config(agents={"oa": {"framework": "openai_agents", "settings": settings}})
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert info.value.field == field and words in str(info.value)


def test_a_plugins_own_package_is_in_its_fingerprint(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin's entry module and the modules of its own package it imports are hashed
    with the reactlab modules it imports; another file of its package is not."""
    pkg = tmp_path / "rl_fp_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agent.py").write_text("from rl_fp_plugin import helpers\n"
                                  "from reactlab.frameworks.kit import Kit\n")
    (pkg / "helpers.py").write_text("X = 1\n")
    (pkg / "other.py").write_text("Y = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = fingerprint(PACKAGE, "reactlab.runner", "rl_fp_plugin.agent")
    assert before != fingerprint(PACKAGE, "reactlab.runner")
    (pkg / "other.py").write_text("Y = 2\n")
    assert fingerprint(PACKAGE, "reactlab.runner", "rl_fp_plugin.agent") == before
    (pkg / "helpers.py").write_text("X = 2\n")
    assert fingerprint(PACKAGE, "reactlab.runner", "rl_fp_plugin.agent") != before
