"""Deterministic checks of a final answer against the trace of the run that produced it.

The loop's guardrails (schema validation, repetition detection, step limit) never see the
most dangerous error, because it lives in the final answer and not in a call. This module
checks the answer against the recorded tool calls with a handful of cheap, pure rules taken
from the lesson ("Verifying the final answer against the trace", the wrong-tool scenario and
Exercise 1). Findings come out in a fixed order:

1. ``no_answer`` -- the run ended without an answer (step limit, token budget, backend error);
   when it fires it is the only finding.
2. The lesson's ``verificar``, with exactly its semantics:

   - ``figure_without_source`` -- every figure in the answer must be near (see :func:`near`)
     some figure in a successful tool result or in the question; one finding per offending
     figure, in order of appearance;
   - ``percentage_without_calculation`` -- every percentage in the answer must be near a
     figure from a successful result of a calculating tool (:data:`CALCULATING_TOOLS`);
   - ``unresolved_tool_error`` -- some call failed, the successful results hold no figure
     at all (the lesson tests the list of figures seen, ``not vistas``, not the list of
     successful calls: a successful result without digits, e.g. an empty news search, does
     not resolve an error), *and the answer gives a data point anyway* (a figure that is
     not in the question, or a quoted headline). This last clause is the lesson's prose
     ("the answer cannot give the data point that tool was supposed to bring") rather than
     its code, which also flagged an honest "there is no data" answer; every verdict of
     the lesson is unchanged.

3. ``headline_not_verbatim`` (Exercise 1) -- every quoted headline in the answer must appear
   verbatim as a ``titular`` of a successful ``buscar_noticias`` result. The check is literal:
   an honest paraphrase fails it too.
4. ``percentage_not_given`` (the wrong-tool scenario) -- the question asks for a percentage
   and the answer gives none. A percentage that is given but not computed is already caught
   by ``percentage_without_calculation``.

5. ``non_answer`` -- the question asks for a data point (:func:`asks_figure`), the answer
   carries no figure of its own (every figure in it is one of the question's, such as its
   dates) and makes no honest "there is no data" statement (:data:`NO_DATA`). A small model's
   "You can use json.dumps()..." to a price question is not an answer. Questions that ask
   for a percentage are left to rule 4, which already reports the missing figure.

A finding about a place in the answer (a figure, a percentage, a quoted headline) carries
that place as ``span`` (start and end offsets in the answer), so a view can mark it without
re-reading the answer. :class:`Verification` is the verifier's record for one trace (its
JSON, :func:`verification_record`, is what ``results/verified/*.json`` holds);
:func:`load_verification` reads a stored one back and checks it against a fresh
verification, once; :class:`VerifiedRun` pairs a trace with its verification after
:meth:`Verification.check` (the one check that they belong together), and is what the
tables and the viewer consume.

The rules are independent: a figure inside an invented quoted headline is still a figure of
the answer, so it is reported by rule 2 as well as the headline by rule 3.

Figures of a result are read from ``json.dumps(result["resultado"])`` with the default
arguments, as the lesson does. ``ensure_ascii=True`` turns non-ASCII letters into escapes
such as ``\\u00f3`` whose digits become figures too (``0``, ``3``...); this is a quirk of the
lesson that is kept on purpose so that verdicts match it.

A call is a trace's :class:`~reactlab.trace.records.ToolCallRecord` (``name`` is ``None``
for a call that could not be parsed); a result is successful when it is a mapping holding
the key ``"resultado"`` (:attr:`ToolCallRecord.succeeded`), and anything else
(``{"error": ...}``, an unparseable call) counts as an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab import trace as tracemod
from reactlab.core import io as core_io
from reactlab.core.errors import TraceError
from reactlab.trace.records import Termination, ToolCallRecord

if TYPE_CHECKING:
    from reactlab.trace import Trace

__all__ = [
    "CALCULATING_TOOLS",
    "NEWS_TOOL",
    "NO_DATA",
    "Finding",
    "Verification",
    "VerifiedRun",
    "asks_figure",
    "asks_percentage",
    "figures",
    "load_verification",
    "load_verified",
    "near",
    "read_verification",
    "verdict",
    "verification_record",
    "verify",
    "verify_job",
]

CALCULATING_TOOLS = frozenset({"calculadora", "variacion"})
"""Tools whose results are computed in code; only they can be the source of a percentage."""

NEWS_TOOL = "buscar_noticias"
"""The tool whose results hold the headlines (``titular``) an answer may quote."""

_NUM = re.compile(r"\d[\d.,]*\d|\d")
_THOUSANDS = re.compile(r"\d{1,3}(\.\d{3})+")
_DIGITS = re.compile(r"\d+")
_PERCENT = re.compile(r"(\d[\d.,]*)\s*%")
_QUOTED = re.compile(r"[«\"“]([^»\"”]+)[»\"”]")
_ASKS_PERCENT = re.compile(r"porcentaje|porcentual|%", re.IGNORECASE)
_ASKS_FIGURE = re.compile(
    r"cu[aá]nt[oa]s?\b|cu[aá]l (fue|es|era|ha sido)\b|porcentaje|porcentual|%|precio|cierre|"
    r"cotizaci[oó]n", re.IGNORECASE)

NO_DATA = re.compile(
    r"\bno (hay|existen?|tengo|dispongo|consta|encontr\w*|he encontrado|se encontr\w*|"
    r"pude|puedo|se pudo|se puede|est[aá]n? disponibles?)\b|\bsin datos\b|\bno disponibles?\b|"
    r"\bno data\b|\bnot available\b|\bdoes not exist\b|\bno information\b|"
    r"\bcould not (find|get|obtain)\b", re.IGNORECASE)
"""An honest statement that the data is not there (Spanish, and English for models that
switch language): with it, an answer without a figure is an answer."""


@dataclass(frozen=True)
class Finding:
    """One reason why an answer cannot be accepted.

    ``rule`` is a stable identifier (``no_answer``, ``figure_without_source``,
    ``percentage_without_calculation``, ``unresolved_tool_error``, ``headline_not_verbatim``,
    ``percentage_not_given``, ``non_answer``); ``message`` is the human-readable English
    text of the lesson, e.g. ``"figure without a source: 10"``. ``span`` is the (start, end)
    of the offending text in the answer for the rules about a place in it (a figure token, a
    percentage with its ``%``, a quoted headline with its quotes), ``None`` for the others.
    """

    rule: str
    message: str
    span: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "message": self.message}
        if self.span is not None:
            out["span"] = list(self.span)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Finding:
        try:
            span = obj.get("span")
            return cls(rule=str(obj["rule"]), message=str(obj["message"]),
                       span=None if span is None else (int(span[0]), int(span[1])))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise TraceError(f"malformed finding {obj!r:.100}: {exc!r}") from exc


def _token_values(token: str) -> list[float]:
    """Value(s) of one numeric token, following the lesson's ``cifras``."""
    if "," in token:
        token = token.replace(".", "").replace(",", ".")
    elif _THOUSANDS.fullmatch(token):
        token = token.replace(".", "")
    try:
        return [float(token.rstrip("."))]
    except ValueError:
        # The lesson's function raises here ("15.03.2024", "1,234,567", "1.2.3"). A verifier
        # must not crash on an answer, so each run of digits is taken as its own figure,
        # the same way "2024-03-15" is read as 2024, 3 and 15: every part must be sourced.
        return [float(d) for d in _DIGITS.findall(token)]


