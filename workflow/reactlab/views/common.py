"""What the HTML viewer and the terminal view share: safe text, guardrail texts, and the
places in an answer that the verifier's findings are about."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from reactlab.analysis.verify import Finding
from reactlab.trace.records import Guardrail

__all__ = ["GUARDRAIL_TEXT", "escape_char", "finding_spans", "guardrail_parts", "is_hidden",
           "visible"]

#: What each guardrail event means (the HTML page and the terminal view say the same).
GUARDRAIL_TEXT = {
    "step_limit": "the step limit was reached; the run stops without an answer",
    "repeated_call": "repeated call with the same arguments: not executed",
    "token_budget": "the next request would exceed the token budget: not sent",
    "scope_rule": "call on a ticker the question does not name: blocked",
    "plan_failed": "the plan's parameters did not validate",
    "single_turn": "one model turn: its calls are recorded, not executed (an outside suite)",
    "pin_tool_list": "the MCP server's tools are not the ones planned: server refused, "
                     "no model turn",
}



def guardrail_parts(rec: Guardrail, esc: Callable[[object], str], *, call: str = "{}",
                    refused: str = "{} tokens refused, {} left") -> tuple[str, list[str]]:
    """What a view says about one guardrail event: its meaning and its details.

    The meaning is :data:`GUARDRAIL_TEXT`'s sentence for the rule (empty for a rule it
    lacks); the details are the call it stopped (``call``, a format with one slot), the
    tokens refused and left (``refused``, two slots) and the free-text detail, for the
    fields the event has. Every value from the trace goes through ``esc`` (the view's
    escaping), so each view only lays the parts out.
    """
    details = []
    if rec.id is not None:
        details.append(call.format(esc(rec.id)))
    if rec.tokens_refused is not None:
        details.append(refused.format(esc(rec.tokens_refused), esc(rec.tokens_left)))
    if rec.detail is not None:
        details.append(esc(rec.detail))
    return esc(GUARDRAIL_TEXT.get(rec.rule, "")), details


# Outer spans first when two start at the same place (a headline holds a percentage,
# a percentage holds a figure).
_RULE_ORDER = {"headline_not_verbatim": 0, "percentage_without_calculation": 1,
               "figure_without_source": 2}

# Bidirectional formatting characters ("Trojan Source"): printable by Python's rules in
# some versions of Unicode, never wanted raw in a trace view.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BREAKS = frozenset("\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\u2028\u2029")


def escape_char(ch: str) -> str:
    cp = ord(ch)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def is_hidden(ch: str) -> bool:
    """Whether ``ch`` must be shown as an escape (newline and tab are kept)."""
    if ch in "\n\t":
        return False
    if ch in _BREAKS or ch in _BIDI:
        return True
    return not (ch.isprintable() or ch.isspace())


def visible(text: str) -> str:
    """``text`` with every control / format / surrogate character replaced by an escape.

    Newlines, tabs, spaces and printable characters are kept; an escape sequence such as
    ``"\\x1b[2J"`` becomes the literal text ``\\x1b[2J``, a right-to-left override
    ``\\u202e``, a lone surrogate ``\\udc80``.
    """
    if text.isprintable() or all(not is_hidden(ch) for ch in text):
        return text
    return "".join(escape_char(ch) if is_hidden(ch) else ch for ch in text)


def finding_spans(answer: str, findings: Iterable[Finding]) -> list[tuple[int, int, str]]:
    """(start, end, rule) of every place in ``answer`` that a finding is about.

    The places are the findings' own ``span`` (the verifier located them); a span that
    does not fit in ``answer`` (a verification of another text) is skipped. The spans are
    properly nested, sorted by start (outer first), without duplicates.
    """
    spans = {(f.span[0], f.span[1], f.rule) for f in findings
             if f.span is not None and f.rule in _RULE_ORDER
             and 0 <= f.span[0] < f.span[1] <= len(answer)}
    return sorted(spans, key=lambda s: (s[0], -s[1], _RULE_ORDER[s[2]]))
