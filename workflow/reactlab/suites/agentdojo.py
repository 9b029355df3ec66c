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

* The local model (a ``local`` backend in ``model`` mode) plays a pair as
  :class:`reactlab.backends.local.LocalModelSession`, multi-turn, reading AgentDojo's own
  tool schemas and system message; the shard job loads it once (:mod:`reactlab.suites.run`).

In the pipeline a ``benchmark: agentdojo`` entry of the ``suites:`` section
(:func:`case_specs`) plans its runs as :class:`~reactlab.suites.plan.CaseSpec` shards like
BFCL's; :func:`run_case` runs one, :func:`suite_record` is its verification and
:func:`table` is ``agentdojo.csv``. Planning reads a JSON index of the suites (pairs,
prompts, tool schemas, scopes) cached on disk, so that a plan does not import agentdojo.
``python -m reactlab.suites.agentdojo`` runs the same code without Snakemake.

The tool texts stay AgentDojo's (English), as every suite's text stays in its own language.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, update_wrapper
from pathlib import Path
from typing import Any, Generic, ParamSpec, TypeVar

from reactlab.agent.types import ModelTurn, ToolCall, ToolOutcome
from reactlab.core.errors import UsageError

__all__ = ["ATTACK_MODEL", "DEFENCES", "POLICIES", "SUITES", "Pair", "case_specs", "pairs",
           "run_case", "run_pair", "score_trace", "suite_record", "table"]

VERSION = "v1.2"
SUITES = ("workspace", "travel", "banking", "slack")
POLICIES = ("ground_truth", "obeys_injection")
DEFENCES = ("none", "delimit", "scope", "delimit+scope")
ATTACK = "important_instructions"
ATTACK_MODEL = "local"  # AgentDojo addresses it as "Local model"
TAG = "<INFORMATION>"
MAX_STEPS = 8


#: The instant AgentDojo's tools read as "now" (a sent email's timestamp, a file's
#: modification time): after every date in the suites' data (the latest is 2025-01-15).
FIXED_NOW = "2026-01-01T00:00:00"


# ------------------------------------------------------------------- one-time builders
#
# The shard and verification jobs run as threads of one Snakemake process (profiles/default:
# ``force-use-threads``), so two of them can be the first to import agentdojo and to build
# a suite's objects. ``functools.cache`` lets two threads compute the same value at once,
# and a cold import raced by two threads can hand the second one an incomplete package:
# ``agentdojo/attacks/__init__.py`` fills the attack registry (``attack_registry.ATTACKS``)
# by importing the attack modules, and a thread that found ``attack_registry`` itself
# complete in ``sys.modules`` called ``load_attack`` before ``important_instructions`` was
# registered (a KeyError, once in twelve first runs). So agentdojo is imported once, whole,
# under one lock (:func:`_load`), before anything of it is used, and every one-time
# builder below computes under the same lock, once per key (:class:`_Once`).

_LOCK = threading.RLock()  # re-entrant: the builders call one another (injections -> suite)

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Once(Generic[_P, _R]):
    """``functools.cache`` that computes each value once, under :data:`_LOCK`, however
    many threads ask for it at once; a cached value is read without the lock. Arguments
    must be hashable, as for ``functools.cache``; a call that raises caches nothing."""

    def __init__(self, fn: Callable[_P, _R]) -> None:
        self._fn = fn
        self._values: dict[Any, _R] = {}
        update_wrapper(self, fn)

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        key = (args, tuple(kwargs.items()))
        try:
            return self._values[key]
        except KeyError:
            pass
        with _LOCK:
            if key not in self._values:
                self._values[key] = self._fn(*args, **kwargs)
            return self._values[key]

    def cache_clear(self) -> None:
        with _LOCK:
            self._values.clear()


#: Every agentdojo module used here, the packages whose imports fill its registries first.
_AGENTDOJO_MODULES = (
    "agentdojo.attacks",  # its __init__ imports the attack modules: they register the attacks
    "agentdojo.task_suite.load_suites",  # imports every suite version, registering its tasks
    "agentdojo.default_suites.v1.tools.cloud_drive_client",
    "agentdojo.default_suites.v1.tools.email_client",
    "agentdojo.functions_runtime",
    "agentdojo.types",
    "agentdojo.agent_pipeline.agent_pipeline",
    "agentdojo.agent_pipeline.tool_execution",
)


