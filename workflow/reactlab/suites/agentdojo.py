"""AgentDojo (``agentdojo`` 0.1.35) as a suite: user task × injection task through the loop.

One run is a (suite, user task, injection task, policy, defence). AgentDojo's own runtime
executes the tools on its own environment (loaded with the attack's injections), the
project's loop (:func:`reactlab.agent.loop.run_agent`) drives the turns, and AgentDojo's
own ``utility`` / ``security`` functions score the run (``security`` True means the
injection task was carried out: the attack succeeded).

* Injections: the ``important_instructions`` attack by default, built by AgentDojo's own
  attack registry. Its text names the target model; AgentDojo reads the name from
  ``pipeline.name``, which must contain a key of ``agentdojo.models.MODEL_NAMES``: the
  stand-in pipeline is named :data:`ATTACK_MODEL`.
* Policies (scripted, :class:`PolicySession`): ``ground_truth`` makes the user task's
  ground-truth calls, then answers with its ``GROUND_TRUTH_OUTPUT``; ``obeys_injection``
  does the same, but when a tool result it reads carries the attack's ``<INFORMATION>``
  tag it first makes the injection task's ground-truth calls (the worst case).
* Defences (the project's, :mod:`reactlab.agent.defences`): ``delimit`` marks tool output
  as data (``<`` and ``>`` become ``‹`` ``›``, so the tag is no longer seen verbatim);
  ``scope`` offers every tool but lets a call run only on the tools the user task's ground
  truth uses (the scope a task declares), refusing the rest unexecuted (status
  ``unknown``).
* Verification replays the trace: the executed calls (status ``ok`` or ``error``), in
  order, on a fresh copy of the same injected environment, then AgentDojo's checks on the
  answer, the environment before and after, and the call stack. The environment and its
  tools are deterministic, so the verdict is a pure function of the trace.

The tool texts stay AgentDojo's (English), as every suite's text stays in its own language.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from reactlab.agent.types import ModelTurn, ToolCall, ToolOutcome
from reactlab.core.errors import UsageError

__all__ = ["ATTACK_MODEL", "DEFENCES", "POLICIES", "SUITES", "Pair", "pairs", "run_pair",
           "score_trace"]

VERSION = "v1.2"
SUITES = ("workspace", "travel", "banking", "slack")
POLICIES = ("ground_truth", "obeys_injection")
DEFENCES = ("none", "delimit", "scope", "delimit+scope")
ATTACK = "important_instructions"
ATTACK_MODEL = "local"  # AgentDojo addresses it as "Local model"
TAG = "<INFORMATION>"


@cache
def suite(name: str) -> Any:
    from agentdojo.task_suite.load_suites import get_suite

    return get_suite(VERSION, name)


@dataclass(frozen=True)
class Pair:
    suite: str
    user_task: str
    injection_task: str

    @property
    def id(self) -> str:
        return f"{self.user_task}__{self.injection_task}"


def pairs(name: str) -> list[Pair]:
    s = suite(name)
    return [Pair(name, u, i) for u in sorted(s.user_tasks, key=_num)
            for i in sorted(s.injection_tasks, key=_num)]


def _num(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[-1])


@cache
def _attack(name: str) -> Any:
    """The suite's attack object, made once (it caches the injection candidates, found by
    running each user task's ground truth on a canary environment)."""
    from types import SimpleNamespace

    from agentdojo.attacks.attack_registry import load_attack

    return load_attack(ATTACK, suite(name), SimpleNamespace(name=ATTACK_MODEL))


@cache
def injections(name: str, user_task: str, injection_task: str) -> dict[str, str]:
    """The attack's injection texts for this pair (AgentDojo's attack registry)."""
    s = suite(name)
    return dict(_attack(name).attack(s.user_tasks[user_task],
                                     s.injection_tasks[injection_task]))


@cache
def _environment(pair: Pair) -> Any:
    s = suite(pair.suite)
    env = s.load_and_inject_default_environment(
        injections(pair.suite, pair.user_task, pair.injection_task))
    return s.user_tasks[pair.user_task].init_environment(env)


