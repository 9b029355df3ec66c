"""AgentDojo's runs: the specs of a suite entry, the scripted policies, one case through
the loop on AgentDojo's own runtime (:mod:`reactlab.suites.agentdojo_env`).

* :func:`case_specs`: every sampled pair of each selected suite, on each backend, under
  each policy (a backend that plays scripts) or the model, and each defence, one
  :class:`~reactlab.config.RunSpec` each (:func:`spec_for`);
* :func:`policy_steps`: ``ground_truth`` and ``obeys_injection`` written as a case's
  script (docs in :mod:`reactlab.suites.agentdojo`), played by the backend's session;
* :func:`run_case`: one spec through the runner (:func:`reactlab.runner.run_to_trace`),
  its calls executed by :class:`~reactlab.suites.agentdojo_env.Runtime`, the trace
  written atomically.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.agent.defences import NO_DEFENCES
from reactlab.config import RunSpec
from reactlab.config.scripts import literal
from reactlab.config.settings import (
    PolicyScript,
    SuiteCase,
    SuiteSettings,
    agent_settings,
    backend_settings,
    limits,
    script_settings,
)
from reactlab.core.errors import UsageError
from reactlab.runner import run_to_trace
from reactlab.suites import agentdojo_env as env
from reactlab.suites.types import SCENARIO_MODEL, played, sample_cases

if TYPE_CHECKING:
    from reactlab.agent.types import ModelTurn
    from reactlab.backends.registry import LoadedModel

__all__ = ["case_specs", "fields_of", "pair_of", "policy_steps", "run_case", "run_pair",
           "sample_pairs", "scenario_name", "spec_for", "system_message"]

#: The benchmark's name (a suite entry's ``benchmark:``, a case spec's ``suite.benchmark``).
NAME = "agentdojo"


def policy_steps(spec: RunSpec, pre_env: Any) -> list[dict[str, Any]]:
    """The steps of the spec's scripted policy on its pair, from the environment before
    the run (``pre_env``; AgentDojo's ground truths are functions of it). ``ground_truth``:
    the user task's ground-truth calls in one turn, then its ground-truth output.
    ``obeys_injection``: the same, except that once a tool result the model read holds the
    attack's tag (:data:`~reactlab.suites.agentdojo_env.TAG`) it makes the injection
    task's ground-truth calls before answering (a ``branch`` on the text it was sent)."""
    assert isinstance(spec.script, PolicyScript), f"{spec.key} plays no policy"
    policy = spec.script.policy
    if policy not in env.POLICIES:
        raise UsageError(f"unknown policy {policy!r} (known: {', '.join(env.POLICIES)})")
    pair = pair_of(spec)
    s = env.suite(pair.suite)
    user, injection = s.user_tasks[pair.user_task], s.injection_tasks[pair.injection_task]
    answer = {"answer": getattr(user, "GROUND_TRUTH_OUTPUT", "") or ""}
    user_calls = _calls(user.ground_truth(copy.deepcopy(pre_env)))
    if not user_calls:
        steps = [answer]
    elif policy == "ground_truth":
        steps = [{"calls": user_calls}, answer]
    else:
        injected = _calls(injection.ground_truth(copy.deepcopy(pre_env)))
        steps = [{"calls": user_calls},
                 {"branch": {"if_seen": env.TAG,
                             "then": {"calls": injected} if injected else answer,
                             "else": answer}},
                 answer]
    return [literal(step) for step in steps]


def _calls(calls: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"name": c.function, "arguments": env._jsonable(dict(c.args))} for c in calls]


def scenario_name(policy: str, defence: str) -> str:
    """A run's scenario: the policy (or, for a model, ``react``) and the defence."""
    return f"{policy}__{defence.replace('+', '_')}"


def system_message() -> str:
    """AgentDojo's own default system message (``data/system_messages.yaml``): what a model
    backend reads as its system prompt unless the suite entry gives one."""
    return str(env.index()["system_message"])


def spec_for(pair: env.Pair, policy: str, defence: str, *, entry: str = NAME,
             backend: str = "scripted", backend_config: Mapping[str, Any] | None = None,
             system_prompt: str | None = None, max_steps: int = env.MAX_STEPS) -> RunSpec:
    """The :class:`~reactlab.config.RunSpec` of one run. ``policy`` is a scripted policy
    (played by a backend that plays scripts: the local scripted one, a simulated API), or
    ``react`` for a backend that runs a model (local or live): the model then reads
    ``system_prompt`` (default: AgentDojo's own system message). Every backend reads
    AgentDojo's own tool schemas (carried in the spec, so the trace holds the tools as the
    model read them)."""
    cfg = dict(backend_config or {"provider": "local", "mode": "scripted"})
    model = cfg.get("mode") in ("model", "live")
    if model != (policy == SCENARIO_MODEL):
        raise UsageError(f"policy {policy!r} on a {cfg.get('mode')} backend: a model "
                         f"backend plays {SCENARIO_MODEL!r}, a scripted one "
                         f"{' or '.join(env.POLICIES)}")
    if not model and policy not in env.POLICIES:
        raise UsageError(f"unknown policy {policy!r} (known: {', '.join(env.POLICIES)})")
    if defence not in env.DEFENCES:
        raise UsageError(f"unknown defence {defence!r} (known: {', '.join(env.DEFENCES)})")
    info = env.index()["suites"][pair.suite]
    prompt = (system_message() if system_prompt is None else system_prompt) if model else ""
    script = ({"model": SCENARIO_MODEL, "strategy": "react"} if model
              else {"model": policy, "policy": policy, "strategy": "react"})
    backend_cfg, run_limits, agent, played_script = _settings(
        json.dumps(cfg, sort_keys=True), defence, prompt, max_steps,
        json.dumps(script, sort_keys=True))
    return RunSpec(
        task=pair.task, backend=backend, scenario=scenario_name(policy, defence),
        question=info["user_tasks"][pair.user_task]["prompt"],
        tools=tuple(t["name"] for t in info["tools"]), params={},
        backend_config=backend_cfg, script=played_script, limits=run_limits,
        agent=agent, suite=_suite_case(entry, pair, policy, defence))


