"""Clear errors at the edges (issue 38, item 4): a target outside the matrix, a mistyped
overlay, a missing environment. Each ends in one line that says what exists and what to
do, with no traceback and a non-zero exit status. Snakemake runs as a subprocess, dry
(``-n``), in a copy of the checkout: each case takes seconds and builds nothing."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reactlab import config
from tests.conftest import ROOT
from tests.test_pipeline import copy_workflow

OVERLAYS = ROOT / "workflow" / "configs"
PROFILE_LINE = ("Using workflow specific profile profiles/default for setting default "
                "command line arguments.")
# Snakemake without reactlab on its import path: the venv's own Python, with the
# package's folders (the editable install's and PYTHONPATH's) taken off sys.path.
NO_REACTLAB = """\
import sys
sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("/workflow")]
sys.argv = ["snakemake", *sys.argv[1:]]
from snakemake.cli import main
main()
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("edges")
    copy_workflow(work)
    return work


def snakemake(work: Path, *args: str, python: tuple[str, ...] = ("-m", "snakemake"),
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *python, "-n", "--cores", "1", *args], cwd=work,
                          capture_output=True, text=True, timeout=300, check=False)


def workflow_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line of a WorkflowError that stopped Snakemake while it parsed: beside the
    profile's line, the output holds Snakemake's header (``WorkflowError in file ...``),
    the message and the place (``File ..., line N``), nothing else."""
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "Traceback" not in out and "KeyError" not in out, out[-3000:]
    lines = [line for line in out.splitlines() if line.strip() and line != PROFILE_LINE]
    assert len(lines) == 3, out[-3000:]
    assert lines[0].startswith("WorkflowError in file"), out[-3000:]
    assert lines[2].lstrip().startswith("File "), out[-3000:]
    return lines[1]


@pytest.fixture(scope="module")
def run_keys() -> list[str]:
    return [r.key for r in config.load(ROOT / "config.yaml").runs]


@pytest.mark.parametrize(("target", "key", "near"), [
    ("results/traces/variacion_busi/openai/nope.jsonl", "variacion_busi/openai/nope",
     "variacion_busi/openai/correcto"),
    ("results/verified/variacion_busi/openai_chat/corecto.json",
     "variacion_busi/openai_chat/corecto", "variacion_busi/openai_chat/correcto"),
    ("results/traces/nope.jsonl", "nope", None),
    ("results/verified/nope.json", "nope", None),
], ids=["trace", "verified-typo", "trace-no-key", "verified-no-key"])
def test_a_target_outside_the_matrix_names_the_nearest_runs(
        work: Path, run_keys: list[str], target: str, key: str, near: str | None) -> None:
    line = workflow_error(snakemake(work, target))
    assert line.startswith(f"{target}: {key} is not a run of the config "
                           f"({len(run_keys)} planned; nearest: "), line
    named = re.search(r"nearest: (.*?)\);", line)
    assert named, line
    nearest = named.group(1).split(", ")
    assert len(nearest) == 3 and set(nearest) <= set(run_keys), nearest
    if near is not None:
        assert near in nearest, line
    assert "`snakemake -n`" in line and "reactlab check --list" in line, line
    assert not list((work / "results").glob("*/*")), "a refused target built something"


def test_a_suite_shard_outside_the_config_is_refused(work: Path) -> None:
    from reactlab.suites.plan import plan

    shards = sorted(s.id for s in plan(config.load(ROOT / "config.yaml").raw))
    assert shards, "the default config plans suite shards"
    typo = shards[0][:-1]  # a shard's id, its last character lost
    target = f"results/suites/agentdojo/shards/{typo}.traces.json"
    line = workflow_error(snakemake(work, target))
    assert line.startswith(f"{target}: {typo} is not a suite shard of the config "
                           f"({len(shards)} planned; nearest: "), line
    named = re.search(r"nearest: (.*?)\);", line)
    assert named and shards[0] in named.group(1).split(", "), line


def test_a_planned_target_still_plans(work: Path) -> None:
    proc = snakemake(work, "results/verified/variacion_busi/openai/correcto.json")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "verify" in proc.stdout and "run_agent" in proc.stdout, proc.stdout[-3000:]


def test_a_mistyped_overlay_lists_the_overlays_to_reactlab_check() -> None:
    proc = subprocess.run([sys.executable, "-m", "reactlab", "check", "--configfile",
                           "workflow/configs/bfcl_fre.yaml"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("reactlab: error: config: cannot read "
                               "workflow/configs/bfcl_fre.yaml: "), lines[0]
    listed = lines[0].partition("workflow/configs holds ")[2].rstrip(")").split(", ")
    assert listed == sorted(p.name for p in OVERLAYS.glob("*.yaml")), lines[0]


OVERLAY_A = """\
tasks:
  variacion_busi_a:
    question: "¿Cuánto varió BUSI entre el 2024-01-02 y el 2024-03-15?"
    tools: [precio, calculadora]
    params: {ticker: BUSI, desde: "2024-01-02", hasta: "2024-03-15"}
