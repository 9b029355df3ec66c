"""Parse and validate config.yaml, and expand it into the matrix of runs.

Validation happens in three layers, all before any job starts:

1. YAML itself (duplicate keys are an error, not "last one wins");
2. the JSON Schema in ``workflow/schemas/config.schema.yaml`` (types, ranges, unknown keys);
3. cross-references (matrix entries, ``extends``, template names against task params).

Every failure raises :class:`~reactlab.core.errors.ConfigError` whose ``field`` is a dotted
path such as ``scenarios.bucle.steps[0].calls[0].name``.

This module must stay cheap to import: the Snakefile imports it at parse time.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from reactlab.config.scripts import ROOT_NAMES, Script
from reactlab.config.settings import (
    CONSTRAINED_DECODINGS,
    SCHEMA_PATH,
    AgentSettings,
    BackendSettings,
    FrameworkSettings,
    Limits,
    McpTools,
    PolicyScript,
    ScriptSettings,
    StepScript,
    SuiteCase,
    agent_settings,
    backend_settings,
    framework_settings,
    limits,
    mcp_tools,
    schema_file,
    script_settings,
    suite_case,
)
from reactlab.config.trials import (
    check_analysis,
    derive_seed,
    trial_indices,
    trial_key,
)
from reactlab.core.errors import ConfigError, ScriptError

__all__ = ["SCHEMA_PATH", "Config", "RunSpec", "declare_benchmark", "declare_provider", "load",
           "parse"]


def _duplicate_key(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> tuple[str, int] | None:
    """(dotted path, line) of the first duplicate mapping key in a composed YAML tree."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                return _path([*path, key]), key_node.start_mark.line + 1
            seen.add(key)
            found = _duplicate_key(value_node, (*path, key))
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _duplicate_key(item, (*path, i))
            if found:
                return found
    return None


def _yaml_error(exc: yaml.YAMLError) -> str:
    """A YAML syntax error as 'invalid YAML at line L, column C: problem' (1-based)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"invalid YAML: {problem}"
    hint = ("; indent with spaces, YAML does not allow tabs" if "\\t" in problem
            or "\t" in problem else "")
    return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}{hint}"


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_files(paths: Iterable[str | Path]) -> None:
    """Load every config file Snakemake is about to read with :func:`load_yaml`.

    Snakemake's own ``configfile:`` loader keeps the last of duplicate keys and reports
    a syntax error without its place; the Snakefile calls this first, so the pipeline
    runs only a file that ``reactlab check`` would accept. Missing files are left to
    Snakemake (an override via ``--configfile`` may stand in for config.yaml).
    """
    for path in paths:
        if Path(path).is_file():
            load_yaml(path)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file; duplicate keys are an error naming their path and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:  # a mistyped overlay: name the ones its folder holds
        there = sorted(p.name for p in path.parent.glob("*.yaml")) if not path.exists() else []
        raise ConfigError("", f"cannot read {path}: {exc.strerror}" + (
            f" ({path.parent} holds {', '.join(there)})" if there else "")) from exc
    try:
        # libyaml's loader when PyYAML has it (≈ 10× faster: every Snakemake start reads
        # the config through here); a file it refuses is re-read by the pure-Python
        # loader, whose error messages (and their tab hint) are the ones reported.
        dup = _duplicate_key(yaml.compose(text, Loader=_FAST_LOADER))
        data = yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        try:
            dup = _duplicate_key(yaml.compose(text, Loader=yaml.SafeLoader))
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError("", f"{path}: {_yaml_error(exc)}") from exc
    if dup is not None:
        field, line = dup
        raise ConfigError(field, f"{path}: duplicate key {field.rsplit('.', 1)[-1]!r} at line "
                                 f"{line} (YAML would silently keep the last one)")
    if not isinstance(data, dict):
        raise ConfigError("", f"{path}: the top level must be a mapping")
    return data


#: Providers registered in code beyond the schema's built-in ones: name → HTTP layer.
_DECLARED: dict[str, bool] = {}


def declare_provider(name: str, *, http: bool) -> None:
    """Accept ``name`` as a backend's ``provider`` (with the modes and options of a
    provider with an HTTP layer, or of one without). Called by
    :func:`reactlab.backends.registry.register`; the built-in names are the schema's."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError("provider", f"a provider name is lower-case letters, digits and "
                                      f"underscores, not {name!r}")
    _DECLARED[name] = http
    _schema.cache_clear()


