"""Repeated trials: which runs a matrix block repeats, their keys and their seeds.

A matrix block with ``trials: k`` (k > 1) turns each of its runs into k runs, keyed
``{task}/{backend}/{scenario}/t{i}`` for i = 1..k, each its own job and trace
(``results/traces/{task}/{backend}/{scenario}/t{i}.jsonl``). With k = 1 (the default) the
key and the trace path stay ``{task}/{backend}/{scenario}``, so configurations without
trials produce exactly the files they always did.

Every trial of a run, and every run of a sampling backend, carries a seed derived from
the configuration alone: the first 8 bytes of sha256("{base key}|t{i}|data{data seed}")
as an unsigned integer below 2**63. Same config, same seeds, on any machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from reactlab.core.errors import ConfigError

SEED_BITS = 63
#: ``statistics.min_trials`` when the config leaves it out (docs/statistics.md).
MIN_TRIALS = 3


def derive_seed(base_key: str, trial: int, data_seed: int) -> int:
    """The seed of trial ``trial`` of run ``base_key`` (a pure function of its inputs)."""
    digest = hashlib.sha256(f"{base_key}|t{trial}|data{data_seed}".encode()).digest()
    seed: int = int.from_bytes(digest[:8], "big") % 2**SEED_BITS
    return seed


def trial_key(base_key: str, trial: int | None) -> str:
    return base_key if trial is None else f"{base_key}/t{trial}"


def trial_indices(trials: int) -> list[int | None]:
    """[None] for a single run (today's key and path), else [1, ..., trials]."""
    return [None] if trials == 1 else list(range(1, trials + 1))


def check_analysis(raw: Mapping[str, Any]) -> None:
    """Cross-references of the analysis sections: ``pricing`` and ``comparisons``."""
    pricing = raw.get("pricing")
    if pricing is not None:
        for backend, model in pricing["backends"].items():
            if backend not in raw["backends"]:
                raise ConfigError(f"pricing.backends.{backend}", f"no backend named {backend!r}")
            if model not in pricing["models"]:
                raise ConfigError(f"pricing.backends.{backend}",
                                  f"no model named {model!r} in pricing.models")
    for i, comp in enumerate(raw.get("comparisons", [])):
        table = "backends" if comp["vary"] == "backend" else "scenarios"
        for side in ("a", "b"):
            if comp[side] not in raw[table]:
                raise ConfigError(f"comparisons[{i}].{side}",
                                  f"no {comp['vary']} named {comp[side]!r}")
        if comp["a"] == comp["b"]:
            raise ConfigError(f"comparisons[{i}]", "`a` and `b` are the same")
    names = [c["name"] for c in raw.get("comparisons", [])]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError("comparisons", f"duplicate comparison name {dup[0]!r}")


def analysis_section(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What the tables need beyond the traces: expected calls, answerability, pricing,
    comparisons and the fewest stochastic trials that get an interval (``min_trials``)
    (JSON-ready; a rule parameter, so editing it re-runs only the tables)."""
    return {
        "tasks": {t: {"expected_calls": task.get("expected_calls"),
                      "answerable": task.get("answerable", True)}
                  for t, task in sorted(raw["tasks"].items())},
        "pricing": raw.get("pricing"),
        "comparisons": list(raw.get("comparisons", [])),
        "min_trials": int((raw.get("statistics") or {}).get("min_trials", MIN_TRIALS)),
    }
