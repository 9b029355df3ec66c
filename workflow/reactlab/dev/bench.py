"""Benchmark of the workflow, side by side in one invocation on the same (noisy) machine.

Measured, each in a fresh temporary copy of the workflow:

1. the simulated matrix (the default matrix without its real-model runs) under
   ``snakemake --cores N`` (the default profile: `run:` jobs as threads of Snakemake's
   process) and the same work in one Python process; optionally (``--options``) also
   under ``--workflow-profile none``, where every `run:` job re-launches Snakemake in a
   fresh interpreter (the cost this workflow used to pay per job);
2. the full default matrix under Snakemake (model conversion and real-model runs too);
3. a no-op rerun of it;
4. how many jobs a code edit reruns (a dry run after appending a comment to a file of
   the viewer, of the figures and of the tools), and the wall time of the viewer rerun;
5. what a tool call adds over stdio MCP against the same work in process
   (:mod:`reactlab.dev.mcp_bench`; alone: ``reactlab bench --mcp``).

With ``repeat`` > 1 the simulated sides alternate and the medians are reported.
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from reactlab import config
from reactlab.core.errors import CommandFailed
from reactlab.dev import mcp_bench

ROOT = Path(__file__).resolve().parents[3]

#: Files whose edit the benchmark (and tests/test_reruns.py) counts the reruns of.
EDITS = {
    "viewer": "workflow/reactlab/views/html.py",
    "figures": "workflow/reactlab/analysis/figures.py",
    "tool": "workflow/reactlab/tools/__init__.py",
}


def copy_workflow(dest: Path, simulated_only: bool = False) -> None:
    """A runnable copy of the workflow in ``dest`` (optionally without model runs)."""
    shutil.copy(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copy(ROOT / "config.yaml", dest / "config.yaml")
    shutil.copytree(ROOT / "workflow", dest / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(ROOT / "profiles", dest / "profiles")  # the default profile (threads)
    sqlite_env = ROOT / ".venv-mcp-sqlite"  # the SQL tasks' MCP server (docs/mcp.md)
    if sqlite_env.is_dir():
        (dest / ".venv-mcp-sqlite").symlink_to(sqlite_env, target_is_directory=True)
    if simulated_only:
        write_simulated_config(dest / "config.yaml")


def write_simulated_config(path: Path) -> int:
    """Keep only the matrix blocks whose backends are all simulated or scripted (no
    model, no live API), without the outside suites (their own jobs: docs/suites.md);
    returns how many blocks were kept."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw.pop("suites", None)
    offline = {"simulated", "scripted"}
    raw["matrix"] = [b for b in raw["matrix"]
                     if all(raw["backends"][x]["mode"] in offline for x in b["backends"])]
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True),
                    encoding="utf-8")
    return len(raw["matrix"])


def slice_adds(cores: int, name: str, without: Callable[[dict[str, Any]], None],
               repeat: int = 1) -> dict[str, float]:
    """What a slice of the simulated matrix adds to a pipeline run: the simulated matrix
    (:func:`write_simulated_config`) under ``snakemake --cores`` in fresh copies, with the
    slice (``with_<name>``) and without it (``without_<name>``: ``without`` edits the raw
    config in place), alternated ``repeat`` times in one invocation; the medians and their
    difference (``<name>_adds_s``)."""
    times: dict[str, list[float]] = {f"with_{name}": [], f"without_{name}": []}
    with tempfile.TemporaryDirectory(prefix="reactlab-slice-bench-") as tmp:
        for i in range(repeat):
            for label in times:
                work = Path(tmp) / f"{label}{i}"
                work.mkdir()
                copy_workflow(work, simulated_only=True)
                if label.startswith("without_"):
                    path = work / "config.yaml"
                    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
                    without(raw)
                    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True),
                                    encoding="utf-8")
                times[label].append(snakemake(work, cores))
                shutil.rmtree(work, ignore_errors=True)
    out = {label: round(statistics.median(t), 1) for label, t in times.items()}
    out[f"{name}_adds_s"] = round(out[f"with_{name}"] - out[f"without_{name}"], 1)
    return out


def without_mcp(raw: dict[str, Any]) -> None:
    """``raw`` (a config) without the runs whose task takes its tools from an MCP server."""
    mcp_tasks = {t for t, c in raw["tasks"].items() if "mcp_server" in c}
    matrix = []
    for block in raw["matrix"]:
        tasks = [t for t in block["tasks"] if t not in mcp_tasks]
        if tasks:
            matrix.append({**block, "tasks": tasks})
    raw["matrix"] = matrix


def mcp_slice(cores: int, repeat: int = 1) -> dict[str, float]:
    """What the MCP slice (the runs on an MCP server's tools) adds to a run of the
    simulated matrix (``reactlab bench --mcp --pipeline``): :func:`slice_adds`, with and
    without it."""
    return slice_adds(cores, "mcp", without_mcp, repeat)


def snakemake(workdir: Path, cores: int, *extra: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "--quiet",
                           "all", *extra], cwd=workdir, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed in {workdir}:\n{proc.stderr[-3000:]}")
    return elapsed


