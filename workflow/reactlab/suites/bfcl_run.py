"""How one BFCL case runs: a single turn through the project's loop, one trace per case.

A BFCL case is single-turn: the loop runs one step under :class:`SingleTurn`; the calls
the model (or the policy) proposes are validated and *recorded*, never executed
(:class:`RecordOnly` answers each with a fixed ``not_executed`` result that nobody reads
back: there is no second turn). Who answers:

* a scripted backend plays a policy (:class:`PolicySession`): the policy's calls are
  written as Hermes ``<tool_call>`` text and parsed back by the parser a real model's
  output goes through, so dotted names and English text cross the same path; tokens sent
  are the o200k_base tokens of the rendered ChatML prompt, as for the lesson's scripted
  local backend;
* a model backend runs :class:`reactlab.backends.local.LocalModelSession` with the
  case's tools, on the model its shard loaded once (:mod:`reactlab.suites.run`); its
  decoding mode is the backend's. With the suite's ``batch_size`` above 1 the shard's
  first turns are decoded ``batch_size`` cases at a time (:mod:`reactlab.suites.batch`)
  and each case's loop receives its turn.

The trace header is the runner's (:func:`reactlab.runner.header`), its spec the case's
:class:`~reactlab.suites.types.CaseSpec`: everything the verification needs is in it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.agent.types import BudgetExceeded, ModelTurn, ToolCall, ToolOutcome
from reactlab.trace.records import Guardrail

if TYPE_CHECKING:
    from reactlab.backends.local.model import LocalModel
    from reactlab.suites.types import CaseSpec

__all__ = ["NOT_EXECUTED", "PolicySession", "RecordOnly", "SingleTurn", "case_of",
           "run_case"]

NOT_EXECUTED = {"not_executed": "single-turn case: the call is recorded, not run"}


@dataclass(frozen=True)
class SingleTurn:
    """One model turn: its calls are recorded, then the run stops (``single_turn``)."""

    name: str = "single_turn"
    max_steps: int | None = 1
    session: str = "conversation"

    def allowed(self, offered: Collection[str]) -> Collection[str]:
        return offered

    def calls(self, step: int, turn: ModelTurn) -> tuple[ToolCall, ...]:
        return turn.calls

    def stop(self, step: int, outcomes: Sequence[ToolOutcome]) -> Guardrail | None:
        return Guardrail(step=step, rule="single_turn")


class RecordOnly:
    """The executor of a single-turn case: nothing runs."""

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        return dict(NOT_EXECUTED)


class PolicySession:
    """A scripted policy of the suite, speaking Hermes text (see the module docstring)."""

    def __init__(self, spec: CaseSpec) -> None:
        from reactlab.backends.local import hermes_tools

        self.spec = spec
        self.tools = hermes_tools(spec)
        self.turn = 0

    def prompt(self) -> str:
        from reactlab.backends.local import render_chatml
        from reactlab.backends.local.hermes import render_tools_system

        system = render_tools_system(self.spec.agent.system_prompt, self.tools)
        return render_chatml([{"role": "system", "content": system},
                              {"role": "user", "content": self.spec.question}])

    def _write(self) -> str:
        from reactlab.suites import bfcl

        case = case_of(self.spec)
        calls = bfcl.policy_calls(case, self.spec.script["policy"])
        if not calls:
            return bfcl.DECLINE
        return "\n".join(f'<tool_call>\n{{"name": {json.dumps(c["name"], ensure_ascii=False)}, '
                         f'"arguments": {json.dumps(c["arguments"], ensure_ascii=False)}}}'
                         f"\n</tool_call>" for c in calls)

    def request(self, budget_left: int | None) -> ModelTurn:
        from reactlab.backends.local import calls_from_text
        from reactlab.backends.local.hermes import parse_tool_calls
        from reactlab.core.tokens import count

        sent = count(self.prompt())
        if budget_left is not None and sent > budget_left:
            raise BudgetExceeded(sent, budget_left)
        text = self._write()
        parsed = parse_tool_calls(text)
        calls = calls_from_text(parsed, self.turn)
        self.turn += 1
        return ModelTurn(text=parsed.content if calls else text, calls=calls,
                         tokens_sent=sent, tokens_out=count(text))

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        """Single turn: results never go back."""


def case_of(spec: CaseSpec) -> Any:
    """The benchmark case a spec carries (rebuilt from the spec alone)."""
    from reactlab.suites import bfcl

    s = spec.suite
    return bfcl.Case(id=spec.task, category=s["category"], question=spec.question,
                     functions=tuple(s["functions"]),
                     possible_answer=None if s["possible_answer"] is None
                     else tuple(s["possible_answer"]))


def run_case(spec: CaseSpec, out: str | Path, model: LocalModel | None = None,
             turn: ModelTurn | None = None) -> dict[str, Any]:
    """Run one case and write its trace atomically; returns the end record's data.
    ``turn``: the case's model turn, already decoded in a batch
    (:mod:`reactlab.suites.batch`)."""
    from reactlab.agent.loop import run_agent
    from reactlab.agent.types import Session
    from reactlab.runner import header
    from reactlab.trace import TraceWriter

    writer = TraceWriter(out)
    writer.add(header(spec))  # type: ignore[arg-type]
    session: Session
    if turn is not None:
        from reactlab.suites.batch import PrecomputedSession

        session = PrecomputedSession(turn)
    elif spec.backend_config.mode == "model":
        from reactlab.backends.local import LocalModelSession

        assert model is not None, "a model case needs the shard's model"
        model.reset_cache()
        session = LocalModelSession(spec, model)  # type: ignore[arg-type]
    else:
        session = PolicySession(spec)
    end = run_agent(session, RecordOnly(), spec.tools, spec.limits.max_steps,
                    spec.limits.token_budget, writer.add, strategy=SingleTurn())
    writer.close(end)
    return {k: v for k, v in end.to_json().items() if k != "type"}