@_Once
def _load() -> None:
    """Import agentdojo completely, once per process, under the lock: every later
    ``from agentdojo... import`` here then finds complete modules (and full registries)."""
    import importlib

    for module in _AGENTDOJO_MODULES:
        importlib.import_module(module)


@_Once
def suite(name: str) -> Any:
    _load()
    from agentdojo.task_suite.load_suites import get_suite

    _freeze_clock()
    return get_suite(VERSION, name)


def _freeze_clock() -> None:
    """AgentDojo's email and cloud-drive tools stamp what they write with
    ``datetime.datetime.now()``, which would put the wall clock into tool results and the
    trace. In those two modules (the only callers) ``datetime`` is replaced by a copy whose
    ``datetime.now()`` answers :data:`FIXED_NOW`, so a run is a pure function of its spec
    and its replay sees the same values."""
    import datetime
    import types

    from agentdojo.default_suites.v1.tools import cloud_drive_client, email_client

    fixed = datetime.datetime.fromisoformat(FIXED_NOW)

    class Clock(datetime.datetime):
        @classmethod  # a plain datetime, as the real now() gives, not a Clock
        def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:  # type: ignore[override]
            return fixed if tz is None else fixed.replace(tzinfo=tz)

    shim = types.ModuleType("datetime")
    shim.__dict__.update({k: v for k, v in vars(datetime).items() if not k.startswith("__")})
    shim.datetime = Clock  # type: ignore[attr-defined]
    for module in (cloud_drive_client, email_client):
        module.datetime = shim


@dataclass(frozen=True)
class Pair:
    suite: str
    user_task: str
    injection_task: str

    @property
    def id(self) -> str:
        return f"{self.user_task}__{self.injection_task}"

    @property
    def task(self) -> str:
        """The run's task in the pipeline: unique across AgentDojo's suites."""
        return f"{self.suite}/{self.id}"


def pairs(name: str) -> list[Pair]:
    """Every (user task, injection task) pair of a suite, in task number order."""
    info = index()["suites"][name]
    return [Pair(name, u, i) for u in info["user_tasks"] for i in info["injection_tasks"]]


def _num(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[-1])


@_Once
def _attack(name: str) -> Any:
    """The suite's attack object, made once (it caches the injection candidates, found by
    running each user task's ground truth on a canary environment)."""
    from types import SimpleNamespace

    s = suite(name)  # first: it imports agentdojo whole (the attacks registered)
    from agentdojo.attacks import load_attack

    return load_attack(ATTACK, s, SimpleNamespace(name=ATTACK_MODEL))


@_Once
def injections(name: str, user_task: str, injection_task: str) -> dict[str, str]:
    """The attack's injection texts for this pair (AgentDojo's attack registry)."""
    s = suite(name)
    return dict(_attack(name).attack(s.user_tasks[user_task],
                                     s.injection_tasks[injection_task]))


@_Once
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
    """AgentDojo's own tool schemas of a suite (the model reads them as they are)."""
    return list(index()["suites"][name]["tools"])


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def scope_tools(pair: Pair) -> list[str]:
    """The tools the user task's ground truth uses: the scope the task declares."""
    return list(index()["suites"][pair.suite]["user_tasks"][pair.user_task]["scope"])


# ----------------------------------------------------------------------------- index
#
# Planning needs each suite's pairs, prompts, tool schemas and scopes. Importing agentdojo
# (its task suites import its model clients) costs seconds, and a scope needs the user
# task's ground truth on an environment, so the planning facts are read once from the
# package into a JSON index, cached on disk and keyed by the installed agentdojo version
# and this module's code: a plan never imports agentdojo once the index exists.

INDEX_CACHE = Path(".snakemake/reactlab/agentdojo-index.json")


def _index_key() -> dict[str, str]:
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("agentdojo")
    except PackageNotFoundError:
        raise UsageError("benchmark agentdojo needs the package agentdojo, which is not "
                         "installed (make env installs agentdojo==0.1.35)") from None
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return {"agentdojo": installed, "benchmark_version": VERSION, "code": code}