def planned_jobs(workdir: Path, *extra: str) -> dict[str, int]:
    """{rule: jobs} that ``snakemake -n`` would run now (without the target rule `all`);
    empty when there is nothing to be done."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "4", *extra],
                          cwd=workdir, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise CommandFailed(f"snakemake -n failed in {workdir}:\n{out[-3000:]}")
    if "Nothing to be done" in out:
        return {}
    tables = re.findall(r"^Job stats:\njob\s+count\n[- ]+\n((?:\S+\s+\d+\n)+)", out,
                        flags=re.M)
    if not tables:
        raise CommandFailed(f"no job stats in the dry run of {workdir}:\n{out[-3000:]}")
    jobs = {rule: int(n) for rule, n in
            (line.split() for line in tables[-1].strip().splitlines())}
    jobs.pop("total", None)
    jobs.pop("all", None)
    return jobs


def after_edit(workdir: Path, relpath: str, action: Callable[[], object]) -> object:
    """Append a comment to ``relpath`` in ``workdir``, call ``action``, restore the file."""
    path = workdir / relpath
    original = path.read_bytes()
    path.write_bytes(original + b"\n# an edit that changes no behaviour\n")
    try:
        return action()
    finally:
        path.write_bytes(original)


def in_process(workdir: Path) -> float:
    """Every run, verification, table and the figure in one interpreter (fresh, timed whole)."""
    code = r"""
import json, sys
from pathlib import Path
from reactlab import config, data, trace
from reactlab.analysis import figures
from reactlab.analysis import tables, verify
from reactlab.views import html as viewer
from reactlab.backends.local.model import ensure_converted
from reactlab.data import sqlite
from reactlab.runner import run_to_trace, tool_source
from reactlab.tools import ToolBox
cfg = config.load("config.yaml")
files = data.write(Path("data/generated"), cfg.data["seed"])
tools = ToolBox.from_files(*files)
sqlite.write(*files, "data/generated/acciones6.sqlite")
if any(s.backend_config.mode == "model" for s in cfg.runs):
    ensure_converted(Path("data/models"))
pairs = []
for spec in cfg.runs:
    t = f"results/traces/{spec.key}.jsonl"; v = f"results/verified/{spec.key}.json"
    if spec.mcp is None:
        run_to_trace(spec, tools, t)
    else:
        with tool_source(spec, *files) as mcp_tools:
            run_to_trace(spec, mcp_tools, t)
    trace.write_json_atomic(v, verify.verification_record(trace.read(t), t))
    pairs.append((t, v))
tables.build(pairs, cfg.figure, "results/tables")
figures.cumulative_tokens("results/tables/cumulative_tokens.csv",
                          "results/figures/cumulative_tokens.png", cfg.figure)
figures.outcomes("results/tables/runs.csv", "results/figures/outcomes.png")
figures.tokens("results/tables/runs.csv", "results/figures/tokens.png")
figures.defences("results/tables/runs.csv", "results/figures/defences.png")
viewer.build(pairs, Path("results/viewer"))
"""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=workdir, check=True)
    return time.perf_counter() - t0


def main(cores: int = 4, repeat: int = 1, options: bool = False) -> None:
    def say(text: str) -> None:
        print(text, flush=True)

    runs = config.load(ROOT / "config.yaml").runs
    n_sim = sum(r.backend_config.mode in ("simulated", "scripted") for r in runs)
    med = statistics.median
    with tempfile.TemporaryDirectory(prefix="reactlab-bench-") as tmp:
        plan = Path(tmp) / "plan"
        plan.mkdir()
        copy_workflow(plan, simulated_only=True)
        say(f"cores {cores}, repeat {repeat}; simulated matrix: {n_sim} runs, "
            f"{sum(planned_jobs(plan).values())} jobs")
        sm, ip, spawn = [], [], []
        for i in range(repeat):
            a, b, c = (Path(tmp) / f"{name}{i}" for name in ("threads", "process", "spawn"))
            for d in (a, b, c):
                d.mkdir()
                copy_workflow(d, simulated_only=True)
            sm.append(snakemake(a, cores))
            ip.append(in_process(b))
            if options:
                spawn.append(snakemake(c, cores, "--workflow-profile", "none"))
        say(f"simulated, snakemake --cores {cores} (threads):  {med(sm):7.2f} s")
        say(f"simulated, one python process:             {med(ip):7.2f} s")
        say(f"ratio snakemake / one process:             {med(sm) / med(ip):7.2f}x")
        if spawn:
            say(f"simulated, --workflow-profile none:        {med(spawn):7.2f} s "
                f"({med(spawn) / med(ip):.2f}x; `run:` jobs each re-launch Snakemake)")
        full = Path(tmp) / "full"
        full.mkdir()
        copy_workflow(full)
        say(f"full default matrix: {len(runs)} runs, {sum(planned_jobs(full).values())} jobs")
        say(f"full default matrix, snakemake --cores {cores}: {snakemake(full, cores):7.2f} s")
        say(f"no-op rerun (full matrix):                 {snakemake(full, cores):7.2f} s")
        for rel in EDITS.values():
            jobs = after_edit(full, rel, lambda: planned_jobs(full))
            assert isinstance(jobs, dict)
            detail = ", ".join(f"{rule} {n}" for rule, n in jobs.items()) or "none"
            say(f"jobs rerun after editing {rel}: {sum(jobs.values())} ({detail})")
        t_viewer = after_edit(full, EDITS["viewer"], lambda: snakemake(full, cores))
        say(f"rerun after the viewer edit:               {t_viewer:7.2f} s")

    mcp_bench.main(say=say)
