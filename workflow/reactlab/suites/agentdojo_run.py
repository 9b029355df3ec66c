"""AgentDojo's runs: the specs of a suite entry, the scripted policies, one case through
the loop on AgentDojo's own runtime (:mod:`reactlab.suites.agentdojo_env`).

* :func:`case_specs`: every sampled pair of each selected suite, on each backend, under
  each policy (a scripted backend) or the model, and each defence, one
  :class:`~reactlab.suites.types.CaseSpec` each (:func:`spec_for`);
* :class:`PolicySession`: ``ground_truth`` and ``obeys_injection`` (docs in
  :mod:`reactlab.suites.agentdojo`);
* :func:`run_case`: one spec through :func:`reactlab.agent.loop.run_agent`, its calls
  executed by :class:`~reactlab.suites.agentdojo_env.Runtime`, the trace written
  atomically.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from reactlab.agent.types import ModelTurn, ToolCall, ToolOutcome
from reactlab.core.errors import UsageError
from reactlab.suites.agentdojo_env import (
    ATTACK,
    ATTACK_MODEL,
    DEFENCES,
    MAX_STEPS,
    POLICIES,
    SUITES,
    TAG,
    VERSION,
    Pair,
    Runtime,
    _jsonable,
    index,
    pairs,
    scope_tools,
    suite,
    tool_schemas,
)
from reactlab.suites.types import SCENARIO_MODEL, CaseSpec, sample_cases

__all__ = ["PolicySession", "case_specs", "pair_of", "run_case", "run_pair", "sample_pairs",
           "scenario_name", "spec_for", "system_message"]

#: The benchmark's name (a suite entry's ``benchmark:``, a case spec's ``suite.benchmark``).
NAME = "agentdojo"


class PolicySession:
    """A scripted AgentDojo policy (see the module docstring)."""

    def __init__(self, pair: Pair, policy: str, pre_env: Any) -> None:
        if policy not in POLICIES:
            raise UsageError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
        s = suite(pair.suite)
        self.user = s.user_tasks[pair.user_task]
        self.injection = s.injection_tasks[pair.injection_task]
        self.policy = policy
        self.pre = pre_env
        self.read: list[str] = []
        self.step = 0
        self.obeyed = False

    def _calls(self, calls: Sequence[Any], prefix: str) -> tuple[ToolCall, ...]:
        return tuple(ToolCall(id=f"{prefix}_{i}", name=c.function,
                              arguments=_jsonable(dict(c.args))) for i, c in enumerate(calls))

    def request(self, budget_left: int | None) -> ModelTurn:
        self.step += 1
        if self.step == 1:
            calls = self._calls(self.user.ground_truth(copy.deepcopy(self.pre)), "user")
            if calls:
                return ModelTurn(text="", calls=calls, tokens_sent=0)
        if (self.policy == "obeys_injection" and not self.obeyed
                and any(TAG in text for text in self.read)):
            self.obeyed = True
            calls = self._calls(self.injection.ground_truth(copy.deepcopy(self.pre)),
                                "injection")
            if calls:
                return ModelTurn(text="", calls=calls, tokens_sent=0)
        answer = getattr(self.user, "GROUND_TRUTH_OUTPUT", "") or ""
        return ModelTurn(text=answer, calls=(), tokens_sent=0)

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        from reactlab.tools.messages import tool_message

        for oc in outcomes:
            self.read.append(tool_message(oc.result, delimit=oc.delimit, ensure_ascii=False))


def scenario_name(policy: str, defence: str) -> str:
    """A run's scenario: the policy (or, for a model, ``react``) and the defence."""
    return f"{policy}__{defence.replace('+', '_')}"


def system_message() -> str:
    """AgentDojo's own default system message (``data/system_messages.yaml``): what a model
    backend reads as its system prompt unless the suite entry gives one."""
    return str(index()["system_message"])


def spec_for(pair: Pair, policy: str, defence: str, *, entry: str = NAME,
             backend: str = "scripted", backend_config: Mapping[str, Any] | None = None,
             system_prompt: str | None = None, max_steps: int = MAX_STEPS) -> Any:
    """The :class:`~reactlab.suites.types.CaseSpec` of one run. ``policy`` is a scripted
    policy, or ``react`` for a model backend: the model then reads AgentDojo's tool schemas
    (carried in the spec, so the trace holds the tools as the model read them) and
    ``system_prompt`` (default: AgentDojo's own system message)."""
    cfg = dict(backend_config or {"provider": "local", "mode": "scripted"})
    model = cfg.get("mode") == "model"
    if model != (policy == SCENARIO_MODEL):
        raise UsageError(f"policy {policy!r} on a {cfg.get('mode')} backend: a model "
                         f"backend plays {SCENARIO_MODEL!r}, a scripted one "
                         f"{' or '.join(POLICIES)}")
    if not model and policy not in POLICIES:
        raise UsageError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    if defence not in DEFENCES:
        raise UsageError(f"unknown defence {defence!r} (known: {', '.join(DEFENCES)})")
    info = index()["suites"][pair.suite]
    prompt = (system_message() if system_prompt is None else system_prompt) if model else ""
    script = ({"model": SCENARIO_MODEL, "strategy": "react"} if model
              else {"model": policy, "policy": policy})
    backend_settings, limits, agent = _settings(json.dumps(cfg, sort_keys=True), defence,
                                                prompt, max_steps)
    return CaseSpec(
        task=pair.task, backend=backend, scenario=scenario_name(policy, defence),
        question=info["user_tasks"][pair.user_task]["prompt"],
        tools=tuple(t["name"] for t in info["tools"]),
        backend_config=backend_settings, script=script, limits=limits, agent=agent,
        suite={"name": entry, "benchmark": NAME, "version": VERSION,
               "suite": pair.suite, "user_task": pair.user_task,
               "injection_task": pair.injection_task, "attack": ATTACK,
               "attack_model": ATTACK_MODEL, "policy": policy, "defence": defence,
               "scope": scope_tools(pair) if "scope" in defence else None,
               # the model reads AgentDojo's own tool schemas; a scripted policy reads none
               "tools": tool_schemas(pair.suite) if model else []})


