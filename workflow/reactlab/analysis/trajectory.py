"""Trajectory metrics: the tool calls a run made against the calls its task expects.

A task may declare ``expected_calls`` in config.yaml: a list of calls, in order, each a
tool ``name`` and, optionally, per argument the list of acceptable values (BFCL-style
sets: ``fecha: ["2024-03-15"]``). An actual call *matches* an expected one when the names
agree and every argument the expectation lists has one of its acceptable values (numbers
compare by value, so 1 and 1.0 agree; arguments the expectation does not list are not
checked). Per run:

* ``tc_precision`` / ``tc_recall`` / ``tc_f1`` — any order: the largest one-to-one
  matching between actual and expected calls, over the number of actual / expected calls;
* ``tc_precision_order`` / ``tc_recall_order`` / ``tc_f1_order`` — in order: the longest
  common subsequence of the two call sequences under the same match;
* ``arg_accuracy`` — among actual calls to a tool the task expects, the share whose
  arguments are acceptable for some expected call of that tool (empty when there is none);
* ``abstained_correctly`` — only for tasks marked ``answerable: false`` (the data cannot
  answer them, e.g. the close of a ticker that does not exist): the run answered, its
  answer gives no figure of its own (every figure in it is one of the question's, compared
  as the verifier compares figures) and it says that the data is not there (the
  verifier's :data:`~reactlab.analysis.verify.NO_DATA` statement). An answer without
  figures that does not say so ("¿En qué más puedo ayudarte?") is not an abstention: it is
  the verifier's ``non_answer``.

Every call the model asked for counts, including invalid, unknown and repeated ones:
they are part of the trajectory. Empty cells mean "not defined" (no expectation, or
nothing to divide by); an empty actual *and* expected list scores 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reactlab.analysis.verify import NO_DATA, figures, near
from reactlab.trace.records import ToolCallRecord

TRAJECTORY_COLUMNS = ["tc_precision", "tc_recall", "tc_f1", "tc_precision_order",
                      "tc_recall_order", "tc_f1_order", "arg_accuracy", "abstained_correctly"]


def _same_value(actual: Any, acceptable: Any) -> bool:
    if isinstance(actual, bool) or isinstance(acceptable, bool):
        return actual is acceptable
    if isinstance(actual, int | float) and isinstance(acceptable, int | float):
        return float(actual) == float(acceptable)
    return bool(actual == acceptable)


def call_matches(call: ToolCallRecord, expected: Mapping[str, Any]) -> bool:
    """Whether an actual call (its name and arguments) satisfies one expected call."""
    if call.name != expected["name"]:
        return False
    args = call.arguments
    wanted = expected.get("arguments") or {}
    if not wanted:
        return True
    if not isinstance(args, Mapping):
        return False  # invalid JSON: no arguments to check
    return all(name in args and any(_same_value(args[name], ok) for ok in values)
               for name, values in wanted.items())


def _lcs(actual: Sequence[ToolCallRecord], expected: Sequence[Mapping[str, Any]]) -> int:
    rows = [[0] * (len(expected) + 1) for _ in range(len(actual) + 1)]
    for i, a in enumerate(actual, 1):
        for j, e in enumerate(expected, 1):
            rows[i][j] = (rows[i - 1][j - 1] + 1 if call_matches(a, e)
                          else max(rows[i - 1][j], rows[i][j - 1]))
    return rows[-1][-1]


def _max_matching(actual: Sequence[ToolCallRecord],
                  expected: Sequence[Mapping[str, Any]]) -> int:
    """Size of a maximum one-to-one matching (augmenting paths; the lists are short)."""
    owner: dict[int, int] = {}  # expected index -> actual index

    def augment(i: int, seen: set[int]) -> bool:
        for j, e in enumerate(expected):
            if j in seen or not call_matches(actual[i], e):
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    return sum(augment(i, set()) for i in range(len(actual)))


def _prf(hits: int, n_actual: int, n_expected: int) -> tuple[float | None, ...]:
    if n_actual == 0 and n_expected == 0:
        return 1.0, 1.0, 1.0
    precision = hits / n_actual if n_actual else None
    recall = hits / n_expected if n_expected else None
    if precision is None or recall is None:
        f1 = 0.0
    else:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def abstains(question: str, answer: str | None) -> bool:
    """The answer exists, gives no figure beyond the question's and says there is no data."""
    if answer is None:
        return False
    asked = figures(question)
    return (all(near(x, asked) for x in figures(answer))
            and NO_DATA.search(answer) is not None)


def trajectory_metrics(calls: Sequence[ToolCallRecord], question: str, answer: str | None,
                       expected: Sequence[Mapping[str, Any]] | None,
                       answerable: bool = True) -> dict[str, Any]:
    """The TRAJECTORY_COLUMNS of one run (None where a metric is not defined)."""
    out: dict[str, Any] = dict.fromkeys(TRAJECTORY_COLUMNS)
    if expected is not None:
        actual = list(calls)
        p, r, f = _prf(_max_matching(actual, expected), len(actual), len(expected))
        po, ro, fo = _prf(_lcs(actual, expected), len(actual), len(expected))
        out.update(tc_precision=p, tc_recall=r, tc_f1=f, tc_precision_order=po,
                   tc_recall_order=ro, tc_f1_order=fo)
        names = {e["name"] for e in expected}
        relevant = [c for c in actual if c.name in names]
        if relevant:
            good = sum(any(call_matches(c, e) for e in expected) for c in relevant)
            out["arg_accuracy"] = good / len(relevant)
    if not answerable:
        out["abstained_correctly"] = abstains(question, answer)
    return out
