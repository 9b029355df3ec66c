"""The runs of a config: :class:`RunSpec`, everything one run needs, and :class:`Config`,
the validated config with the matrix of its runs (built by :func:`reactlab.config.parse`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reactlab.config.scripts import Script
from reactlab.config.settings import (
    AgentSettings,
    BackendSettings,
    FrameworkSettings,
    Limits,
    PolicyScript,
    ScriptSettings,
    StepScript,
    SuiteCase,
    agent_settings,
    backend_settings,
    framework_settings,
    limits,
    script_settings,
    suite_case,
)
from reactlab.config.tool_parts import McpTools, ToolSourcePart, mcp_tools, tool_source_part
from reactlab.config.trials import trial_key
from reactlab.core.errors import ConfigError


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
    #: The task's tools when a tool source serves them (``tasks.<t>.tool_source``, a
    #: plugin: reactlab.tools.sources); None otherwise.
    tool_source: ToolSourcePart | None = None

    def __post_init__(self) -> None:
        for name, build in (("backend_config", backend_settings), ("script", script_settings),
                            ("limits", limits), ("agent", agent_settings),
                            ("suite", suite_case), ("framework", framework_settings),
                            ("mcp", mcp_tools), ("tool_source", tool_source_part)):
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
            return self.mcp.described(self.agent.defences.sanitize_descriptions)
        if self.tool_source is not None:
            return list(self.tool_source.tools)
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
        if self.tool_source is not None:
            out["tool_source"] = self.tool_source.to_dict()
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
class LeftOut:
    """The runs a plan leaves out because the tools of their task's MCP server are not
    known: the server could not be listed (its error), or the command lists none."""

    server: str
    error: ConfigError
    runs: tuple[str, ...]

    def line(self) -> str:
        """One line for the person: which runs, why, and that the others go on."""
        shown = ", ".join(self.runs[:3]) + (", ..." if len(self.runs) > 3 else "")
        return (f"{len(self.runs)} run(s) on MCP server {self.server!r} left out of this "
                f"plan ({shown}), the others planned: {self.error}")


@dataclass(frozen=True)
class Config:
    raw: Mapping[str, Any]
    runs: tuple[RunSpec, ...] = field(repr=False)
    #: the runs left out of the plan, by server (:func:`reactlab.config.parse`'s ``servers``)
    left_out: tuple[LeftOut, ...] = field(default=(), repr=False)
    #: the MCP servers whose planned tool list came from the cache (stdio), which a job
    #: about to run checks first (:func:`reactlab.config.mcp.stale_cache`)
    cached_servers: frozenset[str] = field(default=frozenset(), repr=False)

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
