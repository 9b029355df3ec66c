"""The one agent loop: the model proposes, the program validates, executes and records.

Who decides the calls is a strategy (:mod:`reactlab.agent.strategies`): the model
(ReAct) or the program's plan (plan-and-execute); both go through this loop.

Guardrails, each recorded as an event: a step limit, repeated-call detection (the call
is not executed; the model is told it already has the result), a token budget on tokens
sent (the request that would exceed it is not sent), and invalid JSON / unknown tools
answered as errors-as-data. Backend failures end the run with ``backend_error``; nothing
escapes as an exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any, Protocol, cast

from reactlab.agent.defences import NOT_ALLOWED, OUT_OF_SCOPE, out_of_scope
from reactlab.agent.strategies import REACT, Strategy
from reactlab.agent.types import BudgetExceeded, Session, StatusResult, ToolCall, ToolOutcome
from reactlab.core.errors import BackendError
from reactlab.trace.records import (
    Answer,
    End,
    Error,
    ErrorKind,
    Guardrail,
    GuardrailRule,
    Record,
    Request,
    Termination,
    ToolCallRecord,
)

INVALID_JSON = "llamada con JSON no válido"
REPEATED = "llamada repetida: ya tienes el resultado"


class Executor(Protocol):
    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]: ...


def call_key(call: ToolCall) -> str:
    """Identity of a call for repetition detection (the lesson's key)."""
    return json.dumps([call.name, call.arguments], sort_keys=True)


def guarded_execute(call: ToolCall, tools: Executor, allowed: Collection[str],
                    seen: set[str], scope: frozenset[str] | None = None,
                    refused: Collection[str] = ()) -> ToolOutcome:
    """Validate and execute one call; every failure comes back as data.

    With ``scope`` (the scope rule), a call on a ticker outside it is refused unexecuted;
    so is a call to a tool in ``refused`` (the side-effect allowlist).
    """
    if call.arguments is None or call.name is None:
        return ToolOutcome(call, {"error": INVALID_JSON}, "invalid")
    key = call_key(call)
    if key in seen:
        return ToolOutcome(call, {"error": REPEATED}, "repeated")
    seen.add(key)
    if scope is not None:
        ticker = out_of_scope(call.arguments, scope)
        if ticker is not None:
            return ToolOutcome(call, {"error": OUT_OF_SCOPE.format(ticker=ticker)}, "blocked")
    if call.name in refused:
        return ToolOutcome(call, {"error": NOT_ALLOWED.format(name=call.name)}, "blocked")
    result = tools.execute(call.name, call.arguments, allowed)
    if call.name not in allowed:
        return ToolOutcome(call, result, "unknown")
    if isinstance(result, StatusResult):
        return ToolOutcome(call, result, result.status)
    return ToolOutcome(call, result, "error" if "error" in result else "ok")


def _guardrail_rule(oc: ToolOutcome) -> GuardrailRule:
    """The rule that kept a call from running (``repeated`` or ``blocked``)."""
    if oc.status == "repeated":
        return "repeated_call"
    refusal = {"error": NOT_ALLOWED.format(name=oc.call.name)}
    return "side_effect_allowlist" if oc.result == refusal else "scope_rule"


def run_agent(session: Session, tools: Executor, allowed: Collection[str], max_steps: int,
              token_budget: int | None, emit: Callable[[Record], None], *,
              scope: frozenset[str] | None = None, delimit: bool = False,
              strategy: Strategy = REACT, refused: Collection[str] = ()) -> End:
    """Run the loop to termination, emitting trace records; return the end record
    (without the record count and checksum, which the trace writer adds).

    ``scope`` turns on the scope rule (tickers a call may touch); ``refused``: tools a
    call may not run (the side-effect allowlist's refusals); ``delimit`` sends tool
    output marked as data (see :mod:`reactlab.agent.defences`); ``strategy`` says who
    decides the calls (see :mod:`reactlab.agent.strategies`).
    """
    seen: set[str] = set()
    sent = calls = errors = 0
    answer: str | None = None
    termination: Termination = "step_limit"
    allowed = strategy.allowed(allowed)
    if strategy.max_steps is not None:
        max_steps = strategy.max_steps
    step = 0
    for step in range(1, max_steps + 1):
        left = None if token_budget is None else token_budget - sent
        try:
            turn = session.request(left)
        except BudgetExceeded as exc:
            emit(Guardrail(step=step, rule="token_budget", tokens_refused=exc.tokens,
                           tokens_left=exc.limit))
            termination = "token_budget"
            break
        except BackendError as exc:
            # a raised BackendError is a subclass: its kind is one of BackendError.KINDS
            emit(Error(step=step, kind=cast(ErrorKind, exc.kind), status=exc.status,
                       message=str(exc),
                       attempts=exc.attempts, retryable=exc.retryable, history=exc.history))
            termination = "backend_error"
            break
        sent += turn.tokens_sent
        emit(Request(step=step, tokens_sent=turn.tokens_sent, cumulative_tokens=sent,
                     tokens_out=turn.tokens_out, attempts=turn.attempts, text=turn.text,
                     n_calls=len(turn.calls), decoding=turn.decoding))
        planned = strategy.calls(step, turn)
        if not planned:
            answer = turn.text
            emit(Answer(step=step, text=answer))
            termination = "answer"
            break
        outcomes = [replace(guarded_execute(c, tools, allowed, seen, scope, refused),
                            delimit=delimit) for c in planned]
        for oc in outcomes:
            calls += 1
            errors += oc.is_error
            emit(ToolCallRecord(step=step, id=oc.call.id, name=oc.call.name,
                                arguments=oc.call.arguments, status=oc.status,
                                result=oc.result, raw=oc.call.raw))
            if oc.status in ("repeated", "blocked"):
                emit(Guardrail(step=step, rule=_guardrail_rule(oc), id=oc.call.id))
        stop = strategy.stop(step, outcomes)
        if stop is not None:
            emit(stop)
            termination = stop.rule
            break
        session.add_results(outcomes)
    else:
        emit(Guardrail(step=max_steps, rule="step_limit"))
    return End(termination=termination, steps=step, answer=answer, tokens_sent=sent,
               calls=calls, errors=errors)