def declare_benchmark(name: str, *, categories: Sequence[str], policies: Sequence[str],
                      only: Sequence[str] = ()) -> None:
    """Accept ``name`` as a suite entry's ``benchmark``, with its own ``categories`` and
    ``policies``, and the entry fields ``only`` it takes (checked by
    :func:`reactlab.config.suites.check_suites`). Called by
    :func:`reactlab.suites.registry.register`; the built-in names are the schema's."""
    from reactlab.config.suites import BENCHMARKS

    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError("benchmark", f"a benchmark name is lower-case letters, digits and "
                                       f"underscores, not {name!r}")
    BENCHMARKS[name] = {"categories": tuple(categories), "policies": tuple(policies),
                        "only": tuple(only)}
    _schema.cache_clear()


def declare_framework(name: str, *, providers: Sequence[str],
                      settings: Sequence[str] = (), mcp: bool = False) -> None:
    """Accept ``name`` as an agent's ``framework``, with the providers (wire APIs) its
    client speaks, the ``settings`` it takes and whether it takes MCP tools (checked by
    :func:`reactlab.config.agents.check_agents`). Called by
    :func:`reactlab.frameworks.registry.register`."""
    from reactlab.config.agents import FRAMEWORKS, LESSON

    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name == LESSON:
        raise ConfigError("framework", f"a framework name is lower-case letters, digits and "
                                       f"underscores, and not {LESSON!r}: {name!r}")
    FRAMEWORKS[name] = {"providers": tuple(providers), "settings": tuple(settings),
                        "mcp": ("stdio",) if mcp else ()}


def _provider_enum(schema: Mapping[str, Any], http: bool) -> list[str]:
    enum: list[str] = schema["$defs"]["http_provider" if http else "inprocess_provider"]["enum"]
    return enum


def provider_has_http(name: str) -> bool:
    """Whether the provider ``name`` (built in or declared) has an HTTP layer."""
    if name in _DECLARED:
        return _DECLARED[name]
    return name in _provider_enum(_schema(), True)