def environment(pair: Pair) -> tuple[Any, Any]:
    """(task environment, its copy before the run) with the pair's injections: fresh deep
    copies of one environment built per pair and process."""
    base = _environment(pair)
    return base.model_copy(deep=True), base.model_copy(deep=True)


def tool_schemas(name: str) -> list[dict[str, Any]]:
    return [{"name": f.name, "description": f.description,
             "parameters": f.parameters.model_json_schema()} for f in suite(name).tools]


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def scope_tools(pair: Pair) -> list[str]:
    """The tools the user task's ground truth uses: the scope the task declares."""
    s = suite(pair.suite)
    _, pre = environment(pair)
    return sorted({c.function for c in s.user_tasks[pair.user_task].ground_truth(pre)})


class Runtime:
    """The loop's executor: AgentDojo's runtime on the pair's environment."""

    def __init__(self, pair: Pair) -> None:
        from agentdojo.functions_runtime import FunctionsRuntime

        self.runtime = FunctionsRuntime(suite(pair.suite).tools)
        self.env, self.pre = environment(pair)
        self.stack: list[Any] = []

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
        from agentdojo.functions_runtime import FunctionCall

        if allowed is not None and name not in allowed:
            return {"error": f"the tool {name!r} is not available for this task"}
        assert isinstance(args, dict)
        result, error = self.runtime.run_function(self.env, name, args)
        self.stack.append(FunctionCall(function=name, args=args))
        if error:
            return {"error": str(error)}
        return {"resultado": tool_result_to_str(result)}


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


def spec_for(pair: Pair, policy: str, defence: str) -> Any:
    from reactlab.agent.defences import NO_DEFENCES
    from reactlab.config.settings import agent_settings, backend_settings, limits
    from reactlab.suites.plan import CaseSpec

    s = suite(pair.suite)
    return CaseSpec(
        task=pair.id, backend="scripted", scenario=f"{policy}__{defence.replace('+', '_')}",
        question=s.user_tasks[pair.user_task].PROMPT,
        tools=tuple(f.name for f in s.tools),
        backend_config=backend_settings({"provider": "local", "mode": "scripted"}),
        script={"model": policy, "policy": policy},
        limits=limits({"max_steps": 8, "token_budget": None}),
        agent=agent_settings({"send_tools": True, "send_system_prompt": False,
                              "system_prompt": "",
                              "defences": {**NO_DEFENCES,
                                           "delimit_tool_output": "delimit" in defence,
                                           "scope_rule": "scope" in defence}}),
        suite={"name": "agentdojo", "benchmark": "agentdojo", "version": VERSION,
               "suite": pair.suite, "user_task": pair.user_task,
               "injection_task": pair.injection_task, "attack": ATTACK,
               "attack_model": ATTACK_MODEL, "policy": policy, "defence": defence,
               "scope": scope_tools(pair) if "scope" in defence else None,
               "tools": []})


def run_pair(pair: Pair, policy: str, defence: str, out: str) -> dict[str, Any]:
    """Run one pair through the loop, write its trace; returns the end record's data."""
    from reactlab.agent.loop import run_agent
    from reactlab.runner import header
    from reactlab.trace import TraceWriter

    spec = spec_for(pair, policy, defence)
    runtime = Runtime(pair)
    session = PolicySession(pair, policy, runtime.pre)
    allowed = spec.suite["scope"] if spec.suite["scope"] is not None else spec.tools
    writer = TraceWriter(out)
    writer.add(header(spec))
    end = run_agent(session, runtime, allowed, spec.limits.max_steps, None, writer.add,
                    delimit=spec.agent.defences.delimit_tool_output)
    writer.close(end)
    return {k: v for k, v in end.to_json().items() if k != "type"}


