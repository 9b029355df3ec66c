"""BFCL's scorer: the verification record of a BFCL trace (:func:`suite_record`).

The verdict is BFCL's own (:func:`reactlab.suites.bfcl.score`), computed from the trace
alone (its header carries the case's functions and possible answer, and BFCL's mode: in
"FC" mode the checker maps the functions' dotted names as BFCL does,
``underscore_to_dot``). Beside it the project's trajectory metrics
(:mod:`reactlab.analysis.trajectory`) score the same calls
against the possible answer written as ``expected_calls``: every parameter that must be
given, with its acceptable values (a dict parameter's first acceptable shape); parameters
that may be left out are not checked. The project calls a case correct when ``tc_f1`` is
1 (every expected call matched one-to-one, no other call); an irrelevance case expects no
call. The two verdicts differ where the scorers differ: BFCL normalises strings (case,
spaces, punctuation), checks types and refuses parameters the function does not have; the
trajectory metrics compare values exactly and ignore parameters they do not list. How
often they agree is a column of ``bfcl.csv``.

The record has the fields of :class:`reactlab.analysis.verify.Verification` (so a viewer
reads it like a lesson run's) plus the suite's own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reactlab.analysis.trajectory import trajectory_metrics
from reactlab.analysis.verify import Finding, Verification
from reactlab.core.errors import TraceError
from reactlab.suites import bfcl, bfcl_run

if TYPE_CHECKING:
    from reactlab.trace import Trace

__all__ = ["NAME", "expected_calls", "suite_record"]

#: The benchmark's name (a suite entry's ``benchmark:``, a case spec's ``suite.benchmark``).
NAME = "bfcl"


def expected_calls(case: Any) -> list[dict[str, Any]]:
    """The possible answer as the trajectory metrics' ``expected_calls``."""
    out = []
    for expected in case.possible_answer or ():
        (name, params), = expected.items()
        props = bfcl._function(case, name)["parameters"].get("properties", {})
        args = {p: [bfcl._materialise(v, props.get(p, {})) for v in values]
                for p, values in params.items() if "" not in values and p in props}
        out.append({"name": name, "arguments": args})
    return out


def suite_record(tr: Trace, trace_path: str) -> dict[str, Any]:
    """The verification record of one BFCL trace (a pure function of the trace)."""
    spec = tr.header.run_spec
    if spec.suite is None or spec.suite.benchmark != NAME:
        raise TraceError(f"{trace_path}: not a BFCL suite trace")
    case = bfcl_run.case_of(spec)
    mode = bfcl_run.mode_of(spec)
    records = tr.tool_calls()
    calls = [{"name": c.name, "arguments": c.arguments} for c in records]
    result = bfcl.score(case, calls, mode)
    if mode == "fc":  # the trajectory metrics compare names as the functions have them
        dotted = {bfcl.api_name(f["name"]): f["name"] for f in case.functions}
        records = [replace(c, name=dotted.get(c.name, c.name)) if c.name is not None else c
                   for c in records]
    traj = trajectory_metrics(records, case.question, tr.end.answer, expected_calls(case))
    findings = [] if result["valid"] else [
        Finding(f"bfcl:{result['error_type']}",
                f"{result['error_type']}: {(result['error'] or [''])[0][:300]}")]
    rec = Verification(trace=trace_path, trace_sha256=str(tr.end.sha256), run=tr.run,
                       verified=bool(result["valid"]), findings=tuple(findings)).to_json()
    rec.update({"checker": "bfcl.ast_checker", "suite": spec.suite.name,
                "category": case.category, "case": case.id,
                "error_type": result["error_type"],
                "sub_error_types": sorted(set(result["sub_error_types"])),
                "trajectory": traj, "project_verified": traj["tc_f1"] == 1.0})
    return rec
