"""How one BFCL case runs: a single turn through the runner, one trace per case.

A BFCL case is a :class:`~reactlab.config.RunSpec` like any run, and it runs through the
one path from spec to trace (:func:`reactlab.runner.run_to_trace`): its session is its
backend's provider's, its loop the project's under the ``single_turn`` strategy
(:class:`reactlab.agent.strategies.SingleTurn`). The calls the model (or the policy)
proposes are validated and *recorded*, never executed (:class:`RecordOnly` answers each
with a fixed ``not_executed`` result that nobody reads back: there is no second turn).
Who answers:

* a scripted policy (:func:`policy_steps`) is written as the case's one step and played
  by any backend that plays scripts: the local ``scripted`` backend writes it as Hermes
  ``<tool_call>`` text and parses it back (BFCL's "prompt" mode: dotted names and English
  text cross the path a real model's output takes), a ``simulated`` API's simulator
  answers it over the wire with the API's own tool calls (BFCL's "FC" mode: the tools go
  as the API's tool definitions, names as :func:`reactlab.suites.bfcl.api_name` writes
  them);
* a model backend runs its model: the local one on the model its shard loaded once
  (with the suite's ``batch_size`` above 1 the shard's first turns are decoded in
  batches, :mod:`reactlab.backends.local.batch`), a live API its remote model.

The trace header is the runner's, its spec the case's with the policy's step written
out: everything the verification needs is in it.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from reactlab.config.scripts import literal
from reactlab.config.settings import CaseFields, PolicyScript
from reactlab.runner import run_to_trace
from reactlab.suites import bfcl
from reactlab.suites.types import played

if TYPE_CHECKING:
    from reactlab.agent.types import ModelTurn
    from reactlab.backends.registry import LoadedModel
    from reactlab.config import RunSpec

__all__ = ["NOT_EXECUTED", "BfclCase", "RecordOnly", "case_of", "mode_of", "policy_steps",
           "run_case"]

NOT_EXECUTED = {"not_executed": "single-turn case: the call is recorded, not run"}


class RecordOnly:
    """The executor of a single-turn case: nothing runs."""

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        return dict(NOT_EXECUTED)


class BfclCase(CaseFields):
    """A BFCL case's own fields in its spec (``suite``): its category and language, its
    function documents as BFCL wrote them, its possible answers (None: an irrelevance
    case) and ``mode``: ``fc`` when its tools go as an API's tool definitions (left out:
    BFCL's ``prompt`` mode). Its traces write ``tools`` and ``batch_size`` before ``mode``."""

    tools_before: ClassVar[str | None] = "mode"
    category: str
    language: str
    functions: list[dict[str, Any]]
    possible_answer: list[Any] | None
    mode: Literal["fc"] | None = None


def fields_of(spec: RunSpec) -> BfclCase:
    """The BFCL fields of a case's spec (a ConfigError names a field BFCL has not)."""
    assert spec.suite is not None, f"{spec.key} is no suite case"
    return BfclCase.of(spec.suite)


def case_of(spec: RunSpec) -> bfcl.Case:
    """The benchmark case a spec carries (rebuilt from the spec alone)."""
    s = fields_of(spec)
    return bfcl.Case(id=spec.task, category=s.category, question=spec.question,
                     functions=tuple(s.functions),
                     possible_answer=None if s.possible_answer is None
                     else tuple(s.possible_answer))


def mode_of(spec: RunSpec) -> str:
    """BFCL's mode of a case's spec: ``fc`` (an API's native tools) or ``prompt``."""
    return (fields_of(spec).mode or "prompt") if spec.suite is not None else "prompt"


def policy_steps(spec: RunSpec) -> list[dict[str, Any]]:
    """The scripted policy of ``spec`` on its case as one step: its calls (named as the
    case's tools are), or BFCL's decline text when it makes none; the case's text taken
    literally (:func:`reactlab.config.scripts.literal`: a brace in an argument is no
    template field)."""
    assert isinstance(spec.script, PolicyScript), f"{spec.key} plays no policy"
    calls = bfcl.policy_calls(case_of(spec), spec.script.policy)
    if not calls:
        return [literal({"answer": bfcl.DECLINE})]
    rename = bfcl.api_name if mode_of(spec) == "fc" else str
    return [literal({"calls": [{"name": rename(c["name"]), "arguments": c["arguments"]}
                               for c in calls]})]


def run_case(spec: RunSpec, out: str | Path, *, model: LoadedModel | None = None,
             turn: ModelTurn | None = None, recording: str | None = None,
             replay: str | None = None) -> dict[str, Any]:
    """Run one case and write its trace atomically; returns the end record's data.
    ``model``/``turn``: the shard's model and the case's batched turn (a local model);
    ``recording``/``replay``: an HTTP case's recording to write or to answer from."""
    return run_to_trace(played(spec, policy_steps), RecordOnly(), out, model=model,
                        first_turn=turn, recording=recording, replay=replay)
