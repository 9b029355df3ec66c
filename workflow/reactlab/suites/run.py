"""One shard job: every case of the shard through the project's loop, one trace each.

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
  case's tools, loaded once per shard (torch, transformers and the weights are paid once
  per job, not once per case); its decoding mode is the backend's. With the suite's
  ``batch_size`` above 1 the shard's first turns are decoded ``batch_size`` cases at a
  time (:mod:`reactlab.suites.batch`) and each case's loop receives its turn.

An AgentDojo case is multi-turn: :func:`reactlab.suites.agentdojo.run_case` runs it on
AgentDojo's own runtime, with the same loaded model for a model backend.

The trace header is the runner's (:func:`reactlab.runner.header`), its spec the case's
:class:`~reactlab.suites.plan.CaseSpec`: everything the verification needs is in it.

A model's greedy text also depends on what the spec does not hold: which cases shared a
batch, torch's version and the CPU kernels it ran (in bfloat16 these can change a case's
text: docs/local-models.md, "What a greedy trace depends on"). A model shard's process
writes them down (:func:`reproduction_record`) beside its specs, and the job moves that
record into the shard's trace manifest (:func:`reactlab.suites.shards.publish`); the
traces themselves are unchanged.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.agent.types import BudgetExceeded, ModelTurn, ToolCall, ToolOutcome
from reactlab.core.errors import UsageError
from reactlab.trace.records import Guardrail

if TYPE_CHECKING:
    from reactlab.backends.local.model import LocalModel
    from reactlab.suites.plan import CaseSpec

log = logging.getLogger("reactlab.suites")

NOT_EXECUTED = {"not_executed": "single-turn case: the call is recorded, not run"}

#: What a model shard's reproduction record promises (its ``contract``).
CONTRACT = ("the traces are reproduced byte for byte by the same specs decoded in the same "
            "batches (cases and order: 'batches'; cases in none were decoded one at a "
            "time) with the same torch and transformers versions, CPU capability, "
            "bfloat16 matmul kernel, MKL and threads; in bfloat16 another layout or other "
            "kernels may change a case's text (docs/local-models.md)")


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


def reproduction_record(model: LocalModel, specs_json: str, batch_size: int,
                        layout: list[list[str]]) -> dict[str, Any]:
    """What a reader needs, beyond the specs, to reproduce a model shard's traces: the
    specs' sha256 (ties the record to them), the contract, the weights' dtype, the batch
    size and the batches as decoded (``layout``: case ids per ``generate``, in order), and
    the runtime (:func:`reactlab.backends.local.kernels.runtime_record`)."""
    import hashlib

    from reactlab.backends.local.kernels import runtime_record

    dtype = str(next(model.model.parameters()).dtype).removeprefix("torch.")
    return {"specs_sha256": hashlib.sha256(specs_json.encode("utf-8")).hexdigest(),
            "contract": CONTRACT, "model": model.name, "dtype": dtype,
            "batch_size": batch_size, "batches": layout, **runtime_record()}


def run_shard(specs_json: str, outputs: Sequence[str],
              record: str | Path | None = None) -> str:
    """One shard job (the Snakemake rule and ``reactlab suite-shard``): the specs (a JSON
    list, as :meth:`Shard.to_json` writes it) run in order, one trace each to
    ``outputs``; the model, for a model backend, is loaded once. With a model and
    ``record``, its :func:`reproduction_record` is written there (JSON, atomically) after
    the traces. Returns the job's summary line."""
    from reactlab.suites.plan import CaseSpec

    specs = [CaseSpec.from_dict(d) for d in json.loads(specs_json)]
    if len(specs) != len(outputs):
        raise UsageError(f"{len(specs)} specs but {len(outputs)} outputs")
    model = None
    t0 = time.perf_counter()
    if specs and specs[0].backend_config.mode == "model":
        from reactlab.backends.local import load_model

        model = load_model(specs[0])  # type: ignore[arg-type]
    t_load = time.perf_counter() - t0
    turns: list[ModelTurn | None] = [None] * len(specs)
    batch = int(specs[0].suite.get("batch_size", 1)) if specs else 1
    layout: list[list[str]] = []
    if model is not None and batch > 1:
        from reactlab.suites.batch import first_turns

        turns = first_turns(model, specs, batch, layout)
    calls = answered = 0
    for spec, out, turn in zip(specs, outputs, turns, strict=True):
        if spec.suite.get("benchmark") == "agentdojo":  # multi-turn, AgentDojo's runtime
            from reactlab.suites.agentdojo import run_case as run_agentdojo_case

            end = run_agentdojo_case(spec, out, model)
        else:
            end = run_case(spec, out, model, turn)
        calls += end["calls"]
        answered += end["termination"] == "answer"
    if model is not None and record is not None:
        from reactlab.core.io import write_json_atomic

        write_json_atomic(record, reproduction_record(model, specs_json, batch, layout))
    total = time.perf_counter() - t0
    log.info("shard of %d cases: load %.2f s, %.2f s per case", len(specs), t_load,
             (total - t_load) / max(len(specs), 1))
    return (f"{len(specs)} cases of {specs[0].base_key.rsplit('/', 1)[0] if specs else '-'}:"
            f" {calls} calls, {answered} answered in text")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m reactlab.suites.run SPECS.json``: run one shard in this process (what a
    model shard's job does); the outputs are the specs' own trace paths, and a model's
    reproduction record goes beside SPECS.json
    (:func:`reactlab.suites.shards.reproduction_file`)."""
    import sys

    from reactlab.suites.plan import CaseSpec, shard_paths
    from reactlab.suites.shards import reproduction_file

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m reactlab.suites.run SPECS.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    text = Path(args[0]).read_text(encoding="utf-8")
    outputs = [shard_paths(CaseSpec.from_dict(d))[0] for d in json.loads(text)]
    print(run_shard(text, outputs, reproduction_file(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
