"""Benchmark: the simulated matrix under Snakemake vs one Python process, and a no-op rerun.

Both sides run in fresh temporary copies of the workflow and do the same work (generate
the data, run every run, verify, aggregate, draw), in the same invocation, alternating
when ``repeat`` > 1, so the ratio is measured side by side on the same (noisy) machine.
The ratio is the per-job overhead of one fresh interpreter per job.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def copy_workflow(dest: Path) -> None:
    shutil.copy(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copy(ROOT / "config.yaml", dest / "config.yaml")
    shutil.copytree(ROOT / "workflow", dest / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))


def snakemake(workdir: Path, cores: int, *extra: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "--quiet",
                           "all", *extra], cwd=workdir, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed in {workdir}:\n{proc.stderr[-3000:]}")
    return elapsed


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
from reactlab.runner import run_to_trace
from reactlab.tools import ToolBox
cfg = config.load("config.yaml")
tools = ToolBox.from_files(*data.write(Path("data/generated"), cfg.data["seed"]))
if any(s.backend_config["mode"] == "model" for s in cfg.runs):
    ensure_converted(Path("data/models"))
pairs = []
for spec in cfg.runs:
    t = f"results/traces/{spec.key}.jsonl"; v = f"results/verified/{spec.key}.json"
    run_to_trace(spec, tools, t)
    trace.write_json_atomic(v, verify.verification_record(trace.read(t), t))
    pairs.append((t, v))
tables.build(pairs, cfg.figure, "results/tables")
figures.cumulative_tokens("results/tables/cumulative_tokens.csv",
                          "results/figures/cumulative_tokens.png", cfg.figure)
figures.outcomes("results/tables/runs.csv", "results/figures/outcomes.png")
figures.tokens("results/tables/runs.csv", "results/figures/tokens.png")
figures.defences("results/tables/summary_by_defences.csv", "results/figures/defences.png")
viewer.build(pairs, Path("results/viewer"))
"""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=workdir, check=True)
    return time.perf_counter() - t0


def main(cores: int = 4, repeat: int = 1) -> None:
    from reactlab import config

    n_runs = len(config.load(ROOT / "config.yaml").runs)
    sm, ip, noop = [], [], []
    with tempfile.TemporaryDirectory(prefix="reactlab-bench-") as tmp:
        for i in range(repeat):
            a, b = Path(tmp) / f"snakemake{i}", Path(tmp) / f"process{i}"
            for d in (a, b):
                d.mkdir()
                copy_workflow(d)
            sm.append(snakemake(a, cores))
            ip.append(in_process(b))
            noop.append(snakemake(a, cores))
    med = statistics.median
    print(f"matrix: {n_runs} runs ({n_runs * 2 + 8} jobs under Snakemake), "
          f"--cores {cores}, repeat {repeat}")
    print(f"snakemake --cores {cores}:        {med(sm):7.2f} s")
    print(f"one python process:          {med(ip):7.2f} s")
    print(f"ratio snakemake / process:   {med(sm) / med(ip):7.2f}x")
    print(f"per-job overhead (approx):   {(med(sm) - med(ip)) / (n_runs * 2 + 8):7.3f} s/job "
          f"(wall, {cores} cores)")
    print(f"no-op rerun:                 {med(noop):7.2f} s")
