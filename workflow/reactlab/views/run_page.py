"""A run's page: the question, a summary, the final answer with the verifier's findings
marked on it, the findings, the conversation step by step and the run's configuration;
and the run's row of the index.

The verifier's findings are highlighted on the answer itself: each figure without a
source, each percentage without a calculation and each quoted headline that is in no
news result is wrapped in ``<mark class="finding">``. The places are the ones the
verifier recorded with each finding (``span``, :mod:`reactlab.analysis.verify`), so the
page shows exactly what the verifier found.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reactlab.analysis.tables import run_row
from reactlab.analysis.trials import deterministic
from reactlab.analysis.verify import VerifiedRun
from reactlab.views.common import finding_spans
from reactlab.views.conversation import steps
from reactlab.views.page import attr as _t
from reactlab.views.page import cell as _v
from reactlab.views.page import doc as _doc
from reactlab.views.page import h as _h
from reactlab.views.page import meta as _meta
from reactlab.views.page import page_path
from reactlab.views.page import verdict_badge as _verdict_badge

if TYPE_CHECKING:
    from reactlab.config.settings import FrameworkSettings

__all__ = ["MARKED_RULES", "index_row", "render_run"]

MARKED_RULES = {
    "figure_without_source": "figure without a source",
    "percentage_without_calculation": "percentage without a calculation",
    "headline_not_verbatim": "headline not in any news result",
}
"""The rules whose findings are marked on the answer text, with the mark's title."""


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


def render_run(run: VerifiedRun, row: Mapping[str, Any] | None = None) -> str:
    """One run (a trace and its verification) as a self-contained HTML page.

    ``row`` is the run's row of the ``runs`` table (:func:`reactlab.analysis.tables.run_row`),
    computed here when not given. The page shows the question, a summary, the final answer
    with the findings marked on it, the findings, then the conversation step by step
    (requests with their tokens, tool calls with arguments and result or error, guardrail
    events, backend errors) and the run's configuration.
    """
    tr = run.trace
    if row is None:
        row = run_row(run)
    key = tr.header.key or "/".join(tr.run.values())
    spans: list[tuple[int, int, str]] = []
    answer_html = ""
    if tr.end.answer is not None:
        spans = finding_spans(tr.end.answer, run.verification.findings)
        answer_html = _marked(tr.end.answer, spans)
    body = [_head(run, key), _answer(run, answer_html), _findings(run, row, spans),
            "<h2>Conversation</h2>\n", steps(tr, answer_html),
            "<h2>Run</h2>\n" + _meta(_run_meta(run, row))]
    return _doc(f"{key} — reactlab trace", "".join(body))


def _head(run: VerifiedRun, key: str) -> str:
    """The page's top: the way back, the run and its verdict, the question, a summary."""
    tr, end = run.trace, run.trace.end
    summary = [("termination", end.termination), ("steps", end.steps),
               ("tool calls", end.calls), ("errors", end.errors),
               ("tokens sent", end.tokens_sent),
               ("findings", len(run.verification.findings))]
    return ('<nav><a href="../../index.html">← all runs</a></nav>\n'
            f'<h1>{_h(key)} {_verdict_badge(run.verification.verified)}</h1>\n'
            f'<div class="question"><span class="label">question</span>'
            f'<div class="text">{_h(tr.header.question)}</div></div>\n'
            '<div class="summary">' + "".join(
                f"<div><span class=\"label\">{_h(k)}</span><b>{_h(v)}</b></div>"
                for k, v in summary) + "</div>\n")


def _answer(run: VerifiedRun, answer_html: str) -> str:
    """The final answer (``answer_html``: with the findings marked), or why there is none."""
    end = run.trace.end
    if end.answer is not None:
        cls = "answer" if run.verification.verified else "answer rejected"
        return ("<h2>Final answer</h2>\n"
                f'<div class="{cls}" id="answer"><div class="text">{answer_html}</div>'
                "</div>\n")
    term = end.termination.replace("_", " ")
    return ("<h2>Final answer</h2>\n"
            f'<div class="no-answer" id="answer"><b>no answer</b> — the run ended '
            f"with <code>{_h(end.termination)}</code> ({_h(term)}) after "
            f"{_h(end.steps)} steps</div>\n")