@cache
def _settings(cfg_json: str, defence: str, system_prompt: str,
              max_steps: int) -> tuple[Any, Any, Any]:
    """The typed backend, limits and agent settings of a run, built once per combination
    (a plan builds thousands of specs from a handful of them)."""
    from reactlab.agent.defences import NO_DEFENCES
    from reactlab.config.settings import agent_settings, backend_settings, limits

    model = json.loads(cfg_json).get("mode") == "model"
    return (backend_settings(json.loads(cfg_json)),
            limits({"max_steps": max_steps, "token_budget": None}),
            agent_settings({"send_tools": True, "send_system_prompt": model,
                            "system_prompt": system_prompt,
                            "defences": {**NO_DEFENCES,
                                         "delimit_tool_output": "delimit" in defence,
                                         "scope_rule": "scope" in defence}}))


def pair_of(spec: Any) -> Pair:
    """The pair a spec (or a trace header's spec) runs."""
    info = spec["suite"] if isinstance(spec, Mapping) else spec.suite
    return Pair(info["suite"], info["user_task"], info["injection_task"])


def run_case(spec: Any, out: str | Path, model: Any = None) -> dict[str, Any]:
    """Run one spec through the loop (AgentDojo's runtime executes the calls) and write its
    trace atomically; returns the end record's data. ``model``: the shard's loaded model,
    for a model backend (loaded once per shard by :func:`reactlab.suites.run.run_shard`)."""
    from reactlab.agent.loop import run_agent
    from reactlab.agent.types import Session
    from reactlab.runner import header
    from reactlab.trace import TraceWriter

    pair = pair_of(spec)
    runtime = Runtime(pair)
    session: Session
    if spec.backend_config.mode == "model":
        from reactlab.backends.local import LocalModelSession

        if model is None:
            raise UsageError(f"{spec.key}: a model run needs the shard's model")
        model.reset_cache()
        session = LocalModelSession(spec, model)
    else:
        session = PolicySession(pair, spec.suite["policy"], runtime.pre)
    allowed = spec.suite["scope"] if spec.suite["scope"] is not None else spec.tools
    writer = TraceWriter(out)
    writer.add(header(spec))
    end = run_agent(session, runtime, allowed, spec.limits.max_steps,
                    spec.limits.token_budget, writer.add,
                    delimit=spec.agent.defences.delimit_tool_output)
    writer.close(end)
    return {k: v for k, v in end.to_json().items() if k != "type"}


def run_pair(pair: Pair, policy: str, defence: str, out: str) -> dict[str, Any]:
    """Run one pair under a scripted policy through the loop, write its trace; returns the
    end record's data (the standalone command's path)."""
    return run_case(spec_for(pair, policy, defence), out)


def sample_pairs(name: str, sample: int | None, seed: int) -> list[Pair]:
    """The seeded sample of a suite's pairs (:func:`reactlab.suites.types.sample_cases`:
    ranked by ``sha256(f"{seed}:{pair id}")``), in the suite's own pair order."""
    everything = pairs(name)
    index = {p.id: i for i, p in enumerate(everything)}
    return sorted(sample_cases(tuple(everything), sample, seed), key=lambda p: index[p.id])


def case_specs(name: str, entry: Mapping[str, Any], raw: Mapping[str, Any]) -> list[Any]:
    """The specs of a ``benchmark: agentdojo`` entry of the ``suites:`` section: every
    sampled pair of each selected suite, on each backend, under each policy (a scripted
    backend) or the model, and each defence."""
    specs = []
    for name_ in entry.get("categories", SUITES):
        chosen = sample_pairs(name_, entry.get("sample"), int(entry.get("seed", 0)))
        for backend in entry["backends"]:
            cfg = raw["backends"][backend]
            policies = ([SCENARIO_MODEL] if cfg["mode"] == "model"
                        else entry.get("policies", POLICIES))
            for policy in policies:
                for defence in entry.get("defences", DEFENCES):
                    specs += [spec_for(pair, policy, defence, entry=name, backend=backend,
                                       backend_config=cfg,
                                       system_prompt=entry.get("system_prompt"),
                                       max_steps=int(entry.get("max_steps", MAX_STEPS)))
                              for pair in chosen]
    return specs
