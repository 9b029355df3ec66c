"""The ``suites:`` section of config.yaml expanded into runs and shards.

Each suite names a benchmark, the categories to take, a seeded sample size per category
(``null``: every case), the backends and, for scripted backends, the policies. A case
becomes one :class:`CaseSpec` per (backend, scenario): a scripted backend runs each
policy (scenario = policy name), a model backend runs the model (scenario ``react``).
Cases of one (suite, backend, scenario) are cut into shards of ``shard_size`` cases: one
shard is one job (the model is loaded once per job), and every case still has its own
trace and verification file.

The sample is a pure function of the seed and the case ids: the cases of a category are
ordered by ``sha256(f"{seed}:{case id}")`` and the first ``sample`` taken, so adding a
category or growing the sample keeps the cases already chosen.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reactlab.agent.defences import NO_DEFENCES
from reactlab.config.settings import (
    AgentSettings,
    BackendSettings,
    Limits,
    agent_settings,
    backend_settings,
)
from reactlab.config.settings import limits as limits_settings
from reactlab.core.errors import UsageError

__all__ = ["CaseSpec", "Shard", "plan", "sample_cases", "shard_paths"]

SCENARIO_MODEL = "react"


def _natural(case_id: str) -> tuple[str, int]:
    m = re.fullmatch(r"(.*?)_?(\d+)", case_id)
    return (m.group(1), int(m.group(2))) if m else (case_id, -1)


@dataclass(frozen=True)
class CaseSpec:
    """One suite case on one backend under one scenario: what its job needs.

    It has the attributes of :class:`reactlab.config.RunSpec` that the runner and the
    local sessions read (task = the case id; tools = the functions' names), plus
    ``suite``: the suite's name, benchmark, category, the tool definitions the model
    reads (``tool_schemas``) and what the benchmark's checker needs, so that a trace
    holds everything its verification reads.
    """

    task: str
    backend: str
    scenario: str
    question: str
    tools: tuple[str, ...]
    backend_config: BackendSettings
    script: Mapping[str, Any]  # the suite's own: the model name and the benchmark policy
    limits: Limits
    agent: AgentSettings
    suite: Mapping[str, Any]
    params: Mapping[str, Any] = field(default_factory=dict)
    trial: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        # the backend, limits and agent settings are the config's typed ones
        # (reactlab.config.settings), validated here once when given as mappings
        for name, build in (("backend_config", backend_settings), ("limits", limits_settings),
                            ("agent", agent_settings)):
            value = getattr(self, name)
            if isinstance(value, Mapping):
                object.__setattr__(self, name, build(value, name))

    @property
    def base_key(self) -> str:
        return f"{self.suite['name']}/{self.backend}/{self.scenario}/{self.task}"

    @property
    def key(self) -> str:
        return self.base_key

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return list(self.suite["tools"])

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "backend": self.backend, "scenario": self.scenario,
                "question": self.question, "tools": list(self.tools),
                "params": dict(self.params), "backend_config": self.backend_config.to_dict(),
                "script": dict(self.script), "limits": self.limits.to_dict(),
                "agent": self.agent.to_dict(), "suite": dict(self.suite)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"))

    @property
    def config_hash(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CaseSpec:
        d = dict(d)
        d["tools"] = tuple(d["tools"])
        return cls(**d)


@dataclass(frozen=True)
class Shard:
    """Cases of one (suite, backend, scenario), run by one job."""

    suite: str
    backend: str
    scenario: str
    index: int
    specs: tuple[CaseSpec, ...]

    @property
    def id(self) -> str:
        return f"{self.suite}__{self.backend}__{self.scenario}__{self.index:04d}"

    @property
    def model(self) -> bool:
        return self.specs[0].backend_config.mode == "model"

    def to_json(self) -> str:
        return json.dumps([s.to_dict() for s in self.specs], sort_keys=True,
                          ensure_ascii=False, separators=(",", ":"))

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def traces(self, root: str = "results/suites") -> list[str]:
        return [shard_paths(s, root)[0] for s in self.specs]

    def verified(self, root: str = "results/suites") -> list[str]:
        return [shard_paths(s, root)[1] for s in self.specs]


def shard_paths(spec: CaseSpec, root: str = "results/suites") -> tuple[str, str]:
    """(trace, verification) paths of one case."""
    rel = f"{spec.backend}/{spec.scenario}/{spec.task}"
    name = spec.suite["name"]
    return f"{root}/{name}/traces/{rel}.jsonl", f"{root}/{name}/verified/{rel}.json"


def sample_cases(cases: tuple[Any, ...], sample: int | None, seed: int) -> list[Any]:
    """The seeded sample of ``cases`` (all when ``sample`` is None), in natural id order."""
    if sample is not None and sample < len(cases):
        ranked = sorted(cases, key=lambda c: hashlib.sha256(f"{seed}:{c.id}".encode())
                        .hexdigest())
        cases = tuple(ranked[:sample])
    return sorted(cases, key=lambda c: _natural(c.id))


def _bfcl_specs(name: str, suite: Mapping[str, Any], raw: Mapping[str, Any]) -> list[CaseSpec]:
    from reactlab.suites import bfcl

    specs = []
    agent = {"send_tools": True, "send_system_prompt": True,
             "system_prompt": suite.get("system_prompt", ""),
             "defences": dict(NO_DEFENCES)}
    for category in suite.get("categories", list(bfcl.CATEGORIES)):
        cases = sample_cases(bfcl.load_cases(category), suite.get("sample"),
                             int(suite.get("seed", 0)))
        for case in cases:
            info = {"name": name, "benchmark": "bfcl", "category": category,
                    "language": "python", "functions": list(case.functions),
                    "possible_answer": None if case.possible_answer is None
                    else list(case.possible_answer),
                    "tools": bfcl.tool_definitions(case.functions),
                    "batch_size": int(suite.get("batch_size", 1))}
            for backend in suite["backends"]:
                cfg = raw["backends"][backend]
                scenarios = ([SCENARIO_MODEL] if cfg["mode"] == "model"
                             else list(suite.get("policies", bfcl.POLICIES)))
                for scenario in scenarios:
                    script = ({"model": SCENARIO_MODEL, "strategy": "single_turn"}
                              if cfg["mode"] == "model"
                              else {"model": scenario, "policy": scenario})
                    specs.append(CaseSpec(
                        task=case.id, backend=backend, scenario=scenario,
                        question=case.question,
                        tools=tuple(f["name"] for f in case.functions),
                        backend_config=backend_settings(cfg), script=script,
                        limits=limits_settings({"max_steps": 1, "token_budget": None}),
                        agent=agent_settings(agent), suite=info))
    return specs


def _benchmark_specs(name: str, suite: Mapping[str, Any],
                     raw: Mapping[str, Any]) -> list[CaseSpec]:
    """The specs of one suite entry, by its benchmark (the package imported lazily)."""
    if suite["benchmark"] == "bfcl":
        return _bfcl_specs(name, suite, raw)
    if suite["benchmark"] == "agentdojo":
        from reactlab.suites import agentdojo

        try:
            specs: list[CaseSpec] = agentdojo.case_specs(name, suite, raw)
        except UsageError as exc:  # the package missing, a policy for another backend
            raise UsageError(f"suites.{name}: {exc}") from None
        return specs
    raise UsageError(f"suites.{name}.benchmark: {suite['benchmark']!r} is not runnable here")


def plan(raw: Mapping[str, Any]) -> list[Shard]:
    """Every shard of every suite of the config (none without a ``suites:`` section)."""
    shards: list[Shard] = []
    for name, suite in (raw.get("suites") or {}).items():
        groups: dict[tuple[str, str], list[CaseSpec]] = {}
        for spec in _benchmark_specs(name, suite, raw):
            groups.setdefault((spec.backend, spec.scenario), []).append(spec)
        size = int(suite.get("shard_size", 40))
        for (backend, scenario), specs in groups.items():
            for i in range(0, len(specs), size):
                shards.append(Shard(name, backend, scenario, i // size,
                                    tuple(specs[i:i + size])))
    return shards
