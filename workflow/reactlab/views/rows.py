"""The index's rows: the run list's columns, its rows built from the lesson's runs and
the suite cases (:func:`run_list`), and the reading of a row's cells, which come as
Python values (the viewer's own rows) or as CSV text (a table read back: empty cells,
``"True"``, NaN)."""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from reactlab.views.page import page_path

__all__ = ["COLUMNS", "VERDICT", "SuiteRow", "count", "lesson_verdict", "number", "run_list",
           "text", "trial", "truthy"]

#: The run list's columns, in the order of each row of the embedded JSON.
COLUMNS = ("suite", "task", "backend", "scenario", "agent", "trial", "termination",
           "verdict", "steps", "calls", "tokens", "detail", "href")
#: The verdict's place in a row of :data:`COLUMNS`.
VERDICT = COLUMNS.index("verdict")

SuiteRow = Mapping[str, Any]
"""A suite case's row for the list: ``suite``, ``category``, ``task`` (the case),
``backend``, ``scenario``, ``termination``, ``verified``, ``steps``, ``calls``,
``tokens_sent``, ``detail``, ``href`` and ``deterministic`` (its backend repeats one
outcome)."""


def truthy(value: object) -> bool:
    """A boolean cell of a row or CSV table (``"True"``, ``"1"``, ``True`` ...)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(value)


def trial(row: Mapping[str, Any]) -> int:
    """The row's trial number, 0 for a run without trials (also for empty CSV cells)."""
    value = row.get("trial")
    try:
        return int(value) if value is not None and value == value and value != "" else 0
    except (TypeError, ValueError):
        return 0


def count(value: object) -> int | str:
    """A count cell as an int (``""`` when missing or NaN)."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return ""
    try:
        return int(float(str(value)))
    except ValueError:
        return str(value)


def number(value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        out = float(str(value))
    except ValueError:
        return None
    return None if math.isnan(out) else out


def text(value: object) -> str:
    """A text cell; NaN (an empty CSV cell read by pandas) and None are empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def lesson_verdict(row: Mapping[str, Any]) -> str:
    """``verified``, ``rejected`` or ``no answer`` (when the row says it has none)."""
    if truthy(row["verified"]):
        return "verified"
    if "answered" in row and not truthy(row["answered"]):
        return "no answer"
    return "rejected"


def _findings(row: Mapping[str, Any]) -> str:
    findings = row.get("findings", "")
    if isinstance(findings, list):
        return "; ".join(str(f.get("message", f)) if isinstance(f, Mapping) else str(f)
                         for f in findings)
    return text(findings)


def _href(row: Mapping[str, Any]) -> str:
    href = row.get("href")
    if not href:
        href = page_path(row)
    return urllib.parse.quote(str(href), safe="/")


def run_list(rows: Sequence[Mapping[str, Any]], suite_rows: Sequence[SuiteRow] = ()
             ) -> list[list[Any]]:
    """The run list's rows (:data:`COLUMNS`): lesson runs sorted by task, backend,
    scenario and trial, then suite cases sorted by suite, category, backend, scenario and
    case (numbers in case ids in numeric order)."""
    out: list[list[Any]] = []
    for r in sorted(rows, key=lambda r: (str(r["task"]), str(r["backend"]),
                                         str(r["scenario"]), trial(r))):
        out.append(["lesson", str(r["task"]), str(r["backend"]), str(r["scenario"]),
                    _agent(r), trial(r), str(r["termination"]), lesson_verdict(r),
                    count(r["steps"]), count(r.get("calls")), count(r["tokens_sent"]),
                    _findings(r), _href(r)])
    for s in sorted(suite_rows, key=lambda s: (str(s["suite"]), str(s["category"]),
                                               str(s["backend"]), str(s["scenario"]),
                                               _natural(str(s["task"])))):
        label = f"{s['suite']}/{s['category']}" if s.get("category") else str(s["suite"])
        out.append([label, str(s["task"]), str(s["backend"]), str(s["scenario"]),
                    _agent(s), 0,
                    str(s["termination"]), "correct" if truthy(s["verified"]) else "incorrect",
                    count(s["steps"]), count(s["calls"]), count(s["tokens_sent"]),
                    text(s.get("detail")), urllib.parse.quote(str(s["href"]), safe="/")])
    return out


def _agent(row: Mapping[str, Any]) -> str:
    """The agent that ran a row: its ``agent`` field (the viewer's rows), else the suffix
    of a framework run's scenario (``{scenario}__{agent}``, as in ``runs.csv``), else the
    lesson's loop."""
    agent = row.get("agent")
    if agent:
        return str(agent)
    _, sep, suffix = str(row["scenario"]).partition("__")
    return suffix if sep and suffix else "lesson"


def _natural(text: str) -> tuple[str, int]:
    head = text.rstrip("0123456789")
    tail = text[len(head):]
    return (head, int(tail) if tail else -1)
