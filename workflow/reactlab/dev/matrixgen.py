"""Generate large, valid configurations: the same schema as config.yaml, n runs.

Used to measure how planning scales (tests/test_dag_scaling.py) and to try the pipeline
on a big matrix::

    python -m reactlab.dev.matrixgen 1000 --base config.yaml --out big.yaml
    snakemake -n --cores 4 --configfile big.yaml

:func:`generate` keeps the base configuration's agent, data, scenarios and figure
settings and replaces its tasks and matrix:

* tasks: ``variacion_000``, ``variacion_001`` ... each asking for the percentage change
  of BUSI's close over its own window of weekdays in 2023-2024 (distinct ``desde`` /
  ``hasta`` for every task), with the basic tools;
* backends: only the scripted and simulated ones (openai, anthropic, local); model and
  live backends are dropped, so no model folder, download or API key is needed;
* scenarios: every scripted scenario whose templates only use ``ticker``, ``desde`` and
  ``hasta``; scenarios that inject HTTP faults run on the API backends only.

The result has exactly ``n_runs`` runs (whole tasks first, then part of one more), every
run a distinct (task, backend, scenario), and a ``figure`` section that points at runs
of the first task. It stays cheap to import (no pandas): it only builds dictionaries.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from reactlab.backends.registry import PROVIDERS
from reactlab.config import load_yaml, parse
from reactlab.config.scripts import ROOT_NAMES, Script
from reactlab.core.errors import UsageError

TICKER = "BUSI"
TOOLS = ["precio", "buscar_noticias", "calculadora"]
PARAMS = frozenset({"ticker", "desde", "hasta"})
# Weekdays of the synthetic price series (data.FIRST_DAY .. data.LAST_DAY).
FIRST_DAY = dt.date(2023, 1, 2)
LAST_DAY = dt.date(2024, 12, 31)
WINDOW = 5  # weekdays between desde and hasta, grown by WINDOW for each pass over the days

SCRIPTED_MODES = frozenset({"simulated", "scripted"})


def _weekdays(first: dt.date, last: dt.date) -> list[dt.date]:
    days, day = [], first
    while day <= last:
        if day.weekday() < 5:
            days.append(day)
        day += dt.timedelta(days=1)
    return days


def _windows(n: int) -> list[tuple[str, str]]:
    """n distinct (desde, hasta) pairs of weekdays, both inside the price series."""
    days = _weekdays(FIRST_DAY, LAST_DAY)
    out: list[tuple[str, str]] = []
    span = WINDOW
    while len(out) < n:
        if span >= len(days):
            raise UsageError(f"cannot make {n} distinct date windows")
        for i in range(len(days) - span):
            out.append((days[i].isoformat(), days[i + span].isoformat()))
            if len(out) == n:
                break
        span += WINDOW
    return out


def _script_entry(scenarios: Mapping[str, Any], sid: str) -> Mapping[str, Any] | None:
    """The scenario's own steps, or those of the scenario it extends; None for a
    `strategy` scenario (real models only) or a broken `extends`."""
    entry: Mapping[str, Any] = scenarios[sid]
    if "strategy" in entry:
        return None
    if "extends" in entry:
        base: Mapping[str, Any] | None = scenarios.get(entry["extends"])
        if base is None or "steps" not in base:
            return None
        return base
    return entry


def _compatible(scenarios: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(scenarios for every scripted backend, fault scenarios for API backends only)."""
    plain: list[str] = []
    faulty: list[str] = []
    for sid, entry in scenarios.items():
        script = _script_entry(scenarios, sid)
        if script is None:
            continue
        names = Script.from_config(sid, script).names()
        if not names <= PARAMS | ROOT_NAMES:
            continue  # needs params (fecha, otro ...) that the generated tasks lack
        faults = entry.get("faults", script.get("faults"))
        (faulty if faults else plain).append(sid)
    return plain, faulty


