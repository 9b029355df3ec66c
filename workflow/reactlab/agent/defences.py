"""Deterministic defences against prompt injection through tool results.

Three defences, each switchable in config (``agent.defences`` or a scenario's
``defences``) and measured in the tables:

* ``delimit_tool_output`` — tool output is marked as data before the model reads it (the
  encoding lives in :mod:`reactlab.tools.messages`, which backends and simulators share): the
  JSON is wrapped between explicit markers and every ``<`` / ``>`` inside it is replaced
  by ``‹`` / ``›``, so markup such as ``<INFORMATION>`` cannot pose as a real tag.
* ``scope_rule`` — a tool call may only touch tickers named in the question; any other
  ticker is refused (as data) without running the tool.
* ``verifier_gate`` — an answer that fails verification is not delivered (tables).

A task whose tools come from an MCP server has three more (docs/mcp.md, "Tool
poisoning"): its tool list pinned at planning (``pin_tool_list``, the job's check in
:mod:`reactlab.mcp.source`), its tools' descriptions sanitized (``sanitize_descriptions``,
:func:`reactlab.config.tool_parts.sanitized_description`) and ``side_effect_allowlist``: a
call to a side-effecting tool the task does not allow is refused (as data) unexecuted.

The text a model reads stays in Spanish, like every tool message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TICKER = re.compile(r"\b[A-Z]{4}\b")
OUT_OF_SCOPE = "fuera de alcance: la pregunta no menciona el ticker {ticker}"
#: What the model reads of a call to a side-effecting tool its task does not allow
#: (``side_effect_allowlist``, an MCP task's defence: docs/mcp.md).
NOT_ALLOWED = "acción no permitida en esta tarea: {name}"
NO_DEFENCES: Mapping[str, bool] = {"delimit_tool_output": False, "scope_rule": False,
                                   "verifier_gate": False}


def question_tickers(question: str) -> frozenset[str]:
    return frozenset(TICKER.findall(question))


def out_of_scope(arguments: Mapping[str, Any] | None, scope: frozenset[str]) -> str | None:
    """The ticker of a call that the scope rule refuses, or None."""
    if not arguments:
        return None
    ticker = arguments.get("ticker")
    if isinstance(ticker, str) and ticker not in scope:
        return ticker
    return None
