"""Scripted simulators of the provider APIs, at the HTTP boundary.

Each simulator is a plain function ``handler(request) -> response`` for an httpx-style
``MockTransport``: it reads the request body the official SDK serialised, asks a
:class:`ScriptedPolicy` for the next action, and answers in the provider's documented
wire shape (the lesson's shapes, field for field). No state is kept between requests:
like a real API, everything the policy needs is in the conversation it is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reactlab.scripts import Action, Script


@dataclass(frozen=True)
class ScriptedPolicy:
    """Scripts by model name, and the task they play."""

    scripts: Mapping[str, Script]
    params: Mapping[str, Any]
    question: str

    def act(self, model: str, turn: int, results: Sequence[Mapping[str, Any]]) -> Action:
        """Raises KeyError for an unknown model, ScriptError when the script cannot go on."""
        return self.scripts[model].action(turn, self.params, self.question, results)


def parse_tool_output(text: Any) -> Any:
    """A tool result as the simulated model reads it back (JSON, else the raw text)."""
    import json

    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return {"texto": text}


def count_runs(flags: Sequence[bool]) -> int:
    """Number of maximal runs of True in ``flags`` (assistant turns in a conversation)."""
    runs, previous = 0, False
    for flag in flags:
        if flag and not previous:
            runs += 1
        previous = flag
    return runs
