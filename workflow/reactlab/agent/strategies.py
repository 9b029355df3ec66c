"""Strategies of the one agent loop: who decides the next tool call.

* :data:`REACT` — the model decides: the calls of each turn are the calls it proposed.
* :class:`SingleTurn` — one turn whose calls are recorded, not run (an outside suite's
  single-turn cases).
* :class:`PlanExecute` — the program holds the plan: the model extracts the parameters of
  ``variacion`` as JSON (step 1), the program validates them and computes, and the model
  writes the answer from the computed data (step 2). A plan whose call fails (invalid
  JSON, a tool error, a call refused by the scope rule) ends the run with ``plan_failed``.

Both run in :func:`reactlab.agent.loop.run_agent`: the same guarded execution (repetition,
scope rule), the same delimiting of tool output, the same token budget and the same
trace records. The prompts below are what the model reads, so they stay in Spanish; the
backend that talks to the model (:mod:`reactlab.backends.local`) sends them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from reactlab.agent.types import ModelTurn, ToolCall, ToolOutcome
from reactlab.core.errors import UsageError
from reactlab.trace.records import Guardrail

__all__ = [
    "PLAN_EXECUTE",
    "PLAN_EXTRACT_PREFIX",
    "PLAN_EXTRACT_PROMPT",
    "PLAN_TOOL",
    "PLAN_WRITE_PROMPT",
    "REACT",
    "SINGLE_TURN",
    "PlanExecute",
    "React",
    "SingleTurn",
    "Strategy",
    "first_json_object",
    "strategy_named",
]

PLAN_EXTRACT_PROMPT = (
    "Extrae de la pregunta los parámetros para calcular la variación del cierre de una "
    "acción. Responde solo con un objeto JSON con las claves \"ticker\", \"desde\" y "
    "\"hasta\" (fechas AAAA-MM-DD), sin texto adicional.\n\n"
    "Ejemplo:\nPregunta: ¿Cuánto varió el cierre de ABCD entre el 2023-05-02 y el "
    "2023-06-01?\nJSON: {\"ticker\": \"ABCD\", \"desde\": \"2023-05-02\", "
    "\"hasta\": \"2023-06-01\"}")
#: The program starts the model's answer with the JSON object it expects: the plan, not
#: the model, decides the output format (a small model otherwise answers in prose).
PLAN_EXTRACT_PREFIX = '{"ticker": "'
PLAN_WRITE_PROMPT = (
    "Eres un asistente de research de renta variable. Contesta en español en una o dos "
    "frases usando solo los datos calculados que se te dan; no inventes cifras.")
PLAN_TOOL = "variacion"


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (models often wrap it in prose or fences)."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch == "{":
            try:
                value, _ = decoder.raw_decode(text, i)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                return value
    return None


class Strategy(Protocol):
    """What differs between strategies; everything else is the loop's."""

    @property
    def name(self) -> str:
        """The strategy's name in the config (``script.strategy``)."""
        ...

    @property
    def max_steps(self) -> int | None:
        """Steps the strategy needs at most (None: the configured ``max_steps``)."""
        ...

    @property
    def session(self) -> str:
        """The kind of session it talks to, which the backend's provider opens
        (:mod:`reactlab.backends.registry`): ``conversation`` (the model proposes the
        calls) or ``plan_execute`` (the two prompts of :class:`PlanExecute`)."""
        ...

    def allowed(self, offered: Collection[str]) -> Collection[str]:
        """The tools a call may run."""
        ...

    def calls(self, step: int, turn: ModelTurn) -> tuple[ToolCall, ...]:
        """The calls to execute after the model's turn (none: the turn is the answer)."""
        ...

    def stop(self, step: int, outcomes: Sequence[ToolOutcome]) -> Guardrail | None:
        """A guardrail event that ends the run after these outcomes, or None."""
        ...


@dataclass(frozen=True)
class React:
    """The model decides: the ReAct loop."""

    name: str = "react"
    max_steps: int | None = None
    session: str = "conversation"

    def allowed(self, offered: Collection[str]) -> Collection[str]:
        return offered

    def calls(self, step: int, turn: ModelTurn) -> tuple[ToolCall, ...]:
        return turn.calls

    def stop(self, step: int, outcomes: Sequence[ToolOutcome]) -> Guardrail | None:
        return None


@dataclass(frozen=True)
class PlanExecute:
    """The program holds the plan: extract (model) → validate and compute (code) →
    write (model). The model's turns propose no calls; step 1's text is the plan's call."""

    name: str = "plan_execute"
    max_steps: int | None = 2
    session: str = "plan_execute"

    def allowed(self, offered: Collection[str]) -> Collection[str]:
        return (PLAN_TOOL,)

    def calls(self, step: int, turn: ModelTurn) -> tuple[ToolCall, ...]:
        if step != 1:
            return ()
        params = first_json_object(turn.text)
        return (ToolCall(id="plan_0", name=PLAN_TOOL, arguments=params,
                         raw=None if params is not None else turn.text),)

    def stop(self, step: int, outcomes: Sequence[ToolOutcome]) -> Guardrail | None:
        for oc in outcomes:
            if oc.status != "ok":
                return Guardrail(step=step, rule="plan_failed", detail=oc.result["error"])
        return None


@dataclass(frozen=True)
class SingleTurn(React):
    """ReAct for one model turn: its calls are recorded, then the run stops
    (``single_turn``). An outside suite's single-turn case (BFCL): the calls are what is
    scored, and the executor it runs with records them without running anything."""

    name: str = "single_turn"
    max_steps: int | None = 1

    def stop(self, step: int, outcomes: Sequence[ToolOutcome]) -> Guardrail | None:
        return Guardrail(step=step, rule="single_turn")


REACT = React()
PLAN_EXECUTE = PlanExecute()
SINGLE_TURN = SingleTurn()
_BY_NAME: dict[str, Strategy] = {s.name: s for s in (REACT, PLAN_EXECUTE, SINGLE_TURN)}


def strategy_named(name: str) -> Strategy:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UsageError(f"unknown strategy {name!r} (known: {', '.join(_BY_NAME)})") from None
