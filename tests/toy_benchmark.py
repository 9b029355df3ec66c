"""A toy benchmark, in this one module: made-up cases, a scripted policy, a scorer, a table.

Importing this module registers the benchmark ``toy`` (:func:`reactlab.suites.registry.register`);
nothing in the package names it. tests/test_toy_benchmark.py then plans a ``suites:``
entry with ``benchmark: toy`` and runs its shard, verify and table jobs through the
functions the rules call. It proves that a benchmark is one registered object, as
tests/toy_provider.py proves it of a provider.

* Cases: three questions, each with one tool of its own (``add``, ``upper``, ``count``),
  in two categories (``numbers``, ``words``).
* Policy ``direct`` (a backend that plays scripts: the local scripted one, a simulated
  API): call the case's tool with the case's arguments, then answer with the tool's
  result, written as the case's steps (:func:`policy_steps`) and run through the runner
  like any benchmark's. A model backend is not supported.
* Scorer: a case is verified when the answer is the expected value.
* Table ``toy.csv``: one row per (suite, backend, scenario, category): cases, correct.
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactlab import trace as tracemod
from reactlab.agent.defences import NO_DEFENCES
from reactlab.agent.types import ModelTurn
from reactlab.analysis.verify import Finding, Verification
from reactlab.config import RunSpec
from reactlab.config.scripts import literal
from reactlab.config.settings import (
    CaseFields,
    SuiteCase,
    SuiteSettings,
    agent_settings,
    backend_settings,
    limits,
)
from reactlab.core.errors import UsageError
from reactlab.core.io import atomic_path
from reactlab.runner import run_to_trace
from reactlab.suites.registry import register
from reactlab.suites.types import checked_record, played, sample_cases

NAME = "toy"
POLICY = "direct"


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    question: str
    tool: str
    arguments: Mapping[str, Any]
    expected: str


def _schema(name: str, about: str, **params: str) -> dict[str, Any]:
    return {"name": name, "description": about,
            "parameters": {"type": "object", "required": list(params),
                           "properties": {k: {"type": v} for k, v in params.items()}}}


TOOLS = {"add": _schema("add", "Add two integers.", a="integer", b="integer"),
         "upper": _schema("upper", "Upper-case a text.", text="string"),
         "count": _schema("count", "Count the letters of a word.", word="string")}
FUNCTIONS = {"add": lambda a, b: a + b, "upper": lambda text: text.upper(),
             "count": lambda word: len(word)}
CASES = (Case("numbers_1", "numbers", "How much is 2 + 3?", "add", {"a": 2, "b": 3}, "5"),
         Case("words_1", "words", "Shout 'hola'.", "upper", {"text": "hola"}, "HOLA"),
         Case("words_2", "words", "How many letters has 'tres'?", "count", {"word": "tres"},
              "4"))


class ToyCase(CaseFields):
    """A toy case's own fields in its spec: what its policy calls and its scorer expects."""

    category: str
    tool: str
    arguments: dict[str, Any]
    expected: str


class Tools:
    """The loop's executor: the toy functions."""

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        assert isinstance(args, dict)
        return {"value": FUNCTIONS[name](**args)}


def policy_steps(spec: RunSpec) -> list[dict[str, Any]]:
    """Policy ``direct``: call the case's tool with the case's arguments, then answer
    with the value it returned (a template over the results, as a scenario writes it)."""
    assert spec.suite is not None
    case = ToyCase.of(spec.suite)
    return [{"calls": [{"name": case.tool, "arguments": literal(dict(case.arguments))}]},
            {"answer": "{ok[0][value]}"}]


class Toy:
    """The toy benchmark's registry entry."""

    name = NAME
    tables = ("toy",)
    categories = ("numbers", "words")
    policies = (POLICY,)
    only = ()
    case_fields = ToyCase
    settings = None  # it takes no settings
    figures: tuple[Any, ...] = ()  # no figure of its table
    summaries: Mapping[str, Any] = {}  # its table shown as it is on the viewer's index
    code: Mapping[str, str] = {}  # outside the package: nothing of it to fingerprint

    def specs(self, suite_name: str, entry: SuiteSettings,
              raw: Mapping[str, Any]) -> list[RunSpec]:
        agent = agent_settings({"send_tools": True, "send_system_prompt": False,
                                "system_prompt": "", "defences": dict(NO_DEFENCES)})
        steps = limits({"max_steps": 3, "token_budget": None})
        specs = []
        for category in entry.categories or self.categories:
            chosen = sample_cases(tuple(c for c in CASES if c.category == category),
                                  entry.sample, entry.seed)
            for case in chosen:
                for backend in entry.backends:
                    settings = backend_settings(raw["backends"][backend])
                    if settings.mode in ("model", "live"):
                        raise UsageError("the toy benchmark has no model runs")
                    for policy in entry.policies or self.policies:
                        specs.append(RunSpec(
                            task=case.id, backend=backend, scenario=policy,
                            question=case.question, tools=(case.tool,), params={},
                            backend_config=settings,
                            script={"model": policy, "policy": policy, "strategy": "react"},
                            limits=steps, agent=agent,
                            suite=SuiteCase.of(suite_name, NAME, [TOOLS[case.tool]],
                                               ToyCase(category=category, tool=case.tool,
                                                       arguments=dict(case.arguments),
                                                       expected=case.expected))))
        return specs

    def run_case(self, spec: RunSpec, out: str | Path, *, model: Any = None,
                 turn: ModelTurn | None = None, recording: str | None = None,
                 replay: str | None = None) -> dict[str, Any]:
        return run_to_trace(played(spec, policy_steps), Tools(), out,
                            recording=recording, replay=replay)

    def record(self, trace: tracemod.Trace, trace_path: str) -> dict[str, Any]:
        spec = trace.header.run_spec
        assert spec.suite is not None
        info = ToyCase.of(spec.suite)
        ok = trace.end.answer == info.expected
        findings = () if ok else (Finding("toy:wrong", f"expected {info.expected!r}"),)
        rec = Verification(trace=trace_path, trace_sha256=str(trace.end.sha256),
                           run=trace.run, verified=ok, findings=findings).to_json()
        rec.update({"checker": NAME, "suite": spec.suite.name, "category": info.category,
                    "case": spec.task})
        return rec

    def build_tables(self, pairs: Iterable[tuple[str, str]],
                     out_dir: str | Path) -> dict[str, Path]:
        groups: dict[tuple[str, str, str, str], list[bool]] = {}
        for trace_path, verified in pairs:
            tr = tracemod.read(trace_path)
            rec = checked_record(tr, verified, trace_path, self.record)
            key = (rec["suite"], tr.run["backend"], tr.run["scenario"], rec["category"])
            groups.setdefault(key, []).append(bool(rec["verified"]))
        path = Path(out_dir) / "toy.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["suite", "backend", "scenario", "category", "cases", "correct"])
            for key in sorted(groups):
                w.writerow([*key, len(groups[key]), sum(groups[key])])
        return {"toy": path}


TOY = register(Toy())

__all__ = ["CASES", "NAME", "TOY"]
