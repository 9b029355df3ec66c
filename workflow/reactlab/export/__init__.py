"""Exports of the results to formats other tools read: Inspect logs and OTel GenAI spans.

Both exports read the same inputs as the viewer, the (trace, verification) pairs, and
check each verification against its trace (:func:`reactlab.analysis.verify.load_verification`).
This module holds what the two share and imports no export library: reading and
grouping the runs, the time axis and the identifiers. The writers are
:mod:`reactlab.export.inspect_log` (``inspect_ai``) and :mod:`reactlab.export.otel`
(the OpenTelemetry SDK); each imports its library when it is called, and both libraries
come with the ``export`` extra (``pip install -e ".[export]"``).

Traces carry no clock, and nothing that reaches an export reads one: time is the step
axis. The fixed instant :data:`EPOCH` (2000-01-01T00:00:00Z) stands for the start of
every run, and step *k* of a run occupies the second ``[k - 1, k)`` after it: the model
call in its first half, the step's tool calls one after another in its second half
(:func:`step_window`). Identifiers are hashes of the run key and the trace's own
checksum (:func:`derived_id`), so exporting the same traces twice writes the same bytes.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from reactlab import trace as tracemod
from reactlab.analysis.verify import Verification, load_verification
from reactlab.backends import API_RESULTS_ASCII
from reactlab.config import RunSpec
from reactlab.config.settings import HTTP_MODES, BackendSettings
from reactlab.core.errors import ExportError, TraceError
from reactlab.trace.integrity import MANIFEST, check_manifest
from reactlab.trace.records import Guardrail, Request, ToolCallRecord

__all__ = ["EPOCH", "EPOCH_NS", "STEP_NS", "ExportError", "ExportRun", "damaged_exports",
           "derived_id", "find_pairs", "group_runs", "load_runs", "require",
           "step_window", "unrecorded_facts"]

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""The instant that stands for the start of every run (traces carry no clock)."""
EPOCH_NS = int(EPOCH.timestamp()) * 1_000_000_000
STEP_NS = 1_000_000_000
"""One step of the agent loop is one second of the exported time axis."""


def require(module: str, what: str) -> None:
    """Raise :class:`ExportError` naming the extra when ``module`` cannot be imported."""
    if importlib.util.find_spec(module) is None:
        raise ExportError(f"{what} needs the package {module!r}, which is not installed: "
                          f"install the export extra (`pip install -e \".[export]\"`; "
                          f"`make env` does)")


def derived_id(*parts: object, length: int = 32) -> str:
    """A hexadecimal identifier derived from ``parts`` (sha256; no clock, no randomness)."""
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(text.encode("utf-8", errors="backslashreplace")).hexdigest()[:length]


@dataclass(frozen=True)
class ExportRun:
    """One run as the exports see it: its trace and the verification checked against it."""

    trace: tracemod.Trace
    verification: Verification

    @property
    def key(self) -> str:
        return self.trace.header.key

    @property
    def task(self) -> str:
        return self.trace.run["task"]

    @property
    def backend(self) -> str:
        return self.trace.run["backend"]

    @property
    def scenario(self) -> str:
        return self.trace.run["scenario"]

    @property
    def agent(self) -> str | None:
        """The agent framework's agent that ran it (docs/agents.md); None: the lesson's
        own loop."""
        agent = self.trace.run.get("agent")
        return str(agent) if agent is not None else None

    @property
    def spec(self) -> RunSpec:
        """The run's spec, typed (:attr:`reactlab.trace.records.Header.run_spec`)."""
        return self.trace.header.run_spec

    @property
    def strategy(self) -> str:
        """Who decided the calls: ``react`` (the scripted steps' and the default) or the
        strategy a real model's scenario names (``plan_execute``)."""
        return self.spec.script.strategy

    @property
    def trial(self) -> int | None:
        """The trial number of a run with repeated trials, None for a single run."""
        return self.spec.trial

    @property
    def backend_config(self) -> BackendSettings:
        """The run's backend settings, typed (validated from the trace header's spec)."""
        return self.spec.backend_config

    @property
    def provider(self) -> str:
        return self.backend_config.provider

    @property
    def max_output_tokens(self) -> int | None:
        """The output-token cap the run's backend config sets (one attribute for every
        backend kind: :attr:`reactlab.config.settings._Backend.max_output_tokens`)."""
        return self.backend_config.max_output_tokens

    @property
    def system_prompt_sent(self) -> bool:
        """Whether the agent's system prompt went to the model, as the trace header records
        what the run's session said (:class:`reactlab.agent.types.SessionFacts`)."""
        recorded = self.trace.header.system_prompt_sent
        return recorded if recorded is not None else unrecorded_facts(self)[0]

    @property
    def tool_results_ascii(self) -> bool:
        """Whether tool results reached the model with ASCII escapes, as the trace header
        records it."""
        recorded = self.trace.header.tool_results_ascii
        return recorded if recorded is not None else unrecorded_facts(self)[1]

    @property
    def model(self) -> str:
        """The model's name: the configured one, else the scripted model's (the scenario
        whose script the simulator or the scripted backend plays)."""
        name = getattr(self.backend_config, "model", None)
        if name:
            return Path(str(name)).name if "/" in str(name) else str(name)
        return self.spec.script.model or self.scenario

    def request_params(self) -> dict[str, int | float]:
        """The request parameters the run's config sets, as both exports name them:
        ``max_tokens`` (the backend's output-token cap, whichever config key sets it),
        ``temperature``, ``top_p`` and ``seed``, in that order, each only when set."""
        cfg = self.backend_config.to_dict()  # the fields the config gave, as it gave them
        values: dict[str, int | float] = {}
        if self.max_output_tokens is not None:
            values["max_tokens"] = self.max_output_tokens
        for name in ("temperature", "top_p"):
            if cfg.get(name) is not None:
                values[name] = float(cfg[name])
        if self.spec.seed is not None:
            values["seed"] = self.spec.seed
        return values

    def calls_by_step(self) -> dict[int, list[ToolCallRecord]]:
        out: dict[int, list[ToolCallRecord]] = {}
        for call in self.trace.tool_calls():
            out.setdefault(call.step, []).append(call)
        return out

    def guardrails(self) -> list[Guardrail]:
        return list(self.trace.of_type(Guardrail))

    def requests(self) -> list[Request]:
        return self.trace.requests()


