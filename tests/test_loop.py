"""Tests of reactlab.agent.loop.run_agent: guardrails, errors as data and the returned counts.

Most tests drive the loop with a fake Session that plays a list of ModelTurns; the last
one checks the token budget end to end through the real adapters and simulators.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from typing import Any

import pytest

import reactlab.simulate.anthropic_messages as sim_anthropic
import reactlab.simulate.openai_responses as sim_openai
from reactlab.agent.loop import INVALID_JSON, REPEATED, run_agent
from reactlab.agent.types import BudgetExceeded, ModelTurn, ToolCall, ToolOutcome
from reactlab.backends import open_session
from reactlab.config import parse
from reactlab.core.errors import ServerError
from reactlab.core.tokens import count
from reactlab.trace.records import End

ALLOWED = ("precio", "buscar_noticias", "calculadora")
PRECIO_15 = {"ticker": "BUSI", "fecha": "2024-03-15"}


class FakeSession:
    """Plays ModelTurns (or raises exceptions) in order; refuses over-budget requests."""

    def __init__(self, turns: Iterable[ModelTurn | Exception]) -> None:
        self._turns: Iterator[ModelTurn | Exception] = iter(turns)
        self.budgets: list[int | None] = []
        self.received: list[list[ToolOutcome]] = []

    def request(self, budget_left: int | None) -> ModelTurn:
        self.budgets.append(budget_left)
        item = next(self._turns)
        if isinstance(item, Exception):
            raise item
        if budget_left is not None and item.tokens_sent > budget_left:
            raise BudgetExceeded(item.tokens_sent, budget_left)
        return item

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        self.received.append(list(outcomes))


class SpyTools:
    """The real ToolBox, recording every call that reaches it."""

    def __init__(self, box: Any) -> None:
        self.box = box
        self.executed: list[tuple[str, object]] = []

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        self.executed.append((name, args))
        return self.box.execute(name, args, allowed)


def turn(*calls: ToolCall, tokens: int = 100, text: str = "") -> ModelTurn:
    return ModelTurn(text=text, calls=tuple(calls), tokens_sent=tokens)


def call(cid: str, name: str | None, args: dict[str, Any] | None,
         raw: str | None = None) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=args, raw=raw)


def run(session: FakeSession, tools: Any, max_steps: int = 6, token_budget: int | None = None,
        allowed: Collection[str] = ALLOWED) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    end = run_agent(session, tools, allowed, max_steps, token_budget,
                    lambda r: records.append(r.to_json()))
    return end_json(end), records


def end_json(end: End) -> dict[str, Any]:
    """The loop's end record as the JSON data it stands for (without the ``type``)."""
    return {k: v for k, v in end.to_json().items() if k != "type"}


def of_type(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == kind]


def endless_distinct_calls() -> Iterator[ModelTurn]:
    i = 0
    while True:
        i += 1
        yield turn(call(f"c{i}", "calculadora", {"expresion": f"{i}+1"}))


# --------------------------------------------------------------------------- terminations


def test_answer_ends_the_run(toolbox: Any) -> None:
    session = FakeSession([turn(call("c1", "precio", PRECIO_15), tokens=120),
                           turn(tokens=180, text="El cierre fue X.")])
    end, records = run(session, toolbox)
    assert end == {"termination": "answer", "steps": 2, "answer": "El cierre fue X.",
                   "tokens_sent": 300, "calls": 1, "errors": 0}
    assert [r["type"] for r in records] == ["request", "tool_call", "request", "answer"]
    assert records[3] == {"type": "answer", "step": 2, "text": "El cierre fue X."}
    assert records[2]["cumulative_tokens"] == 300
    assert records[2]["n_calls"] == 0
    (oc,) = session.received[0]
    assert oc.status == "ok"
    assert oc.result["resultado"]["ticker"] == "BUSI"
    assert oc.result["resultado"]["fecha"] == "2024-03-15"
    assert isinstance(oc.result["resultado"]["cierre"], float)
    assert records[1]["result"] == oc.result


