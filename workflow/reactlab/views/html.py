"""A static HTML viewer for traces: one self-contained page per run, and an index.

Every page is plain HTML with inline CSS: no JavaScript, no external asset, no network.
Every piece of text that comes from a trace (the question, the model's text, tool
arguments and results, error messages) is escaped with :func:`html.escape`, and
characters that could disturb a reader (control characters, bidirectional overrides,
lone surrogates) are shown as visible escapes such as ``\\x1b`` instead.

The verifier's findings are highlighted on the answer itself: each figure without a
source, each percentage without a calculation and each quoted headline that is in no
news result is wrapped in ``<mark class="finding">``. The places are the ones the
verifier recorded with each finding (``span``, :mod:`reactlab.analysis.verify`), so the
page shows exactly what the verifier found.

The bytes are a pure function of the traces and verification files: no timestamps, no
absolute paths, runs in sorted order.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reactlab import trace as tracemod
from reactlab.analysis.verify import VerifiedRun, load_verified
from reactlab.core.errors import TraceError
from reactlab.core.io import write_text_atomic
from reactlab.trace.integrity import publish_dir
from reactlab.trace.records import Error, Guardrail, Request, ToolCallRecord
from reactlab.views.common import (
    escape_char,
    finding_spans,
    guardrail_parts,
    is_hidden,
    visible,
)

__all__ = ["build", "finding_spans", "index_row", "page_path", "render_index", "render_run",
           "visible"]

MARKED_RULES = {
    "figure_without_source": "figure without a source",
    "percentage_without_calculation": "percentage without a calculation",
    "headline_not_verbatim": "headline not in any news result",
}
"""The rules whose findings are marked on the answer text, with the mark's title."""

STATUSES = ("ok", "error", "invalid", "unknown", "repeated", "blocked")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _h(text: object) -> str:
    """Escape any value for HTML; hidden characters appear as escapes in a ``ctl`` span."""
    s = text if isinstance(text, str) else str(text)
    out: list[str] = []
    plain: list[str] = []
    for ch in s:
        if is_hidden(ch):
            if plain:
                out.append(html.escape("".join(plain)))
                plain = []
            out.append(f'<span class="ctl">{html.escape(escape_char(ch))}</span>')
        else:
            plain.append(ch)
    if plain:
        out.append(html.escape("".join(plain)))
    return "".join(out)


def _t(text: object) -> str:
    """Escape any value for an attribute or the title: hidden characters as plain escapes."""
    return html.escape(visible(text if isinstance(text, str) else str(text)))


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

_CSS = """
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
  margin: 0 auto; max-width: 1100px; padding: 1em 1.5em 3em; color: #1d2330;
  background: #fbfbfd; }
h1 { font-size: 1.35em; margin: .4em 0; word-break: break-all; }
h2 { font-size: 1.1em; margin: 1.4em 0 .5em; border-bottom: 1px solid #d8dbe3; }
a { color: #1f5fbf; }
code, pre, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-size: 13px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: .3em 0;
  background: #f1f3f7; border: 1px solid #e0e3ea; border-radius: 4px; padding: .45em .6em; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3em .55em; border-bottom: 1px solid #e3e6ec;
  vertical-align: top; }
th { background: #eef0f5; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15em 1em; margin: 0; }
dl.meta dt { color: #5a6275; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.question { font-size: 1.1em; background: #fff; border-left: 4px solid #1f5fbf;
  padding: .5em .8em; margin: .6em 0; }
.step { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; margin: .8em 0;
  padding: .6em .9em; }
.step h3 { font-size: 1em; margin: 0 0 .4em; display: flex; gap: 1em; align-items: baseline;
  flex-wrap: wrap; }
.tokens { color: #5a6275; font-weight: normal; font-size: .92em; }
.bar { display: inline-block; height: .55em; background: #8fb3e8; border-radius: 2px;
  vertical-align: middle; }
.call { border-left: 3px solid #c9ced9; padding: .2em 0 .2em .7em; margin: .5em 0; }
.call-head { display: flex; gap: .6em; align-items: baseline; flex-wrap: wrap; }
.label { color: #5a6275; font-size: .85em; text-transform: uppercase; letter-spacing: .04em; }
.badge { display: inline-block; padding: 0 .5em; border-radius: 999px; font-size: .8em;
  font-weight: 600; border: 1px solid transparent; }
.s-ok { background: #e3f4e6; color: #1c6b2c; border-color: #b9e0c1; }
.s-error { background: #fde8e6; color: #a3261a; border-color: #f3c1bb; }
.s-invalid { background: #fdeede; color: #9a4a00; border-color: #f4cfa5; }
.s-unknown { background: #f1e6fb; color: #6a2b9c; border-color: #d9c1ee; }
.s-repeated { background: #fff6d6; color: #7a5c00; border-color: #ecd98f; }
.s-blocked { background: #e6e9f0; color: #333b4d; border-color: #c5cad6; }
.v-verified { background: #e3f4e6; color: #1c6b2c; border-color: #b9e0c1; }
.v-rejected { background: #fde8e6; color: #a3261a; border-color: #f3c1bb; }
.event { border-radius: 4px; padding: .35em .7em; margin: .5em 0; }
.guardrail { background: #fff6d6; border: 1px solid #ecd98f; }
.backend-error { background: #fde8e6; border: 1px solid #f3c1bb; }
.answer { background: #fff; border: 2px solid #1c6b2c; border-radius: 6px;
  padding: .6em .9em; font-size: 1.05em; }
.answer.rejected { border-color: #a3261a; }
.no-answer { background: #f1f3f7; border: 2px dashed #9aa1b1; border-radius: 6px;
  padding: .6em .9em; color: #333b4d; }
mark.finding { background: #ffd2cc; color: #7d1206; border-bottom: 2px solid #d0311f;
  padding: 0 .1em; border-radius: 2px; }
mark.finding mark.finding { background: #ffb3a8; }
mark.finding[data-rule="headline_not_verbatim"] { background: #ffe9b8; color: #6b4700;
  border-bottom-color: #d08b00; }
mark.finding[data-rule="percentage_without_calculation"] { background: #ffd9ec;
  color: #7d0640; border-bottom-color: #c2185b; }
ul.findings { margin: .4em 0; padding-left: 1.3em; }
ul.findings li { margin: .15em 0; }
.ctl { background: #333b4d; color: #fff; border-radius: 2px; padding: 0 .15em;
  font-family: "DejaVu Sans Mono", monospace; font-size: .85em; }
.muted { color: #6b7285; }
.summary { display: flex; gap: 1.2em; flex-wrap: wrap; margin: .5em 0; }
.summary div { background: #fff; border: 1px solid #dde1e8; border-radius: 6px;
  padding: .35em .8em; }
.summary b { display: block; font-size: 1.15em; }
td.findings { min-width: 24em; font-size: .9em; }
nav { margin: .3em 0 .8em; font-size: .95em; }
"""