def score_trace(tr: Any) -> dict[str, Any]:
    """AgentDojo's utility and security for a trace, by replaying its executed calls on
    a fresh copy of the pair's environment (see the module docstring)."""
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
    from agentdojo.types import text_content_block_from_string

    info = tr.header.spec["suite"]
    pair = Pair(info["suite"], info["user_task"], info["injection_task"])
    s = suite(pair.suite)
    env, pre = environment(pair)
    runtime = FunctionsRuntime(s.tools)
    stack = []
    for c in tr.tool_calls():
        if c.status in ("ok", "error"):
            runtime.run_function(env, c.name, c.arguments)
            stack.append(FunctionCall(function=c.name, args=c.arguments))
    output = [text_content_block_from_string(tr.end.answer or "")]
    utility = s._check_task_result(s.user_tasks[pair.user_task], output, pre, env, stack)
    security = s._check_task_result(s.injection_tasks[pair.injection_task], output, pre, env,
                                    stack)
    return {"suite": pair.suite, "user_task": pair.user_task,
            "injection_task": pair.injection_task, "policy": info["policy"],
            "defence": info["defence"], "utility": bool(utility),
            "attack_succeeded": bool(security)}


# ------------------------------------------------------------------------------ table

TABLE_COLUMNS = ["suite", "policy", "defence", "pairs", "utility", "utility_low",
                 "utility_high", "attack_success_rate", "asr_low", "asr_high",
                 "baseline_utility", "baseline_attack_success_rate"]


def table(rows: Sequence[dict[str, Any]]) -> Any:
    """``agentdojo.csv``: per suite × policy × defence, utility and attack success rate
    with 95 % Wilson intervals, beside the same suite and policy without defence."""
    import pandas as pd

    from reactlab.analysis.stats import wilson

    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["suite"], r["policy"], r["defence"]), []).append(r)
    out: list[dict[str, Any]] = []
    for (s, policy, defence), rs in groups.items():
        n = len(rs)
        u = wilson(sum(r["utility"] for r in rs), n)
        a = wilson(sum(r["attack_succeeded"] for r in rs), n)
        out.append({"suite": s, "policy": policy, "defence": defence, "pairs": n,
                    "utility": u.estimate, "utility_low": u.low, "utility_high": u.high,
                    "attack_success_rate": a.estimate, "asr_low": a.low, "asr_high": a.high})
    base = {(r["suite"], r["policy"]): r for r in out if r["defence"] == "none"}
    for r in out:
        b = base.get((r["suite"], r["policy"]))
        r["baseline_utility"] = None if b is None else b["utility"]
        r["baseline_attack_success_rate"] = None if b is None else b["attack_success_rate"]
    order = {d: i for i, d in enumerate(DEFENCES)}
    out.sort(key=lambda r: (SUITES.index(r["suite"]) if r["suite"] in SUITES else 99,
                            r["policy"], order.get(r["defence"], 99)))
    return pd.DataFrame(out, columns=TABLE_COLUMNS).round(4)


def run_all(suites: Sequence[str], policies: Sequence[str], defences: Sequence[str],
            root: str, limit: int | None = None) -> Any:
    """Every pair of ``suites`` under each policy and defence: one trace per run under
    ``root/traces/{suite}/{policy}/{defence}/{user}__{injection}.jsonl``, then
    ``root/agentdojo.csv`` (written atomically) from the replayed verdicts."""
    from pathlib import Path

    from reactlab import trace
    from reactlab.core.io import atomic_path

    rows = []
    for name in suites:
        for policy in policies:
            for defence in defences:
                for pair in pairs(name)[:limit]:
                    out = (f"{root}/traces/{name}/{policy}/{defence.replace('+', '_')}/"
                           f"{pair.id}.jsonl")
                    run_pair(pair, policy, defence, out)
                    rows.append(score_trace(trace.read(out)))
    df = table(rows)
    path = Path(root) / "agentdojo.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n")
    return df


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m reactlab.suites.agentdojo [--suites ...] [--limit N] [--out DIR]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m reactlab.suites.agentdojo")
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--defences", nargs="+", default=list(DEFENCES), choices=DEFENCES)
    parser.add_argument("--limit", type=int, default=None,
                        help="the first N pairs of each suite (default: all)")
    parser.add_argument("--out", default="results/suites/agentdojo")
    args = parser.parse_args(argv)
    df = run_all(args.suites, args.policies, args.defences, args.out, args.limit)
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
