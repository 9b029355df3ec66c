"""Parse and validate config.yaml, and expand it into the matrix of runs.

Validation happens in three layers, all before any job starts:

1. YAML itself (duplicate keys are an error, not "last one wins");
2. the JSON Schema in ``workflow/schemas/config.schema.yaml`` (types, ranges, unknown keys);
3. cross-references (matrix entries, ``extends``, template names against task params).

Every failure raises :class:`~reactlab.errors.ConfigError` whose ``field`` is a dotted
path such as ``scenarios.bucle.steps[0].calls[0].name``.

This module must stay cheap to import: the Snakefile imports it at parse time.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from reactlab.errors import ConfigError, ScriptError
from reactlab.scripts import ROOT_NAMES, Script

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "config.schema.yaml"


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate mapping keys."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigError(
                "", f"duplicate key {key!r} at line {key_node.start_mark.line + 1}"
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


def load_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise ConfigError("", f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError("", f"{path}: the top level must be a mapping")
    return data


@cache
def _schema() -> dict[str, Any]:
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


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
        return where, ("a scenario has either `steps` (and optionally `repeat_last`) "
                       "or `extends`, not both and not neither")
    if parts[:1] == ["scenarios"] and "steps" in parts and err.validator in (
            "minProperties", "maxProperties"):
        return where, "a step has exactly one of `calls` or `answer`"
    if (err.validator == "not" and isinstance(err.instance, dict)
            and "raw_arguments" in err.instance):
        return where, "a call has `arguments` or `raw_arguments`, not both"
    return where, err.message


def validate_schema(raw: Mapping[str, Any]) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: (list(map(str, e.absolute_path))))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        where, msg = _schema_error_message(best)
        raise ConfigError(where, msg)


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs, as plain JSON data (it travels to the job as JSON)."""

    task: str
    backend: str
    scenario: str
    question: str
    tools: tuple[str, ...]
    params: Mapping[str, Any]
    backend_config: Mapping[str, Any]
    script: Mapping[str, Any]  # {"model": ..., "steps": [...], "repeat_last": bool}
    limits: Mapping[str, Any]  # {"max_steps": int, "token_budget": int | None}
    agent: Mapping[str, Any]  # {"send_tools", "send_system_prompt", "system_prompt"}

    @property
    def key(self) -> str:
        return f"{self.task}/{self.backend}/{self.scenario}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task, "backend": self.backend, "scenario": self.scenario,
            "question": self.question, "tools": list(self.tools), "params": dict(self.params),
            "backend_config": dict(self.backend_config), "script": dict(self.script),
            "limits": dict(self.limits), "agent": dict(self.agent),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"))

    @property
    def config_hash(self) -> str:
        """sha256 of the config slice this run depends on."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        d = json.loads(text)
        d["tools"] = tuple(d["tools"])
        return cls(**d)

    def script_obj(self) -> Script:
        return Script.from_config(self.script["model"], self.script)


@dataclass(frozen=True)
class Config:
    raw: Mapping[str, Any]
    runs: tuple[RunSpec, ...] = field(repr=False)

    def run(self, task: str, backend: str, scenario: str) -> RunSpec:
        for r in self.runs:
            if (r.task, r.backend, r.scenario) == (task, backend, scenario):
                return r
        raise KeyError(f"{task}/{backend}/{scenario} is not in the matrix")

    @property
    def data(self) -> Mapping[str, Any]:
        return self.raw["data"]

    @property
    def figure(self) -> Mapping[str, Any]:
        return self.raw["figure"]


def _resolved_scenario(raw: Mapping[str, Any], sid: str) -> dict[str, Any]:
    """The scenario with ``extends`` applied: its base's script, its own limits."""
    entry = raw["scenarios"][sid]
    if "extends" not in entry:
        return {"model": sid, "steps": entry["steps"],
                "repeat_last": entry.get("repeat_last", False),
                "limits": entry.get("limits", {})}
    base_id = entry["extends"]
    base = raw["scenarios"].get(base_id)
    if base is None:
        raise ConfigError(f"scenarios.{sid}.extends", f"no scenario named {base_id!r}")
    if "extends" in base:
        raise ConfigError(f"scenarios.{sid}.extends",
                          f"{base_id!r} itself extends another scenario; use its base")
    return {"model": base_id, "steps": base["steps"],
            "repeat_last": base.get("repeat_last", False),
            "limits": {**base.get("limits", {}), **entry.get("limits", {})}}


def parse(raw: Mapping[str, Any]) -> Config:
    """Validate a config mapping and expand its matrix. Raises ConfigError."""
    raw = copy.deepcopy(dict(raw))
    validate_schema(raw)
    scen_cache: dict[str, dict[str, Any]] = {}
    for sid in raw["scenarios"]:
        scen = _resolved_scenario(raw, sid)
        try:
            scen["names"] = Script.from_config(sid, scen).names()
        except ScriptError as exc:
            raise ConfigError(f"scenarios.{sid}.steps", str(exc)) from exc
        scen_cache[sid] = scen

    runs: list[RunSpec] = []
    seen: set[tuple[str, str, str]] = set()
    agent = raw["agent"]
    for i, block in enumerate(raw["matrix"]):
        for kind, table in (("tasks", "tasks"), ("backends", "backends"),
                            ("scenarios", "scenarios")):
            for j, name in enumerate(block[kind]):
                if name not in raw[table]:
                    hint = difflib.get_close_matches(name, list(raw[table]), n=1)
                    raise ConfigError(
                        f"matrix[{i}].{kind}[{j}]",
                        f"no {kind[:-1]} named {name!r}"
                        + (f" (did you mean {hint[0]!r}?)" if hint else ""),
                    )
        for t in block["tasks"]:
            task = raw["tasks"][t]
            for s in block["scenarios"]:
                scen = scen_cache[s]
                missing = scen["names"] - set(task["params"]) - ROOT_NAMES
                if missing:
                    raise ConfigError(
                        f"matrix[{i}]",
                        f"scenario {s!r} uses {', '.join(sorted('{' + m + '}' for m in missing))}"
                        f", which task {t!r} does not define in its params",
                    )
                for b in block["backends"]:
                    if (t, b, s) in seen:
                        continue
                    seen.add((t, b, s))
                    runs.append(RunSpec(
                        task=t, backend=b, scenario=s,
                        question=task["question"], tools=tuple(task["tools"]),
                        params=task["params"], backend_config=raw["backends"][b],
                        script={"model": scen["model"], "steps": scen["steps"],
                                "repeat_last": scen["repeat_last"]},
                        limits={"max_steps": scen["limits"].get("max_steps", agent["max_steps"]),
                                "token_budget": scen["limits"].get("token_budget",
                                                                   agent["token_budget"])},
                        agent={"send_tools": agent["send_tools"],
                               "send_system_prompt": agent["send_system_prompt"],
                               "system_prompt": agent["system_prompt"]},
                    ))
    fig = raw["figure"]
    for name in ("loop", "reference"):
        if (fig["task"], fig["backend"], fig[name]) not in seen:
            raise ConfigError(f"figure.{name}",
                              f"{fig['task']}/{fig['backend']}/{fig[name]} is not in the matrix")
    return Config(raw=raw, runs=tuple(runs))


def load(path: str | Path = "config.yaml") -> Config:
    return parse(load_yaml(path))