@cache
def _schema() -> dict[str, Any]:
    """The config schema, its provider enums extended by the declared providers, its
    suites' benchmark, category and policy enums by the declared benchmarks."""
    schema = copy.deepcopy(schema_file())
    backend = schema["properties"]["backends"]["additionalProperties"]["properties"]
    for name, http in _DECLARED.items():
        if name not in backend["provider"]["enum"]:
            backend["provider"]["enum"].append(name)
            _provider_enum(schema, http).append(name)
    from reactlab.config.suites import BENCHMARKS

    entry = schema["properties"]["suites"]["additionalProperties"]["properties"]
    for name, spec in BENCHMARKS.items():  # the declared ones beyond the schema's enums
        for enum, values in ((entry["benchmark"]["enum"], (name,)),
                             (entry["categories"]["items"]["enum"], spec["categories"]),
                             (entry["policies"]["items"]["enum"], spec["policies"])):
            enum += [v for v in values if v not in enum]
    return schema


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _schema_error_message(err: Any) -> tuple[str, str]:
    """Turn a jsonschema error into (field path, message) a person can act on."""
    where = _path(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = list(err.schema.get("properties", {}))
        extra = [k for k in err.instance if k not in allowed]
        if extra:
            key = extra[0]
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            msg = "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else "")
            msg += f"; allowed: {', '.join(allowed)}"
            return _path([*err.absolute_path, key]), msg
    parts = list(err.absolute_path)
    if len(parts) == 2 and parts[0] == "scenarios" and err.validator in ("oneOf", "not"):
        return where, ("a scenario has exactly one of `steps` (and optionally "
                       "`repeat_last`), `extends` or `strategy`")
    if parts[:1] == ["scenarios"] and "steps" in parts and err.validator in (
            "minProperties", "maxProperties"):
        return where, "a step has exactly one of `calls` or `answer`"
    if (err.validator == "not" and isinstance(err.instance, dict)
            and "raw_arguments" in err.instance):
        return where, "a call has `arguments` or `raw_arguments`, not both"
    return where, err.message


def validate_schema(raw: Mapping[str, Any]) -> None:
    import jsonschema

    # JSON Schema counts 6.0 as an integer; a step limit of 6.0 would then reach
    # range() as a float. Here an integer is a Python int (and never a bool).
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool))
    strict = jsonschema.validators.extend(jsonschema.Draft202012Validator,
                                          type_checker=checker)
    validator = strict(_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: (list(map(str, e.absolute_path))))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        where, msg = _schema_error_message(best)
        raise ConfigError(where, msg)


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs (it travels to the job as JSON: :meth:`to_json`).

    The backend, script, limits and agent settings are typed
    (:mod:`reactlab.config.settings`); given as plain mappings (a spec read back from
    JSON, a test), they are validated into their models here, once.
    """

    task: str
    backend: str
    scenario: str
    question: str
    tools: tuple[str, ...]
    params: Mapping[str, Any]
    backend_config: BackendSettings
    script: ScriptSettings
    limits: Limits
    agent: AgentSettings
    # Repeated trials (reactlab.config.trials): the trial number (None for a single run)
    # and the seed (None unless the run has trials or its backend samples).
    trial: int | None = None
    seed: int | None = None
    #: An outside suite's case (reactlab.suites): the suite, its benchmark, the tools the
    #: model reads and what the benchmark's checker needs; None for the config's runs.
    suite: SuiteCase | None = None
    #: The agent when it is a framework (``agents:``, reactlab.frameworks); None: the
    #: project's own loop (``lesson``).
    framework: FrameworkSettings | None = None
    #: The task's tools when an MCP server serves them (``tasks.<t>.mcp_server``,
    #: docs/mcp.md): the server, how to reach it, the tools as it defines them and the
    #: hash of its tool list; None: the project's tools (reactlab.tools).
    mcp: McpTools | None = None

    def __post_init__(self) -> None:
        for name, build in (("backend_config", backend_settings), ("script", script_settings),
                            ("limits", limits), ("agent", agent_settings),
                            ("suite", suite_case), ("framework", framework_settings),
                            ("mcp", mcp_tools)):
            value = getattr(self, name)
            if isinstance(value, Mapping):
                object.__setattr__(self, name, build(value, name))

    @property
    def run_scenario(self) -> str:
        """The scenario as the run's key, paths and tables name it: a framework's run is
        ``{scenario}__{agent}`` beside the lesson loop's ``{scenario}``."""
        if self.framework is not None:
            return f"{self.scenario}__{self.framework.name}"
        return self.scenario

    @property
    def base_key(self) -> str:
        if self.suite is not None:
            return f"{self.suite.name}/{self.backend}/{self.scenario}/{self.task}"
        return f"{self.task}/{self.backend}/{self.run_scenario}"

    @property
    def tool_schemas(self) -> list[dict[str, Any]] | None:
        """The tool definitions an outside suite's case carries, or an MCP server's
        (None: the project's tools, by name: :func:`reactlab.backends.tool_definitions`)."""
        if self.mcp is not None:
            return list(self.mcp.tools)
        return list(self.suite.tools) if self.suite is not None else None

    @property
    def key(self) -> str:
        return trial_key(self.base_key, self.trial)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "task": self.task, "backend": self.backend, "scenario": self.scenario,
            "question": self.question, "tools": list(self.tools), "params": dict(self.params),
            "backend_config": self.backend_config.to_dict(), "script": self.script.to_dict(),
            "limits": self.limits.to_dict(), "agent": self.agent.to_dict(),
        }
        # only when set, so that the hashes of runs without trials or sampling stay put
        if self.trial is not None:
            out["trial"] = self.trial
        if self.seed is not None:
            out["seed"] = self.seed
        if self.suite is not None:
            out["suite"] = self.suite.to_dict()
        if self.framework is not None:
            out["framework"] = self.framework.to_dict()
        if self.mcp is not None:
            out["mcp"] = self.mcp.to_dict()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"))

    @property
    def config_hash(self) -> str:
        """sha256 of the config slice this run depends on."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpec:
        """The spec of :meth:`to_dict` (a trace header's ``spec``, a shard's spec file)."""
        d = dict(d)
        d["tools"] = tuple(d["tools"])
        return cls(**d)

    def script_obj(self) -> Script:
        """The scripted steps (ConfigError for a strategy run, which has none)."""
        if isinstance(self.script, PolicyScript):
            raise ConfigError("script", f"{self.key} plays the policy "
                                        f"{self.script.policy!r}, whose steps its benchmark "
                                        "writes when the run starts")
        if not isinstance(self.script, StepScript):
            raise ConfigError("script", f"{self.key} runs a model ({self.script.strategy}); "
                                        "it has no script")
        return Script(self.script.model, tuple(self.script.steps), self.script.repeat_last)


@dataclass(frozen=True)
class Config:
    raw: Mapping[str, Any]
    runs: tuple[RunSpec, ...] = field(repr=False)

    def run(self, task: str, backend: str, scenario: str, trial: int | None = None) -> RunSpec:
        for r in self.runs:
            if (r.task, r.backend, r.scenario, r.trial) == (task, backend, scenario, trial):
                return r
        raise KeyError(f"{trial_key(f'{task}/{backend}/{scenario}', trial)} is not in the matrix")

    @property
    def data(self) -> Mapping[str, Any]:
        data: Mapping[str, Any] = self.raw["data"]
        return data

    @property
    def figure(self) -> Mapping[str, Any]:
        figure: Mapping[str, Any] = self.raw["figure"]
        return figure


def resolved_scenario(raw: Mapping[str, Any], sid: str) -> dict[str, Any]:
    """The scenario with ``extends`` applied: its base's script, its own limits."""
    entry = raw["scenarios"][sid]
    if "strategy" in entry:
        return {"model": sid, "strategy": entry["strategy"], "limits": entry.get("limits", {}),
                "defences": entry.get("defences", {})}
    if "extends" not in entry:
        return {"model": sid, "steps": entry["steps"],
                "repeat_last": entry.get("repeat_last", False),
                "limits": entry.get("limits", {}), "defences": entry.get("defences", {}),
                "faults": entry.get("faults", [])}
    base_id = entry["extends"]
    base = raw["scenarios"].get(base_id)
    if base is None:
        raise ConfigError(f"scenarios.{sid}.extends", f"no scenario named {base_id!r}")
    if "extends" in base or "strategy" in base:
        raise ConfigError(f"scenarios.{sid}.extends",
                          f"{base_id!r} is not a scripted scenario with `steps`; extend one")
    return {"model": base_id, "steps": base["steps"],
            "repeat_last": base.get("repeat_last", False),
            "limits": {**base.get("limits", {}), **entry.get("limits", {})},
            "defences": {**base.get("defences", {}), **entry.get("defences", {})},
            "faults": entry.get("faults", base.get("faults", []))}


