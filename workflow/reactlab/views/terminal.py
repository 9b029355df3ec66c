"""Terminal view of one trace: ``python -m reactlab show TRACE.jsonl``.

Prints the conversation (requests with their tokens, tool calls with arguments and result
or error, guardrail events, backend errors), the final answer and the verifier's
findings. With colour (a TTY, or ``--color always``) the findings are highlighted on the
answer; without colour the output is plain text.

Text from the trace never reaches the terminal raw: control characters (an escape
sequence such as ``"\\x1b[2J"`` in a headline), bidirectional overrides and lone surrogates
are printed as visible escapes (:func:`reactlab.views.common.visible`), and a line break inside
a field is indented so that it cannot pass for a line of the view.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from reactlab import trace as tracemod
from reactlab.analysis.verify import Finding, Verification, VerifiedRun, read_verification
from reactlab.core.errors import UsageError
from reactlab.trace.records import Answer, Error, Guardrail, Request, ToolCallRecord
from reactlab.views.common import finding_spans, guardrail_parts, visible

__all__ = ["format_run", "show", "use_color"]

COLORS = ("auto", "always", "never")

_STATUS_STYLE = {"ok": "green", "error": "red", "invalid": "yellow", "unknown": "magenta",
                 "repeated": "yellow", "blocked": "magenta"}
_SGR = {"bold": "1", "dim": "2", "underline": "4", "red": "31", "green": "32",
        "yellow": "33", "blue": "34", "magenta": "35", "cyan": "36", "finding": "1;4;31"}



def use_color(mode: str, stream: TextIO) -> bool:
    """``always`` / ``never``, or for ``auto``: a TTY, ``NO_COLOR`` unset, ``TERM`` not dumb."""
    if mode not in COLORS:
        raise UsageError(f"color must be one of {', '.join(COLORS)}, not {mode!r}")
    if mode != "auto":
        return mode == "always"
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and "NO_COLOR" not in os.environ and (
        os.environ.get("TERM") != "dumb")


class _Painter:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles or not text:
            return text
        codes = ";".join(_SGR[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


def _clean(value: object, indent: str = "") -> str:
    """Trace text made safe for a terminal; line breaks continue under ``indent``."""
    text = visible(value if isinstance(value, str) else str(value))
    return text.replace("\n", "\n" + indent + "  ") if "\n" in text else text


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _answer(text: str, findings: Sequence[Finding], paint: _Painter,
            indent: str) -> str:
    """The answer, each finding's span highlighted (only when painting)."""
    if not paint.color:
        return _clean(text, indent)
    covered = [False] * len(text)
    for start, end, _rule in finding_spans(text, findings):
        for i in range(start, end):
            covered[i] = True
    out: list[str] = []
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and covered[j] == covered[i]:
            j += 1
        piece = _clean(text[i:j], indent)
        out.append(paint(piece, "finding") if covered[i] else piece)
        i = j
    return "".join(out)


def _tool_lines(rec: ToolCallRecord, paint: _Painter) -> list[str]:
    head = (f"  → {paint(_clean(rec.name if rec.name is not None else '(unparsed)'), 'bold')} "
            f"{_clean(_compact(rec.arguments))}  "
            f"{paint('[' + _clean(rec.status) + ']', _STATUS_STYLE.get(rec.status, 'red'))} "
            f"{paint(_clean(rec.id), 'dim')}")
    lines = [head]
    if rec.raw is not None:
        lines.append(f"    raw: {_clean(rec.raw, '    ')}")
    result = rec.result
    if rec.succeeded:
        value = result["resultado"]
        if isinstance(value, list) and value:
            lines.append(f"    ← {len(value)} item(s)")
            lines.extend(f"      {_clean(_compact(item))}" for item in value)
        else:
            lines.append(f"    ← {_clean(_compact(value))}")
    elif set(result) == {"error"}:
        lines.append(f"    {paint('✗', 'red')} {_clean(result['error'], '    ')}")
    else:
        lines.append(f"    ← {_clean(_compact(result))}")
    return lines


def _guardrail_line(rec: Guardrail, paint: _Painter) -> str:
    meaning, details = guardrail_parts(rec, _clean)
    tail = f" ({'; '.join(details)})" if details else ""
    return (f"  {paint('! guardrail ' + _clean(rec.rule), 'yellow', 'bold')}: "
            f"{meaning}{tail}")


