"""The one bounded retry loop of the API adapters (openai and anthropic alike).

The SDK clients are built with ``max_retries=0``: the SDKs' own retries sleep for times
they choose (anthropic obeys a ``retry-after`` of an hour) and are invisible in a trace.
Here every attempt is counted, every wait is chosen from the backend's configuration,
capped, injectable (tests pass ``sleep``) and recorded.

Policy
    * retried: HTTP 408, 409, 429, 500, 502, 503, 504, 529, connection errors, timeouts;
    * not retried: every other status (400, 401, 403, 404, 422 ...: a client error will
      not mend itself) and **protocol** errors (a 200 whose body is not a valid answer:
      the provider has already done, and billed, the work; a deterministic server would
      answer the same again);
    * at most ``max_attempts`` attempts in all (the backend's ``max_attempts``; its
      default and bounds are the config schema's);
    * the wait before attempt n + 1 is the server's ``retry-after-ms`` / ``retry-after``
      when it sent one, else ``BACKOFF_BASE * 2 ** (n - 1)`` (0.5, 1, 2 ... seconds, no
      jitter: runs are reproducible), and never more than ``max_wait``
      (the backend's ``max_wait``, in seconds) — the capped value is what is slept and
      recorded.

What is recorded
    ``call`` returns the value and the attempt log, a list with one dict per attempt::

        {"attempt": 1, "status": 429, "kind": "rate_limit", "error": "...",
         "retry_after": 0.01, "wait": 0.01}
        {"attempt": 2, "status": 200}

    (``retry_after`` is what the server asked for, None if nothing; ``wait`` what was
    slept.) When it gives up, the final :class:`BackendError` carries its fields
    ``attempts`` (int), ``history`` (that log, the last entry with ``wait: None``) and
    ``retryable`` (whether its kind/status is one that is retried, i.e. False for a
    client or protocol error stopped at once, True when the bound was hit), set by
    :meth:`BackendError.gave_up`; its message ends with "(gave up after N attempts)" when N > 1.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from reactlab.agent.types import BudgetExceeded
from reactlab.config.settings import LiveBackend, SimulatedBackend
from reactlab.core.errors import BackendError

T = TypeVar("T")

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
RETRY_KINDS = frozenset({"connection", "timeout"})
BACKOFF_BASE = 0.5
API_KEY_HINT = "check the API key"


def default_sleep(seconds: float) -> None:
    """The sleep used when none is injected (looked up at call time: tests may replace it)."""
    time.sleep(seconds)


def kind_for_status(status: int) -> str:
    """The BackendError kind of an HTTP error status."""
    if status == 429:
        return "rate_limit"
    if status == 408:
        return "timeout"
    if status == 409 or status >= 500:
        return "server"
    return "client"


def status_error(status: int, message: str, *, api_key_hint: str = API_KEY_HINT) -> BackendError:
    """The BackendError of an HTTP error response (401 says what to check)."""
    if status == 401:
        message += f" ({api_key_hint})"
    return BackendError.of_kind(kind_for_status(status), message, status=status)


def is_retryable(err: BackendError) -> bool:
    """Retried: the statuses of RETRY_STATUSES; without a status, connection and timeout."""
    if err.status is not None:
        return err.status in RETRY_STATUSES
    return err.kind in RETRY_KINDS


def retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms``, else ``retry-after``
    (seconds or an HTTP date); None when absent, unreadable or negative."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) / divisor
        except (TypeError, ValueError):
            value = math.nan
        if math.isfinite(value):
            if value >= 0:
                return value
            continue
        if name == "retry-after":
            try:
                when = email.utils.parsedate_to_datetime(str(raw))
            except (TypeError, ValueError, IndexError):
                continue
            delta = when.timestamp() - (time.time() if now is None else now)
            return max(0.0, delta)
    return None


def _headers_of(exc: BaseException) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    return headers if isinstance(headers, Mapping) else None


_DEFAULTS = SimulatedBackend.model_fields  # the schema's defaults (config/settings.py)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = _DEFAULTS["max_attempts"].default
    max_wait: float = float(_DEFAULTS["max_wait"].default)
    base: float = BACKOFF_BASE

    @classmethod
    def from_settings(cls, settings: SimulatedBackend | LiveBackend) -> RetryPolicy:
        """The policy of an API backend (its settings are validated: bounds included)."""
        return cls(max_attempts=settings.max_attempts, max_wait=float(settings.max_wait))

    def wait(self, attempt: int, asked: float | None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based), capped."""
        wanted = asked if asked is not None else self.base * 2 ** (attempt - 1)
        return min(wanted, self.max_wait)


def call(attempt: Callable[[], T], translate: Callable[[Exception], Exception],
         policy: RetryPolicy, *, catch: tuple[type[Exception], ...] = (),
         sleep: Callable[[float], None] | None = None) -> tuple[T, list[dict[str, Any]]]:
    """Run ``attempt`` until it succeeds, fails for good or the bound is reached.

    ``attempt`` may raise BackendError itself (e.g. protocol errors it found), or any of
    ``catch``, which ``translate`` turns into a BackendError (or BudgetExceeded, which,
    like a BudgetExceeded raised directly, passes through at once: the request was not
    sent). Returns (value, attempt log); raises the last BackendError with ``attempts``,
    ``history`` and ``retryable`` set on it.
    """
    history: list[dict[str, Any]] = []
    n = 0
    while True:
        n += 1
        cause: BaseException
        try:
            value = attempt()
        except BudgetExceeded:
            raise
        except BackendError as exc:
            err, cause = exc, exc
        except catch as exc:
            translated = translate(exc)
            if isinstance(translated, BudgetExceeded):
                raise translated from exc
            if not isinstance(translated, BackendError):  # pragma: no cover - adapter bug
                raise translated from exc
            err, cause = translated, exc
        else:
            history.append({"attempt": n, "status": 200})
            return value, history
        asked = retry_after(_headers_of(cause)) if err.status is not None else None
        entry: dict[str, Any] = {"attempt": n, "status": err.status, "kind": err.kind,
                                 "error": str(err), "retry_after": asked}
        history.append(entry)
        retryable = is_retryable(err)
        if not retryable or n >= policy.max_attempts:
            entry["wait"] = None
            err.gave_up(n, history, retryable)
            if err is cause:
                raise err
            raise err from cause
        entry["wait"] = policy.wait(n, asked)
        (sleep if sleep is not None else default_sleep)(entry["wait"])
