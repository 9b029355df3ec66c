"""The verification of a suite trace, by its benchmark's own scorer.

The record is the benchmark's (:meth:`reactlab.suites.registry.Benchmark.record`: BFCL's
in :mod:`reactlab.suites.bfcl_suite`, AgentDojo's in :mod:`reactlab.suites.agentdojo_score`),
a pure function of the trace, with the fields of
:class:`reactlab.analysis.verify.Verification` (so a viewer reads it like a lesson run's)
plus the benchmark's own. Here: one verify job (:func:`verify_shard`), given the scorer
by the caller, so that this module (and the verify rule's code fingerprint) does not
import the registry: the rule's fingerprint is this module's and the benchmark's scorer
module's (``Benchmark.code``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reactlab import trace
from reactlab.core.io import write_json_atomic

if TYPE_CHECKING:
    from reactlab.trace import Trace

__all__ = ["summary_counts", "verify_shard"]


def verify_shard(traces: Sequence[str], outputs: Sequence[str],
                 record: Callable[[Trace, str], dict[str, Any]]) -> str:
    """One suite verify job: every trace of a shard, its record (``record``: the scorer,
    :func:`reactlab.suites.registry.suite_record` for any benchmark's) written
    atomically."""
    ok = 0
    for trace_path, out in zip(traces, outputs, strict=True):
        rec = record(trace.read(trace_path), trace_path)
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
