"""Run counts, one definition for every reader (issue 41, item 3): the viewer's index, the
terminal's ``reactlab summary``, and what the tables and exports hold.

Three selections, each a count of runs (rows of the viewer's run list, lines of
``results/tables/trials.csv``):

* ``runs``: every run, one trace each; each trial of a run with repeated trials is one
  run. The viewer's "runs", ``trials.csv``, the exports (an OpenTelemetry file, an
  Inspect sample per run) and ``reactlab check`` count these.
* ``one_draw``: the runs without repeated trials: the rows of ``runs.csv`` and of
  ``summary_by_scenario.csv`` (agent frameworks' runs under their own scenario name).
* ``lesson_loop``: the project's own loop's runs without repeated trials: the ``runs`` of
  ``summary_by_backend.csv`` and ``summary_by_defences.csv`` (a framework's runs are in
  ``agents.csv``; trials in ``summary_trials.csv``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from reactlab.core.errors import UsageError

__all__ = ["SELECTIONS", "agent_of", "count", "format_counts", "is_trial_trace", "planned",
           "table_rows"]

#: Each selection and what it counts (in the terminal's legend and the viewer's note).
SELECTIONS: dict[str, str] = {
    "runs": "every run, one trace each (a trial is a run): trials.csv, the exports",
    "one_draw": "runs without repeated trials: runs.csv, summary_by_scenario.csv",
    "lesson_loop": "the project's loop's runs without repeated trials: "
                   "summary_by_backend.csv, summary_by_defences.csv",
}

_TRIAL_TRACE = re.compile(r"/t[0-9]+\.jsonl$")


def is_trial_trace(path: str) -> bool:
    """Whether a trace path is a trial's (``.../{scenario}/t{i}.jsonl``)."""
    return bool(_TRIAL_TRACE.search(path))


def agent_of(scenario: str) -> str:
    """The agent of a run from its scenario name: ``lesson`` unless a framework's
    (``{scenario}__{agent}``)."""
    _, sep, agent = scenario.partition("__")
    return agent if sep and agent else "lesson"


def _trial(value: Any) -> bool:
    return value not in (None, "", 0, "0") and value == value  # NaN: no trial


def count(rows: Iterable[Mapping[str, Any]], by: str) -> dict[str, dict[str, int]]:
    """The three counts (:data:`SELECTIONS`) per value of ``by`` (``backend``, ``task``,
    ``scenario``), from rows with ``trial`` (empty or 0: no trial) and ``agent``
    (``lesson``: the project's loop); sorted by that value."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        c = out.setdefault(str(r[by]), dict.fromkeys(SELECTIONS, 0))
        c["runs"] += 1
        if not _trial(r.get("trial")):
            c["one_draw"] += 1
            c["lesson_loop"] += str(r.get("agent") or "lesson") == "lesson"
    return dict(sorted(out.items()))


def planned(specs: Iterable[Any]) -> dict[str, int]:
    """The three counts (:data:`SELECTIONS`) of a config's planned runs (its
    :class:`~reactlab.config.RunSpec` s: ``trial``, None without trials; ``framework``,
    None for the project's loop), all backends together: the n of the report's captions."""
    rows = [{"backend": "", "trial": s.trial or 0,
             "agent": "lesson" if s.framework is None else "framework"} for s in specs]
    return count(rows, "backend").get("", dict.fromkeys(SELECTIONS, 0))


def table_rows(trials_csv: str | Path) -> list[dict[str, Any]]:
    """The rows :func:`count` reads, from ``trials.csv`` (one line per run, trials
    included): the trial and the agent from each line's trace path and scenario."""
    try:
        with Path(trials_csv).open(encoding="utf-8", newline="") as fh:
            lines = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise UsageError(f"{trials_csv}: no such table (run the pipeline first, or pass "
                         "--results)") from None
    return [{"task": r["task"], "backend": r["backend"], "scenario": r["scenario"],
             "trial": 1 if is_trial_trace(r["trace"]) else 0,
             "agent": agent_of(r["scenario"])} for r in lines]


def format_counts(counts: Mapping[str, Mapping[str, int]], by: str) -> str:
    """The terminal's table: a line per value of ``by``, a total, then the legend."""
    head = [by, *SELECTIONS]
    total = {s: sum(c[s] for c in counts.values()) for s in SELECTIONS}
    body = [[k, *(str(c[s]) for s in SELECTIONS)] for k, c in counts.items()]
    body.append(["all", *(str(total[s]) for s in SELECTIONS)])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [head, *body]]
    legend = [f"{s}: {text}" for s, text in SELECTIONS.items()]
    return "\n".join([*lines, "", *legend])
