"""The ``suites:`` section of config.yaml expanded into runs and shards.

Each suite names a benchmark, the categories to take, a seeded sample size per category
(``null``: every case), the backends and, for scripted backends, the policies. The
benchmark's registry entry (:mod:`reactlab.suites.registry`) turns the entry into its
:class:`~reactlab.config.RunSpec` runs: a case becomes one spec per (backend,
scenario) — a scripted backend runs each policy (scenario = policy name), a model backend
runs the model (scenario ``react``). Cases of one (suite, backend, scenario) are cut here
into shards of ``shard_size`` cases: one shard is one job (the model is loaded once per
job), and every case still has its own trace and verification file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactlab.config import RunSpec
from reactlab.config.settings import SuiteSettings, suite_settings
from reactlab.core.errors import UsageError
from reactlab.suites.registry import benchmark, case_fields
from reactlab.suites.types import Shard, digest_shards

__all__ = ["plan", "suite_specs"]


def suite_specs(name: str, suite: SuiteSettings, raw: Mapping[str, Any]) -> list[RunSpec]:
    """The specs of one suite entry, by its benchmark's registry entry, each case's own
    fields checked against its model (:func:`reactlab.suites.registry.case_fields`); a
    UsageError names the entry (the benchmark's package missing, a policy for another
    backend), a ConfigError a case field the benchmark does not declare."""
    try:
        specs: list[RunSpec] = benchmark(suite.benchmark).specs(name, suite, raw)
        for spec in specs:
            case_fields(spec)
    except UsageError as exc:
        raise UsageError(f"suites.{name}: {exc}") from None
    return specs


def plan(raw: Mapping[str, Any]) -> list[Shard]:
    """Every shard of every suite of the config (none without a ``suites:`` section). A
    live backend's cases are planned only with ``live: {enabled: true}``, as the matrix's
    live runs are: nothing asks for a key otherwise."""
    shards: list[Shard] = []
    live = bool((raw.get("live") or {}).get("enabled", False))
    for name, entry in (raw.get("suites") or {}).items():
        suite = suite_settings(entry, f"suites.{name}")
        if not live:
            offline = [b for b in suite.backends
                       if (raw["backends"].get(b) or {}).get("mode") != "live"]
            if not offline:
                continue
            suite = suite.replace(backends=offline)
        groups: dict[tuple[str, str], list[RunSpec]] = {}
        for spec in suite_specs(name, suite, raw):
            groups.setdefault((spec.backend, spec.scenario), []).append(spec)
        size = suite.shard_size
        for (backend, scenario), specs in groups.items():
            for i in range(0, len(specs), size):
                shards.append(Shard(name, backend, scenario, i // size,
                                    tuple(specs[i:i + size])))
    digest_shards(shards)  # the shared parts, hashed once for all shards
    return shards
