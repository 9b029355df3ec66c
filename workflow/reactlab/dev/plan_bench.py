"""Benchmark of planning: what the outside task suites add to a dry run and a no-op rerun.

``python -m reactlab.dev.plan_bench`` (``make bench-plan``) measures, side by side in one
invocation, each configuration in its own temporary copy of the workflow:

* ``no suites`` — the simulated matrix (the default matrix without its real-model runs,
  as ``make bench`` uses it) and no ``suites:`` section;
* ``default slice`` — the same with config.yaml's ``suites:`` section (the small BFCL
  slice the default ``make run`` includes);
* ``10k suite`` — the same with a BFCL suite of every case of the five categories
  (1,240) played by the four scripted policies on ``copies`` scripted backends
  (``local`` and copies of it): 9,920 runs with the default two;
* ``bfcl overlay`` (plan only) — config.yaml with ``workflow/configs/bfcl.yaml`` as
  Snakemake runs it (1,240 cases × 4 policies and 4 model backends = 9,920 runs; its
  model shards are not run here).

For each: ``snakemake -n`` planning from scratch (no results, no ``.snakemake`` folder:
the caches are removed before each try), then a real build (``snakemake --cores N``,
timed once), then the no-op rerun (``snakemake --cores N`` that must answer "Nothing to
be done"). Best of ``repeat`` tries for the dry run and the no-op; wall time and the CPU
time of the Snakemake process (user + system) are reported.

``--make-run`` also times a full clean run of the default ``make run`` (config.yaml as
is, model runs included) with and without its ``suites:`` section, side by side.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reactlab.config import load_yaml, parse
from reactlab.core.errors import CommandFailed, UsageError
from reactlab.dev.bench import ROOT, write_simulated_config
from reactlab.suites.plan import plan

CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"]
POLICIES = ["oracle", "wrong_type", "wrong_name", "missing_argument"]
NOTHING = "Nothing to be done"


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float
    output: str


def timed(cmd: Sequence[str], cwd: Path) -> Timing:
    """Run ``cmd`` in ``cwd`` with the copy's own package first on the import path; its
    wall time and the CPU time it used (user + system)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(cwd / "workflow"), os.environ.get("PYTHONPATH")) if p)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=False,
                          env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise CommandFailed(f"{' '.join(cmd)} failed in {cwd}:\n{out[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu, out)


def copy_workflow(source: Path, dest: Path) -> None:
    """A runnable copy of the workflow checked out at ``source`` in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "Snakefile", dest / "Snakefile")
    shutil.copy(source / "config.yaml", dest / "config.yaml")
    shutil.copytree(source / "workflow", dest / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(source / "profiles", dest / "profiles")


def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args]


def job_count(output: str) -> int:
    """The total of the last "Job stats" table of a dry run (0: nothing to be done)."""
    totals = re.findall(r"^total\s+(\d+)$", output, flags=re.M)
    return int(totals[-1]) if totals else 0


def suite_overlay(copies: int = 2) -> dict[str, Any]:
    """A suite of every case of the five BFCL categories, the four scripted policies, on
    ``copies`` scripted backends: 1,240 × 4 × ``copies`` runs."""
    if copies < 1:
        raise UsageError("copies must be at least 1")
    extra = {f"local_{i}": {"provider": "local", "mode": "scripted"}
             for i in range(2, copies + 1)}
    return {"backends": extra,
            "suites": {"bfcl": {"benchmark": "bfcl", "categories": CATEGORIES,
                                "sample": None, "seed": 21, "shard_size": 40,
                                "backends": ["local", *extra], "policies": POLICIES,
                                "system_prompt": "You are a helpful assistant with "
                                                 "access to functions."}}}


def write_config(work: Path, kind: str, copies: int) -> None:
    """config.yaml of ``work`` for one configuration (``none``, ``slice``, ``10k``)."""
    path = work / "config.yaml"
    default_suites = yaml.safe_load(path.read_text(encoding="utf-8")).get("suites")
    write_simulated_config(path)  # no model runs, no suites
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if kind == "slice":
        raw["suites"] = copy.deepcopy(default_suites)
    elif kind == "10k":
        overlay = suite_overlay(copies)
        raw["backends"].update(overlay["backends"])
        raw["suites"] = overlay["suites"]
    elif kind != "none":
        raise UsageError(f"unknown config kind {kind!r} (none, slice, 10k)")
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True),
                    encoding="utf-8")


def runs_of(work: Path, *overlays: str) -> int:
    """Runs of the lesson matrix plus suite cases of ``work``'s config (and overlays)."""
    raw = load_yaml(work / "config.yaml")
    for extra in overlays:
        raw = _merge(raw, load_yaml(work / extra))
    return len(parse(raw).runs) + sum(len(s.specs) for s in plan(raw))


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = (_merge(out[key], value) if isinstance(value, dict)
                    and isinstance(out.get(key), dict) else value)
    return out


def best(tries: int, once: Callable[[], Timing]) -> Timing:
    results = [once() for _ in range(tries)]
    return min(results, key=lambda t: t.wall_s)


def plan_from_scratch(work: Path, tries: int, *extra: str) -> tuple[Timing, int]:
    def once() -> Timing:
        shutil.rmtree(work / ".snakemake", ignore_errors=True)
        return timed(snakemake_cmd("-n", "--cores", "4", *extra), work)

    t = best(tries, once)
    return t, job_count(t.output)


def noop(work: Path, tries: int, cores: int) -> Timing:
    def once() -> Timing:
        t = timed(snakemake_cmd("--cores", str(cores)), work)
        if NOTHING not in t.output:
            raise CommandFailed(f"the rerun in {work} was not a no-op:\n{t.output[-3000:]}")
        return t

    return best(tries, once)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reactlab.dev.plan_bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="tries per measure (best of)")
    ap.add_argument("--cores", type=int, default=2, help="--cores of the real runs")
    ap.add_argument("--copies", type=int, default=2,
                    help="scripted backends of the large suite (1,240 x 4 runs each)")
    ap.add_argument("--only", choices=["none", "slice", "10k", "overlay"], action="append",
                    help="measure only these configurations (repeatable)")
    ap.add_argument("--make-run", action="store_true",
                    help="also time a full clean `make run` with and without its suites")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--workflow", type=Path, default=ROOT,
                    help="the checkout whose workflow and package are measured "
                         "(default: this one)")
    a = ap.parse_args(argv)

    def say(text: str) -> None:
        print(text, flush=True)

    kinds = a.only or ["none", "slice", "10k", "overlay"]
    labels = {"none": "no suites", "slice": "default slice", "10k": "10k suite",
              "overlay": "bfcl overlay"}
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="reactlab-plan-bench-") as tmp:
        root = a.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for kind in kinds:
            work = root / kind
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            copy_workflow(a.workflow, work)
            extra: tuple[str, ...] = ()
            if kind == "overlay":
                extra = ("--configfile", "workflow/configs/bfcl.yaml")
                runs = runs_of(work, "workflow/configs/bfcl.yaml")
            else:
                write_config(work, kind, a.copies)
                runs = runs_of(work)
            dry, jobs = plan_from_scratch(work, a.repeat, *extra)
            say(f"{labels[kind]}: {runs} runs, {jobs} jobs; snakemake -n from scratch "
                f"{dry.wall_s:.2f} s wall, {dry.cpu_s:.2f} s CPU")
            cells = [labels[kind], f"{runs:,}", f"{jobs:,}",
                     f"{dry.wall_s:.2f} s ({dry.cpu_s:.2f} s CPU)"]
            if kind == "overlay":
                cells += ["—", "—"]
            else:
                shutil.rmtree(work / ".snakemake", ignore_errors=True)
                built = timed(snakemake_cmd("--cores", str(a.cores)), work)
                say(f"  built in {built.wall_s:.1f} s")
                rerun = noop(work, a.repeat, a.cores)
                say(f"  no-op rerun {rerun.wall_s:.2f} s wall, {rerun.cpu_s:.2f} s CPU")
                cells += [f"{built.wall_s:.1f} s",
                          f"{rerun.wall_s:.2f} s ({rerun.cpu_s:.2f} s CPU)"]
            rows.append("| " + " | ".join(cells) + " |")
        if a.make_run:
            for name, keep_suites in (("make-run-with-suites", True),
                                      ("make-run-without-suites", False)):
                work = root / name
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir()
                copy_workflow(a.workflow, work)
                if not keep_suites:
                    raw = yaml.safe_load((work / "config.yaml").read_text(encoding="utf-8"))
                    raw.pop("suites", None)
                    (work / "config.yaml").write_text(
                        yaml.safe_dump(raw, sort_keys=False, allow_unicode=True),
                        encoding="utf-8")
                t = timed(snakemake_cmd("--cores", str(a.cores)), work)
                label = "with" if keep_suites else "without"
                say(f"make run ({label} its suites), clean: {t.wall_s:.1f} s wall, "
                    f"{t.cpu_s:.1f} s CPU")
    say("")
    say(f"| config | runs | jobs | `snakemake -n` from scratch, best of {a.repeat} | "
        f"build (`--cores {a.cores}`) | no-op rerun, best of {a.repeat} |")
    say("|---|---|---|---|---|---|")
    for row in rows:
        say(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
