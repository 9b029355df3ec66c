"""The verification record of a suite trace: the benchmark's verdict, and the project's.

For a BFCL case the verdict is BFCL's own (:func:`reactlab.suites.bfcl.score`), computed
from the trace alone (its header carries the case's functions and possible answer). Beside
it the project's trajectory metrics (:mod:`reactlab.analysis.trajectory`) score the same
calls against the possible answer written as ``expected_calls``: every parameter that must
be given, with its acceptable values (a dict parameter's first acceptable shape);
parameters that may be left out are not checked. The project calls a case correct when
``tc_f1`` is 1 (every expected call matched one-to-one, no other call); an irrelevance case
expects no call. The two verdicts differ where the scorers differ: BFCL normalises strings
(case, spaces, punctuation), checks types and refuses parameters the function does not
have; the trajectory metrics compare values exactly and ignore parameters they do not
list. How often they agree is a column of ``bfcl.csv``.

The record has the fields of :class:`reactlab.analysis.verify.Verification` (so a viewer
reads it like a lesson run's) plus the suite's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.analysis.trajectory import trajectory_metrics
from reactlab.analysis.verify import REPAIR, Finding, Verification
from reactlab.core.errors import TraceError

if TYPE_CHECKING:
    from reactlab.trace import Trace

__all__ = ["expected_calls", "suite_record", "verify_shard"]


def expected_calls(case: Any) -> list[dict[str, Any]]:
    """The possible answer as the trajectory metrics' ``expected_calls``."""
    from reactlab.suites.bfcl import _function, _materialise

    out = []
    for expected in case.possible_answer or ():
        (name, params), = expected.items()
        props = _function(case, name)["parameters"].get("properties", {})
        args = {p: [_materialise(v, props.get(p, {})) for v in values]
                for p, values in params.items() if "" not in values and p in props}
        out.append({"name": name, "arguments": args})
    return out


def suite_record(tr: Trace, trace_path: str) -> dict[str, Any]:
    """The verification record of one suite trace (a pure function of the trace)."""
    from reactlab.suites import bfcl
    from reactlab.suites.plan import CaseSpec
    from reactlab.suites.run import case_of

    spec = CaseSpec.from_dict(tr.header.spec)
    if spec.suite.get("benchmark") == "agentdojo":  # AgentDojo's checks, by replay
        from reactlab.suites.agentdojo import suite_record as agentdojo_record

        return agentdojo_record(tr, trace_path)
    if spec.suite.get("benchmark") != "bfcl":
        raise TraceError(f"{trace_path}: not a BFCL suite trace")
    case = case_of(spec)
    records = tr.tool_calls()
    calls = [{"name": c.name, "arguments": c.arguments} for c in records]
    result = bfcl.score(case, calls)
    traj = trajectory_metrics(records, case.question, tr.end.answer, expected_calls(case))
    findings = [] if result["valid"] else [
        Finding(f"bfcl:{result['error_type']}",
                f"{result['error_type']}: {(result['error'] or [''])[0][:300]}")]
    rec = Verification(trace=trace_path, trace_sha256=str(tr.end.sha256), run=tr.run,
                       verified=bool(result["valid"]), findings=tuple(findings)).to_json()
    rec.update({"checker": "bfcl.ast_checker", "suite": spec.suite["name"],
                "category": case.category, "case": case.id,
                "error_type": result["error_type"],
                "sub_error_types": sorted(set(result["sub_error_types"])),
                "trajectory": traj, "project_verified": traj["tc_f1"] == 1.0})
    return rec


def load_suite_verification(tr: Trace, verified_path: str | Path,
                            trace_path: str) -> dict[str, Any]:
    """The record of ``tr``, recomputed, after checking the stored file agrees with it."""
    try:
        stored = json.loads(Path(verified_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(f"{verified_path}: cannot read the verification ({exc}); "
                         f"{REPAIR}") from exc
    fresh = suite_record(tr, trace_path)
    if stored != fresh:
        raise TraceError(f"{verified_path}: differs from verifying {trace_path} again "
                         f"(another version of the trace, or edited); {REPAIR}")
    return fresh


def verify_shard(traces: Sequence[str], outputs: Sequence[str]) -> str:
    """One suite verify job: every trace of a shard, its record written atomically."""
    from reactlab import trace
    from reactlab.core.io import write_json_atomic

    ok = 0
    for trace_path, out in zip(traces, outputs, strict=True):
        rec = suite_record(trace.read(trace_path), trace_path)
        write_json_atomic(out, rec)
        ok += rec["verified"]
    return f"{len(traces)} suite traces verified by their benchmark's checker: {ok} correct"


def summary_counts(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Error types and their counts among ``records``."""
    counts: dict[str, int] = {}
    for r in records:
        if not r["verified"]:
            counts[str(r["error_type"])] = counts.get(str(r["error_type"]), 0) + 1
    return counts
