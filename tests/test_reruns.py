"""Precise reruns: count the jobs that a code edit reruns.

The pipeline runs once in a temporary copy of the project on a small matrix (2 backends
x 2 scenarios); each test then appends a comment to one file of the package, counts the
jobs of a dry run (``snakemake -n``'s job stats, the target rule ``all`` left out), and
restores the file. Each rule carries the fingerprint of the code its jobs run
(``reactlab.core.fingerprint``), so an edit reruns the rules whose code changed and,
through their new outputs, everything after them, and nothing else.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reactlab.dev.bench import after_edit, copy_workflow, planned_jobs

pytestmark = pytest.mark.e2e

RUNS = 6  # the matrix below: 4 of the lesson's loop, one per framework agent
FIGURES = {f"figure_{k}": 1 for k in ("cumulative_tokens", "outcomes", "tokens", "defences",
                                      "success_rates", "agents_tokens")}
AFTER_RUNS = {"run_agent": RUNS, "verify": RUNS, "tables": 1, "viewer": 1, **FIGURES}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("reruns")
    copy_workflow(work)
    cfg = work / "config.yaml"
    raw = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    raw["matrix"] = [{"tasks": ["variacion_busi"], "backends": ["openai", "anthropic"],
                      "scenarios": ["correcto", "bucle_sin_limite"]},
                     # two frameworks (plugins of reactlab.agents): editing one reruns its
                     # runs only
                     {"tasks": ["variacion_busi"], "backends": ["openai_chat"],
                      "scenarios": ["correcto"], "agents": ["langchain", "openai_agents"]}]
    raw.pop("suites", None)  # the suites' shard jobs are counted in tests/test_suites.py
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2"], cwd=work,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # the default profile was read: the run: jobs ran as threads of this process
    assert "Using workflow specific profile profiles/default" in proc.stdout + proc.stderr
    return work


def test_a_complete_project_has_nothing_to_rerun(project: Path) -> None:
    assert planned_jobs(project) == {}


@pytest.mark.parametrize("relpath,expected", [
    pytest.param("workflow/reactlab/views/html.py", {"viewer": 1}, id="viewer"),
    pytest.param("workflow/reactlab/analysis/figures.py", FIGURES, id="figures"),
    pytest.param("workflow/reactlab/analysis/tables.py", {"tables": 1, "viewer": 1, **FIGURES},
                 id="tables"),
    pytest.param("workflow/reactlab/analysis/verify.py",
                 {"verify": RUNS, "tables": 1, "viewer": 1, **FIGURES}, id="verifier"),
    pytest.param("workflow/reactlab/tools/__init__.py", AFTER_RUNS, id="tool"),
    pytest.param("workflow/reactlab/simulate/openai_responses.py", AFTER_RUNS, id="simulator"),
    pytest.param("workflow/reactlab/core/errors.py", {"generate_data": 1, **AFTER_RUNS},
                 id="core"),
    pytest.param("workflow/reactlab/frameworks/langchain.py",
                 {**AFTER_RUNS, "run_agent": 1, "verify": 1}, id="one-agent"),
    pytest.param("workflow/reactlab/simulate/server.py", {}, id="server-not-run-by-jobs"),
    pytest.param("workflow/reactlab/cli.py", {}, id="cli"),
    pytest.param("workflow/reactlab/dev/bench.py", {}, id="dev"),
])
def test_an_edit_reruns_exactly_the_jobs_that_run_that_code(
        project: Path, relpath: str, expected: dict[str, int]) -> None:
    assert after_edit(project, relpath, lambda: planned_jobs(project)) == expected
    assert planned_jobs(project) == {}  # restoring the file restores the fingerprint


def test_each_job_logs_to_its_own_file(project: Path) -> None:
    logs = project / "results" / "logs"
    for backend in ("openai", "anthropic"):
        for scenario in ("correcto", "bucle_sin_limite"):  # the lesson's loop's runs
            key = f"variacion_busi/{backend}/{scenario}"
            run = (logs / "run" / f"{key}.log").read_text(encoding="utf-8")
            assert run.startswith(f"{key}: ") and run.count("\n") == 1, run
            verify = (logs / "verify" / f"{key}.log").read_text(encoding="utf-8")
            assert verify.startswith(f"{key}: ") and verify.count("\n") == 1, verify
    from reactlab.analysis import outputs

    files = sum(1 + bool(t.latex) for t in outputs.TABLES)  # each CSV, a key table's .tex
    assert (logs / "tables.log").read_text() == (
        f"wrote {files} tables (CSV, and LaTeX for the key ones) to results/tables\n")
