"""Parse and validate config.yaml, and expand it into the matrix of runs.

Validation happens in three layers, all before any job starts:

1. YAML itself (duplicate keys are an error, not "last one wins"):
   :mod:`reactlab.config.loading`;
2. the JSON Schema in ``workflow/schemas/config.schema.yaml`` (types, ranges, unknown
   keys): :mod:`reactlab.config.schema`;
3. cross-references (matrix entries, ``extends``, template names against task params):
   here, as :func:`parse` expands the matrix into :class:`~reactlab.config.spec.RunSpec`
   objects.

Every failure raises :class:`~reactlab.core.errors.ConfigError` whose ``field`` is a dotted
path such as ``scenarios.bucle.steps[0].calls[0].name``.

This module must stay cheap to import: the Snakefile imports it at parse time.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from reactlab.config.agents import LESSON, check_agents
from reactlab.config.faults import parse_plan
from reactlab.config.loading import check_files, load_yaml, merge
from reactlab.config.mcp import Planner, task_servers
from reactlab.config.schema import (
    SCHEMA_PATH,
    provider_entry,
    provider_has_http,
    validate_schema,
)
from reactlab.config.scripts import ROOT_NAMES, Script
from reactlab.config.settings import (
    CONSTRAINED_DECODINGS,
    BackendSettings,
    agent_settings,
    backend_settings,
    framework_settings,
    limits,
    script_settings,
)
from reactlab.config.spec import Config, LeftOut, RunSpec
from reactlab.config.suites import check_suites
from reactlab.config.tool_parts import McpTools
from reactlab.config.tool_sources import ToolSources
from reactlab.config.trials import check_analysis, derive_seed, trial_indices
from reactlab.core.errors import ConfigError, ScriptError

__all__ = ["GENERATED_DATA", "MAX_NAME", "SCHEMA_PATH", "Config", "ConfigError", "LeftOut",
           "RunSpec", "check_files", "data_source", "load", "load_yaml", "merge", "parse",
           "provider_has_http", "resolved_scenario", "validate_schema"]


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
    if task_servers(raw["tasks"][t]) and raw["backends"][b]["mode"] == "live":
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


def _expand(raw: Mapping[str, Any], scenarios: Mapping[str, Mapping[str, Any]],
            mcp: Planner, sources: ToolSources,
            left: dict[str, tuple[ConfigError, list[str]]]) -> list[RunSpec]:
    """The matrix's runs. A run whose task's MCP server was not listed (``mcp.unlisted``)
    goes to ``left`` under its server instead, with the error."""
    runs: list[RunSpec] = []
    seen_agents: set[tuple[str, str, str, str]] = set()
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
            unlisted = mcp.unlisted(t)
            for s in block["scenarios"]:
                for b, a in itertools.product(block["backends"],
                                              block.get("agents", [LESSON])):
                    _check_combination(raw, i, t, b, s, scenarios[s], a)
                    if (t, b, s, a) in seen_agents:
                        continue
                    seen_agents.add((t, b, s, a))
                    spec = replace(_run_spec(raw, t, b, s, scenarios[s], backends[b],
                                             None if unlisted else mcp.part(t)),
                                   tool_source=sources.part(t))
                    if a != LESSON:
                        spec = replace(spec, framework=framework_settings(
                            {"name": a, **raw["agents"][a]}, f"agents.{a}"))
                    trials = []
                    for trial in trial_indices(block.get("trials", 1)):
                        seed = (derive_seed(spec.base_key, trial or 1, raw["data"]["seed"])
                                if trial is not None or backends[b].samples else None)
                        trials.append(replace(spec, trial=trial, seed=seed))
                    if unlisted is None:
                        runs += trials
                    else:
                        left.setdefault(mcp.unlisted_server(t) or "", (unlisted, []))[1] \
                            .extend(r.key for r in trials)
    return runs


def _check_figure(raw: Mapping[str, Any], runs: list[RunSpec],
                  left: Mapping[str, tuple[ConfigError, list[str]]], mode: str) -> None:
    """The figure's loop and reference runs are planned, and its marks within the loop
    run's length. A run of them left out (its MCP server not listed): the server's error,
    unless the command lists no server (``skip``: the figure is not its concern)."""
    fig = raw["figure"]
    planned = {(r.task, r.backend, r.scenario) for r in runs if r.framework is None}
    for name in ("loop", "reference"):
        run = (fig["task"], fig["backend"], fig[name])
        if run in planned:
            continue
        server = next((n for n in task_servers(raw["tasks"].get(fig["task"], {}))
                       if n in left), None)
        base = "/".join(run)
        if server is not None and any(k == base or k.startswith(f"{base}/")
                                      for k in left[server][1]):
            if mode == "skip":
                return
            raise ConfigError(f"figure.{name}", f"{base} needs MCP server {server!r}, whose "
                              f"tools are not known: {left[server][0]}")
        raise ConfigError(f"figure.{name}", f"{base} is not in the matrix")
    _check_marks(raw, runs)


def parse(raw: Mapping[str, Any], *, servers: str = "require") -> Config:
    """Validate a config mapping and expand its matrix. Raises ConfigError.

    ``servers`` (:data:`reactlab.config.mcp.MODES`): what a task's MCP server that cannot
    be listed does. ``require``: a ConfigError naming the server (``reactlab check``).
    ``tolerate``: the runs of its tasks are left out of the plan (:attr:`Config.left_out`),
    the others planned (the Snakefile: a failure stays with the runs it touches).
    ``skip``: no server is started or reached, and every run on one is left out (the
    commands that need no run: ``reactlab mcp``, ``serve``, ``tables``, ``figure``)."""
    raw = copy.deepcopy(dict(raw))
    _check_name_lengths(raw)
    validate_schema(raw)
    for b, entry in raw["backends"].items():  # installed (the schema takes any name)
        provider_entry(entry["provider"], f"backends.{b}.provider", entry.get("package"))
    scenarios = _resolve_scenarios(raw)
    check_agents(raw)
    sources = ToolSources(raw)
    mcp = Planner(raw, mode=servers)
    for t in raw["tasks"]:
        mcp.check_task(t)
        sources.part(t)
    left: dict[str, tuple[ConfigError, list[str]]] = {}
    runs = _expand(raw, scenarios, mcp, sources, left)
    _check_figure(raw, runs, left, servers)
    check_analysis(raw)
    check_suites(raw)
    return Config(raw=raw, runs=tuple(runs),
                  left_out=tuple(LeftOut(server, error, tuple(keys))
                                 for server, (error, keys) in left.items()),
                  cached_servers=frozenset(mcp.cached))


def load(path: str | Path = "config.yaml", overlays: Iterable[str | Path] = (), *,
         servers: str = "require") -> Config:
    """Load, merge the overlays (as ``snakemake --configfile A B`` does), validate
    (:func:`parse`, its ``servers`` mode)."""
    raw = load_yaml(path)
    for overlay in overlays:
        raw = merge(raw, load_yaml(overlay))
    return parse(raw, servers=servers)
