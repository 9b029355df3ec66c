"""The exception tree of reactlab: every error the project raises on purpose.

All of them derive from :class:`ReactlabError` and are defined here, in one place::

    ReactlabError
    ├── ConfigError           config.yaml (or an override) is invalid; ``field`` names the culprit
    ├── DataError             a parquet file is missing or does not fit the expected schema
    ├── TokenizerError        the offline o200k_base file is missing or its hash differs
    ├── TraceError            a trace file is damaged, truncated or of another schema version
    │   └── DamagedResult         damaged, and a plain rerun must not rebuild it (it costs money)
    ├── ScriptError           a scripted scenario cannot produce its next action
    ├── RecordingError        an HTTP recording cannot be read, or a replay left part unused
    ├── ToolServerError       an MCP tool server cannot be started, listed or understood; a
    │                         failed call during a run is data for the model, not this
    ├── ModelNotFound         a local model (GGUF package, folder, cached id) is not available
    ├── RunActive             another run holds the working folder
    ├── DiskFull              too little free space to start a run
    ├── CommandFailed         (also a RuntimeError) a process the project starts (a job's own
    │                         process, snakemake, the HTTP server) failed or did not start
    ├── InternalError         (also a RuntimeError) an invariant the code relies on failed:
    │                         a bug here or in a pinned dependency
    ├── UsageError            (also a ValueError) a function or command was given an argument
    │   │                     it cannot take (an unknown name, a bad option, a bad count)
    │   ├── DecodingError         a decoding mode or grammar that cannot be built
    │   └── PluginMissing         a plugin (agent, provider, benchmark, tool source) that no
    │                             installed package declares; names the package to install
    ├── JSONRefused           (also a ValueError) the strict JSON loader refused a text
    │   ├── DuplicateKeyError     an object repeats a key
    │   └── NonFiniteConstantError  NaN, Infinity or -Infinity
    ├── StreamError           (also a ValueError) an SSE event stream out of order or cut short
    ├── ToolInputError        (also a ValueError) a tool cannot answer for its arguments
    │   │                     (unknown ticker, no data); its Spanish message goes back to
    │   │                     the model as data
    │   └── CalculatorError       a refused calculator expression (Spanish, for the model)
    ├── ExportError           an export (Inspect, OTel) cannot be written: its extra is missing
    ├── SuiteUnavailable      (also a RuntimeError) an outside suite's package is not installed
    ├── RequestInvalid        a request the simulated API refuses (status, message, param, code)
    ├── BudgetExceeded        control flow of the loop: a request would exceed the token budget
    └── BackendError          a model backend failed; the subclass says how, ``kind`` as data:
        ├── RateLimitError        kind "rate_limit"  HTTP 429
        ├── ServerError           kind "server"      HTTP 409, 5xx
        ├── ClientError           kind "client"      other 4xx, a missing key, a bad model
        ├── ProtocolError         kind "protocol"    a 2xx whose body is not a valid answer
        ├── RequestTimeoutError   kind "timeout"     HTTP 408, a transport timeout
        └── NetworkError          kind "connection"  the connection failed

A :class:`BackendError` carries ``status`` (the HTTP status, None without one) and, from
the retry loop (:mod:`reactlab.backends.retry`), ``attempts``, ``retryable`` and
``history`` (the per-attempt log). ``kind`` is a class attribute; the trace's ``error``
record stores it as a string. :meth:`BackendError.of_kind` builds the subclass of a kind.

The classes marked "also a ValueError/RuntimeError" keep the built-in base they replaced,
so that callers catching the built-in one (``json.loads`` users, the tool executor, the
SDKs' stream readers) behave as before. Not raised on purpose, and so not here: the
exceptions a protocol prescribes (``KeyError`` from a mapping, ``NotImplementedError`` from
an abstract method, the transport errors ``httpx.ConnectError``/``ReadTimeout`` that the
simulators raise to imitate a failing network, pydantic's ``PydanticCustomError`` inside
a validator); ``tests/test_error_tree.py`` lists them with their reasons and fails on any
other. Tool failures are *not* exceptions that leave the tool executor: tools return
``{"error": ...}`` as data so that the model can read them.
"""

