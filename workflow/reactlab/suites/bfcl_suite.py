"""BFCL's registry entry (:data:`BFCL`): its cases as specs, its scorer, its tables.

* Planning (:func:`case_specs`): every sampled case of each category becomes one
  :class:`~reactlab.config.RunSpec` per (backend, scenario); the tools are the case's
  function documents mapped to JSON Schema (:func:`reactlab.suites.bfcl.tool_definitions`),
  a backend that plays scripts plays each of BFCL's policies, a model backend (local or
  live) the model, one turn.
* Running: :func:`reactlab.suites.bfcl_run.run_case` (a single turn, calls recorded).
* Scoring: BFCL's own checker beside the project's trajectory metrics
  (:func:`reactlab.suites.bfcl_score.suite_record`).
* Tables: ``bfcl.csv`` and ``bfcl_cases.csv`` (:mod:`reactlab.suites.bfcl_tables`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactlab.agent.defences import NO_DEFENCES
from reactlab.analysis.figure_kinds import Figure
from reactlab.analysis.suite_figures import bfcl_accuracy
from reactlab.config import RunSpec
from reactlab.config.settings import (
    LiveBackend,
    SimulatedBackend,
    SuiteCase,
    SuiteSettings,
    agent_settings,
    backend_settings,
    script_settings,
)
from reactlab.config.settings import limits as limits_settings
from reactlab.suites import bfcl, bfcl_run, bfcl_score, bfcl_tables
from reactlab.suites.bfcl_run import BfclCase
from reactlab.suites.bfcl_score import NAME
from reactlab.suites.entry import BenchmarkEntry
from reactlab.suites.summaries import bfcl_summary
from reactlab.suites.types import SCENARIO_MODEL, sample_cases

__all__ = ["BFCL", "case_specs"]


def case_specs(name: str, suite: SuiteSettings, raw: Mapping[str, Any]) -> list[RunSpec]:
    """The specs of a ``benchmark: bfcl`` entry of the ``suites:`` section: every sampled
    case of each category, on each backend, under each policy (a backend that plays
    scripts) or the model (one that runs a model). On an HTTP API (``simulated`` or
    ``live``) a case is in BFCL's "FC" mode: its tools go as the API's tool definitions,
    each dot of a name made an underscore, and the system prompt is sent only when the
    entry gives one; on the local backend it is in "prompt" mode (the tools in the system
    prompt, the names as BFCL wrote them)."""
    specs = []
    # the typed settings are validated once per suite and backend, and shared by its
    # cases (frozen: the specs keep them as they are)
    system_prompt = suite.system_prompt or ""
    agents = {fc: agent_settings({"send_tools": True,
                                  "send_system_prompt": not fc or bool(system_prompt),
                                  "system_prompt": system_prompt,
                                  "defences": dict(NO_DEFENCES)})
              for fc in (False, True)}
    limits = limits_settings({"max_steps": 1, "token_budget": None})
    backends = {b: backend_settings(raw["backends"][b]) for b in suite.backends}
    for category in suite.categories or bfcl.CATEGORIES:
        cases = sample_cases(bfcl.load_cases(category), suite.sample, suite.seed)
        for case in cases:
            infos: dict[bool, SuiteCase] = {}
            tools = tuple(f["name"] for f in case.functions)
            for backend, settings in backends.items():
                fc = isinstance(settings, SimulatedBackend | LiveBackend)
                if fc not in infos:
                    own = BfclCase.model_validate({
                        "category": category, "language": "python",
                        "functions": list(case.functions),
                        "possible_answer": None if case.possible_answer is None
                        else list(case.possible_answer),
                        **({"mode": "fc"} if fc else {})})  # left out: prompt mode
                    infos[fc] = SuiteCase.of(
                        name, NAME, bfcl.tool_definitions(case.functions,
                                                          "fc" if fc else "prompt"),
                        own, batch_size=suite.batch_size)
                runs_model = settings.mode in ("model", "live")
                scenarios = ([SCENARIO_MODEL] if runs_model
                             else list(suite.policies or bfcl.POLICIES))
                for scenario in scenarios:
                    script = ({"model": SCENARIO_MODEL, "strategy": "single_turn"}
                              if runs_model else
                              {"model": scenario, "policy": scenario,
                               "strategy": "single_turn"})
                    specs.append(RunSpec(
                        task=case.id, backend=backend, scenario=scenario,
                        question=case.question,
                        tools=tuple(t["name"] for t in infos[fc].tools) if fc else tools,
                        params={}, backend_config=settings, script=script_settings(script),
                        limits=limits, agent=agents[fc], suite=infos[fc]))
    return specs


#: BFCL's registry entry, the Berkeley Function Calling Leaderboard
#: (:mod:`reactlab.suites.bfcl`; :mod:`reactlab.suites.registry` registers it).
BFCL = BenchmarkEntry(
    name=NAME, tables=("bfcl", "bfcl_cases"), categories=bfcl.CATEGORIES,
    policies=bfcl.POLICIES, only=("batch_size",), case_fields=BfclCase,
    figures=(Figure("bfcl_accuracy", "bfcl", bfcl_accuracy),),
    summaries={"bfcl": bfcl_summary},
    code={"run": "reactlab.suites.bfcl_run", "verify": "reactlab.suites.bfcl_score",
          "tables": "reactlab.suites.bfcl_tables"},
    specs=case_specs, run_case=bfcl_run.run_case, record=bfcl_score.suite_record,
    build_tables=bfcl_tables.build_bfcl)