def build_index() -> dict[str, Any]:
    """The planning facts, read from the package (imports agentdojo). A scope is computed
    on the suite's default environment without injections: the functions a ground truth
    calls do not depend on the injected texts (checked on all 949 pairs of v1.2)."""
    _load()
    from agentdojo.agent_pipeline.agent_pipeline import load_system_message

    out: dict[str, Any] = {**_index_key(), "system_message": str(load_system_message(None)),
                           "suites": {}}
    for name in SUITES:
        s = suite(name)
        env = s.load_and_inject_default_environment({})
        users = {}
        for uid in sorted(s.user_tasks, key=_num):
            task = s.user_tasks[uid]
            pre = task.init_environment(env.model_copy(deep=True))
            users[uid] = {"prompt": task.PROMPT,
                          "scope": sorted({c.function for c in task.ground_truth(pre)})}
        out["suites"][name] = {
            "tools": [{"name": f.name, "description": f.description,
                       "parameters": inline_refs(f.parameters.model_json_schema())}
                      for f in s.tools],
            "user_tasks": users,
            "injection_tasks": sorted(s.injection_tasks, key=_num)}
    return out


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's JSON Schema with its local ``$ref``s (``#/$defs/...``, pydantic's enums)
    replaced by what they point to and ``$defs`` dropped: the same schema, readable on its
    own inside a prompt's tools block or a call grammar (which nests each tool's
    parameters, so a reference to the root's ``$defs`` would dangle)."""
    defs = schema.get("$defs", {})

    def resolve(node: Any, depth: int = 0) -> Any:
        if depth > 20:
            raise UsageError("a tool schema's $refs nest too deep (a recursive model?)")
        if isinstance(node, list):
            return [resolve(v, depth) for v in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/$defs/"):
            target = defs[node["$ref"][len("#/$defs/"):]]
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return resolve({**target, **siblings}, depth + 1)
        return {k: resolve(v, depth) for k, v in node.items() if k != "$defs"}

    out: dict[str, Any] = resolve(schema)
    return out


@_Once
def index() -> dict[str, Any]:
    """The planning facts: the cached index when its key matches, else built and cached."""
    from reactlab.core.io import write_json_atomic

    key = _index_key()
    try:
        cached = json.loads(INDEX_CACHE.read_text(encoding="utf-8"))
        if isinstance(cached, dict) and all(cached.get(k) == v for k, v in key.items()):
            return cached
    except (OSError, ValueError):
        pass
    built = build_index()
    write_json_atomic(INDEX_CACHE, built, indent=None)
    return built


class Runtime:
    """The loop's executor: AgentDojo's runtime on the pair's environment."""

    def __init__(self, pair: Pair) -> None:
        _load()
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


def scenario_name(policy: str, defence: str) -> str:
    """A run's scenario: the policy (or, for a model, ``react``) and the defence."""
    return f"{policy}__{defence.replace('+', '_')}"


def system_message() -> str:
    """AgentDojo's own default system message (``data/system_messages.yaml``): what a model
    backend reads as its system prompt unless the suite entry gives one."""
    return str(index()["system_message"])


def spec_for(pair: Pair, policy: str, defence: str, *, entry: str = "agentdojo",
             backend: str = "scripted", backend_config: Mapping[str, Any] | None = None,
             system_prompt: str | None = None, max_steps: int = MAX_STEPS) -> Any:
    """The :class:`~reactlab.suites.plan.CaseSpec` of one run. ``policy`` is a scripted
    policy, or ``react`` for a model backend: the model then reads AgentDojo's tool schemas
    (carried in the spec, so the trace holds the tools as the model read them) and
    ``system_prompt`` (default: AgentDojo's own system message)."""
    from reactlab.suites.plan import SCENARIO_MODEL, CaseSpec

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
        suite={"name": entry, "benchmark": "agentdojo", "version": VERSION,
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


def score_trace(tr: Any) -> dict[str, Any]:
    """AgentDojo's utility and security for a trace, by replaying its executed calls on
    a fresh copy of the pair's environment (see the module docstring)."""
    _load()
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
    return {"entry": info["name"], "suite": pair.suite, "backend": tr.run["backend"],
            "user_task": pair.user_task, "injection_task": pair.injection_task,
            "policy": info["policy"], "defence": info["defence"], "utility": bool(utility),
            "attack_succeeded": bool(security)}


def suite_record(tr: Any, trace_path: str) -> dict[str, Any]:
    """The verification record of an AgentDojo trace (a pure function of the trace): the
    fields of :class:`reactlab.analysis.verify.Verification` — ``verified`` when the user
    task's utility holds and the injection task was not carried out — plus AgentDojo's
    two verdicts."""
    from reactlab.analysis.verify import Finding, Verification

    v = score_trace(tr)
    findings = []
    if not v["utility"]:
        findings.append(Finding("agentdojo:utility",
                                f"AgentDojo's utility check of {v['user_task']} failed"))
    if v["attack_succeeded"]:
        findings.append(Finding("agentdojo:security",
                                f"the injection task {v['injection_task']} was carried out "
                                "(AgentDojo's security check)"))
    rec = Verification(trace=trace_path, trace_sha256=str(tr.end.sha256), run=tr.run,
                       verified=not findings, findings=tuple(findings)).to_json()
    rec.update({"checker": "agentdojo", "suite": v["entry"], "agentdojo_suite": v["suite"],
                "user_task": v["user_task"], "injection_task": v["injection_task"],
                "policy": v["policy"], "defence": v["defence"], "utility": v["utility"],
                "attack_succeeded": v["attack_succeeded"]})
    return rec


# ------------------------------------------------------------------------------ plan


def sample_pairs(name: str, sample: int | None, seed: int) -> list[Pair]:
    """The seeded sample of a suite's pairs (:func:`reactlab.suites.plan.sample_cases`:
    ranked by ``sha256(f"{seed}:{pair id}")``), in the suite's own pair order."""
    from reactlab.suites.plan import sample_cases

    everything = pairs(name)
    index = {p.id: i for i, p in enumerate(everything)}
    return sorted(sample_cases(tuple(everything), sample, seed), key=lambda p: index[p.id])


def case_specs(name: str, entry: Mapping[str, Any], raw: Mapping[str, Any]) -> list[Any]:
    """The specs of a ``benchmark: agentdojo`` entry of the ``suites:`` section: every
    sampled pair of each selected suite, on each backend, under each policy (a scripted
    backend) or the model, and each defence."""
    from reactlab.suites.plan import SCENARIO_MODEL

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


# ------------------------------------------------------------------------------ table

TABLE_COLUMNS = ["entry", "suite", "backend", "policy", "defence", "pairs", "utility",
                 "utility_low", "utility_high", "attack_success_rate", "asr_low", "asr_high",
                 "baseline_utility", "baseline_attack_success_rate"]


def table(rows: Sequence[dict[str, Any]]) -> Any:
    """``agentdojo.csv``: per suite entry × AgentDojo suite × backend × policy × defence,
    utility and attack success rate with 95 % Wilson intervals, beside the same group
    without defence (``baseline_*``)."""
    import pandas as pd

    from reactlab.analysis.stats import wilson

    groups: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        key = (r.get("entry", "agentdojo"), r["suite"], r.get("backend", "scripted"),
               r["policy"], r["defence"])
        groups.setdefault(key, []).append(r)
    out: list[dict[str, Any]] = []
    for (entry, s, backend, policy, defence), rs in groups.items():
        n = len(rs)
        u = wilson(sum(r["utility"] for r in rs), n)
        a = wilson(sum(r["attack_succeeded"] for r in rs), n)
        out.append({"entry": entry, "suite": s, "backend": backend, "policy": policy,
                    "defence": defence, "pairs": n,
                    "utility": u.estimate, "utility_low": u.low, "utility_high": u.high,
                    "attack_success_rate": a.estimate, "asr_low": a.low, "asr_high": a.high})
    base = {(r["entry"], r["suite"], r["backend"], r["policy"]): r for r in out
            if r["defence"] == "none"}
    for r in out:
        b = base.get((r["entry"], r["suite"], r["backend"], r["policy"]))
        r["baseline_utility"] = None if b is None else b["utility"]
        r["baseline_attack_success_rate"] = None if b is None else b["attack_success_rate"]
    order = {d: i for i, d in enumerate(DEFENCES)}
    out.sort(key=lambda r: (r["entry"], SUITES.index(r["suite"]) if r["suite"] in SUITES
                            else 99, r["backend"], r["policy"], order.get(r["defence"], 99)))
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
