"""Provider faults to inject into the simulated APIs: the model of a fault plan.

A scenario may carry ``faults:``, a list of plain dicts; each one says *when* a request
fails and *how*:

* when — exactly one of

  - ``attempt: N`` — the N-th HTTP attempt of the run (1-based, counting every attempt,
    retries included);
  - ``step: N`` — the logical request of loop step N (the conversation holds N - 1
    assistant turns), for its first ``times`` attempts (default 1), so
    ``{step: 2, status: 500, times: 2}`` fails step 2 twice and lets the third attempt
    through;

* how — exactly one of

  - ``status: 400..599`` — an error response in the provider's documented error shape;
    ``retry_after: seconds`` (only with ``status``) adds ``retry-after`` (whole seconds,
    rounded up, as HTTP has it) and ``retry-after-ms`` headers;
  - ``body: truncated | html | missing_fields | empty`` — a 200 that is not a valid
    answer: the real JSON cut in half, an HTML page, the JSON without ``output`` /
    ``content``, or no body at all;
  - ``raise: connect | timeout`` — the transport raises the HTTP library's
    ``ConnectError`` / ``ReadTimeout`` (the request never gets an answer).

An ``attempt`` fault wins over a ``step`` fault for the same attempt. This module holds
the model only (no HTTP library); the simulators render the faults.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reactlab.config.schema import schema_at
from reactlab.config.settings import ScriptSettings, StepScript
from reactlab.core.errors import ConfigError

# The keys, their values and bounds are the config schema's ($defs.fault), one source.
_SCHEMA = schema_at("$defs", "fault", "properties")
BODIES: tuple[str, ...] = tuple(_SCHEMA["body"]["enum"])
RAISES: tuple[str, ...] = tuple(_SCHEMA["raise"]["enum"])
KEYS: tuple[str, ...] = tuple(_SCHEMA)


def _bounds(key: str) -> tuple[float, float]:
    return _SCHEMA[key]["minimum"], _SCHEMA[key]["maximum"]


@dataclass(frozen=True)
class Fault:
    """One injected fault. ``raises`` is the ``raise`` key (a Python keyword)."""

    attempt: int | None = None
    step: int | None = None
    times: int = 1
    status: int | None = None
    retry_after: float | None = None
    body: str | None = None
    raises: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plain dict this fault was parsed from (defaults left out)."""
        out: dict[str, Any] = {}
        for key, value in (("attempt", self.attempt), ("step", self.step),
                           ("status", self.status), ("retry_after", self.retry_after),
                           ("body", self.body), ("raise", self.raises)):
            if value is not None:
                out[key] = value
        if self.step is not None and self.times != 1:
            out["times"] = self.times
        return out


def _int(entry: Mapping[str, Any], key: str, where: str) -> int | None:
    lo, hi = _bounds(key)
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{where}.{key}", f"must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(f"{where}.{key}", f"must be between {lo} and {hi}, not {value}")
    return value


def parse_fault(entry: Any, where: str = "faults[0]") -> Fault:
    """A :class:`Fault` from a plain dict; ConfigError names the key at fault."""
    if isinstance(entry, Fault):
        return entry
    if not isinstance(entry, Mapping):
        raise ConfigError(where, f"a fault is a mapping, not {type(entry).__name__}")
    unknown = [k for k in entry if k not in KEYS]
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}",
                          f"unknown key; allowed: {', '.join(KEYS)}")
    whens = [k for k in ("attempt", "step") if k in entry]
    if len(whens) != 1:
        raise ConfigError(where, "a fault has exactly one of `attempt` or `step`")
    hows = [k for k in ("status", "body", "raise") if k in entry]
    if len(hows) != 1:
        raise ConfigError(where, "a fault has exactly one of `status`, `body` or `raise`")
    attempt = _int(entry, "attempt", where)
    step = _int(entry, "step", where)
    if "times" in entry and step is None:
        raise ConfigError(f"{where}.times", "`times` goes with `step` only")
    times = _int(entry, "times", where)
    status = _int(entry, "status", where)
    retry_after = entry.get("retry_after")
    if retry_after is not None:
        if status is None:
            raise ConfigError(f"{where}.retry_after", "`retry_after` goes with `status` only")
        lo, hi = _bounds("retry_after")
        if (not isinstance(retry_after, int | float) or isinstance(retry_after, bool)
                or not math.isfinite(retry_after)
                or not lo <= retry_after <= hi):
            raise ConfigError(f"{where}.retry_after",
                              f"must be a number of seconds from {lo:g} to {hi:g}, "
                              f"not {retry_after!r}")
        retry_after = float(retry_after)
    body = entry.get("body")
    if "body" in entry and body not in BODIES:
        raise ConfigError(f"{where}.body", f"must be one of {', '.join(BODIES)}, not {body!r}")
    raises = entry.get("raise")
    if "raise" in entry and raises not in RAISES:
        raise ConfigError(f"{where}.raise",
                          f"must be one of {', '.join(RAISES)}, not {raises!r}")
    return Fault(attempt=attempt, step=step, times=times or 1, status=status,
                 retry_after=retry_after, body=body, raises=raises)


def parse_plan(entries: Iterable[Any] | None, where: str = "faults") -> tuple[Fault, ...]:
    """Every fault of a plan; two faults on the same ``attempt`` are an error."""
    if entries is None:
        return ()
    if isinstance(entries, Mapping | str | bytes):
        raise ConfigError(where, "faults is a list of mappings")
    faults = tuple(parse_fault(e, f"{where}[{i}]") for i, e in enumerate(entries))
    for key, hint in (("attempt", ""), ("step", "; use `times` to fail it more than once")):
        seen: dict[int, int] = {}  # attempt (or step) -> the first fault on it
        for i, f in enumerate(faults):
            value = f.attempt if key == "attempt" else f.step
            if value is None:
                continue
            if value in seen:
                raise ConfigError(f"{where}[{i}].{key}", f"{key} {value} already has a fault "
                                                         f"({where}[{seen[value]}]){hint}")
            seen[value] = i
    return faults


@dataclass
class FaultPlan:
    """The faults of one run, and the attempts counted so far (state of one run)."""

    faults: tuple[Fault, ...] = ()
    attempts: int = 0
    per_step: dict[int, int] = field(default_factory=dict)
    log: list[tuple[int, int, Fault | None]] = field(default_factory=list)

    @classmethod
    def from_script(cls, script: ScriptSettings) -> FaultPlan:
        """The plan of a run's script (empty for a strategy run, which has none)."""
        return cls(parse_plan(script.faults if isinstance(script, StepScript) else ()))

    def next(self, step: int) -> Fault | None:
        """Count one attempt of loop step ``step``; the fault it meets, if any."""
        self.attempts += 1
        k = self.per_step[step] = self.per_step.get(step, 0) + 1
        chosen = next((f for f in self.faults if f.attempt == self.attempts), None)
        if chosen is None:
            chosen = next((f for f in self.faults if f.step == step and k <= f.times), None)
        self.log.append((self.attempts, step, chosen))
        return chosen

    def __bool__(self) -> bool:
        return bool(self.faults)