def figures(text: str | None) -> list[float]:
    """The numbers in ``text``, in order: the lesson's ``cifras``.

    A token with a comma is read in the European way (``"1.234,5"`` -> 1234.5); a token that
    only has dot-separated groups of three digits is a thousands separator (``"1.234"`` ->
    1234); otherwise the dot is decimal (``"27.88."`` -> 27.88). ``None`` gives ``[]``. Where
    the lesson's function would raise ``ValueError`` (a token such as ``"15.03.2024"`` that is
    no valid float after those rules), each run of digits of the token is returned instead.
    """
    out: list[float] = []
    for token in _NUM.findall(text or ""):
        out.extend(_token_values(token))
    return out


def near(x: float, ys: Iterable[float]) -> bool:
    """Whether ``x`` is within 0.6 % of some ``y`` (absolute 0.006 when ``|y| < 1``): ``cerca``."""
    return any(abs(x - y) <= 0.006 * max(1.0, abs(y)) for y in ys)


def asks_percentage(question: str) -> bool:
    """Whether the question asks for a percentage ("porcentaje", "porcentual" or "%")."""
    return _ASKS_PERCENT.search(question or "") is not None


def asks_figure(question: str) -> bool:
    """Whether the question asks for a data point: how much ("cuánto"), which value
    ("cuál fue"), a percentage, a price, a close or a quote."""
    return _ASKS_FIGURE.search(question or "") is not None