def unrecorded_facts(run: ExportRun) -> tuple[bool, bool]:
    """(system prompt sent, tool results ASCII) of a trace whose header records neither:
    one written before the runner recorded them (``tests/golden/exports/input`` holds
    such traces, committed byte for byte). Read from the trace alone: what the sessions
    of the time did, by the backend's ``mode`` that its header's spec holds. An HTTP mode
    (``simulated``, ``live``: an :class:`~reactlab.backends.adapter.ApiSession`) sent the
    system prompt as ``agent.send_system_prompt`` says and ASCII-escaped results; an
    in-process one (``scripted``, ``model``: the local ChatML sessions) always sent the
    system prompt and kept the results' UTF-8 text. Either sends the system prompt only
    to the ReAct strategy. Nothing outside the trace (which providers are registered
    now) is asked, so an export reads the same for a trace of any provider.

    Only old traces take this path; drop it once no kept trace lacks the two fields."""
    react = run.strategy == "react"
    if run.backend_config.mode in HTTP_MODES:
        return run.spec.agent.send_system_prompt and react, API_RESULTS_ASCII
    return react, False


def step_window(step: int, slot: int | None = None, slots: int = 1) -> tuple[int, int]:
    """(start, end) in nanoseconds after the run's start for step ``step`` (1-based).

    ``slot=None`` is the model call (the first half of the step's second); slot ``j`` of
    ``slots`` is the j-th tool call of the step (the second half, in equal parts).
    """
    base = (step - 1) * STEP_NS
    half = STEP_NS // 2
    if slot is None:
        return base, base + half
    width = half // max(slots, 1)
    start = base + half + slot * width
    return start, start + width


def load_runs(pairs: Iterable[tuple[str | Path, str | Path]]) -> list[ExportRun]:
    """Read each (trace, verification) pair, check the verification against its trace,
    and return the runs sorted by key. A run that appears twice is an error."""
    runs: dict[str, ExportRun] = {}
    for trace_path, verified_path in pairs:
        tr = tracemod.read(trace_path)
        run = ExportRun(tr, load_verification(tr, verified_path, str(trace_path)))
        if run.key in runs:
            raise TraceError(f"{trace_path}: run {run.key} appears twice")
        runs[run.key] = run
    if not runs:
        raise TraceError("no traces to export")
    return [runs[k] for k in sorted(runs)]


def group_runs(runs: Iterable[ExportRun]) -> dict[tuple[str, str], list[ExportRun]]:
    """The runs by (task, backend), both sorted; within a group by scenario and trial."""
    groups: dict[tuple[str, str], list[ExportRun]] = {}
    for run in runs:
        groups.setdefault((run.task, run.backend), []).append(run)
    return {k: sorted(groups[k], key=lambda r: (r.scenario, r.trial or 0))
            for k in sorted(groups)}


def find_pairs(results: str | Path = "results") -> list[tuple[Path, Path]]:
    """(trace, verification) of every trace under ``results/traces`` (for exporting an
    existing results folder); a trace without its verification is an error naming it."""
    results = Path(results)
    traces_dir, verified_dir = results / "traces", results / "verified"
    if not traces_dir.is_dir():
        raise ExportError(f"{traces_dir}: no such folder (run the pipeline first, or pass "
                          f"--results)")
    pairs = []
    for trace_path in sorted(traces_dir.rglob("*.jsonl")):
        rel = trace_path.relative_to(traces_dir).with_suffix(".json")
        verified = verified_dir / rel
        if not verified.is_file():
            raise ExportError(f"{trace_path} has no verification {verified}: run the "
                              f"pipeline (`make run`) or `reactlab verify` first")
        pairs.append((trace_path, verified))
    if not pairs:
        raise ExportError(f"{traces_dir}: no traces to export")
    return pairs


def damaged_exports(folders: Iterable[str | Path]) -> list[tuple[Path, str]]:
    """The export folders whose files no longer match their checksum manifest, with the
    first problem found (the pipeline removes them before a run, so they are rebuilt)."""
    found = []
    for folder in map(Path, folders):
        if folder.exists():
            problems = check_manifest(folder / MANIFEST)
            if problems:
                found.append((folder, problems[0]))
    return found
