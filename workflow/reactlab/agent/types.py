"""Provider-neutral values that flow between the loop and the backend adapters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reactlab.core.errors import BudgetExceeded as BudgetExceeded  # re-exported
from reactlab.trace.records import ToolStatus


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model proposed it.

    ``arguments`` is None when the model's argument text was not a JSON object; the raw
    text is then kept in ``raw`` and the call is answered with an error, never executed.
    """

    id: str
    name: str | None
    arguments: dict[str, Any] | None
    raw: str | None = None


@dataclass(frozen=True)
class ModelTurn:
    """One model response: free text and/or tool calls, and what the request cost."""

    text: str
    calls: tuple[ToolCall, ...]
    tokens_sent: int
    tokens_out: int = 0
    attempts: int = 1
    # How a local model decoded the turn (mode, grammar hash...) when it was not plain
    # free decoding; None otherwise, and then the request record has no such field.
    decoding: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolOutcome:
    """The program's answer to one call: the result dict and how it came about.

    ``status`` is one of ``ok``, ``error`` (the tool or its validation said no),
    ``invalid`` (arguments were not JSON), ``unknown`` (no such tool offered),
    ``repeated`` (same call already made; not executed), ``blocked`` (refused by the
    scope rule; not executed), ``nonconforming`` (an MCP server's result that breaks the
    output schema its tool declares: the model reads an error; :class:`StatusResult`).
    """

    call: ToolCall
    result: dict[str, Any]
    status: ToolStatus
    delimit: bool = False  # send it marked as data (the delimiting defence)

    @property
    def is_error(self) -> bool:
        return "error" in self.result


class StatusResult(dict[str, Any]):
    """A tool result that carries its own status, for an executor whose verdict the
    result's keys cannot tell (``"error" in result`` says ``error``): an MCP tool source
    marks a result that breaks its tool's declared output schema ``nonconforming``
    (:mod:`reactlab.mcp.source`). It is the same dict to everyone else."""

    def __init__(self, result: Mapping[str, Any], status: ToolStatus) -> None:
        super().__init__(result)
        self.status: ToolStatus = status


@dataclass
class RequestMeter:
    """Counts the tokens of every request body a backend sends.

    ``limit`` (tokens) makes the next request fail *before* it is sent if its body is
    larger: the token budget is enforced on the exact bytes the SDK would send.
    """

    counts: list[int] = field(default_factory=list)
    limit: int | None = None

    def take(self) -> list[int]:
        out, self.counts = self.counts, []
        return out


class Session(Protocol):
    """A conversation with one model through one adapter."""

    def request(self, budget_left: int | None) -> ModelTurn:
        """Send the conversation; raise BudgetExceeded or BackendError."""
        ...

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        """Append the program's answers to the calls of the last turn."""
        ...


@runtime_checkable
class SessionFacts(Protocol):
    """What a session says about how it talks to its model, beyond the turns themselves.

    The session is the one that knows: the runner records both in the trace header
    (:func:`reactlab.runner.header`, :class:`reactlab.trace.records.Header`) and the
    exports read them from there, instead of guessing them from the provider's name.
    A session without them (a test's fake, an outside suite's policy) records neither.
    """

    @property
    def system_prompt_sent(self) -> bool:
        """Whether the agent's system prompt (``agent.system_prompt``) goes to the model."""
        ...

    @property
    def tool_results_ascii(self) -> bool:
        """Whether a tool result's JSON reaches the model with ASCII escapes (``json.dumps``
        defaults, the HTTP APIs) rather than as UTF-8 text (the local ChatML sessions)."""
        ...
