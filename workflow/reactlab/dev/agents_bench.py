"""Benchmark of the agent frameworks beside the lesson's loop (docs/agents.md, "Goals").

``python -m reactlab.dev.agents_bench`` measures, side by side in one invocation:

1. **In process.** For each built-in framework, in a fresh interpreter of its own: the
   lesson scenarios of the default matrix's framework block (``correcto``,
   ``argumentos_inventados``, ``bucle``, ``fallo_429_recupera`` on ``variacion_busi``) on
   every simulated API the framework speaks, as shipped and capped, one after the other
   through ``run_to_trace``. The lesson's loop runs the same task × API × scenario runs in its own
   fresh interpreter. Each interpreter runs its runs twice over: the first pass pays the
   imports and set-up, the second is the runs' own time. Printed per framework: the
   import and set-up (first pass less second), the second pass's total, the lesson
   loop's second-pass total for the same task × API × scenario runs, and their ratio
   (overall and per scenario).
2. **Through the pipeline** (``--pipeline``): the simulated matrix (dev/bench.py's
   ``write_simulated_config``) under ``snakemake --cores N`` in two fresh copies, with
   the framework agents of the default matrix and with its ``lesson`` agent alone; the
   difference is what the framework slice adds to a run.

Timings are wall-clock on a shared machine; the load average is printed with them.
Nothing here reaches a trace or a table (the runs write into temporary folders).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reactlab.config import load_yaml
from reactlab.dev.bench import slice_adds
from reactlab.frameworks.registry import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ("correcto", "argumentos_inventados", "bucle", "fallo_429_recupera")

#: The code one interpreter runs: the given runs in order, each timed; prints JSON.
_CHILD = r"""
import json, sys, time, tempfile
from pathlib import Path
t0 = time.perf_counter()
from reactlab import config, data
from reactlab.runner import run_to_trace
from reactlab.tools import ToolBox
raw = json.loads(sys.argv[1]); keys = json.loads(sys.argv[2])
cfg = config.parse(raw)
tmp = Path(tempfile.mkdtemp(prefix="reactlab-agents-bench-"))
tools = ToolBox.from_files(*data.write(tmp / "data", cfg.data["seed"]))
ready = time.perf_counter() - t0
specs = {r.key: r for r in cfg.runs}
passes = []
for n in range(int(sys.argv[3])):
    times, steps = [], []
    for key in keys:
        t = time.perf_counter()
        end = run_to_trace(specs[key], tools, tmp / f"{n}_{key.replace('/', '_')}.jsonl")
        times.append(time.perf_counter() - t)
        steps.append(end["steps"])
    passes.append(times)
print(json.dumps({"ready_s": ready, "times": passes[-1], "passes": passes,
                  "steps": steps}))
import shutil
shutil.rmtree(tmp, ignore_errors=True)
"""


def bench_config() -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The config with one block per framework (every API it speaks, both conditions)
    and the lesson's loop on every API, and the run keys of each framework and of the
    lesson."""
    raw = load_yaml(ROOT / "config.yaml")
    raw.pop("suites", None)
    agents = raw["agents"]
    # the default matrix runs every framework on openai_chat and the lesson's loop on
    # every API; a block per framework adds its other APIs
    default = {(b, s, a) for block in raw["matrix"] for b in block["backends"]
               for s in block["scenarios"] for a in block.get("agents", ["lesson"])
               if "variacion_busi" in block["tasks"]}
    keys: dict[str, list[str]] = {}
    providers: set[str] = set()
    for framework, entry in FRAMEWORKS.items():
        names = [n for n, a in agents.items() if a["framework"] == framework]
        backends = list(entry.providers)
        providers |= set(backends)
        extra = [b for b in backends
                 if not all((b, s, n) in default for s in SCENARIOS for n in names)]
        if extra:
            raw["matrix"].append({"tasks": ["variacion_busi"], "backends": extra,
                                  "scenarios": list(SCENARIOS), "agents": names})
        keys[framework] = [f"variacion_busi/{b}/{s}__{n}" for b in backends
                           for s in SCENARIOS for n in names]
    keys["lesson"] = [f"variacion_busi/{b}/{s}" for b in sorted(providers) for s in SCENARIOS]
    return raw, keys