def _headlines(calls: Sequence[ToolCallRecord]) -> set[str]:
    """Every ``titular`` of the successful news results (malformed items are skipped)."""
    found: set[str] = set()
    for call in calls:
        if call.name != NEWS_TOOL or not call.succeeded:
            continue
        items = call.result["resultado"]
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, Mapping) and isinstance(item.get("titular"), str):
                found.add(item["titular"])
    return found


def verify(
    question: str,
    answer: str | None,
    calls: Sequence[ToolCallRecord],
    termination: Termination = "answer",
) -> list[Finding]:
    """Check ``answer`` to ``question`` against the tool ``calls`` of the run.

    ``termination`` says why the run ended ("answer", "step_limit", "token_budget",
    "backend_error"...); it only appears in the ``no_answer`` message. An empty string is an
    answer like any other and goes through every rule. Returns the findings in the order
    described in the module docstring; an empty list means the answer passes.
    """
    if answer is None:
        return [Finding("no_answer", f"no answer: {termination.replace('_', ' ')}")]

    seen: list[float] = []
    computed: list[float] = []
    errors = 0
    for call in calls:
        if call.succeeded:
            values = figures(json.dumps(call.result["resultado"]))
            seen += values
            if call.name in CALCULATING_TOOLS:
                computed += values
        else:
            errors += 1

    findings: list[Finding] = []
    sources = seen + figures(question)
    for m in _NUM.finditer(answer):  # the tokens of figures(answer), in order
        for x in _token_values(m.group()):
            if not near(x, sources):
                findings.append(Finding("figure_without_source",
                                        f"figure without a source: {x:g}", m.span()))
    percentages = _PERCENT.findall(answer)
    for m in _PERCENT.finditer(answer):
        p = m.group(1)
        if not near(figures(p)[0], computed):
            findings.append(
                Finding("percentage_without_calculation",
                        f"percentage without a calculation: {p}%", m.span())
            )
    question_figures = figures(question)
    gives_data = any(not near(x, question_figures) for x in figures(answer)) or bool(
        _QUOTED.findall(answer))
    if errors and not seen and gives_data:
        findings.append(Finding("unresolved_tool_error", "unresolved tool error"))

    real = _headlines(calls)
    for m in _QUOTED.finditer(answer):
        quoted = m.group(1)
        if quoted not in real:
            findings.append(
                Finding("headline_not_verbatim", f"headline not in any news result: {quoted}",
                        m.span())
            )

    if asks_percentage(question) and not percentages:
        findings.append(
            Finding("percentage_not_given", "question asks for a percentage; the answer gives none")
        )
    elif (asks_figure(question) and not any(not near(x, question_figures)
                                            for x in figures(answer))
          and NO_DATA.search(answer) is None):
        findings.append(
            Finding("non_answer", "data question; the answer gives no figure and does not say "
                                  "that there is no data")
        )
    return findings


def verdict(findings: Iterable[Finding]) -> bool:
    """True when there are no findings: the answer is accepted."""
    return not list(findings)


