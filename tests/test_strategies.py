"""Plan-and-execute as a strategy of the one loop, with a stand-in for the local model.

``plan_execute_reference.json`` holds the trace lines (header and checksum left out: they
depend on package versions) that the code at tag ``stage-layout`` wrote for these cases,
when plan-and-execute still had its own loop; the strategy must write the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

import reactlab.backends.local as local
from reactlab import config, trace
from reactlab.agent.defences import OUT_OF_SCOPE
from reactlab.agent.strategies import PLAN_EXECUTE, REACT, strategy_named
from reactlab.config import RunSpec
from reactlab.runner import run_to_trace
from reactlab.tools import messages
from tests.conftest import ROOT

REFERENCE = json.loads((Path(__file__).parent / "plan_execute_reference.json")
                       .read_text(encoding="utf-8"))


@dataclass
class Gen:
    text: str
    new_ids: list[int]


class FakeModel:
    """Scripted generations; four characters per token; remembers every prompt."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = list(outputs)
        self.prompts: list[str] = []

    def tokenizer(self, text: str, add_special_tokens: bool = False) -> dict[str, Any]:
        self.prompts.append(text)
        return {"input_ids": list(range(len(text) // 4))}

    def prompt_text(self, messages: list[dict[str, Any]], tools: Any) -> str:
        return "".join(f"<{m['role']}>{m['content']}\n" for m in messages) + "<assistant>"

    def prompt_ids(self, messages: list[dict[str, Any]], tools: Any) -> list[int]:
        return self.tokenizer(self.prompt_text(messages, tools))["input_ids"]

    def generate(self, ids: list[int], max_new_tokens: int = 80) -> Gen:
        text = self.outputs.pop(0)
        return Gen(text, list(range(len(text) // 4)))


OK = 'BUSI", "desde": "2024-03-15", "hasta": "2024-03-22"}'
CASES: dict[str, tuple[list[str], int | None]] = {
    "ok": ([OK, " El cierre de BUSI varió un 6.45 %. "], None),
    "invalid": (["no lo sé"], None),
    "tool_error": (['ZZZZ", "desde": "2024-03-15", "hasta": "2024-03-22"}'], None),
    "bad_dates": (['BUSI", "desde": "2024-13-15", "hasta": "x"}'], None),
    "budget_1": ([OK], 10),
    "budget_2": ([OK, "x"], 200),
}


@pytest.fixture(scope="module")
def plan_spec() -> RunSpec:
    return config.load(ROOT / "config.yaml").run("variacion_busi", "smollm2", "plan_execute")


def _run(spec: RunSpec, outputs: list[str], toolbox: Any, path: Path,
         monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], FakeModel]:
    model = FakeModel(outputs)
    monkeypatch.setattr(local, "load_model", lambda spec: model)
    return run_to_trace(spec, toolbox, path), model


def _with(spec: RunSpec, **defences: bool) -> RunSpec:
    on = {"delimit_tool_output": False, "scope_rule": False, "verifier_gate": False, **defences}
    return replace(spec, agent=spec.agent.replace(defences=on))


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_bytes_as_the_old_plan_execute_loop(case: str, plan_spec: RunSpec, toolbox: Any,
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    outputs, budget = CASES[case]
    spec = plan_spec if budget is None else replace(
        plan_spec, limits=plan_spec.limits.replace(token_budget=budget))
    path = tmp_path / "t.jsonl"
    _run(spec, outputs, toolbox, path, monkeypatch)
    lines = path.read_text(encoding="utf-8").splitlines()
    end = json.loads(lines[-1])
    del end["sha256"]
    assert {"records": lines[1:-1], "end": end} == REFERENCE[case]


def test_the_reference_covers_every_ending() -> None:
    assert {c["end"]["termination"] for c in REFERENCE.values()} == {
        "answer", "plan_failed", "token_budget"}


def test_the_scope_rule_applies_to_plan_execute(plan_spec: RunSpec, toolbox: Any,
                                                tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    other = ['ALBA", "desde": "2024-03-15", "hasta": "2024-03-22"}']
    executed: list[Any] = []

    class Spy:
        def execute(self, name: str, args: object, allowed: Any = None) -> dict[str, Any]:
            executed.append((name, args))
            return toolbox.execute(name, args, allowed)

    # without the rule the plan runs the call on a ticker the question does not name
    end, _ = _run(plan_spec, [*other, "ALBA subió."], Spy(), tmp_path / "off.jsonl",
                  monkeypatch)
    assert end["termination"] == "answer" and len(executed) == 1
    executed.clear()
    end, _ = _run(_with(plan_spec, scope_rule=True), other, Spy(), tmp_path / "on.jsonl",
                  monkeypatch)
    assert executed == []
    assert end["termination"] == "plan_failed" and end["errors"] == 1
    tr = trace.read(tmp_path / "on.jsonl")
    (call,) = tr.tool_calls()
    refusal = OUT_OF_SCOPE.format(ticker="ALBA")
    assert (call.status, call.result) == ("blocked", {"error": refusal})
    guards = [(g.rule, g.id, g.detail) for g in tr.records if g.type == "guardrail"]
    assert guards == [("scope_rule", "plan_0", None), ("plan_failed", None, refusal)]


def test_delimiting_applies_to_plan_execute(plan_spec: RunSpec, toolbox: Any,
                                            tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = [OK, "El cierre de BUSI varió un 6.45 %."]
    _, plain = _run(plan_spec, outputs, toolbox, tmp_path / "plain.jsonl", monkeypatch)
    _, marked = _run(_with(plan_spec, delimit_tool_output=True), outputs, toolbox,
                     tmp_path / "marked.jsonl", monkeypatch)
    # the writing prompt (the last one) carries the computed data, marked only when asked
    assert messages.OPEN not in plain.prompts[-1]
    assert f"{messages.OPEN}\n" in marked.prompts[-1]
    assert marked.prompts[-1].count(messages.CLOSE) == 1
    data = trace.read(tmp_path / "marked.jsonl").tool_calls()[0].result["resultado"]
    assert messages.tool_message(data, delimit=True, ensure_ascii=False) in marked.prompts[-1]
    assert messages.tool_message(data, delimit=False, ensure_ascii=False) in plain.prompts[-1]


def test_strategies_by_name() -> None:
    assert strategy_named("react") is REACT
    assert strategy_named("plan_execute") is PLAN_EXECUTE
    with pytest.raises(ValueError, match="unknown strategy 'x'"):
        strategy_named("x")