suites: {bfcl: {backends: [openai_live]}, agentdojo: {backends: [openai_live]}}
"""
OVERLAY_B = """\
matrix:
  - {tasks: [variacion_busi], backends: [anthropic], scenarios: [bucle_sin_limite, correcto]}
  - {tasks: [variacion_busi_a], backends: [openai], scenarios: [correcto]}
"""


def test_configfile_overlays_mean_the_same_to_check_and_snakemake(
        work: Path, tmp_path: Path) -> None:
    """`--configfile A B` merges A then B for Snakemake and for `reactlab check` alike:
    the same planned runs (B's matrix names A's task). `--configfile A --configfile B`,
    which Snakemake 9.27 reads as B alone (its option takes nargs="+", and a second
    occurrence replaces the first), is refused by both, in one line naming the form
    that merges them."""
    from reactlab.cli import main

    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(OVERLAY_A, encoding="utf-8")
    b.write_text(OVERLAY_B, encoding="utf-8")

    def check(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.chdir(work), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            rc = main(["check", "--list", *args])
        return rc, out.getvalue(), err.getvalue()

    proc = snakemake(work, "--configfile", str(a), str(b))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    planned = set(re.findall(r"results/traces/(\S+)\.jsonl", proc.stdout))
    rc, listed, err = check("--configfile", str(a), str(b))
    assert rc == 0, err
    assert planned == set(listed.split()), (planned, listed)
    assert "variacion_busi_a/openai/correcto" in planned  # A's task, B's matrix: merged

    line = workflow_error(snakemake(work, "--configfile", str(a), "--configfile", str(b)))
    rc, listed, err = check("--configfile", str(a), "--configfile", str(b))
    assert rc == 2 and not listed, err
    assert line.startswith("invalid configuration: config: --configfile: given 2 times")
    assert err.splitlines() == [
        "reactlab: error: " + line.removeprefix("invalid configuration: ")], (err, line)
    assert line.endswith(f"in order: --configfile {a} {b}"), line


@pytest.mark.xfail(strict=True, reason="Snakemake 9.27 reads every --configfile in its own "
                   "command line (snakemake/settings/types.py, ConfigSettings), before the "
                   "Snakefile runs: a missing one ends in its FileNotFoundError traceback, "
                   "which no code of the project can catch")
def test_a_mistyped_overlay_to_snakemake_is_one_line(work: Path) -> None:
    proc = snakemake(work, "--configfile", "workflow/configs/bfcl_fre.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]


def test_snakemake_without_reactlab_says_make_env(work: Path) -> None:
    line = workflow_error(snakemake(work, python=("-c", NO_REACTLAB)))
    assert line == ("cannot import reactlab (No module named 'reactlab'): run `make env`, "
                    "which creates the environment in .venv, then .venv/bin/snakemake"), line


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_every_make_target_creates_the_environment_first(tmp_path: Path) -> None:
    """`make <target>` before `make env`: each target that runs a command of the
    environment builds it first (the Makefile's .venv), so none fails on a missing one."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    phony = re.search(r"^\.PHONY: (.*)$", makefile, re.M)
    assert phony, "the Makefile declares its targets .PHONY"
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "workflow" / "envs").mkdir(parents=True)
    shutil.copy(OVERLAYS.parent / "envs" / "mcp-sqlite.txt", tmp_path / "workflow" / "envs")
    # as a user types it: not a sub-make of the `make test` that may run this test
    outside_make = {k: v for k, v in os.environ.items()
                    if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    using_env = []
    for target in phony.group(1).split():
        proc = subprocess.run(["make", "--no-print-directory", "-n", target], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, check=False,
                              env=outside_make)
        assert proc.returncode == 0, (target, proc.stderr)
        commands = proc.stdout.splitlines()
        first_use = next((i for i, c in enumerate(commands) if ".venv/bin/" in c), None)
        if first_use is None:
            continue  # clean, distclean: nothing of the environment
        using_env.append(target)
        assert "-m venv .venv" in commands[0], (target, commands[:3])
    assert "run" in using_env and "test" in using_env, using_env
    assert not (tmp_path / ".venv").exists()  # -n: printed, not run
