"""reactlab.core.fingerprint (what each rule reruns on) and reactlab.core.joblog."""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

import pytest

from reactlab.core.errors import ConfigError
from reactlab.core.fingerprint import closure, fingerprint, fingerprints
from reactlab.core.joblog import job_log
from tests.conftest import ROOT

PACKAGE = ROOT / "workflow" / "reactlab"


def names(root: Path, *entries: str) -> set[str]:
    return {p.relative_to(root).as_posix() for p in closure(root, entries)}


def test_closure_follows_lazy_imports_and_package_inits() -> None:
    # a run's code: the runner's and its provider entry's (the built-in providers'
    # module names its sessions' modules for importlib: the adapters -> simulators)
    run = names(PACKAGE, "reactlab.runner", "reactlab.backends.providers")
    assert {"backends/openai_responses.py", "simulate/openai_responses.py",
            "backends/local/model.py", "tools/__init__.py", "__init__.py",
            "backends/local/__init__.py"} <= run
    assert not {"views/html.py", "analysis/tables.py", "simulate/server.py", "cli.py"} & run
    figures = names(PACKAGE, "reactlab.analysis.figures")
    assert {"__init__.py", "analysis/__init__.py", "analysis/figures.py"} <= figures
    assert not {"analysis/tables.py", "views/html.py", "runner/__init__.py"} & figures


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "reactlab"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_fingerprint_changes_only_with_its_own_code(package: Path) -> None:
    before = {e: fingerprint(package, e) for e in ("reactlab.views.html", "reactlab.runner")}
    with open(package / "views" / "html.py", "a") as fh:
        fh.write("\n# edited\n")
    after = {e: fingerprint(package, e) for e in before}
    assert after["reactlab.views.html"] != before["reactlab.views.html"]
    assert after["reactlab.runner"] == before["reactlab.runner"]


def test_relative_and_from_imports_are_followed(package: Path) -> None:
    (package / "views" / "extra.py").write_text("from . import html\n")
    (package / "views" / "other.py").write_text("from reactlab.views import extra\n")
    assert {"views/extra.py", "views/html.py", "analysis/verify.py"} <= names(
        package, "reactlab.views.other")


def test_unknown_entry_module_is_an_error(package: Path) -> None:
    with pytest.raises(ValueError, match=r"no module reactlab\.views\.gone"):
        fingerprint(package, "reactlab.views.gone")


def test_job_logs_of_concurrent_threads_stay_apart(tmp_path: Path) -> None:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def job(name: str) -> None:
        try:
            with job_log(tmp_path / f"{name}.log") as say:
                for i in range(50):
                    logging.getLogger(f"reactlab.{name}").info("%s line %d", name, i)
                    if i == 0:
                        barrier.wait(timeout=10)  # both jobs are now logging at once
                say(f"{name} done")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(n,)) for n in ("alpha", "beta")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for name, other in (("alpha", "beta"), ("beta", "alpha")):
        lines = (tmp_path / f"{name}.log").read_text().splitlines()
        assert lines[:-1] == [f"reactlab.{name}: {name} line {i}" for i in range(50)]
        assert lines[-1] == f"{name} done"
        assert not any(other in line for line in lines)


def test_job_log_records_the_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError), job_log(tmp_path / "x.log"):
        raise ConfigError("agent.max_steps", "0 is less than the minimum of 1")
    assert (tmp_path / "x.log").read_text().startswith(
        "reactlab: error: config: agent.max_steps: 0 is less")


def test_cached_imports_give_the_same_fingerprints_and_follow_edits(
        package: Path, tmp_path: Path) -> None:
    rules = {"run": "reactlab.runner", "viewer": "reactlab.views.html"}
    cache = tmp_path / "cache" / "imports.json"
    plain = {rule: fingerprint(package, entry) for rule, entry in rules.items()}
    assert fingerprints(package, rules, cache=cache) == plain  # writes the cache
    assert cache.is_file()
    assert fingerprints(package, rules, cache=cache) == plain  # reads it
    # a new import in a file whose imports are cached: found, since the content changed
    (package / "views" / "extra.py").write_text("X = 1\n")
    with open(package / "views" / "html.py", "a") as fh:
        fh.write("\nfrom reactlab.views import extra  # noqa\n")
    assert "views/extra.py" in names(package, "reactlab.views.html")
    edited = fingerprints(package, rules, cache=cache)
    assert edited["run"] == plain["run"]
    assert edited["viewer"] == fingerprint(package, "reactlab.views.html") != plain["viewer"]
    (package / "views" / "extra.py").write_text("X = 2\n")  # only in the viewer's closure
    assert fingerprints(package, rules, cache=cache)["viewer"] != edited["viewer"]


def test_a_module_named_for_importlib_is_followed(package: Path) -> None:
    """A registry that imports by name (backends/registry.py) cannot hide its modules."""
    (package / "views" / "reg.py").write_text(
        'import importlib\nMOD = "reactlab.views.html"\nimportlib.import_module(MOD)\n')
    assert "views/html.py" in names(package, "reactlab.views.reg")
    assert "backends/openai_responses.py" in names(PACKAGE, "reactlab.backends.providers")


def test_job_log_puts_the_logging_levels_back(tmp_path: Path) -> None:
    """A job quiets httpx and raises the reactlab loggers to INFO only while it runs: the
    process's own logging configuration (here pytest's caplog) is left as it was."""
    from reactlab.backends.registry import providers

    providers()  # each provider registers its loggers when it is loaded

    before = {n: logging.getLogger(n).level for n in ("reactlab", "openai", "httpx")}
    with job_log(tmp_path / "a.log"):
        assert logging.getLogger("httpx").level == logging.WARNING
        with job_log(tmp_path / "b.log"):
            pass
        assert logging.getLogger("httpx").level == logging.WARNING  # a job still runs
    assert {n: logging.getLogger(n).level for n in before} == before