#: The longest task, backend or scenario name. Each becomes a path component: a trace
#: `{scenario}.jsonl` and its temporary `.{scenario}.{pid}.{12 hex}.tmp.jsonl` (name + up
#: to 26 characters, see core/io.py), a viewer page and log files, all well under the 255
#: bytes a file name may have on common file systems (names are ASCII, so one character
#: is one byte).
MAX_NAME = 100

#: The files rule generate_data writes under data/generated/, by config key.
GENERATED_DATA = {"prices": "acciones6_precios.parquet", "news": "noticias6_corpus.parquet"}


# Snakemake discards a job whose wildcard value ends in one substring repeated 20 or
# more times (PeriodicWildcardError: it suspects a runaway recursion), so such a name
# would leave its runs without a producer.
_PERIODIC = re.compile(r"(.+?)\1{19,}$")


def _check_name_lengths(raw: Mapping[str, Any]) -> None:
    for table in ("tasks", "backends", "scenarios"):
        names = raw.get(table)
        if not isinstance(names, Mapping):
            continue
        for name in names:
            if not isinstance(name, str):
                continue
            if len(name) > MAX_NAME:
                raise ConfigError(
                    f"{table}.{name[:40]}...",
                    f"name is {len(name)} characters long; at most {MAX_NAME} (it becomes a "
                    f"file name under results/)")
            periodic = _PERIODIC.search(name)
            if periodic:
                raise ConfigError(
                    f"{table}.{name}",
                    f"name ends with {periodic.group(1)!r} repeated "
                    f"{len(periodic.group(0)) // len(periodic.group(1))} times; Snakemake "
                    f"refuses such a wildcard value (PeriodicWildcardError), repeat it "
                    f"fewer than 20 times")


def data_source(raw: Mapping[str, Any], kind: str, root: str | Path = ".") -> str:
    """The data file a run reads for ``kind`` (prices or news), relative to ``root``.

    The user's file when ``data.<kind>`` exists; else, when it has the name of the file
    rule generate_data writes, that generated file; else a ConfigError naming the field
    (a typo'd path must not silently become generated data, nor a missing output).
    """
    configured = Path(raw["data"][kind])
    if (Path(root) / configured).exists():
        if not (Path(root) / configured).is_file():
            raise ConfigError(f"data.{kind}", f"{configured} is not a file")
        return str(configured)
    if configured.name == GENERATED_DATA[kind]:
        return f"data/generated/{configured.name}"
    raise ConfigError(
        f"data.{kind}",
        f"{configured} does not exist. Put your parquet file there, or name the default "
        f"{GENERATED_DATA[kind]!r} to have the pipeline generate it from data.seed")


