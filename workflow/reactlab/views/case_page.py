"""A suite case's page (:func:`render_case`), its place in the viewer folder
(:func:`case_path`), its stored verification record (:func:`load_case`) and its row of
the index (:func:`suite_row`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reactlab import trace as tracemod
from reactlab.analysis.trials import deterministic
from reactlab.analysis.verify import Verification, VerifiedRun
from reactlab.core.errors import TraceError
from reactlab.views.conversation import steps
from reactlab.views.page import attr as _t
from reactlab.views.page import badge as _badge
from reactlab.views.page import cell as _v
from reactlab.views.page import doc as _doc
from reactlab.views.page import h as _h
from reactlab.views.page import json_text as _json
from reactlab.views.page import meta as _meta

__all__ = ["SUITE_FIELDS", "case_path", "load_case", "render_case", "suite_row"]

SUITE_FIELDS = ("trace", "trace_sha256", "run", "verified", "findings")
"""The fields every verification record has; a suite record's other fields are its own."""


def case_path(suite: str, run: Mapping[str, Any]) -> str:
    """The page of a suite case relative to the viewer folder:
    ``suites/{suite}/{backend}/{scenario}/{case}.html``; a case named with slashes
    (AgentDojo's ``banking/user_task_0__injection_task_1``) is a path of folders.

    Raises :class:`TraceError` for a name that could leave the folder.
    """
    parts = [suite, str(run.get("backend", "")), str(run.get("scenario", "")),
             *str(run.get("task", "")).split("/")]
    for p in parts:
        if not _SAFE.fullmatch(p):
            raise TraceError(f"suite case name {p!r} cannot be used in a file name")
    return "suites/" + "/".join(parts) + ".html"


_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _flat(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        return [item for k, v in value.items() for item in _flat(f"{prefix}.{k}", v)]
    return [(prefix, value)]


def load_case(trace_path: str, verified_path: str | Path) -> tuple[VerifiedRun, dict[str, Any]]:
    """A suite case: its trace (checked by :func:`reactlab.trace.read`) and its stored
    verification record, which must name this version of the trace (its sha256).

    The benchmark's checker is not run again here: the suite tables job recomputes
    every record from its trace and refuses one that differs
    (:func:`reactlab.suites.types.checked_record`); the viewer shows what those
    tables hold.
    """
    tr = tracemod.read(trace_path)
    try:
        stored = json.loads(Path(verified_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(f"{verified_path}: cannot read the verification ({exc})") from exc
    if not isinstance(stored, dict):
        raise TraceError(f"{verified_path}: a verification record is a JSON object")
    run = VerifiedRun(tr, Verification.from_json(stored))
    if stored.get("run") != tr.run:
        raise TraceError(f"{verified_path}: 'run' names another run than {trace_path}")
    return run, stored


def suite_row(run: VerifiedRun, record: Mapping[str, Any]) -> dict[str, Any]:
    """The index's row for one suite case (:data:`reactlab.views.index.SuiteRow`)."""
    tr = run.trace
    case = tr.header.run_spec.suite
    suite = str(record.get("suite") or (case.name if case is not None else "suite"))
    detail = record.get("error_type") or "; ".join(f.message for f in
                                                   run.verification.findings)
    task = str(tr.run["task"])
    category = record.get("category") or (task.split("/")[0] if "/" in task else "")
    return {"suite": suite, "category": category,
            "task": tr.run["task"], "backend": tr.run["backend"],
            "scenario": tr.run["scenario"], "termination": tr.end.termination,
            "verified": run.verification.verified, "steps": tr.end.steps,
            "calls": tr.end.calls, "tokens_sent": tr.end.tokens_sent,
            "detail": str(detail or ""), "href": case_path(suite, tr.run),
            "deterministic": deterministic(tr.header.run_spec.backend_config)}


def render_case(run: VerifiedRun, record: Mapping[str, Any]) -> str:
    """One suite case as a self-contained page: the question, the benchmark checker's
    verdict and findings, the conversation step by step, the checker's record (category,
    error types, the project's trajectory metrics ...) and the functions offered."""
    tr, verification = run.trace, run.verification
    end = tr.end
    case = tr.header.run_spec.suite
    suite = str(record.get("suite") or (case.name if case is not None else "suite"))
    key = tr.header.key or "/".join(tr.run.values())
    verdict = (_badge("v-verified", "correct") if verification.verified
               else _badge("v-rejected", "incorrect"))
    up = "../" * case_path(suite, tr.run).count("/")
    body: list[str] = [
        f'<nav><a href="{up}index.html">← all runs</a></nav>\n',
        f"<h1>{_h(key)} {verdict}</h1>\n",
        f'<div class="question"><span class="label">question</span>'
        f'<div class="text">{_h(tr.header.question)}</div></div>\n',
    ]
    summary = [("suite", suite), ("category", suite_row(run, record)["category"] or "—"),
               ("termination", end.termination), ("steps", end.steps),
               ("tool calls", end.calls), ("tokens sent", end.tokens_sent)]
    body.append('<div class="summary">' + "".join(
        f"<div><span class=\"label\">{_h(k)}</span><b>{_h(v)}</b></div>" for k, v in summary)
        + "</div>\n")
    checker = record.get("checker", "the benchmark's checker")
    if verification.findings:
        items = "".join(f'<li data-rule="{_t(f.rule)}"><code>{_h(f.rule)}</code>: '
                        f"{_h(f.message)}</li>" for f in verification.findings)
        body.append(f"<p>Checker <code>{_h(checker)}</code>: {verdict}</p>\n"
                    f'<ul class="findings">{items}</ul>\n')
    else:
        body.append(f"<p>Checker <code>{_h(checker)}</code>: {verdict}</p>\n")
    body.append("<h2>Conversation</h2>\n")
    body.append(steps(tr, _h(end.answer) if end.answer is not None else ""))
    meta = [("task", f"<code>{_h(tr.run['task'])}</code>"),
            ("backend", f"<code>{_h(tr.run['backend'])}</code>"),
            ("scenario", f"<code>{_h(tr.run['scenario'])}</code>")]
    for name, value in sorted(record.items()):
        if name in SUITE_FIELDS or name == "checker":
            continue
        for k, v in _flat(name, value):
            shown = ", ".join(map(str, v)) if isinstance(v, list) else v
            meta.append((k, _v(shown)))
    meta.append(("config hash", f"<code>{_h(tr.header.config_hash)}</code>"))
    meta.append(("trace sha256", f"<code>{_h(end.sha256)}</code>"))
    body.append("<h2>Case</h2>\n" + _meta(meta))
    own = case.case if case is not None else {}
    if "possible_answer" in own:
        body.append("<h2>Possible answers</h2>\n"
                    f"<pre>{_h(_json(own['possible_answer']))}</pre>\n")
    functions = (own.get("functions") or case.tools) if case is not None else None
    if functions:
        body.append("<h2>Functions offered</h2>\n"
                    f"<pre>{_h(json.dumps(functions, ensure_ascii=False, indent=1))}</pre>\n")
    return _doc(f"{key} — reactlab suite case", "".join(body))