from __future__ import annotations

import difflib
from typing import Any, ClassVar


class ReactlabError(Exception):
    """Base class of every error raised on purpose by reactlab."""


class ConfigError(ReactlabError):
    """The configuration is invalid. ``field`` is a dotted path to the culprit."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"config: {field}: {message}" if field else f"config: {message}")


class DataError(ReactlabError):
    """Input data is missing or does not have the expected schema."""


class TokenizerError(ReactlabError):
    """The tokenizer file could not be provisioned offline."""


class TraceError(ReactlabError):
    """A trace file is not a complete, valid trace."""


class ScriptError(ReactlabError):
    """A scripted scenario could not render its next action."""


class RecordingError(ReactlabError):
    """A recording cannot be read, or a replay did not use all of it."""


class ToolServerError(ReactlabError):
    """An MCP tool server (``mcp_servers:``) cannot be started, listed or understood.

    ``kind`` says how: ``start`` (the process or the connection cannot be opened, or the
    handshake fails), ``timeout`` (no answer within the server's ``timeout``), ``closed``
    (the server went away), ``malformed`` (not JSON-RPC), ``too_large`` (a message over
    ``max_result_bytes``), ``rpc`` (a JSON-RPC error answer), ``changed`` (its tools are not
    the ones planned). During a run a failed call is caught by the tool source and goes to
    the model as ``{"error": ...}`` data (:mod:`reactlab.mcp.source`)."""

    def __init__(self, kind: str, message: str, *, detail: str | None = None,
                 code: int | None = None, http_status: int | None = None,
                 context: str | None = None) -> None:
        self.kind = kind
        #: the message without ``context``: what a tool recording keeps (byte-stable)
        self.message = message
        #: what the person reads after the message and a recording leaves out: the
        #: server's exit status and the last lines of its stderr (they vary with timing,
        #: process ids, temporary paths)
        self.context = context
        #: the server's own words, for ``rpc``: its JSON-RPC error message
        self.detail = detail
        #: for ``rpc``: the JSON-RPC error code, when the server gave an integer one
        self.code = code
        #: the HTTP status of a Streamable HTTP server's refusal (4xx / 5xx), if any
        self.http_status = http_status
        super().__init__(message + (f"; {context}" if context else ""))


class ModelNotFound(ReactlabError):
    """The model (GGUF package, folder or cached id) is not available locally."""


class DamagedResult(TraceError):
    """A damaged result that a plain rerun must not regenerate (it would cost money)."""


class RunActive(ReactlabError):
    """Another run holds the working folder (its lock); nothing was changed."""


class DiskFull(ReactlabError):
    """The file system has too little free space to start a run."""


class CommandFailed(ReactlabError, RuntimeError):
    """A process the project starts failed, or did not start."""


class InternalError(ReactlabError, RuntimeError):
    """An invariant the code relies on does not hold: a bug, here or in a dependency."""


class UsageError(ReactlabError, ValueError):
    """A function or command was given an argument it cannot take."""


class DecodingError(UsageError):
    """A decoding mode or grammar that cannot be built (unknown mode, bad schema)."""


class PluginMissing(UsageError):
    """A plugin no installed package declares; ``package``: the one the config names."""

    def __init__(self, kind: str, group: str, name: str, installed: list[str],
                 package: str | None = None) -> None:
        self.kind, self.name, self.package = kind, name, package
        near = difflib.get_close_matches(name, installed, n=1)
        how = f"did you mean {near[0]!r}? Else, " if near else ""
        if package:
            how += f"install the package {package!r} that provides it (pip install {package})"
        else:
            how += ("install the package that provides it, and name it in the entry's "
                    "`package:` so that this error can")
        super().__init__(f"no {kind} {name!r} is installed ({group}: "
                         f"{', '.join(installed) or 'none'}): {how}")


class JSONRefused(ReactlabError, ValueError):
    """The strict JSON loader (:func:`reactlab.core.io.loads_strict`) refused a text."""


class DuplicateKeyError(JSONRefused):
    """A JSON object repeats a key (``key``); JSON's "last one wins" is refused."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"duplicate key {key!r}")


class NonFiniteConstantError(JSONRefused):
    """The JSON text holds NaN, Infinity or -Infinity (``name``), which JSON lacks."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"non-standard JSON constant {name}")


class StreamError(ReactlabError, ValueError):
    """An SSE event stream whose events are out of order or which ends too early."""


class ToolInputError(ReactlabError, ValueError):
    """A tool cannot answer for its arguments (an unknown ticker, no data for a date, a
    zero close); the message (Spanish, the lesson's) goes back to the model as data."""


class CalculatorError(ToolInputError):
    """A refused calculator expression; the message (Spanish) is for the model."""


class ExportError(ReactlabError):
    """An export cannot be written (its library is missing, or its input is unusable)."""


class SuiteUnavailable(ReactlabError, RuntimeError):
    """An outside suite's benchmark package is not installed (or not the version read)."""


class RequestInvalid(ReactlabError):
    """A request the API refuses before the model sees it: (status, message, param, code)."""

    def __init__(self, message: str, param: str | None = None, *, status: int = 400,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.code = message, param, status, code


class BudgetExceeded(ReactlabError):
    """Raised inside the transport when a request would exceed the token budget: control
    flow of the loop, which ends the run with ``budget_exceeded``."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"request of {tokens} tokens exceeds the {limit} tokens left")
        self.tokens = tokens
        self.limit = limit


class BackendError(ReactlabError):
    """A backend call failed. Raise a subclass; its ``kind`` classifies the failure.

    ``attempts``, ``retryable`` and ``history`` describe the retries that led here (one
    attempt, not retryable, no history unless the retry loop says otherwise: see
    :meth:`gave_up`).
    """

    kind: ClassVar[str] = ""
    KINDS: ClassVar[tuple[str, ...]] = (
        "rate_limit", "server", "client", "protocol", "timeout", "connection")

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        """A subclass declares its kind in its class line: ``class X(BackendError,
        kind="server")``; a subclass of a kinded class without one keeps the parent's."""
        super().__init_subclass__(**kwargs)
        if kind:
            cls.kind = kind

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1,
                 retryable: bool = False, history: list[dict[str, Any]] | None = None
                 ) -> None:
        if not self.kind:
            raise TypeError("BackendError is abstract: raise one of its subclasses "
                            "(or BackendError.of_kind)")
        self.status = status
        self.attempts = attempts
        self.retryable = retryable
        self.history: list[dict[str, Any]] = [] if history is None else history
        super().__init__(f"{self.kind}: {message}")

    @staticmethod
    def of_kind(kind: str, message: str, *, status: int | None = None) -> BackendError:
        """The error of subclass ``kind`` (UsageError for an unknown kind)."""
        try:
            cls = _BY_KIND[kind]
        except KeyError:
            raise UsageError(f"unknown backend error kind: {kind}") from None
        return cls(message, status=status)

    def gave_up(self, attempts: int, history: list[dict[str, Any]], retryable: bool) -> None:
        """Record the retry loop's outcome; the message then says how many attempts."""
        self.attempts, self.history, self.retryable = attempts, history, retryable
        if attempts > 1:
            self.args = (f"{self.args[0]} (gave up after {attempts} attempts)", *self.args[1:])


class RateLimitError(BackendError, kind="rate_limit"):
    """HTTP 429: the provider asks to slow down."""


class ServerError(BackendError, kind="server"):
    """HTTP 409 or 5xx: the provider failed."""


class ClientError(BackendError, kind="client"):
    """Any other 4xx, or a request that cannot be made (no key, unsupported mode, no model)."""


class ProtocolError(BackendError, kind="protocol"):
    """A 2xx whose body is not a valid answer of the API (or a replay that diverges)."""


class RequestTimeoutError(BackendError, kind="timeout"):
    """HTTP 408 or a transport timeout."""


class NetworkError(BackendError, kind="connection"):
    """The connection to the provider failed."""


_BY_KIND: dict[str, type[BackendError]] = {
    c.kind: c for c in (RateLimitError, ServerError, ClientError, ProtocolError,
                        RequestTimeoutError, NetworkError)}
assert tuple(_BY_KIND) == BackendError.KINDS