def _check_marks(raw: Mapping[str, Any], runs: Iterable[RunSpec]) -> None:
    """Every figure mark must be a step the loop run can reach."""
    fig = raw["figure"]
    loop = next(r for r in runs if (r.task, r.backend, r.scenario)
                == (fig["task"], fig["backend"], fig["loop"]))
    limit = loop.limits.max_steps
    for i, mark in enumerate(fig["marks"]):
        if mark > limit:
            raise ConfigError(f"figure.marks[{i}]",
                              f"step {mark} is beyond the run's length: {loop.key} stops "
                              f"after at most {limit} steps (its max_steps)")


def _resolve_scenarios(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every scenario with ``extends`` resolved, its template names and checked faults."""
    scenarios: dict[str, dict[str, Any]] = {}
    for sid in raw["scenarios"]:
        scen = resolved_scenario(raw, sid)
        try:
            scen["names"] = (set() if "strategy" in scen
                             else Script.from_config(sid, scen).names())
        except ScriptError as exc:
            raise ConfigError(f"scenarios.{sid}.steps", str(exc)) from exc
        if scen.get("faults"):
            from reactlab.config.faults import parse_plan

            parse_plan(scen["faults"], f"scenarios.{sid}.faults")  # overlaps, kinds
        scenarios[sid] = scen
    return scenarios


def _check_block_names(raw: Mapping[str, Any], i: int, block: Mapping[str, Any]) -> None:
    """Every task, backend and scenario a matrix block names exists (with a suggestion)."""
    for kind in ("tasks", "backends", "scenarios"):
        for j, name in enumerate(block[kind]):
            if name not in raw[kind]:
                hint = difflib.get_close_matches(name, list(raw[kind]), n=1)
                raise ConfigError(
                    f"matrix[{i}].{kind}[{j}]",
                    f"no {kind[:-1]} named {name!r}"
                    + (f" (did you mean {hint[0]!r}?)" if hint else ""),
                )


def _check_combination(raw: Mapping[str, Any], i: int, t: str, b: str, s: str,
                       scen: Mapping[str, Any], agent: str = "lesson") -> None:
    """One task × backend × scenario (× agent) of matrix block ``i`` can run."""
    if "mcp_server" in raw["tasks"][t] and raw["backends"][b]["mode"] == "live":
        raise ConfigError(f"matrix[{i}]", f"task {t!r} takes its tools from an MCP "
                          f"server; the live backend {b!r} does not run such tasks "
                          "(docs/mcp.md)")
    missing = scen["names"] - set(raw["tasks"][t]["params"]) - ROOT_NAMES
    if missing:
        raise ConfigError(
            f"matrix[{i}]",
            f"scenario {s!r} uses {', '.join(sorted('{' + m + '}' for m in missing))}"
            f", which task {t!r} does not define in its params",
        )
    model_backend = raw["backends"][b]["mode"] in ("model", "live")
    if model_backend != ("strategy" in scen):
        raise ConfigError(
            f"matrix[{i}]",
            f"backend {b!r} " + (
                f"runs a real model and needs a `strategy` scenario, not the script {s!r}"
                if model_backend else
                f"plays scripts and cannot run the `strategy` scenario {s!r}"))
    decoding = raw["backends"][b].get("decoding", "free")
    if decoding in CONSTRAINED_DECODINGS and not raw["agent"]["send_tools"]:
        raise ConfigError(
            "agent.send_tools",
            f"matrix[{i}] runs backend {b!r}, whose decoding {decoding!r} constrains the "
            "model to the tool definitions, so they must be sent (agent.send_tools: true); "
            f"take {b!r} out of the matrix or use another decoding")
    if scen.get("faults") and not provider_has_http(raw["backends"][b]["provider"]):
        raise ConfigError(
            f"matrix[{i}]", f"scenario {s!r} injects HTTP faults, which the "
            f"{raw['backends'][b]['provider']} backend {b!r} has no HTTP layer to receive")


def _run_spec(raw: Mapping[str, Any], t: str, b: str, s: str,
              scen: Mapping[str, Any], backend: BackendSettings,
              mcp: McpTools | None = None) -> RunSpec:
    """The spec of one run (before trials): the config slice its job receives."""
    task, agent = raw["tasks"][t], raw["agent"]
    return RunSpec(
        task=t, backend=b, scenario=s,
        question=task["question"], tools=tuple(task["tools"]),
        params=task["params"], backend_config=backend,
        script=script_settings(
            {"model": scen["model"], "strategy": scen["strategy"]}
            if "strategy" in scen else
            {"model": scen["model"], "steps": scen["steps"],
             "repeat_last": scen["repeat_last"],
             # only when present, so that other runs' hashes stay put
             **({"faults": scen["faults"]} if scen["faults"] else {})},
            f"scenarios.{s}"),
        limits=limits({"max_steps": scen["limits"].get("max_steps", agent["max_steps"]),
                       "token_budget": scen["limits"].get("token_budget",
                                                          agent["token_budget"])},
                      f"scenarios.{s}.limits"),
        agent=agent_settings({"send_tools": agent["send_tools"],
                              "send_system_prompt": agent["send_system_prompt"],
                              "system_prompt": agent["system_prompt"],
                              "defences": {**agent["defences"], **scen["defences"]}},
                             "agent"),
        mcp=mcp,
    )


def parse(raw: Mapping[str, Any]) -> Config:
    """Validate a config mapping and expand its matrix. Raises ConfigError."""
    raw = copy.deepcopy(dict(raw))
    _check_name_lengths(raw)
    validate_schema(raw)
    scenarios = _resolve_scenarios(raw)
    runs: list[RunSpec] = []
    seen: set[tuple[str, str, str]] = set()  # the lesson loop's runs
    seen_agents: set[tuple[str, str, str, str]] = set()
    from reactlab.config.agents import LESSON, check_agents

    check_agents(raw)
    from reactlab.config.mcp import Planner

    mcp = Planner(raw)
    for t in raw["tasks"]:
        mcp.check_task(t)
    live = raw.get("live", {})
    # the typed settings of each backend, built once (the schema has validated them)
    backends = {b: backend_settings(entry, f"backends.{b}")
                for b, entry in raw["backends"].items()}
    for i, block in enumerate(raw["matrix"]):
        if not live.get("enabled", False) and any(
                b in backends and backends[b].mode == "live" for b in block["backends"]):
            continue  # live blocks run only with `live: {enabled: true}`: no key is asked for
        _check_block_names(raw, i, block)
        for t in block["tasks"]:
            for s in block["scenarios"]:
                for b, a in itertools.product(block["backends"],
                                              block.get("agents", [LESSON])):
                    _check_combination(raw, i, t, b, s, scenarios[s], a)
                    if (t, b, s, a) in seen_agents:
                        continue
                    seen_agents.add((t, b, s, a))
                    spec = _run_spec(raw, t, b, s, scenarios[s], backends[b], mcp.part(t))
                    if a == LESSON:
                        seen.add((t, b, s))
                    else:
                        spec = replace(spec, framework=framework_settings(
                            {"name": a, **raw["agents"][a]}, f"agents.{a}"))
                    for trial in trial_indices(block.get("trials", 1)):
                        seed = (derive_seed(spec.base_key, trial or 1, raw["data"]["seed"])
                                if trial is not None or backends[b].samples else None)
                        runs.append(replace(spec, trial=trial, seed=seed))
    fig = raw["figure"]
    for name in ("loop", "reference"):
        if (fig["task"], fig["backend"], fig[name]) not in seen:
            raise ConfigError(f"figure.{name}",
                              f"{fig['task']}/{fig['backend']}/{fig[name]} is not in the matrix")
    _check_marks(raw, runs)
    check_analysis(raw)
    from reactlab.config.suites import check_suites

    check_suites(raw)
    return Config(raw=raw, runs=tuple(runs))


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` merged into ``base`` as Snakemake merges a --configfile (mappings
    recursively, anything else replaced)."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def load(path: str | Path = "config.yaml", overlays: Iterable[str | Path] = ()) -> Config:
    """Load, merge the overlays (as ``snakemake --configfile`` does), validate."""
    raw = load_yaml(path)
    for overlay in overlays:
        raw = merge(raw, load_yaml(overlay))
    return parse(raw)