def _findings(run: VerifiedRun, row: Mapping[str, Any],
              spans: Sequence[tuple[int, int, str]]) -> str:
    """The verifier's verdict and findings (saying which are marked on the answer), and
    whether the verifier gate withheld the answer."""
    findings = run.verification.findings
    out = []
    if findings:
        marked = set(spans)
        items = []
        for f in findings:
            where = ' <span class="muted">(marked on the answer)</span>' if (
                f.span is not None and (*f.span, f.rule) in marked) else ""
            items.append(f'<li data-rule="{_t(f.rule)}"><code>{_h(f.rule)}</code>: '
                         f"{_h(f.message)}{where}</li>")
        out.append(f"<p>Verifier: {_verdict_badge(False)} {len(findings)} finding(s)</p>\n"
                   f'<ul class="findings">{"".join(items)}</ul>\n')
    else:
        out.append(f"<p>Verifier: {_verdict_badge(True)} no findings.</p>\n")
    if not row["delivered"] and run.trace.end.answer is not None:
        out.append('<p class="muted">The verifier gate withheld this answer: '
                   "it was not delivered.</p>\n")
    return "".join(out)


def _run_meta(run: VerifiedRun, row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's configuration: task, backend, scenario, agent, model, tools, limits,
    defences, the attack's outcome, checksums and package versions."""
    tr = run.trace
    spec = tr.header.run_spec
    backend = spec.backend_config
    limits = spec.limits
    meta = [
        ("task", f"<code>{_h(tr.run['task'])}</code>"),
        ("backend", f"<code>{_h(tr.run['backend'])}</code> "
                    f"({_h(backend.provider)}, {_h(backend.mode)})"),
        ("scenario", f"<code>{_h(tr.run['scenario'])}</code>"),
        ("agent", _agent_html(spec.framework)),
        ("model", f"<code>{_h(row['model'])}</code>"),
        ("tools offered", _h(", ".join(map(str, spec.tools)))),
        ("limits", f"max_steps {_h(limits.max_steps)}, "
                   f"token_budget {_v(limits.token_budget)}"),
        ("defences", _h(row["defences"])),
        ("delivered", _h("yes" if row["delivered"] else "no")),
    ]
    if row["attack_present"]:
        meta.append(("prompt injection", "present in a tool result; attack " + (
            "<b>succeeded</b>" if row["attack_succeeded"] else "failed")))
    meta.append(("config hash", f"<code>{_h(tr.header.config_hash)}</code>"))
    meta.append(("trace sha256", f"<code>{_h(tr.end.sha256)}</code>"))
    if tr.header.versions:
        meta.append(("versions", _h(", ".join(f"{k} {v}"
                                               for k, v in tr.header.versions.items()))))
    return meta


def _agent_html(framework: FrameworkSettings | None) -> str:
    """The run page's agent: the lesson's loop, or a framework's agent with its framework
    and condition (docs/agents.md)."""
    if framework is None:
        return "<code>lesson</code> (the project's loop)"
    condition = "capped" if framework.capped else "as shipped"
    return (f"<code>{_h(framework.name)}</code> "
            f"({_h(framework.framework)}, {condition})")


def index_row(run: VerifiedRun, row: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The index's row for one run: the table builder's row (``row``, computed here when
    not given) plus the page's link."""
    out = dict(run_row(run) if row is None else row)
    out.pop("trace", None)
    out["trial"] = run.trace.run.get("trial")
    out["agent"] = run.trace.run.get("agent") or "lesson"
    out["href"] = page_path(run.trace.run)
    # whether its backend repeats one outcome (trials.csv's column): no interval then
    out["deterministic"] = deterministic(run.trace.header.run_spec.backend_config)
    return out