def _suite_case(entry: str, pair: env.Pair, policy: str, defence: str) -> SuiteCase:
    own = env.AgentDojoCase(version=env.VERSION, suite=pair.suite, user_task=pair.user_task,
                            injection_task=pair.injection_task, attack=env.ATTACK,
                            attack_model=env.ATTACK_MODEL, policy=policy, defence=defence,
                            scope=env.scope_tools(pair) if "scope" in defence else None)
    return SuiteCase.of(entry, NAME, _tools(pair.suite), own)


@cache
def _tools(name: str) -> list[dict[str, Any]]:
    """AgentDojo's tool schemas of suite ``name``, keys sorted (as a spec keeps them)."""
    tools: list[dict[str, Any]] = json.loads(json.dumps(env.tool_schemas(name),
                                                        sort_keys=True, ensure_ascii=False))
    return tools


@cache
def _settings(cfg_json: str, defence: str, system_prompt: str,
              max_steps: int, script_json: str) -> tuple[Any, Any, Any, Any]:
    """The typed backend, limits, agent and script settings of a run, built once per
    combination (a plan builds thousands of specs from a handful of them)."""
    model = json.loads(cfg_json).get("mode") in ("model", "live")
    return (backend_settings(json.loads(cfg_json)),
            limits({"max_steps": max_steps, "token_budget": None}),
            agent_settings({"send_tools": True, "send_system_prompt": model,
                            "system_prompt": system_prompt,
                            "defences": {**NO_DEFENCES,
                                         "delimit_tool_output": "delimit" in defence,
                                         "scope_rule": "scope" in defence}}),
            script_settings(json.loads(script_json)))


def fields_of(spec: RunSpec) -> env.AgentDojoCase:
    """The AgentDojo fields of a case's spec (a trace header's: ``Header.run_spec``); a
    ConfigError names a field AgentDojo has not."""
    if spec.suite is None:
        raise UsageError(f"{spec.key} is no AgentDojo case")
    return env.AgentDojoCase.of(spec.suite)


def pair_of(spec: RunSpec) -> env.Pair:
    """The pair a spec (a trace header's: ``Header.run_spec``) runs."""
    return fields_of(spec).pair


def run_case(spec: RunSpec, out: str | Path, *, model: LoadedModel | None = None,
             turn: ModelTurn | None = None, recording: str | None = None,
             replay: str | None = None) -> dict[str, Any]:
    """Run one spec through the runner (:func:`reactlab.runner.run_to_trace`; AgentDojo's
    runtime executes the calls, the scope defence narrows the tools a call may run) and
    write its trace atomically; returns the end record's data. ``model``: the shard's
    loaded model (a local model backend); ``recording``/``replay``: an HTTP run's."""
    assert spec.suite is not None, f"{spec.key} is no AgentDojo case"
    runtime = env.Runtime(pair_of(spec))
    scope = fields_of(spec).scope
    return run_to_trace(played(spec, lambda s: policy_steps(s, runtime.pre)), runtime, out,
                        allowed=scope if scope is not None else spec.tools, model=model,
                        first_turn=turn, recording=recording, replay=replay)


def run_pair(pair: env.Pair, policy: str, defence: str, out: str) -> dict[str, Any]:
    """Run one pair under a scripted policy through the loop, write its trace; returns the
    end record's data (the standalone command's path)."""
    return run_case(spec_for(pair, policy, defence), out)


def sample_pairs(name: str, sample: int | None, seed: int) -> list[env.Pair]:
    """The seeded sample of a suite's pairs (:func:`reactlab.suites.types.sample_cases`:
    ranked by ``sha256(f"{seed}:{pair id}")``), in the suite's own pair order."""
    everything = env.pairs(name)
    index = {p.id: i for i, p in enumerate(everything)}
    return sorted(sample_cases(tuple(everything), sample, seed), key=lambda p: index[p.id])


def case_specs(name: str, entry: SuiteSettings,
               raw: Mapping[str, Any]) -> list[RunSpec]:
    """The specs of a ``benchmark: agentdojo`` entry of the ``suites:`` section: every
    sampled pair of each selected suite, on each backend, under each policy (a scripted
    backend) or the model, and each defence."""
    specs = []
    for name_ in entry.categories or env.SUITES:
        chosen = sample_pairs(name_, entry.sample, entry.seed)
        for backend in entry.backends:
            cfg = raw["backends"][backend]
            policies = ([SCENARIO_MODEL] if cfg["mode"] in ("model", "live")
                        else entry.policies or env.POLICIES)
            for policy in policies:
                for defence in entry.defences or env.DEFENCES:
                    specs += [spec_for(pair, policy, defence, entry=name, backend=backend,
                                       backend_config=cfg,
                                       system_prompt=entry.system_prompt,
                                       max_steps=entry.max_steps)
                              for pair in chosen]
    return specs
