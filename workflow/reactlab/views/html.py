"""The static HTML viewer: one self-contained page per run and per suite case, and an
index (:mod:`reactlab.views.index`).

Run and case pages are plain HTML with inline CSS: no JavaScript, no external asset, no
network. Every piece of text that comes from a trace (the question, the model's text,
tool arguments and results, error messages) is escaped (:mod:`reactlab.views.page`), and
characters that could disturb a reader (control characters, bidirectional overrides,
lone surrogates) are shown as visible escapes such as ``\\x1b`` instead.

The verifier's findings are highlighted on the answer itself: each figure without a
source, each percentage without a calculation and each quoted headline that is in no
news result is wrapped in ``<mark class="finding">``. The places are the ones the
verifier recorded with each finding (``span``, :mod:`reactlab.analysis.verify`), so the
page shows exactly what the verifier found.

The bytes are a pure function of the traces, verification files and suite tables: no
timestamps, no absolute paths, runs in sorted order.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reactlab import trace as tracemod
from reactlab.analysis.verify import VerifiedRun, load_verified
from reactlab.core.errors import TraceError
from reactlab.core.io import write_text_atomic
from reactlab.trace.integrity import publish_dir
from reactlab.trace.records import Error, Guardrail, Request, ToolCallRecord
from reactlab.views.common import finding_spans, guardrail_parts, visible
from reactlab.views.page import attr as _t
from reactlab.views.page import badge as _badge
from reactlab.views.page import doc as _doc
from reactlab.views.page import h as _h
from reactlab.views.page import page_path
from reactlab.views.page import verdict_badge as _verdict_badge

__all__ = ["build", "case_path", "finding_spans", "index_row", "page_path", "render_case",
           "render_index", "render_run",
           "visible"]

MARKED_RULES = {
    "figure_without_source": "figure without a source",
    "percentage_without_calculation": "percentage without a calculation",
    "headline_not_verbatim": "headline not in any news result",
}
"""The rules whose findings are marked on the answer text, with the mark's title."""

STATUSES = ("ok", "error", "invalid", "unknown", "repeated", "blocked")


def _json(value: Any) -> str:
    """JSON for display: on one line when short, indented otherwise."""
    compact = json.dumps(value, ensure_ascii=False)
    return compact if len(compact) <= 100 else json.dumps(value, ensure_ascii=False, indent=1)


def _v(value: object) -> str:
    """A value for a table cell; ``None`` is a dash."""
    return "—" if value is None else _h(value)


# --------------------------------------------------------------------------- findings


