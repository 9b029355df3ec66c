"""The one agent loop: the model proposes, the program validates, executes and records.

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
from typing import Any, Protocol

from reactlab.agent.defences import OUT_OF_SCOPE, out_of_scope
from reactlab.agent.types import BudgetExceeded, Session, ToolCall, ToolOutcome
from reactlab.core.errors import BackendError

INVALID_JSON = "llamada con JSON no válido"
REPEATED = "llamada repetida: ya tienes el resultado"
TERMINATIONS = ("answer", "step_limit", "token_budget", "backend_error", "plan_failed")


class Executor(Protocol):
    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]: ...


def call_key(call: ToolCall) -> str:
    """Identity of a call for repetition detection (the lesson's key)."""
    return json.dumps([call.name, call.arguments], sort_keys=True)


def guarded_execute(call: ToolCall, tools: Executor, allowed: Collection[str],
                    seen: set[str], scope: frozenset[str] | None = None) -> ToolOutcome:
    """Validate and execute one call; every failure comes back as data.

    With ``scope`` (the scope rule), a call on a ticker outside it is refused unexecuted.
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
    result = tools.execute(call.name, call.arguments, allowed)
    if call.name not in allowed:
        return ToolOutcome(call, result, "unknown")
    return ToolOutcome(call, result, "error" if "error" in result else "ok")


def run_agent(session: Session, tools: Executor, allowed: Collection[str], max_steps: int,
              token_budget: int | None, emit: Callable[[dict[str, Any]], None], *,
              scope: frozenset[str] | None = None, delimit: bool = False) -> dict[str, Any]:
    """Run the loop to termination, emitting trace records; return the end record's data.

    ``scope`` turns on the scope rule (tickers a call may touch); ``delimit`` sends tool
    output marked as data (see :mod:`reactlab.agent.defences`).
    """
    seen: set[str] = set()
    sent = calls = errors = 0
    answer: str | None = None
    termination = "step_limit"
    step = 0
    for step in range(1, max_steps + 1):
        left = None if token_budget is None else token_budget - sent
        try:
            turn = session.request(left)
        except BudgetExceeded as exc:
            emit({"type": "guardrail", "step": step, "rule": "token_budget",
                  "tokens_refused": exc.tokens, "tokens_left": exc.limit})
            termination = "token_budget"
            break
        except BackendError as exc:
            emit({"type": "error", "step": step, "kind": exc.kind, "status": exc.status,
                  "message": str(exc), "attempts": exc.attempts,
                  "retryable": exc.retryable, "history": exc.history})
            termination = "backend_error"
            break
        sent += turn.tokens_sent
        request: dict[str, Any] = {
            "type": "request", "step": step, "tokens_sent": turn.tokens_sent,
            "cumulative_tokens": sent, "tokens_out": turn.tokens_out,
            "attempts": turn.attempts, "text": turn.text, "n_calls": len(turn.calls)}
        if turn.decoding is not None:
            request["decoding"] = turn.decoding
        emit(request)
        if not turn.calls:
            answer = turn.text
            emit({"type": "answer", "step": step, "text": answer})
            termination = "answer"
            break
        outcomes = [replace(guarded_execute(c, tools, allowed, seen, scope), delimit=delimit)
                    for c in turn.calls]
        for oc in outcomes:
            calls += 1
            errors += oc.is_error
            rec: dict[str, Any] = {"type": "tool_call", "step": step, "id": oc.call.id,
                                   "name": oc.call.name, "arguments": oc.call.arguments,
                                   "status": oc.status, "result": oc.result}
            if oc.call.raw is not None:
                rec["raw"] = oc.call.raw
            emit(rec)
            if oc.status in ("repeated", "blocked"):
                emit({"type": "guardrail", "step": step,
                      "rule": "repeated_call" if oc.status == "repeated" else "scope_rule",
                      "id": oc.call.id})
        session.add_results(outcomes)
    else:
        emit({"type": "guardrail", "step": max_steps, "rule": "step_limit"})
    return {"termination": termination, "steps": step, "answer": answer,
            "tokens_sent": sent, "calls": calls, "errors": errors}