def format_run(run: VerifiedRun, color: bool) -> str:
    """The whole view of one run as text (ANSI colour codes only when ``color``)."""
    tr, verification = run.trace, run.verification
    paint = _Painter(color)
    spec = tr.header.run_spec
    end = tr.end
    backend = spec.backend_config
    on = "+".join(k for k, v in tr.header.defences.items() if v) or "none"
    findings = list(verification.findings)
    lines = [
        f"{paint('run', 'dim')}       {paint(_clean(tr.header.key), 'bold')}",
        f"{paint('model', 'dim')}     {_clean(spec.script.model)} "
        f"({_clean(backend.provider)}, {_clean(backend.mode)}); "
        f"defences: {_clean(on)}",
        f"{paint('question', 'dim')}  {_clean(tr.header.question, '          ')}",
    ]
    step = None
    for rec in tr.records:
        if rec.step != step:
            step = rec.step
            lines.append("")
            lines.append(paint(f"── step {_clean(step)} ──", "cyan", "bold"))
        if isinstance(rec, Request):
            lines[-1] += (f" {_clean(rec.tokens_sent)} tokens sent "
                          f"(cumulative {_clean(rec.cumulative_tokens)})")
            if rec.tokens_out:
                lines[-1] += f", {_clean(rec.tokens_out)} out"
            if rec.attempts != 1:
                lines[-1] += f", {_clean(rec.attempts)} attempts"
            if rec.text and rec.n_calls:
                lines.append(f"  {paint('model:', 'dim')} {_clean(rec.text, '  ')}")
        elif isinstance(rec, ToolCallRecord):
            lines.extend(_tool_lines(rec, paint))
        elif isinstance(rec, Guardrail):
            lines.append(_guardrail_line(rec, paint))
        elif isinstance(rec, Error):
            status = f" (HTTP {_clean(rec.status)})" if rec.status is not None else ""
            lines.append(f"  {paint('✗ backend error ' + _clean(rec.kind), 'red', 'bold')}"
                         f"{status} after {_clean(rec.attempts)} attempt(s): "
                         f"{_clean(rec.message, '  ')}")
        elif isinstance(rec, Answer):
            lines.append(f"  {paint('answer:', 'dim')} "
                         f"{_answer(rec.text, findings, paint, '  ')}")
    lines.append("")
    if end.answer is not None:
        lines.append(f"{paint('answer', 'bold')}    "
                     f"{_answer(end.answer, findings, paint, '          ')}")
    else:
        term = end.termination.replace("_", " ")
        lines.append(f"{paint('answer', 'bold')}    {paint('no answer', 'red')} "
                     f"({_clean(term)})")
    lines.append(f"{paint('end', 'dim')}       {_clean(end.termination)} after "
                 f"{_clean(end.steps)} steps · {_clean(end.calls)} calls "
                 f"({_clean(end.errors)} errors) · {_clean(end.tokens_sent)} "
                 "tokens sent")
    if verification.verified and not findings:
        lines.append(f"{paint('verdict', 'dim')}   {paint('verified', 'green', 'bold')}")
    else:
        lines.append(f"{paint('verdict', 'dim')}   {paint('REJECTED', 'red', 'bold')} — "
                     f"{len(findings)} finding(s)")
        for f in findings:
            lines.append(f"  - {paint(_clean(f.rule), 'red')}: "
                         f"{_clean(f.message, '    ')}")
    return "\n".join(lines) + "\n"


def show(trace_path: str | Path, verified_path: str | Path | None = None,
         color: str = "auto", stream: TextIO | None = None) -> None:
    """Print the view of the trace at ``trace_path`` to ``stream`` (stdout by default).

    Findings come from ``verified_path`` (a ``results/verified/*.json`` file) when given,
    otherwise the verifier runs on the trace now.
    """
    out = sys.stdout if stream is None else stream
    tr = tracemod.read(trace_path)
    if verified_path is not None:
        verification = Verification.from_json(read_verification(verified_path))
    else:
        verification = Verification.of(tr, str(trace_path))
    text = format_run(VerifiedRun(tr, verification), use_color(color, out))
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    out.write(text)
    out.flush()
