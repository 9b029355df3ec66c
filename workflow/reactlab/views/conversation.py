"""The conversation of a run, step by step, as the run and suite case pages show it: each
step's request with its tokens, the model's text, tool calls with their arguments and
result or error, guardrail events, backend errors and the answer."""

from __future__ import annotations

from collections.abc import Mapping

from reactlab import trace as tracemod
from reactlab.trace.records import Error, Guardrail, Request, ToolCallRecord
from reactlab.views.common import guardrail_parts
from reactlab.views.page import attr as _t
from reactlab.views.page import badge as _badge
from reactlab.views.page import cell as _v
from reactlab.views.page import h as _h
from reactlab.views.page import json_text as _json

__all__ = ["STATUSES", "steps"]

STATUSES = ("ok", "error", "invalid", "unknown", "repeated", "blocked")


def _status_badge(status: object) -> str:
    s = str(status)
    return _badge(f"s-{s}" if s in STATUSES else "s-error", s)


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


def steps(tr: tracemod.Trace, answer_html: str) -> str:
    """The conversation: one section per step; the answer shows as ``answer_html`` (the
    run page marks the findings on it)."""
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