def run_child(raw: dict[str, Any], keys: list[str], passes: int = 1) -> dict[str, Any]:
    """Run ``keys`` in a fresh interpreter, ``passes`` times over in order; the times of
    each pass (``passes``) and of the last (``times``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(raw), json.dumps(keys),
                           str(passes)],
                          capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    return out


CONDITIONS = ("shipped", "capped")


def capped(condition: str) -> Callable[[str], bool]:
    """Whether a framework run's key is of ``condition`` (its agent named ``*_capped``)."""
    return lambda key: key.endswith("_capped") == (condition == "capped")


def scenario(name: str) -> Callable[[str], bool]:
    """Whether a framework run's key is of scenario ``name``."""
    return lambda key: f"/{name}__" in key


def in_process() -> dict[str, Any]:
    """Part 1 (see the module docstring): each interpreter runs its runs twice over; the
    first pass pays the imports and set-up (the framework's, its SDKs', the tokenizer's,
    the lesson loop's too), the second is the runs' own time."""
    raw, keys = bench_config()
    lesson = run_child(raw, keys["lesson"], passes=2)
    cold, warm = lesson["passes"]
    by_key = dict(zip(keys["lesson"], warm, strict=True))
    steps_of = dict(zip(keys["lesson"], lesson["steps"], strict=True))
    report: dict[str, Any] = {"lesson": {
        "runs": len(keys["lesson"]), "import_and_setup_s": round(sum(cold) - sum(warm), 2),
        "runs_total_s": round(sum(warm), 3),
        "per_scenario_s": {s: round(sum(t for k, t in by_key.items() if k.endswith(f"/{s}")),
                                    3) for s in SCENARIOS},
        "process_s": round(lesson["process_s"], 2)}}
    for framework, fkeys in keys.items():
        if framework == "lesson":
            continue
        got = run_child(raw, fkeys, passes=2)

        def sums(mine: list[Any], lesson_of: dict[str, Any], keep: Callable[[str], bool],
                 fkeys: list[str] = fkeys) -> tuple[Any, Any]:
            """Over the framework's runs ``keep`` selects: the sum of ``mine`` (by run, in
            ``fkeys``' order) and of the lesson loop's same runs (``lesson_of``, by key)."""
            return (sum(v for k, v in zip(fkeys, mine, strict=True) if keep(k)),
                    sum(lesson_of[k.split("__")[0]] for k in fkeys if keep(k)))

        cold, warm = got["passes"]
        same = sum(by_key[k.split("__")[0]] for k in fkeys)  # once per agent
        same_steps = sum(steps_of[k.split("__")[0]] for k in fkeys)
        mine = sum(warm)
        # the model requests of the runs (a framework's: every request on the wire), so
        # that the time per request can be compared where the loops make different numbers
        # of requests (`bucle`: the frameworks as shipped run to their cap or the hard stop)
        my_steps = sum(got["steps"])
        report[framework] = {
            "runs": len(fkeys), "import_and_setup_s": round(sum(cold) - mine, 2),
            "runs_total_s": round(mine, 2), "lesson_same_runs_s": round(same, 3),
            "ratio": round(mine / same, 1) if same else None,
            "model_requests": my_steps, "lesson_model_requests": same_steps,
            "per_request_ratio": round((mine / my_steps) / (same / same_steps), 2)
            if same and my_steps and same_steps else None,
            # as shipped (the framework's own caps) and capped (the lesson's step limit in
            # the framework's own setting): the capped runs stop where the lesson loop does
            "per_condition_ratio": {c: round(sums(warm, by_key, capped(c))[0]
                                             / sums(warm, by_key, capped(c))[1], 1)
                                    for c in CONDITIONS},
            "per_condition_requests": {c: list(sums(got["steps"], steps_of, capped(c)))
                                       for c in CONDITIONS},
            "per_scenario_ratio": {s: round(sums(warm, by_key, scenario(s))[0]
                                            / sums(warm, by_key, scenario(s))[1], 1)
                                   for s in SCENARIOS},
            "slowest_warm": {k: round(t, 2) for k, t in sorted(
                zip(fkeys, warm, strict=True), key=lambda kt: -kt[1])[:3]},
            "process_s": round(got["process_s"], 2)}
    return report