def _doc(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"es\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'\">\n"
            f"<title>{_t(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            f"{body}</body>\n</html>\n")


def _badge(cls: str, text: str) -> str:
    return f'<span class="badge {cls}">{_h(text)}</span>'


def _status_badge(status: object) -> str:
    s = str(status)
    return _badge(f"s-{s}" if s in STATUSES else "s-error", s)


def _verdict_badge(verified: bool) -> str:
    return _badge("v-verified", "verified") if verified else _badge("v-rejected", "rejected")


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


def page_path(run: Mapping[str, Any]) -> str:
    """The page of a run relative to the viewer folder: ``{task}/{backend}/{scenario}.html``.

    Raises :class:`TraceError` for a name that could leave the folder.
    """
    parts = [str(run.get(k, "")) for k in ("task", "backend", "scenario")]
    for p in parts:
        if not _SAFE_NAME.fullmatch(p):
            raise TraceError(f"run name {p!r} cannot be used in a file name")
    if run.get("trial") is not None:  # trial i of a run with trials: {scenario}/t{i}.html
        parts.append(f"t{int(str(run['trial']))}")
    return "/".join(parts) + ".html"


def index_row(run: VerifiedRun, row: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The index's row for one run: the table builder's row (``row``, computed here when
    not given) plus the page's link."""
    from reactlab.analysis.tables import run_row

    out = dict(run_row(run) if row is None else row)
    out.pop("trace", None)
    out["trial"] = run.trace.run.get("trial")
    out["href"] = page_path(run.trace.run)
    return out


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def render_index(rows: Sequence[Mapping[str, Any]]) -> str:
    """The index page: one line per run, linking its page (relative links).

    Each row needs ``task``, ``backend``, ``scenario``, ``termination``, ``verified``,
    ``steps``, ``tokens_sent``; ``calls``, ``errors``, ``findings`` and ``href`` are used
    when present (rows of ``runs.csv`` work as they are). Rows are shown sorted by run.
    """
    ordered = sorted(rows, key=lambda r: (str(r["task"]), str(r["backend"]),
                                          str(r["scenario"]), _trial(r)))
    n_ok = sum(_truthy(r["verified"]) for r in ordered)
    body = ["<h1>reactlab — traces</h1>\n",
            '<div class="summary">'
            f'<div><span class="label">runs</span><b>{len(ordered)}</b></div>'
            f'<div><span class="label">verified</span><b>{n_ok}</b></div>'
            f'<div><span class="label">rejected</span><b>{len(ordered) - n_ok}</b></div>'
            "</div>\n",
            "<table>\n<thead><tr><th>task</th><th>backend</th><th>scenario</th>"
            "<th>termination</th><th>verdict</th><th class=\"num\">steps</th>"
            "<th class=\"num\">calls</th><th class=\"num\">errors</th>"
            "<th class=\"num\">tokens</th><th>findings</th></tr></thead>\n<tbody>\n"]
    for r in ordered:
        href = str(r.get("href") or page_path(r))
        url = urllib.parse.quote(href, safe="/")
        findings = r.get("findings", "")
        if isinstance(findings, list):
            findings = "; ".join(str(f.get("message", f)) if isinstance(f, Mapping) else str(f)
                                 for f in findings)
        if not isinstance(findings, str):  # NaN from an empty CSV cell
            findings = ""
        trial = f" · t{_trial(r)}" if _trial(r) else ""
        body.append(
            f"<tr><td>{_h(r['task'])}</td><td>{_h(r['backend'])}</td>"
            f'<td><a href="{html.escape(url)}">{_h(r["scenario"])}</a>{_h(trial)}</td>'
            f"<td>{_h(r['termination'])}</td><td>{_verdict_badge(_truthy(r['verified']))}</td>"
            f"<td class=\"num\">{_h(r['steps'])}</td>"
            f"<td class=\"num\">{_h(r.get('calls', ''))}</td>"
            f"<td class=\"num\">{_h(r.get('errors', ''))}</td>"
            f"<td class=\"num\">{_h(r['tokens_sent'])}</td>"
            f'<td class="text findings">{_h(findings)}</td></tr>\n')
    body.append("</tbody>\n</table>\n")
    body.append(_trials_section(ordered))
    return _doc("reactlab — traces", "".join(body))


def _trial(row: Mapping[str, Any]) -> int:
    """The row's trial number, 0 for a run without trials (also for empty CSV cells)."""
    value = row.get("trial")
    try:
        return int(value) if value is not None and value == value and value != "" else 0
    except (TypeError, ValueError):
        return 0


def _trials_section(rows: Sequence[Mapping[str, Any]]) -> str:
    """Runs with repeated trials: success rate with its 95 % Wilson interval, pass@k and
    pass^k for k = n (the same estimators as results/tables/summary_trials.csv)."""
    from reactlab.analysis.stats import pass_at_k, pass_hat_k, wilson

    groups: dict[tuple[str, str, str], list[bool]] = {}
    for r in rows:
        if _trial(r):
            key = (str(r["task"]), str(r["backend"]), str(r["scenario"]))
            groups.setdefault(key, []).append(_truthy(r.get("utility", r["verified"])))
    if not groups:
        return ""
    out = ["<h2>Repeated trials</h2>\n<table>\n<thead><tr><th>task</th><th>backend</th>"
           "<th>scenario</th><th class=\"num\">n</th><th class=\"num\">successes</th>"
           "<th class=\"num\">success rate [95 % Wilson]</th>"
           "<th class=\"num\">pass@n</th><th class=\"num\">pass^n</th></tr></thead>\n"
           "<tbody>\n"]
    for (task, backend, scenario), ok in sorted(groups.items()):
        n, c = len(ok), sum(ok)
        iv = wilson(c, n)
        out.append(f"<tr><td>{_h(task)}</td><td>{_h(backend)}</td><td>{_h(scenario)}</td>"
                   f'<td class="num">{n}</td><td class="num">{c}</td>'
                   f'<td class="num">{iv.estimate:.2f} [{iv.low:.2f}, {iv.high:.2f}]</td>'
                   f'<td class="num">{pass_at_k(n, c, n):.2f}</td>'
                   f'<td class="num">{pass_hat_k(n, c, n):.2f}</td></tr>\n')
    out.append("</tbody>\n</table>\n")
    return "".join(out)


def build(pairs: Iterable[tuple[str, str]], out_dir: str | Path) -> list[Path]:
    """Write ``index.html`` and one page per run from (trace path, verification path) pairs.

    Pages go to ``out_dir/{task}/{backend}/{scenario}.html``; the folder is published
    atomically with a checksum manifest (:func:`reactlab.trace.integrity.publish_dir`)
    and replaces any earlier one. Returns the paths written, the index
    first, then the pages in run order.
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
    if not runs:
        raise TraceError("no traces to show")
    rows = []
    pages: list[tuple[str, str]] = []
    for rel in sorted(runs):
        row = run_row(runs[rel])
        rows.append(index_row(runs[rel], row))
        pages.append((rel, render_run(runs[rel], row)))
    index_text = render_index(rows)

    def write(tmp: Path) -> list[Path]:
        for rel, text in pages:
            write_text_atomic(tmp / rel, text)
        write_text_atomic(tmp / "index.html", index_text)
        return [tmp / "index.html", *(tmp / rel for rel, _ in pages)]

    # The whole folder is published at once (a temporary sibling, then a rename), with a
    # checksum manifest: a crash or a full disk never leaves half a viewer in place.
    publish_dir(out_dir, write)
    return [out_dir / "index.html", *(out_dir / rel for rel, _ in pages)]