def _task(ticker: str, start: str, end: str) -> dict[str, Any]:
    return {
        "question": (f"¿Cuánto cambió en porcentaje el cierre de {ticker} entre el {start} "
                     f"y el {end}?"),
        "tools": list(TOOLS),
        "params": {"ticker": ticker, "desde": start, "hasta": end},
    }


def generate(n_runs: int, base: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration like ``base`` (a raw config mapping) with exactly ``n_runs`` runs.

    Raises ValueError when ``n_runs`` is below 2 (the figure needs two runs) or when the
    base has no scripted backend or lacks the figure's scenarios.
    """
    if n_runs < 2:
        raise UsageError("n_runs must be at least 2 (the figure's loop and reference)")
    cfg = copy.deepcopy(dict(base))
    # a matrix of the lesson's runs only: the outside suites (docs/suites.md) add their own
    # fixed shard jobs, which would blur what the scaling measures
    cfg.pop("suites", None)
    backends = {name: b for name, b in cfg["backends"].items()
                if b.get("mode") in SCRIPTED_MODES}
    api = [name for name, b in backends.items() if PROVIDERS[b["provider"]].http]
    if not backends:
        raise UsageError("the base configuration has no scripted or simulated backend")
    cfg["backends"] = backends
    # The analysis sections may name dropped backends: keep only what still exists.
    if cfg.get("pricing"):
        cfg["pricing"] = {**cfg["pricing"], "backends": {
            b: m for b, m in cfg["pricing"]["backends"].items() if b in backends}}
    if cfg.get("comparisons"):
        cfg["comparisons"] = [c for c in cfg["comparisons"] if c["vary"] != "backend"
                              or (c["a"] in backends and c["b"] in backends)]

    plain, faulty = _compatible(cfg["scenarios"])
    if not api:
        faulty = []  # fault scenarios need an HTTP layer
    fig = dict(cfg["figure"])
    fig_backend = fig["backend"] if fig["backend"] in api else (api or list(backends))[0]
    for key in ("loop", "reference"):
        if fig[key] not in plain:
            raise UsageError(f"figure.{key} {fig[key]!r} is not a scenario the generated "
                             f"tasks can run")

    # One task's runs, the figure's two first (so that a partial first task has them).
    pairs = [(fig["loop"], fig_backend), (fig["reference"], fig_backend)]
    pairs += [(s, b) for s in plain for b in backends if (s, b) not in pairs]
    pairs += [(s, b) for s in faulty for b in api]
    per_task = len(pairs)
    full, rest = divmod(n_runs, per_task)

    windows = _windows(full + (1 if rest else 0))
    names = [f"variacion_{i:03d}" for i in range(len(windows))]
    cfg["tasks"] = {name: _task(TICKER, *w) for name, w in zip(names, windows, strict=True)}

    matrix: list[dict[str, list[str]]] = []
    if full:
        matrix.append({"tasks": names[:full], "backends": list(backends), "scenarios": plain})
        if faulty:
            matrix.append({"tasks": names[:full], "backends": api, "scenarios": faulty})
    if rest:
        # part of one more task: one block per scenario, with the backends taken
        by_scenario: dict[str, list[str]] = {}
        for s, b in pairs[:rest]:
            by_scenario.setdefault(s, []).append(b)
        matrix += [{"tasks": [names[full]], "backends": bs, "scenarios": [s]}
                   for s, bs in by_scenario.items()]
    cfg["matrix"] = matrix
    cfg["figure"] = {**fig, "task": names[0], "backend": fig_backend}
    return cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactlab.dev.matrixgen",
                                     description="Write a config with N scripted runs.")
    parser.add_argument("n_runs", type=int)
    parser.add_argument("--base", type=Path, default=Path("config.yaml"))
    parser.add_argument("--out", type=Path, help="output file (default: stdout)")
    args = parser.parse_args(argv)

    cfg = generate(args.n_runs, load_yaml(args.base))
    runs = len(parse(cfg).runs)  # validate before writing
    text = yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False, width=100)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}: {runs} runs", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