FAULTS = ("fallo_429_recupera", "fallo_servidor_persistente", "fallo_respuesta_rota")


def faults() -> dict[str, Any]:
    """Part 3 (``--faults``): each framework as shipped, and the lesson's loop, on each
    ``fallo_*`` scenario on every API it speaks, after a warm-up run (``correcto``) on each
    API in the same interpreter: the wall time of each run (its retries' waits, mostly) and its
    requests on the wire."""
    raw = load_yaml(ROOT / "config.yaml")
    raw.pop("suites", None)
    out: dict[str, Any] = {}
    for framework in ("lesson", *FRAMEWORKS):
        providers = (("openai", "openai_chat", "anthropic") if framework == "lesson"
                     else FRAMEWORKS[framework].providers)
        suffix = "" if framework == "lesson" else f"__{framework}"
        if framework != "lesson":
            raw["matrix"].append({"tasks": ["variacion_busi"], "backends": list(providers),
                                  "scenarios": ["correcto", *FAULTS],
                                  "agents": [framework]})
            raw["matrix"] = _dedupe(raw["matrix"])
        keys = [f"variacion_busi/{p}/{s}{suffix}" for p in providers for s in FAULTS]
        warm = [f"variacion_busi/{p}/correcto{suffix}" for p in providers]
        got = run_child(raw, [*warm, *keys])
        out[framework] = {k.split("/", 1)[1]: round(t, 2)
                          for k, t in zip(keys, got["times"][len(warm):], strict=True)}
    return out


def _dedupe(matrix: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``matrix`` without the runs an earlier block already has (the config refuses a
    run twice)."""
    seen: set[tuple[str, str, str, str]] = set()
    out = []
    for block in matrix:
        runs = {(t, b, s, a) for t in block["tasks"] for b in block["backends"]
                for s in block["scenarios"] for a in block.get("agents", ["lesson"])}
        if runs <= seen:
            continue
        if runs & seen:  # split off the new runs, one block per backend
            for b in block["backends"]:
                for s in block["scenarios"]:
                    agents = [a for a in block.get("agents", ["lesson"])
                              if not any((t, b, s, a) in seen for t in block["tasks"])]
                    if agents:
                        out.append({**block, "backends": [b], "scenarios": [s],
                                    "agents": agents})
        else:
            out.append(block)
        seen |= runs
    return out


def pipeline(cores: int) -> dict[str, float]:
    """Part 2 (see the module docstring)."""
    def lesson_only(raw: dict[str, Any]) -> None:
        for block in raw["matrix"]:
            if "agents" in block:
                block["agents"] = ["lesson"]

    return slice_adds(cores, "frameworks", lesson_only)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pipeline", action="store_true",
                    help="also time the simulated matrix with and without the frameworks")
    ap.add_argument("--faults", action="store_true",
                    help="also time each framework's fallo_* runs (their waits)")
    ap.add_argument("--no-in-process", action="store_true",
                    help="skip part 1")
    ap.add_argument("--cores", type=int, default=2)
    a = ap.parse_args()
    report: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    if not a.no_in_process:
        report["in_process"] = in_process()
    if a.faults:
        report["faults"] = faults()
    if a.pipeline:
        report["pipeline"] = pipeline(a.cores)
    report["load_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
