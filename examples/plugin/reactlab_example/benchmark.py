"""The benchmark ``conversiones``: unit-conversion questions in Spanish, with its scorer and table.

A reactlab benchmark outside reactlab (docs/plugins.md): the object :data:`BENCHMARK`
has the members of ``reactlab.suites.registry.Benchmark`` and is declared by this
package's entry point ``conversiones`` in the group ``reactlab.benchmarks``. A
``suites:`` entry with ``benchmark: conversiones`` then runs its cases.

* Cases (``conversiones.json``, package data): 24 questions in four categories
  (``longitud``, ``masa``, ``temperatura``, ``volumen``), each with the value, the units
  and the expected answer. A case offers one tool, its category's converter
  (:mod:`reactlab_example.units`).
* Policies, played by a backend that plays scripts (the local scripted one, a simulated
  API): ``directo`` calls the converter with the case's value and units, then answers
  with its result; ``unidad_equivocada`` converts to another unit of the category and
  answers with that (a fault the scorer must catch). A model backend (a local model, a
  live API) runs the model instead, under scenario ``react``, with the ReAct loop.
* Scorer (:meth:`Conversions.record`, a pure function of the trace): the answer's last
  figure that is not one of the question's is its value; the case is correct when that
  value is within 0.5 % (at least 0.01) of the expected one. A wrong answer records a
  finding (``conversiones:sin_respuesta``, ``conversiones:sin_cifra``,
  ``conversiones:fuera_de_tolerancia``).
* Table ``conversiones.csv``: one row per (suite, backend, scenario, category): cases,
  correct, and the median relative error of the answers that gave a figure.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from reactlab import trace as tracemod
from reactlab.agent.defences import NO_DEFENCES
from reactlab.analysis.verify import Finding, Verification
from reactlab.config import RunSpec
from reactlab.config.scripts import literal
from reactlab.config.settings import (
    CaseFields,
    Number,
    PolicyScript,
    SuiteCase,
    SuiteSettings,
    agent_settings,
    backend_settings,
    limits,
    script_settings,
)
from reactlab.core.io import atomic_path
from reactlab.runner import run_to_trace
from reactlab.suites.types import SCENARIO_MODEL, checked_record, played, sample_cases
from reactlab_example.units import CATEGORIES, TOOLS, UNITS, Converter, tool_name

if TYPE_CHECKING:
    from reactlab.agent.types import ModelTurn

__all__ = ["BENCHMARK", "CASES", "NAME", "POLICIES", "answer_value", "within_tolerance"]

NAME = "conversiones"
POLICIES = ("directo", "unidad_equivocada")
#: The tolerance of the scorer: relative, with an absolute floor.
REL_TOL, ABS_TOL = 0.005, 0.01
#: The model's step limit on a case (a model backend).
MAX_STEPS = 4
SYSTEM_PROMPT = ("Eres un asistente que convierte unidades. Usa la herramienta de conversión "
                 "y responde en español con el resultado y su unidad.")


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    question: str
    valor: float
    desde: str
    hasta: str
    esperado: float


class Ajustes(BaseModel):
    """The benchmark's own settings (a suite's ``settings:``), checked by the config."""

    model_config = ConfigDict(extra="forbid", strict=True)

    #: the model's step limit on a case (a model backend)
    max_pasos: int = Field(default=MAX_STEPS, ge=1, le=20)


class ConversionCase(CaseFields):
    """A case's own fields in its spec (``suite.case``): what the policy and the scorer
    read, typed (an unknown field is an error naming it)."""

    category: str
    valor: Number
    desde: str
    hasta: str
    esperado: Number


def load_cases() -> tuple[Case, ...]:
    """The cases of ``conversiones.json`` (package data), checked against the units."""
    text = resources.files(__package__).joinpath("conversiones.json").read_text("utf-8")
    cases = tuple(Case(**row) for row in json.loads(text))
    for c in cases:
        assert c.category in UNITS and {c.desde, c.hasta} <= set(UNITS[c.category]), c.id
    return cases


CASES = load_cases()


def policy_steps(spec: RunSpec) -> list[dict[str, Any]]:
    """A policy's steps on one case: a call of the case's converter, then the answer
    made of its result (a template over the results, as a scenario of config.yaml
    writes it; the case's data taken literally)."""
    assert spec.suite is not None and isinstance(spec.script, PolicyScript)
    case = ConversionCase.of(spec.suite)
    target = case.hasta
    if spec.script.policy == "unidad_equivocada":
        units = UNITS[case.category]
        target = next(u for u in units if u not in (case.desde, case.hasta))
    arguments = {"valor": case.valor, "desde": case.desde, "hasta": target}
    return [literal({"calls": [{"name": tool_name(case.category),
                                "arguments": arguments}]}),
            {"answer": "Son {ok[0][valor]} {ok[0][unidad]}."}]


# --------------------------------------------------------------------------- the scorer

#: A figure, not the digit of a unit (``m3``): no letter or digit right before it.
_NUMBER = re.compile(r"(?<![A-Za-z0-9])[-−]?\d+(?:[.,]\d+)*")


def _number(token: str) -> float | None:
    """One figure: with a comma, the European way (``1.234,5``); else the dot is decimal."""
    token = token.replace("−", "-")
    if "," in token:
        token = token.replace(".", "").replace(",", ".")
    try:
        return float(token)
    except ValueError:
        return None


def _figures(text: str) -> list[float]:
    return [v for v in (_number(t) for t in _NUMBER.findall(text)) if v is not None]


def answer_value(question: str, answer: str | None) -> float | None:
    """The answer's value: its last figure that is not one of the question's."""
    asked = _figures(question)
    given = [v for v in _figures(answer or "") if v not in asked]
    return given[-1] if given else None


def within_tolerance(value: float, expected: float) -> bool:
    return abs(value - expected) <= max(ABS_TOL, REL_TOL * abs(expected))


def _findings(expected: float, answer: str | None, value: float | None) -> list[Finding]:
    if answer is None:
        return [Finding(f"{NAME}:sin_respuesta", "the run ended without an answer")]
    if value is None:
        return [Finding(f"{NAME}:sin_cifra", "the answer gives no figure of its own")]
    if not within_tolerance(value, expected):
        return [Finding(f"{NAME}:fuera_de_tolerancia",
                        f"answered {value:g}, expected {expected:g}")]
    return []


# --------------------------------------------------------------------------- the entry


class Conversions:
    """The benchmark's entry (``reactlab.suites.registry.Benchmark``)."""

    name = NAME
    tables = (NAME,)
    categories = CATEGORIES
    policies = POLICIES
    only: tuple[str, ...] = ()
    case_fields = ConversionCase
    settings = Ajustes
    figures: tuple[Any, ...] = ()  # no figure of its table
    summaries: Mapping[str, Any] = {}  # its table shown as it is on the viewer's index
    code: Mapping[str, str] = {"run": "reactlab_example.benchmark",
                               "verify": "reactlab_example.benchmark",
                               "tables": "reactlab_example.benchmark"}

    def specs(self, suite_name: str, entry: SuiteSettings,
              raw: Mapping[str, Any]) -> list[RunSpec]:
        """One spec per sampled case, backend and policy (a model backend: scenario
        ``react``, the model decides)."""
        backends = {b: backend_settings(raw["backends"][b]) for b in entry.backends}
        specs = []
        for category in entry.categories or self.categories:
            chosen = sample_cases(tuple(c for c in CASES if c.category == category),
                                  entry.sample, entry.seed)
            for case in chosen:
                for backend, settings in backends.items():
                    runs_model = settings.mode in ("model", "live")
                    for scenario in ([SCENARIO_MODEL] if runs_model
                                     else entry.policies or self.policies):
                        specs.append(self._spec(suite_name, entry, case, backend, settings,
                                                scenario, runs_model))
        return specs

    @staticmethod
    def _spec(suite_name: str, entry: SuiteSettings, case: Case, backend: str,
              settings: Any, scenario: str, runs_model: bool) -> RunSpec:
        prompt = entry.system_prompt if entry.system_prompt is not None else SYSTEM_PROMPT
        agent = agent_settings({"send_tools": True, "send_system_prompt": runs_model,
                                "system_prompt": prompt, "defences": dict(NO_DEFENCES)})
        script = ({"model": SCENARIO_MODEL, "strategy": "react"} if runs_model
                  else {"model": scenario, "policy": scenario, "strategy": "react"})
        return RunSpec(
            task=case.id, backend=backend, scenario=scenario, question=case.question,
            tools=(tool_name(case.category),), params={}, backend_config=settings,
            script=script_settings(script),
            limits=limits({"max_steps": Ajustes.model_validate(entry.settings).max_pasos,
                           "token_budget": None}), agent=agent,
            suite=SuiteCase.of(suite_name, NAME, [TOOLS[tool_name(case.category)]],
                               ConversionCase(category=case.category, valor=case.valor,
                                              desde=case.desde, hasta=case.hasta,
                                              esperado=case.esperado)))

    def run_case(self, spec: RunSpec, out: str | Path, *, model: Any = None,
                 turn: ModelTurn | None = None, recording: str | None = None,
                 replay: str | None = None) -> dict[str, Any]:
        return run_to_trace(played(spec, policy_steps), Converter(), out, model=model,
                            first_turn=turn, recording=recording, replay=replay)

    def record(self, trace: tracemod.Trace, trace_path: str) -> dict[str, Any]:
        """The case's verification record, a pure function of its trace."""
        spec = trace.header.run_spec
        assert spec.suite is not None
        info = ConversionCase.of(spec.suite)
        expected = float(info.esperado)
        value = answer_value(trace.header.question, trace.end.answer)
        findings = _findings(expected, trace.end.answer, value)
        rec = Verification(trace=trace_path, trace_sha256=str(trace.end.sha256),
                           run=trace.run, verified=not findings,
                           findings=tuple(findings)).to_json()
        rec.update({"checker": NAME, "suite": spec.suite.name, "category": info.category,
                    "case": spec.task, "expected": expected,
                    "value": value,
                    "rel_error": None if value is None
                    else round(abs(value - expected) / max(abs(expected), ABS_TOL), 6)})
        return rec

    def build_tables(self, pairs: Iterable[tuple[str, str]],
                     out_dir: str | Path) -> dict[str, Path]:
        groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
        for trace_path, verified in pairs:
            tr = tracemod.read(trace_path)
            rec = checked_record(tr, verified, trace_path, self.record)
            key = (rec["suite"], tr.run["backend"], tr.run["scenario"], rec["category"])
            groups.setdefault(key, []).append(rec)
        path = Path(out_dir) / f"{NAME}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["suite", "backend", "scenario", "category", "cases", "correct",
                        "median_rel_error"])
            for key in sorted(groups):
                recs = groups[key]
                errors = [r["rel_error"] for r in recs if r["rel_error"] is not None]
                w.writerow([*key, len(recs), sum(bool(r["verified"]) for r in recs),
                            f"{statistics.median(errors):.6f}" if errors else ""])
        return {NAME: path}


#: The entry point ``conversiones`` (group ``reactlab.benchmarks``).
BENCHMARK = Conversions()
