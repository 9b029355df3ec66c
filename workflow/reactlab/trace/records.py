"""The trace's record types: one frozen dataclass per ``type`` of JSONL line.

Writers (the agent loop, the runner) build these instead of dict literals; readers get
them back from :func:`reactlab.trace.read` and use attributes instead of defensive
``.get`` calls. :meth:`to_json` gives the JSON object written on disk, with the keys in
file order; :meth:`from_json` reads one back and says which field is missing, unknown or
of the wrong type. ``from_json(obj).to_json() == obj`` for every record a writer makes,
so the bytes of a trace do not depend on this module (the checksum covers them).

Optional fields (``system_prompt_sent`` and ``tool_results_ascii`` of the header;
``decoding`` of a request; ``raw`` of a tool call; ``tokens_refused``, ``tokens_left``,
``id`` and ``detail`` of a guardrail; ``records`` and ``sha256`` of an end record not yet
written) are left out of the JSON when they are ``None``.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import Field, dataclass, fields
from functools import cached_property
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Literal,
    Self,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from reactlab.core.errors import ReactlabError, TraceError

if TYPE_CHECKING:
    from reactlab.config.spec import RunSpec

__all__ = ["BODY_CLASSES", "RECORD_CLASSES", "Answer", "End", "Error", "ErrorKind", "Guardrail",
           "GuardrailRule", "Header", "Record", "Request", "Termination", "ToolCallRecord",
           "ToolStatus", "record_from_json"]

ToolStatus = Literal["ok", "error", "invalid", "unknown", "repeated", "blocked",
                     "nonconforming"]
"""What the program did with a tool call (``agent.types.ToolOutcome`` says what each means)."""

GuardrailRule = Literal["step_limit", "repeated_call", "token_budget", "scope_rule",
                        "plan_failed", "single_turn", "side_effect_allowlist",
                        "pin_tool_list"]
"""The guardrail that fired (``agent.loop``, ``agent.strategies`` and the single-turn
strategy of ``suites.run`` emit them)."""

Termination = Literal["answer", "backend_error", "step_limit", "repeated_call",
                      "token_budget", "scope_rule", "plan_failed", "single_turn",
                      "side_effect_allowlist", "pin_tool_list", "framework_limit",
                      "framework_error", "hard_stop"]
"""Why a run ended (the ``end`` record): an answer, a backend error, or the guardrail that
stopped it (any rule a strategy's ``stop`` returns ends the run under that rule's name).
A framework's run (reactlab.frameworks) ends in ``answer``, ``framework_limit`` (its own
cap: ``MaxTurnsExceeded``, ``UsageLimitExceeded``, ``GraphRecursionError``…),
``framework_error`` (anything else it raised) or ``hard_stop`` (the simulator refused
the request past the agent's ``max_requests``); ``end.ending`` names its own ending."""

ErrorKind = Literal["rate_limit", "server", "client", "protocol", "timeout", "connection"]
"""The ``kind`` of a backend failure: one per ``BackendError`` subclass (core/errors.py)."""

class _Record:
    """Shared JSON conversion: fields in declaration order, ``type`` first."""

    type: ClassVar[str]
    _optional: ClassVar[frozenset[str]] = frozenset()  # left out of the JSON when None
    #: set by ``@dataclass`` on each record class; declared here so that the type checker
    #: knows every record is a dataclass (what :func:`dataclasses.fields` takes)
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name in self._optional:
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Self:
        if obj.get("type") != cls.type:
            raise TraceError(f"not a {cls.type} record: type {obj.get('type')!r}")
        names = {f.name: f for f in fields(cls)}
        hints = _hints(cls)
        unknown = sorted(set(obj) - set(names) - {"type"})
        if unknown:
            raise TraceError(f"{cls.type} record has unknown field(s) {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name in names:
            if name not in obj:
                if name in cls._optional:
                    continue
                raise TraceError(f"{cls.type} record lacks the field {name!r}")
            value = obj[name]
            if not _type_ok(hints[name], value):
                raise TraceError(f"{cls.type} record: field {name!r} is "
                                 f"{_describe(value)}, expected {_show(hints[name])}")
            values[name] = value
        return cls(**values)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a record class (computed once per class)."""
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _describe(value: object) -> str:
    return type(value).__name__ if not isinstance(value, str) else f"str {value!r}"


def _show(annotation: Any) -> str:
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    return str(annotation).replace("typing.", "") if not isinstance(annotation, type) \
        else annotation.__name__


def _type_ok(annotation: Any, value: object) -> bool:
    """Check ``value`` against a record field's annotation: ``int``, ``str``, ``bool``,
    ``dict[...]``, ``list[...]``, ``Any``, ``None``, a ``Literal`` of strings, or a union
    of these. Any other annotation raises TypeError: a record class may only use types
    this reader can check."""
    origin = get_origin(annotation)
    if annotation is Any:
        return True
    if annotation is None or annotation is type(None):
        return value is None
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in get_args(annotation))
    if origin is Union or origin is types.UnionType:
        return any(_type_ok(a, value) for a in get_args(annotation))
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if annotation is dict or origin is dict:
        return isinstance(value, dict)
    if annotation is list or origin is list:
        return isinstance(value, list)
    raise TypeError(f"record field annotation {annotation!r} is not one the trace reader "
                    "can check")


@dataclass(frozen=True)
class Header(_Record):
    """First line: which run, under which config and package versions, from which spec,
    and what its session says it sent the model beyond the turns: whether the agent's
    system prompt went to it (``system_prompt_sent``) and whether tool results reached it
    with ASCII escapes (``tool_results_ascii``; :class:`reactlab.agent.types.SessionFacts`).
    Those two are left out when the session does not state them (an outside suite's
    policy) and in traces written before the runner recorded them."""

    type: ClassVar[str] = "header"
    _optional: ClassVar[frozenset[str]] = frozenset({"system_prompt_sent",
                                                     "tool_results_ascii"})
    schema_version: int
    run: dict[str, str]
    key: str
    config_hash: str
    versions: dict[str, str]
    spec: dict[str, Any]
    system_prompt_sent: bool | None = None
    tool_results_ascii: bool | None = None

    @cached_property
    def run_spec(self) -> RunSpec:
        """The spec, typed: the :class:`~reactlab.config.RunSpec` the runner wrote it from
        (its task, backend and scenario, the typed backend config, script, limits and agent,
        the suite case, framework and MCP parts). Readers use its attributes instead of the
        ``spec`` dict's string keys. Validated on first use and kept; a TraceError says
        what of the spec does not parse. ``spec`` stays the dict as written, so that the
        trace's bytes do not depend on this view."""
        from reactlab.config.spec import RunSpec  # lazy: pydantic models; a trace reads without

        try:
            return RunSpec.from_dict(self.spec)
        except (ReactlabError, TypeError, KeyError) as exc:
            raise TraceError(f"{self.key}: the header's spec is no run spec ({exc})") from exc

    @property
    def question(self) -> str:
        """The question (read from the spec as written: the verifier also checks a
        hand-written trace whose spec holds the question alone)."""
        return str(self.spec["question"])

    @property
    def defences(self) -> dict[str, bool]:
        """The agent's defences, by name, in the spec's order."""
        return dict(self.run_spec.agent.defences.to_dict())


@dataclass(frozen=True)
class Request(_Record):
    """One request sent to the model and what came back (text, number of calls)."""

    type: ClassVar[str] = "request"
    _optional: ClassVar[frozenset[str]] = frozenset({"decoding"})
    step: int
    tokens_sent: int
    cumulative_tokens: int
    tokens_out: int
    attempts: int
    text: str
    n_calls: int
    decoding: dict[str, Any] | None = None  # constrained decoding only (backends.local.grammar)


@dataclass(frozen=True)
class ToolCallRecord(_Record):
    """One tool call and the program's answer to it (see ``ToolOutcome.status``)."""

    type: ClassVar[str] = "tool_call"
    _optional: ClassVar[frozenset[str]] = frozenset({"raw", "sent"})
    step: int
    id: str
    name: str | None
    arguments: dict[str, Any] | None
    status: ToolStatus
    result: dict[str, Any]
    raw: str | None = None
    #: a framework's run: the tool result exactly as the framework sent it back to the
    #: model (its own error text included); None for the project's loop, whose result
    #: text is ``result`` as the backend writes it
    sent: str | None = None

    @property
    def succeeded(self) -> bool:
        """Whether the result holds a ``resultado`` (what the verifier counts as a source)."""
        return isinstance(self.result, dict) and "resultado" in self.result


@dataclass(frozen=True)
class Guardrail(_Record):
    """A guardrail event: ``step_limit``, ``repeated_call``, ``token_budget``,
    ``scope_rule``, ``side_effect_allowlist``, ``pin_tool_list`` (an MCP server refused:
    its pinned tool list changed) or ``plan_failed``, with the fields that rule has."""

    type: ClassVar[str] = "guardrail"
    _optional: ClassVar[frozenset[str]] = frozenset({"tokens_refused", "tokens_left", "id",
                                                     "detail"})
    step: int
    rule: GuardrailRule
    tokens_refused: int | None = None
    tokens_left: int | None = None
    id: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Answer(_Record):
    """The final answer (the model's text without calls)."""

    type: ClassVar[str] = "answer"
    step: int
    text: str


@dataclass(frozen=True)
class Error(_Record):
    """A backend failure that ended the run (after the SDK's and our retries)."""

    type: ClassVar[str] = "error"
    step: int
    kind: ErrorKind
    status: int | None
    message: str
    attempts: int
    retryable: bool
    history: list[Any]


@dataclass(frozen=True)
class End(_Record):
    """Last line: how the run ended. ``records`` and ``sha256`` are set by the writer."""

    type: ClassVar[str] = "end"
    _optional: ClassVar[frozenset[str]] = frozenset({"ending", "records", "sha256"})
    termination: Termination
    steps: int
    answer: str | None
    tokens_sent: int
    calls: int
    errors: int
    #: a framework's run: how the framework itself ended (``final_output``, or the name of
    #: the exception it raised); None for the project's loop
    ending: str | None = None
    records: int | None = None
    sha256: str | None = None


Record = Union[Request, ToolCallRecord, Guardrail, Answer, Error]  # noqa: UP007
"""A record between the header and the end."""

#: The record classes between the header and the end, by ``type``.
BODY_CLASSES: dict[str, type[Record]] = {
    c.type: c for c in (Request, ToolCallRecord, Guardrail, Answer, Error)}

RECORD_CLASSES: dict[str, type[_Record]] = {"header": Header, **BODY_CLASSES, "end": End}


def record_from_json(obj: Mapping[str, Any]) -> _Record:
    """The typed record of one JSON object (dispatch on ``type``)."""
    kind = obj.get("type")
    cls = RECORD_CLASSES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise TraceError(f"unknown record type {obj.get('type')!r}")
    return cls.from_json(obj)