def test_step_limit(toolbox: Any) -> None:
    session = FakeSession(endless_distinct_calls())
    end, records = run(session, toolbox, max_steps=3)
    assert end == {"termination": "step_limit", "steps": 3, "answer": None,
                   "tokens_sent": 300, "calls": 3, "errors": 0}
    assert len(of_type(records, "request")) == 3
    assert records[-1] == {"type": "guardrail", "step": 3, "rule": "step_limit"}
    assert of_type(records, "guardrail") == [records[-1]]
    assert [[oc.result for oc in batch] for batch in session.received] == [
        [{"resultado": 2}], [{"resultado": 3}], [{"resultado": 4}]]
    assert len(session.budgets) == 3  # no fourth request


def test_answer_on_the_last_allowed_step_is_not_a_step_limit(toolbox: Any) -> None:
    session = FakeSession([turn(call("c1", "precio", PRECIO_15)), turn(text="fin")])
    end, records = run(session, toolbox, max_steps=2)
    assert end["termination"] == "answer"
    assert of_type(records, "guardrail") == []


# --------------------------------------------------------------------------- guardrails


def test_repeated_call_is_not_executed(toolbox: Any) -> None:
    spy = SpyTools(toolbox)
    same_other_order = {"fecha": "2024-03-15", "ticker": "BUSI"}
    session = FakeSession([
        turn(call("c1", "precio", PRECIO_15)),
        turn(call("c2", "precio", same_other_order),
             call("c3", "calculadora", {"expresion": "1+1"})),
        turn(text="listo"),
    ])
    end, records = run(session, spy)
    assert spy.executed == [("precio", PRECIO_15), ("calculadora", {"expresion": "1+1"})]
    calls = of_type(records, "tool_call")
    assert [(c["id"], c["status"]) for c in calls] == [("c1", "ok"), ("c2", "repeated"),
                                                       ("c3", "ok")]
    assert calls[1]["result"] == {"error": REPEATED}
    i = records.index(calls[1])
    assert records[i + 1] == {"type": "guardrail", "step": 2, "rule": "repeated_call",
                              "id": "c2"}
    assert [oc.result for oc in session.received[1]] == [{"error": REPEATED}, {"resultado": 2}]
    assert end["calls"] == 3 and end["errors"] == 1 and end["termination"] == "answer"


def test_invalid_json_is_never_executed(toolbox: Any) -> None:
    spy = SpyTools(toolbox)
    raw = '{"ticker": "BUSI", "fecha": '
    session = FakeSession([turn(call("c1", "precio", None, raw=raw)),
                           turn(call("c2", "precio", None, raw=raw)),
                           turn(text="no")])
    end, records = run(session, spy)
    assert spy.executed == []
    calls = of_type(records, "tool_call")
    assert [c["status"] for c in calls] == ["invalid", "invalid"]  # not "repeated"
    assert calls[0] == {"type": "tool_call", "step": 1, "id": "c1", "name": "precio",
                        "arguments": None, "status": "invalid",
                        "result": {"error": INVALID_JSON}, "raw": raw}
    assert session.received[0][0].result == {"error": INVALID_JSON}
    assert end["errors"] == 2


def test_missing_name_is_invalid(toolbox: Any) -> None:
    spy = SpyTools(toolbox)
    _end, records = run(FakeSession([turn(call("c1", None, {"x": 1})), turn(text="ok")]), spy)
    assert spy.executed == []
    assert of_type(records, "tool_call")[0]["status"] == "invalid"


def test_unknown_tool_and_tool_not_offered(toolbox: Any) -> None:
    args = {"ticker": "BUSI", "desde": "2024-03-15", "hasta": "2024-03-22"}
    # variacion is a real tool, and works when offered ...
    assert "resultado" in toolbox.execute("variacion", args)
    # ... but these tasks do not offer it
    session = FakeSession([turn(call("c1", "cotizacion", PRECIO_15),
                                call("c2", "variacion", args)),
                           turn(text="fin")])
    end, records = run(session, toolbox)
    calls = of_type(records, "tool_call")
    assert [(c["status"], c["result"]) for c in calls] == [
        ("unknown", {"error": "herramienta desconocida: cotizacion"}),
        ("unknown", {"error": "herramienta desconocida: variacion"}),
    ]
    assert end["errors"] == 2 and end["calls"] == 2