def _marked(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    """``text`` escaped, with each span wrapped in ``<mark class="finding">``."""
    out: list[str] = []
    stack: list[int] = []  # ends of the open marks
    pos = 0
    for start, end, rule in spans:
        while stack and stack[-1] <= start:
            close = stack.pop()
            out.append(_h(text[pos:close]) + "</mark>")
            pos = close
        if stack and end > stack[-1]:
            continue  # would cross an open mark; cannot happen with the verifier's regexes
        out.append(_h(text[pos:start]))
        out.append(f'<mark class="finding" title="{html.escape(MARKED_RULES[rule])}" '
                   f'data-rule="{rule}">')
        pos = start
        stack.append(end)
    while stack:
        close = stack.pop()
        out.append(_h(text[pos:close]) + "</mark>")
        pos = close
    out.append(_h(text[pos:]))
    return "".join(out)


# --------------------------------------------------------------------------- pages

def _status_badge(status: object) -> str:
    s = str(status)
    return _badge(f"s-{s}" if s in STATUSES else "s-error", s)


def _meta(items: Iterable[tuple[str, str]]) -> str:
    rows = "".join(f"<dt>{_h(k)}</dt><dd>{v}</dd>" for k, v in items)
    return f'<dl class="meta">{rows}</dl>\n'


def _guardrail(rec: Guardrail) -> str:
    meaning, details = guardrail_parts(rec, _h, call="call <code>{}</code>",
                                       refused="request of {} tokens refused, {} left")
    tail = f" — {'; '.join(details)}" if details else ""
    return (f'<div class="event guardrail" data-guardrail="{_t(rec.rule)}">'
            f'<span class="label">guardrail</span> <b>{_h(rec.rule)}</b>: '
            f"{meaning}{tail}</div>\n")


def _backend_error(rec: Error) -> str:
    parts = [f'<span class="label">backend error</span> <b>{_h(rec.kind)}</b>']
    if rec.status is not None:
        parts.append(f"HTTP {_h(rec.status)}")
    parts.append(f"{_h(rec.attempts)} attempt(s)")
    if rec.retryable:
        parts.append("retryable")
    out = [f'<div class="event backend-error" data-kind="{_t(rec.kind)}">'
           + " · ".join(parts), f'<pre>{_h(rec.message)}</pre>']
    if rec.history:
        out.append("<table><tr><th class=\"num\">attempt</th><th>status</th><th>kind</th>"
                   "<th class=\"num\">retry-after</th><th class=\"num\">wait (s)</th>"
                   "<th>error</th></tr>")
        for h in rec.history:  # one dict per attempt, as the retry layer wrote it
            if not isinstance(h, Mapping):
                continue
            out.append(f"<tr><td class=\"num\">{_v(h.get('attempt'))}</td>"
                       f"<td>{_v(h.get('status'))}</td><td>{_h(h.get('kind'))}</td>"
                       f"<td class=\"num\">{_v(h.get('retry_after'))}</td>"
                       f"<td class=\"num\">{_v(h.get('wait'))}</td>"
                       f"<td class=\"text\">{_h(h.get('error'))}</td></tr>")
        out.append("</table>")
    out.append("</div>\n")
    return "\n".join(out)


def _tool_call(rec: ToolCallRecord) -> str:
    result = rec.result
    out = [f'<div class="call" data-status="{_t(rec.status)}">',
           f'<div class="call-head"><span class="label">tool call</span> '
           f'<code><b>{_h(rec.name if rec.name is not None else "(unparsed)")}</b></code> '
           f"{_status_badge(rec.status)} <span class=\"muted mono\">{_h(rec.id)}</span>"
           "</div>"]
    out.append(f'<div class="label">arguments</div><pre>{_h(_json(rec.arguments))}</pre>')
    if rec.raw is not None:
        out.append(f'<div class="label">raw text</div><pre>{_h(rec.raw)}</pre>')
    if rec.succeeded:
        out.append(f'<div class="label">result</div>'
                   f'<pre>{_h(_json(result["resultado"]))}</pre>')
    elif set(result) == {"error"}:
        out.append(f'<div class="label">error</div><pre>{_h(result["error"])}</pre>')
    else:
        out.append(f'<div class="label">result</div><pre>{_h(_json(result))}</pre>')
    out.append("</div>\n")
    return "\n".join(out)


def _steps(tr: tracemod.Trace, answer_html: str) -> str:
    requests = tr.requests()
    peak = max((r.tokens_sent for r in requests), default=0) or 1
    by_step: dict[int, list[tracemod.Record]] = {}
    for rec in tr.records:
        by_step.setdefault(rec.step, []).append(rec)
    out: list[str] = []
    for step in sorted(by_step):
        recs = by_step[step]
        req = next((r for r in recs if isinstance(r, Request)), None)
        head = f"<span>Step {step}</span>"
        if req is not None:
            sent = req.tokens_sent
            width = max(2, round(160 * sent / peak))
            bits = [f"{_h(sent)} tokens sent", f"cumulative {_h(req.cumulative_tokens)}"]
            if req.tokens_out:
                bits.append(f"{_h(req.tokens_out)} tokens out")
            if req.attempts != 1:
                bits.append(f"{_h(req.attempts)} attempts")
            head += (f' <span class="tokens">{" · ".join(bits)} '
                     f'<span class="bar" style="width:{width}px"></span></span>')
        else:
            failed = any(isinstance(r, Error) for r in recs)
            head += (' <span class="tokens">'
                     f'{"request failed" if failed else "no request sent"}</span>')
        out.append(f'<section class="step" id="step-{step}">\n<h3>{head}</h3>\n')
        for rec in recs:
            if isinstance(rec, Request):
                if rec.text and rec.n_calls:
                    out.append(f'<div class="label">model text</div>'
                               f'<div class="text">{_h(rec.text)}</div>\n')
            elif isinstance(rec, ToolCallRecord):
                out.append(_tool_call(rec))
            elif isinstance(rec, Guardrail):
                out.append(_guardrail(rec))
            elif isinstance(rec, Error):
                out.append(_backend_error(rec))
            else:  # the answer
                text = answer_html if rec.text == tr.end.answer else _h(rec.text)
                out.append(f'<div class="label">answer</div><div class="text">{text}</div>\n')
        out.append("</section>\n")
    return "".join(out)


def render_run(run: VerifiedRun, row: Mapping[str, Any] | None = None) -> str:
    """One run (a trace and its verification) as a self-contained HTML page.

    ``row`` is the run's row of the ``runs`` table (:func:`reactlab.analysis.tables.run_row`),
    computed here when not given. The page shows the question, a summary, the final answer
    with the findings marked on it, the findings, then the conversation step by step
    (requests with their tokens, tool calls with arguments and result or error, guardrail
    events, backend errors) and the run's configuration.
    """
    from reactlab.analysis.tables import run_row

    tr, verification = run.trace, run.verification
    if row is None:
        row = run_row(run)
    spec = tr.header.spec
    end = tr.end
    findings = verification.findings
    verified = verification.verified
    key = tr.header.key or "/".join(tr.run.values())
    body: list[str] = [
        '<nav><a href="../../index.html">← all runs</a></nav>\n',
        f'<h1>{_h(key)} {_verdict_badge(verified)}</h1>\n',
        f'<div class="question"><span class="label">question</span>'
        f'<div class="text">{_h(tr.header.question)}</div></div>\n',
    ]
    summary = [("termination", end.termination), ("steps", end.steps),
               ("tool calls", end.calls), ("errors", end.errors),
               ("tokens sent", end.tokens_sent), ("findings", len(findings))]
    body.append('<div class="summary">' + "".join(
        f"<div><span class=\"label\">{_h(k)}</span><b>{_h(v)}</b></div>" for k, v in summary)
        + "</div>\n")

    body.append("<h2>Final answer</h2>\n")
    spans: list[tuple[int, int, str]] = []
    answer_html = ""
    if end.answer is not None:
        spans = finding_spans(end.answer, findings)
        answer_html = _marked(end.answer, spans)
        cls = "answer" if verified else "answer rejected"
        body.append(f'<div class="{cls}" id="answer"><div class="text">{answer_html}</div>'
                    "</div>\n")
    else:
        term = end.termination.replace("_", " ")
        body.append(f'<div class="no-answer" id="answer"><b>no answer</b> — the run ended '
                    f"with <code>{_h(end.termination)}</code> ({_h(term)}) after "
                    f"{_h(end.steps)} steps</div>\n")

    if findings:
        marked = set(spans)
        items = []
        for f in findings:
            where = ' <span class="muted">(marked on the answer)</span>' if (
                f.span is not None and (*f.span, f.rule) in marked) else ""
            items.append(f'<li data-rule="{_t(f.rule)}"><code>{_h(f.rule)}</code>: '
                         f"{_h(f.message)}{where}</li>")
        body.append(f"<p>Verifier: {_verdict_badge(False)} {len(findings)} finding(s)</p>\n"
                    f'<ul class="findings">{"".join(items)}</ul>\n')
    else:
        body.append(f"<p>Verifier: {_verdict_badge(True)} no findings.</p>\n")
    if not row["delivered"] and end.answer is not None:
        body.append('<p class="muted">The verifier gate withheld this answer: '
                    "it was not delivered.</p>\n")

    body.append("<h2>Conversation</h2>\n")
    body.append(_steps(tr, answer_html))

    backend = spec["backend_config"]
    limits = spec["limits"]
    meta = [
        ("task", f"<code>{_h(tr.run['task'])}</code>"),
        ("backend", f"<code>{_h(tr.run['backend'])}</code> "
                    f"({_h(backend.get('provider'))}, {_h(backend.get('mode'))})"),
        ("scenario", f"<code>{_h(tr.run['scenario'])}</code>"),
        ("agent", _agent_html(spec.get("framework"))),
        ("model", f"<code>{_h(row['model'])}</code>"),
        ("tools offered", _h(", ".join(map(str, spec["tools"])))),
        ("limits", f"max_steps {_h(limits['max_steps'])}, "
                   f"token_budget {_v(limits['token_budget'])}"),
        ("defences", _h(row["defences"])),
        ("delivered", _h("yes" if row["delivered"] else "no")),
    ]
    if row["attack_present"]:
        meta.append(("prompt injection", "present in a tool result; attack " + (
            "<b>succeeded</b>" if row["attack_succeeded"] else "failed")))
    meta.append(("config hash", f"<code>{_h(tr.header.config_hash)}</code>"))
    meta.append(("trace sha256", f"<code>{_h(end.sha256)}</code>"))
    if tr.header.versions:
        meta.append(("versions", _h(", ".join(f"{k} {v}"
                                               for k, v in tr.header.versions.items()))))
    body.append("<h2>Run</h2>\n" + _meta(meta))
    return _doc(f"{key} — reactlab trace", "".join(body))


def _agent_html(framework: Mapping[str, Any] | None) -> str:
    """The run page's agent: the lesson's loop, or a framework's agent with its framework
    and condition (docs/agents.md)."""
    if not framework:
        return "<code>lesson</code> (the project's loop)"
    condition = "capped" if framework.get("capped") else "as shipped"
    return (f"<code>{_h(framework.get('name'))}</code> "
            f"({_h(framework.get('framework'))}, {condition})")


def index_row(run: VerifiedRun, row: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The index's row for one run: the table builder's row (``row``, computed here when
    not given) plus the page's link."""
    from reactlab.analysis.tables import run_row

    out = dict(run_row(run) if row is None else row)
    out.pop("trace", None)
    out["trial"] = run.trace.run.get("trial")
    out["agent"] = run.trace.run.get("agent") or "lesson"
    out["href"] = page_path(run.trace.run)
    return out


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
    from reactlab.analysis.verify import Verification

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
    suite = str(record.get("suite") or tr.header.spec.get("suite", {}).get("name", "suite"))
    detail = record.get("error_type") or "; ".join(f.message for f in
                                                   run.verification.findings)
    task = str(tr.run["task"])
    category = record.get("category") or (task.split("/")[0] if "/" in task else "")
    return {"suite": suite, "category": category,
            "task": tr.run["task"], "backend": tr.run["backend"],
            "scenario": tr.run["scenario"], "termination": tr.end.termination,
            "verified": run.verification.verified, "steps": tr.end.steps,
            "calls": tr.end.calls, "tokens_sent": tr.end.tokens_sent,
            "detail": str(detail or ""), "href": case_path(suite, tr.run)}


def render_case(run: VerifiedRun, record: Mapping[str, Any]) -> str:
    """One suite case as a self-contained page: the question, the benchmark checker's
    verdict and findings, the conversation step by step, the checker's record (category,
    error types, the project's trajectory metrics ...) and the functions offered."""
    tr, verification = run.trace, run.verification
    end = tr.end
    suite_spec = tr.header.spec.get("suite", {})
    suite = str(record.get("suite") or suite_spec.get("name", "suite"))
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
    body.append(_steps(tr, _h(end.answer) if end.answer is not None else ""))
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
    if "possible_answer" in suite_spec:
        body.append("<h2>Possible answers</h2>\n"
                    f"<pre>{_h(_json(suite_spec['possible_answer']))}</pre>\n")
    functions = suite_spec.get("functions") or suite_spec.get("tools")
    if functions:
        body.append("<h2>Functions offered</h2>\n"
                    f"<pre>{_h(json.dumps(functions, ensure_ascii=False, indent=1))}</pre>\n")
    return _doc(f"{key} — reactlab suite case", "".join(body))


def render_index(rows: Sequence[Mapping[str, Any]], suite_rows: Sequence[Mapping[str, Any]] = (),
                 suite_tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> str:
    """The index page (:func:`reactlab.views.index.render_index`)."""
    from reactlab.views.index import render_index as render

    return render(rows, suite_rows, suite_tables)


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """A suite table's rows as strings (empty cells as ``""``), in file order."""
    import csv

    with Path(path).open(encoding="utf-8", newline="") as fh:
        return [dict(r) for r in csv.DictReader(fh)]


def build(pairs: Iterable[tuple[str, str]], out_dir: str | Path, *,
          suite_pairs: Iterable[tuple[str, str]] = (),
          suite_tables: Sequence[str | Path] = ()) -> list[Path]:
    """Write ``index.html``, one page per run and one per suite case.

    ``pairs`` are the lesson's (trace path, verification path) pairs: pages go to
    ``out_dir/{task}/{backend}/{scenario}.html``. ``suite_pairs`` are suite cases: pages
    go to ``out_dir/suites/{suite}/{backend}/{scenario}/{case}.html``. ``suite_tables``
    are suite tables (``results/tables/bfcl.csv`` ...), summarised on the index by their
    file name; a ``*_cases.csv`` table is not (its rows are the cases themselves).
    The folder is published atomically with a checksum manifest
    (:func:`reactlab.trace.integrity.publish_dir`) and replaces any earlier one. Returns
    the paths written, the index first, then the run pages in run order, then the case
    pages.
    """
    from reactlab.analysis.tables import run_row

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
    index_text = render_index(rows, suite_rows, tables)

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
