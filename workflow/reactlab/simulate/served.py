"""What the server serves: the model names of a config's scenarios (:func:`served_models`),
and the fault plan of each run in progress across its requests (:class:`FaultRuns`)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reactlab.config import resolved_scenario
from reactlab.config.faults import Fault, FaultPlan, parse_plan
from reactlab.config.scripts import ROOT_NAMES, Script
from reactlab.core.errors import ConfigError

if TYPE_CHECKING:
    from reactlab.config import Config

log = logging.getLogger("reactlab.simulate.server")

_MAX_RUNS = 1024  # fault-plan states kept (least recently used dropped)


# --- which model names are served -------------------------------------------------------


@dataclass(frozen=True)
class ServedModel:
    """One model name the server answers to: a scenario's script played on a task."""

    name: str
    task: str
    scenario: str
    script: Script
    params: Mapping[str, Any]
    question: str
    faults: tuple[Fault, ...] = ()
    #: the task's tools (none of them is an agent's answer tool: ScriptedPolicy.tools)
    tools: frozenset[str] = frozenset()
    #: False where the config withholds tool definitions from the wire
    #: (``agent.send_tools: false``): then a tool-less request still gets the script's
    #: calls (ScriptedPolicy.calls_need_tools)
    tools_sent: bool = True


def served_models(config: Config, task: str | None = None) -> dict[str, ServedModel]:
    """Every model name served, in listing order: bare scenario names, then TASK/SCENARIO.

    ``task`` is the task bare names play (default: each scenario's first task in the
    matrix). A (task, scenario) pair is served when the task defines every parameter the
    script uses. Strategy scenarios (real models) are not served.
    """
    raw = config.raw
    tasks: Mapping[str, Any] = raw["tasks"]
    if task is not None and task not in tasks:
        raise ConfigError("task", f"no task named {task!r}; tasks: {', '.join(tasks)}")
    scenarios: dict[str, tuple[Script, tuple[Fault, ...]]] = {}
    for sid, declared in raw["scenarios"].items():
        if "strategy" in declared:
            continue
        resolved = resolved_scenario(raw, sid)
        faults = parse_plan(resolved.get("faults") or (), f"scenarios.{sid}.faults")
        if any(f.raises for f in faults):
            log.warning("scenario %s: `raise` faults cannot be served over HTTP; skipped", sid)
            faults = tuple(f for f in faults if f.raises is None)
        scenarios[sid] = (Script.from_config(resolved["model"], resolved), faults)

    def fits(t: str, sid: str) -> bool:
        return not (scenarios[sid][0].names() - set(tasks[t]["params"]) - ROOT_NAMES)

    default: dict[str, str] = {}
    for block in raw["matrix"]:
        for sid in block["scenarios"]:
            if sid in scenarios and sid not in default:
                default[sid] = block["tasks"][0]

    def entry(name: str, t: str, sid: str) -> ServedModel:
        script, faults = scenarios[sid]
        return ServedModel(name=name, task=t, scenario=sid, script=script,
                           params=tasks[t]["params"], question=tasks[t]["question"],
                           faults=faults, tools=frozenset(tasks[t].get("tools") or ()),
                           tools_sent=bool(raw["agent"]["send_tools"]))

    out: dict[str, ServedModel] = {}
    for sid in scenarios:
        t = task if task is not None else default.get(sid)
        if t is not None and fits(t, sid):
            out[sid] = entry(sid, t, sid)
    for t in tasks:
        for sid in scenarios:
            if fits(t, sid):
                out[f"{t}/{sid}"] = entry(f"{t}/{sid}", t, sid)
    return out


# --- fault plans across requests --------------------------------------------------------


@dataclass
class RunState:
    """The fault plan of one run, and how its last attempt was answered."""

    plan: FaultPlan
    last_step: int = 0
    last_clean: bool = False  # the last attempt was answered without a fault


class FaultRuns:
    """The fault plan of the run in progress, per (API, model name, run header)."""

    def __init__(self, limit: int = _MAX_RUNS) -> None:
        self.limit = limit
        self.states: OrderedDict[tuple[str, str, str], RunState] = OrderedDict()

    def plan_for(self, api: str, served: ServedModel, run_id: str, step: int) -> RunState:
        key = (api, served.name, run_id)
        state = self.states.get(key)
        if state is None or step < state.last_step or (
                step == state.last_step and state.last_clean):
            state = RunState(FaultPlan(served.faults))
        self.states[key] = state
        self.states.move_to_end(key)
        while len(self.states) > self.limit:
            self.states.popitem(last=False)
        return state
