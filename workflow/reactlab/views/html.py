"""The static HTML viewer: one self-contained page per run (:mod:`reactlab.views.run_page`)
and per suite case (:mod:`reactlab.views.case_page`), and an index
(:mod:`reactlab.views.index`), built into one folder (:func:`build`).

Run and case pages are plain HTML with inline CSS: no JavaScript, no external asset, no
network. Every piece of text that comes from a trace (the question, the model's text,
tool arguments and results, error messages) is escaped (:mod:`reactlab.views.page`), and
characters that could disturb a reader (control characters, bidirectional overrides,
lone surrogates) are shown as visible escapes such as ``\\x1b`` instead.

The bytes are a pure function of the traces, verification files and suite tables: no
timestamps, no absolute paths, runs in sorted order.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from reactlab.analysis.tables import run_row
from reactlab.analysis.verify import VerifiedRun, load_verified
from reactlab.config.trials import MIN_TRIALS
from reactlab.core.errors import TraceError
from reactlab.core.io import write_text_atomic
from reactlab.trace.integrity import publish_dir
from reactlab.views.case_page import case_path, load_case, render_case, suite_row
from reactlab.views.common import finding_spans, visible
from reactlab.views.index import render_index
from reactlab.views.page import page_path
from reactlab.views.run_page import index_row, render_run

__all__ = ["build", "case_path", "finding_spans", "index_row", "page_path",
           "render_case", "render_index", "render_run", "visible"]


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """A suite table's rows as strings (empty cells as ``""``), in file order."""
    with Path(path).open(encoding="utf-8", newline="") as fh:
        return [dict(r) for r in csv.DictReader(fh)]


def build(pairs: Iterable[tuple[str, str]], out_dir: str | Path, *,
          suite_pairs: Iterable[tuple[str, str]] = (),
          suite_tables: Sequence[str | Path] = (), min_trials: int = MIN_TRIALS
          ) -> list[Path]:
    """Write ``index.html``, one page per run and one per suite case.

    ``pairs`` are the lesson's (trace path, verification path) pairs: pages go to
    ``out_dir/{task}/{backend}/{scenario}.html``. ``suite_pairs`` are suite cases: pages
    go to ``out_dir/suites/{suite}/{backend}/{scenario}/{case}.html``. ``suite_tables``
    are suite tables (``results/tables/bfcl.csv`` ...), summarised on the index by their
    file name; a ``*_cases.csv`` table is not (its rows are the cases themselves). A rate
    on the index gets its interval over at least ``min_trials`` runs of stochastic
    backends (``statistics.min_trials``; :func:`reactlab.views.index.render_index`).
    The folder is published atomically with a checksum manifest
    (:func:`reactlab.trace.integrity.publish_dir`) and replaces any earlier one. Returns
    the paths written, the index first, then the run pages in run order, then the case
    pages.
    """
    out_dir = Path(out_dir)
    runs: dict[str, VerifiedRun] = {}
    for trace_path, verified_path in pairs:
        run = load_verified(trace_path, verified_path)
        rel = page_path(run.trace.run)
        if rel in runs:
            raise TraceError(f"{trace_path}: run {rel[:-5]} appears twice")
        runs[rel] = run
    cases: dict[str, tuple[VerifiedRun, dict[str, Any]]] = {}
    for trace_path, verified_path in suite_pairs:
        case, record = load_case(trace_path, verified_path)
        rel = suite_row(case, record)["href"]
        if rel in cases:
            raise TraceError(f"{trace_path}: suite case {rel[:-5]} appears twice")
        cases[rel] = (case, record)
    if not runs and not cases:
        raise TraceError("no traces to show")
    tables = {}
    for path in sorted(map(Path, suite_tables), key=lambda p: p.name):
        if not path.name.endswith("_cases.csv"):
            tables[path.stem] = read_table(path)
    rows = []
    pages: list[tuple[str, str]] = []
    for rel in sorted(runs):
        row = run_row(runs[rel])
        rows.append(index_row(runs[rel], row))
        pages.append((rel, render_run(runs[rel], row)))
    suite_rows = []
    for rel in sorted(cases):
        case, record = cases[rel]
        suite_rows.append(suite_row(case, record))
        pages.append((rel, render_case(case, record)))
    index_text = render_index(rows, suite_rows, tables, min_trials)

    def write(tmp: Path) -> list[Path]:
        # Not synced one by one (at thousands of pages the fsyncs were most of the build's
        # time): no reader sees the temporary folder, and a page that a power loss would
        # leave short after the rename differs from the manifest, so the next run's
        # recovery rebuilds the viewer (docs/viewer.md).
        for rel, text in pages:
            write_text_atomic(tmp / rel, text, fsync=False)
        write_text_atomic(tmp / "index.html", index_text)
        return [tmp / "index.html", *(tmp / rel for rel, _ in pages)]

    # The whole folder is published at once (a temporary sibling, then a rename), with a
    # checksum manifest: a crash or a full disk never leaves half a viewer in place.
    publish_dir(out_dir, write)
    return [out_dir / "index.html", *(out_dir / rel for rel, _ in pages)]
