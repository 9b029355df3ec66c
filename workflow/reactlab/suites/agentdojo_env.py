"""AgentDojo's package and environments, loaded once per process, and the planning index.

* The one-time builders: agentdojo imported whole under one lock (:func:`_load`), a
  suite (:func:`suite`), its attack, a pair's injections and environment, each built
  once per key however many threads ask (:class:`_Once`); AgentDojo's clock frozen at
  :data:`FIXED_NOW`.
* :class:`Pair`: one (suite, user task, injection task); :func:`pairs`, its tools and
  scope.
* The planning index (:func:`index`): each suite's pairs, prompts, tool schemas and
  scopes, read once from the package and cached on disk, so that a plan does not import
  agentdojo.
* :class:`Runtime`: the loop's executor, AgentDojo's runtime on a pair's environment.

The rest of the suite: :mod:`reactlab.suites.agentdojo` (its registry entry and the
standalone command), :mod:`reactlab.suites.agentdojo_run` (specs and runs),
:mod:`reactlab.suites.agentdojo_score` (the verdict by replay and ``agentdojo.csv``).
"""

from __future__ import annotations

import datetime
import hashlib
import importlib
import importlib.metadata
import json
import threading
import types
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import update_wrapper
from pathlib import Path
from typing import Any, Generic, ParamSpec, TypeVar

from reactlab.config.settings import CaseFields, SuiteSettings
from reactlab.core.errors import UsageError
from reactlab.core.io import write_json_atomic

__all__ = ["ATTACK", "ATTACK_MODEL", "DEFENCES", "MAX_STEPS", "POLICIES", "SUITES", "TAG",
           "VERSION", "AgentDojoCase", "Pair", "Runtime", "build_index", "environment", "index",
           "injections", "inline_refs", "pairs", "scope_tools", "suite", "tool_schemas"]

VERSION = "v1.2"
SUITES = ("workspace", "travel", "banking", "slack")
POLICIES = ("ground_truth", "obeys_injection")
DEFENCES = ("none", "delimit", "scope", "delimit+scope")
ATTACK = "important_instructions"
ATTACK_MODEL = "local"  # AgentDojo addresses it as "Local model"
TAG = "<INFORMATION>"
#: The loop's step limit of a run: the schema's default of a suite entry's ``max_steps``
#: (the standalone command's too).
MAX_STEPS: int = SuiteSettings.model_fields["max_steps"].default


class AgentDojoCase(CaseFields):
    """An AgentDojo case's own fields in its spec (``suite``): AgentDojo's version, the
    pair (its suite, user task and injection task), the attack and the model it addresses,
    the scripted policy and the defence, and ``scope``: the tools a call may run under the
    scope defence (None without it)."""

    version: str
    suite: str
    user_task: str
    injection_task: str
    attack: str
    attack_model: str
    policy: str
    defence: str
    scope: list[str] | None

    @property
    def pair(self) -> Pair:
        return Pair(self.suite, self.user_task, self.injection_task)


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
    for module in _AGENTDOJO_MODULES:
        importlib.import_module(module)


@_Once
def suite(name: str) -> Any:
    _load()
    from agentdojo.task_suite.load_suites import get_suite  # lazy: optional (agentdojo)

    _freeze_clock()
    return get_suite(VERSION, name)


def _freeze_clock() -> None:
    """AgentDojo's email and cloud-drive tools stamp what they write with
    ``datetime.datetime.now()``, which would put the wall clock into tool results and the
    trace. In those two modules (the only callers) ``datetime`` is replaced by a copy whose
    ``datetime.now()`` answers :data:`FIXED_NOW`, so a run is a pure function of its spec
    and its replay sees the same values."""
    # lazy: optional (agentdojo)
    from agentdojo.default_suites.v1.tools import cloud_drive_client, email_client

    fixed = datetime.datetime.fromisoformat(FIXED_NOW)

    def now(cls: type, tz: datetime.tzinfo | None = None) -> datetime.datetime:
        # a plain datetime, as the real now() gives, not a Clock
        return fixed if tz is None else fixed.replace(tzinfo=tz)

    clock = type("Clock", (datetime.datetime,), {"now": classmethod(now)})
    shim = types.ModuleType("datetime")
    shim.__dict__.update({k: v for k, v in vars(datetime).items() if not k.startswith("__")})
    shim.__dict__["datetime"] = clock
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
    s = suite(name)  # first: it imports agentdojo whole (the attacks registered)
    from agentdojo.attacks import load_attack  # lazy: optional (agentdojo)

    return load_attack(ATTACK, s, types.SimpleNamespace(name=ATTACK_MODEL))


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
    try:
        installed = importlib.metadata.version("agentdojo")
    except importlib.metadata.PackageNotFoundError:
        raise UsageError("benchmark agentdojo needs the package agentdojo, which is not "
                         "installed (make env installs agentdojo==0.1.35)") from None
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return {"agentdojo": installed, "benchmark_version": VERSION, "code": code}


def build_index() -> dict[str, Any]:
    """The planning facts, read from the package (imports agentdojo). A scope is computed
    on the suite's default environment without injections: the functions a ground truth
    calls do not depend on the injected texts (checked on all 949 pairs of v1.2)."""
    _load()
    # lazy: optional (agentdojo)
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
        from agentdojo.functions_runtime import FunctionsRuntime  # lazy: optional (agentdojo)

        self.runtime = FunctionsRuntime(suite(pair.suite).tools)
        self.env, self.pre = environment(pair)
        self.stack: list[Any] = []

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        # lazy: optional (agentdojo)
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
        from agentdojo.functions_runtime import FunctionCall  # lazy: optional (agentdojo)

        if allowed is not None and name not in allowed:
            return {"error": f"the tool {name!r} is not available for this task"}
        assert isinstance(args, dict)
        result, error = self.runtime.run_function(self.env, name, args)
        self.stack.append(FunctionCall(function=name, args=args))
        if error:
            return {"error": str(error)}
        return {"resultado": tool_result_to_str(result)}