def test_token_budget(toolbox: Any) -> None:
    session = FakeSession(endless_distinct_calls())
    end, records = run(session, toolbox, max_steps=10, token_budget=250)
    assert session.budgets == [250, 150, 50]
    assert end == {"termination": "token_budget", "steps": 3, "answer": None,
                   "tokens_sent": 200, "calls": 2, "errors": 0}
    assert [r["step"] for r in of_type(records, "request")] == [1, 2]
    assert records[-1] == {"type": "guardrail", "step": 3, "rule": "token_budget",
                           "tokens_refused": 100, "tokens_left": 50}


def test_no_budget_passes_none(toolbox: Any) -> None:
    session = FakeSession(endless_distinct_calls())
    run(session, toolbox, max_steps=4, token_budget=None)
    assert session.budgets == [None] * 4


def test_backend_error_ends_the_run(toolbox: Any) -> None:
    session = FakeSession([turn(call("c1", "precio", PRECIO_15), tokens=70),
                           ServerError("boom", status=503)])
    end, records = run(session, toolbox)
    assert end == {"termination": "backend_error", "steps": 2, "answer": None,
                   "tokens_sent": 70, "calls": 1, "errors": 0}
    assert records[-1] == {"type": "error", "step": 2, "kind": "server", "status": 503,
                           "message": "server: boom", "attempts": 1, "retryable": False,
                           "history": []}


def test_counts_in_end_data(toolbox: Any) -> None:
    session = FakeSession([
        turn(call("a", "precio", PRECIO_15), call("b", "precio", {"ticker": "BUSMAR",
                                                                  "fecha": "2024-03-15"}),
             tokens=11),
        turn(call("c", "nada", {}), call("d", "calculadora", {"expresion": "1/0"}), tokens=13),
        turn(call("e", "precio", PRECIO_15), tokens=17),
        turn(text="respuesta", tokens=19),
    ])
    end, records = run(session, toolbox)
    assert [c["status"] for c in of_type(records, "tool_call")] == [
        "ok", "error", "unknown", "error", "repeated"]
    assert end == {"termination": "answer", "steps": 4, "answer": "respuesta",
                   "tokens_sent": 60, "calls": 5, "errors": 4}
    assert [r["cumulative_tokens"] for r in of_type(records, "request")] == [11, 24, 41, 60]


# --------------------------------------------------------------------------- real adapters


@pytest.fixture
def sent_bodies(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every request body that reaches a simulator (i.e. that was actually sent)."""
    bodies: list[bytes] = []
    for mod in (sim_openai, sim_anthropic):
        original = mod.handler

        def wrapped(policy: Any, original: Any = original) -> Any:
            inner = original(policy)

            def handle(request: Any) -> Any:
                bodies.append(bytes(request.content))
                return inner(request)

            return handle

        monkeypatch.setattr(mod, "handler", wrapped)
    return bodies


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
@pytest.mark.parametrize("budget", [900, 2500])
def test_token_budget_through_real_adapters(raw_config: dict, toolbox: Any,
                                            sent_bodies: list[bytes], backend: str,
                                            budget: int) -> None:
    raw_config["scenarios"]["bucle_presupuesto"]["limits"] = {"max_steps": 30,
                                                              "token_budget": budget}
    spec = parse(raw_config).run("variacion_busi", backend, "bucle_presupuesto")
    assert spec.limits.to_dict() == {"max_steps": 30, "token_budget": budget}
    records: list[dict[str, Any]] = []
    end = end_json(run_agent(open_session(spec), toolbox, spec.tools,
                             spec.limits.max_steps, spec.limits.token_budget,
                             lambda r: records.append(r.to_json())))

    actually_sent = [count(b.decode("utf-8")) for b in sent_bodies]
    assert end["termination"] == "token_budget"
    assert sum(actually_sent) <= budget
    assert sum(actually_sent) == end["tokens_sent"]
    requests = of_type(records, "request")
    assert [r["tokens_sent"] for r in requests] == actually_sent
    assert end["steps"] == len(requests) + 1
    guard = records[-1]
    assert guard["rule"] == "token_budget"
    assert guard["tokens_left"] == budget - end["tokens_sent"]
    assert guard["tokens_refused"] > guard["tokens_left"]
    # the refused request is bigger than the last one sent (the conversation only grows)
    assert guard["tokens_refused"] > actually_sent[-1]
    json.dumps(records, allow_nan=False)  # records stay plain JSON