@dataclass(frozen=True)
class Verification:
    """The verifier's record for one trace (what ``results/verified/*.json`` holds)."""

    trace: str
    trace_sha256: str
    run: dict[str, str]
    verified: bool
    findings: tuple[Finding, ...]

    def to_json(self) -> dict[str, Any]:
        return {"trace": self.trace, "trace_sha256": self.trace_sha256, "run": self.run,
                "verified": self.verified, "findings": [f.to_json() for f in self.findings]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Verification:
        try:
            return cls(trace=str(obj["trace"]), trace_sha256=str(obj["trace_sha256"]),
                       run=dict(obj["run"]), verified=bool(obj["verified"]),
                       findings=tuple(Finding.from_json(f) for f in obj["findings"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"malformed verification record: {exc!r}") from exc

    @classmethod
    def of(cls, tr: Trace, trace_path: str) -> Verification:
        """Verify the trace ``tr`` (read from ``trace_path``, which the record names)."""
        findings = verify(tr.header.question, tr.end.answer, tr.tool_calls(),
                          tr.end.termination)
        return cls(trace=trace_path, trace_sha256=str(tr.end.sha256), run=tr.run,
                   verified=not findings, findings=tuple(findings))

    def check(self, tr: Trace) -> None:
        """Refuse a verification made for another version of the trace ``tr``."""
        if self.trace_sha256 != tr.end.sha256:
            raise TraceError(f"{tr.path}: verification file is for another version of the "
                             "trace")


def verification_record(tr: Trace, trace_path: str) -> dict[str, Any]:
    """The verifier's record for one trace as JSON (what ``results/verified/*.json``
    holds; :meth:`Verification.from_json` reads it back)."""
    return Verification.of(tr, trace_path).to_json()


REPAIR = ("run the pipeline again (`snakemake --cores 4`): damaged results are removed "
          "and regenerated before any job starts")


def read_verification(verified_path: str | Path) -> dict[str, Any]:
    """The JSON object of a verification file (TraceError naming the file and the repair
    when it cannot be read or is not an object)."""
    try:
        stored = json.loads(Path(verified_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(f"{verified_path}: cannot read the verification ({exc}); "
                         f"{REPAIR}") from exc
    if not isinstance(stored, dict):
        raise TraceError(f"{verified_path}: not a verification record; {REPAIR}")
    return stored


def load_verification(tr: Trace, verified_path: str | Path,
                      trace_path: str) -> Verification:
    """The verification of ``tr``, recomputed, after checking the file agrees with it.

    Verifying takes microseconds, so the verdict is never taken on trust: a file that is
    unreadable, for another version of the trace, or whose verdict or findings differ from
    the recomputation raises TraceError naming the file and the repair.
    """
    stored = read_verification(verified_path)
    if stored.get("trace_sha256") != tr.end.sha256:
        raise TraceError(f"{verified_path}: verification file is for another version of "
                         f"the trace {trace_path}; {REPAIR}")
    fresh = Verification.of(tr, trace_path)
    fresh_json = fresh.to_json()
    for key in ("verified", "findings", "run"):
        if stored.get(key) != fresh_json[key]:
            raise TraceError(f"{verified_path}: {key!r} differs from verifying the trace "
                             f"again (edited after it was written?); {REPAIR}")
    return fresh


@dataclass(frozen=True)
class VerifiedRun:
    """A trace with its verification, checked once to belong together: what the tables
    and the viewer consume. Building one for a verification of another version of the
    trace raises TraceError."""

    trace: Trace
    verification: Verification

    def __post_init__(self) -> None:
        self.verification.check(self.trace)

    @property
    def trace_path(self) -> str:
        """The trace's path as the verification names it."""
        return self.verification.trace


def load_verified(trace_path: str, verified_path: str | Path) -> VerifiedRun:
    """Read the trace at ``trace_path`` and its verification at ``verified_path``:
    the trace's checks (:func:`reactlab.trace.read`), then :func:`load_verification`."""
    tr = tracemod.read(trace_path)
    return VerifiedRun(tr, load_verification(tr, verified_path, trace_path))


def verify_job(trace_path: str, out: str) -> str:
    """One verify job of the pipeline (the ``verify`` command and the Snakemake rule):
    read and check the trace, write its verification record atomically; returns the
    summary line for the job's log. Holds no state between calls (jobs may be threads)."""
    tr = tracemod.read(trace_path)
    v = Verification.of(tr, trace_path)
    core_io.write_json_atomic(out, v.to_json())  # by the module: a test fakes a full disk
    verdict_ = "verified" if v.verified else "REJECTED: " + "; ".join(
        f.message for f in v.findings)
    return (f"{tr.header.key}: {tr.end.termination}, {tr.end.steps} steps, "
            f"{tr.end.tokens_sent} tokens sent; {verdict_}")
