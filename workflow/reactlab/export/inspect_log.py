"""Inspect logs (``inspect_ai`` 0.3.285): one ``.json`` eval log per (task, backend).

Each run of the group is a sample (id: the scenario) and each trial of a run with
repeated trials an epoch of that sample (epoch 1 for a single run). A sample holds:

* the conversation rebuilt from the trace: the system prompt where the run's session
  sent one, the question, each model turn (``ChatMessageAssistant`` with its
  ``ToolCall``\\ s) and each tool result (``ChatMessageTool``, written as the session wrote
  it, with or without ASCII escapes, and with a ``ToolCallError`` when the call was not
  executed as asked: invalid arguments, an unknown tool, a tool error, a repeated or
  blocked call); what the session sent is what the trace header records
  (:attr:`~reactlab.export.ExportRun.system_prompt_sent`, ``tool_results_ascii``);
* the events: a ``ModelEvent`` per request (its input, the tools offered, the output and
  its ``ModelUsage``: the trace's tokens sent and received) or per backend error, a
  ``ToolEvent`` per call, an ``InfoEvent`` (source ``reactlab guardrail``) per guardrail
  event with its rule and meaning, a ``SampleLimitEvent`` where the step limit (``turn``)
  or the token budget (``token``) ended the run, and the ``ScoreEvent``;
* the verifier's verdict as the score ``verifier`` (``C`` verified, ``I`` rejected) with
  its findings as the explanation and in the score's metadata; the guardrail events
  again, with the run's outcome, in the sample's metadata.

The events sit in Inspect's own span layout (``init``; ``solvers`` with the solver
``reactlab_agent_loop``; ``scorers`` with ``verifier``), and model-event inputs are
pooled with Inspect's own ``condense_events`` (each message is stored once), as Inspect
does for the logs it writes.

Nothing here reads a clock: times are the step axis of :mod:`reactlab.export` and every
identifier is derived from the run keys and the traces' checksums, so exporting the same
traces twice writes byte-identical files. File names start with the fixed timestamp
:data:`STAMP` because ``inspect view`` lists a ``.json`` log only when its name starts
with one; the rest is Inspect's own pattern ``{task}_{model}_{id}`` (here the backend in
the model's place), with ``_`` written ``-`` inside names as Inspect does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from reactlab.export import (
    EPOCH,
    STEP_NS,
    ExportError,
    ExportRun,
    derived_id,
    group_runs,
    load_runs,
    require,
    step_window,
)
from reactlab.tools import TOOLS, json_schema
from reactlab.tools.messages import tool_message
from reactlab.trace.integrity import publish_dir
from reactlab.trace.records import Answer, Error, Guardrail, Record, Request, ToolCallRecord
from reactlab.views.common import GUARDRAIL_TEXT

if TYPE_CHECKING:
    from inspect_ai.log import EvalError, EvalLog, EvalSample, EvalSampleLimit
    from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput
    from inspect_ai.scorer import Score
    from inspect_ai.tool import ToolInfo

__all__ = ["STAMP", "build_log", "export_job", "log_name", "write_logs"]

STAMP = EPOCH.strftime("%Y-%m-%dT%H-%M-%S+00-00")
"""The fixed timestamp every log's file name starts with (Inspect's own format)."""

SCORER = "verifier"
GUARDRAIL_SOURCE = "reactlab guardrail"

#: The ToolCallError types this export uses (a subset of Inspect's).
ErrorType = Literal["parsing", "unknown", "limit", "approval"]
#: The sample limits this export uses (a subset of Inspect's).
LimitType = Literal["turn", "token"]

# Why a call's result is an error, in Inspect's ToolCallError types.
_ERROR_TYPES: dict[str, ErrorType] = {"invalid": "parsing", "unknown": "unknown",
                                      "error": "unknown", "repeated": "limit",
                                      "blocked": "approval"}
# The guardrails that end a run, as Inspect's sample limits.
_LIMITS: dict[str, LimitType] = {"step_limit": "turn", "token_budget": "token"}


def _clean(name: str) -> str:
    return name.replace("_", "-")


def log_name(task: str, backend: str) -> str:
    """The file name of the log of (task, backend): ``{STAMP}_{task}_{backend}_{id}.json``."""
    return f"{STAMP}_{_clean(task)}_{_clean(backend)}_{task_id(task, backend)}.json"


def task_id(task: str, backend: str) -> str:
    return derived_id("inspect-task", task, backend, length=22)


def _at(ns: int) -> datetime:
    return EPOCH + timedelta(microseconds=ns // 1000)


def _iso(ns: int) -> str:
    return _at(ns).isoformat()


class _Ids:
    """Identifiers of one sample's messages and events: a counter under the sample's key."""

    def __init__(self, *scope: object) -> None:
        self.scope = scope
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return derived_id(*self.scope, self.n, length=22)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _generate_config(run: ExportRun) -> GenerateConfig:
    from inspect_ai.model import GenerateConfig  # lazy: optional (export extra)

    return GenerateConfig.model_validate(run.request_params())


def _tools(run: ExportRun) -> list[ToolInfo]:
    """The tools offered to the model (none when the config does not send them)."""
    from inspect_ai.tool import ToolInfo, ToolParams  # lazy: optional (export extra)

    if not run.spec.agent.send_tools:
        return []
    mcp = run.spec.mcp
    if mcp is not None:  # an MCP server's tools, as its spec holds them (docs/mcp.md)
        return [ToolInfo(name=t["name"], description=t["description"],
                         parameters=ToolParams.model_validate(t["parameters"]))
                for p in mcp.parts() for t in p.tools]
    return [ToolInfo(name=n, description=TOOLS[n].description,
                     parameters=ToolParams.model_validate(json_schema(n)))
            for n in run.spec.tools if n in TOOLS]


def _score(run: ExportRun) -> Score:
    from inspect_ai.scorer import Score  # lazy: optional (export extra)

    v = run.verification
    findings = [f.to_json() for f in v.findings]
    explanation = ("no findings: every figure in the answer comes from a tool result"
                   if v.verified else "; ".join(f.message for f in v.findings))
    return Score(value="C" if v.verified else "I", answer=run.trace.end.answer,
                 explanation=explanation,
                 metadata={"verified": v.verified, "findings": findings})


def _guardrail_data(rec: Guardrail) -> dict[str, Any]:
    data = {k: v for k, v in rec.to_json().items() if k != "type"}
    data["text"] = GUARDRAIL_TEXT.get(rec.rule, rec.rule)
    return data


class _Sample:
    """One sample's messages and events as they are built, record by record, in Inspect's
    own span layout; the identifiers come from one counter (:class:`_Ids`), in the order
    the messages and events are made."""

    def __init__(self, run: ExportRun, eval_id: str) -> None:
        from inspect_ai.model import (  # lazy: optional (export extra)
            ChatMessageSystem,
            ChatMessageUser,
            ModelOutput,
            ModelUsage,
        )

        self.run = run
        self.next_id = _Ids("inspect", eval_id, run.key)
        self.model = f"{run.provider}/{run.model}"
        self.tools = _tools(run)
        self.config = _generate_config(run)
        self.delimit = run.spec.agent.defences.delimit_tool_output
        self.ensure_ascii = run.tool_results_ascii  # as the session wrote them (trace header)
        self.calls = run.calls_by_step()
        self.first: list[ChatMessage] = []
        if run.system_prompt_sent:  # as the session said (trace header)
            self.first.append(ChatMessageSystem(
                id=self.next_id(), content=run.spec.agent.system_prompt, source="input"))
        self.first.append(ChatMessageUser(id=self.next_id(), content=run.trace.header.question,
                                          source="input"))
        self.messages: list[ChatMessage] = list(self.first)
        self.events: list[Any] = []
        self.spans: list[str] = []  # the open spans, innermost last
        self.usage = ModelUsage()
        self.output: ModelOutput = ModelOutput(model=self.model)
        self.error: EvalError | None = None
        self.limit: EvalSampleLimit | None = None
        self.cursor = 0  # ns after the run's start: events never go back in time

    def begin(self, name: str, kind: str, ns: int) -> None:
        from inspect_ai.event import SpanBeginEvent  # lazy: optional (export extra)

        span = self.next_id()
        self.events.append(SpanBeginEvent(
            uuid=self.next_id(), span_id=span, timestamp=_at(ns), working_start=ns / 1e9,
            id=span, name=name, type=kind, parent_id=self.spans[-1] if self.spans else None))
        self.spans.append(span)

    def finish(self, ns: int) -> None:
        from inspect_ai.event import SpanEndEvent  # lazy: optional (export extra)

        span = self.spans.pop()
        self.events.append(SpanEndEvent(uuid=self.next_id(), span_id=span, timestamp=_at(ns),
                                        working_start=ns / 1e9, id=span))

    def add(self, event: Any) -> None:
        event.span_id = self.spans[-1]
        self.events.append(event)

    def when(self, ns: int) -> int:
        self.cursor = max(self.cursor, ns)
        return self.cursor

    def record(self, rec: Record) -> None:
        """Add the messages and events of one trace record."""
        if isinstance(rec, Request):
            self.request(rec)
        elif isinstance(rec, ToolCallRecord):
            self.tool_call(rec)
        elif isinstance(rec, Guardrail):
            self.guardrail(rec)
        elif isinstance(rec, Error):
            self.backend_error(rec)
        elif not isinstance(rec, Answer):  # the answer is the last assistant message
            raise TypeError(f"unexpected record {rec!r:.80}")

    def request(self, rec: Request) -> None:
        """A model turn: the assistant message and its ``ModelEvent``."""
        from inspect_ai.event import ModelEvent  # lazy: optional (export extra)
        from inspect_ai.model import (  # lazy: optional (export extra)
            ChatCompletionChoice,
            ChatMessageAssistant,
            ModelOutput,
            ModelUsage,
        )
        from inspect_ai.tool import ToolCall  # lazy: optional (export extra)

        run = self.run
        step_calls = self.calls.get(rec.step, [])
        assistant = ChatMessageAssistant(
            id=self.next_id(), content=rec.text, source="generate", model=run.model,
            tool_calls=[ToolCall(id=c.id, function=c.name or "",
                                 arguments=c.arguments or {},
                                 parse_error=(None if c.arguments is not None
                                              else f"arguments not a JSON object: "
                                                   f"{c.raw!r}"))
                        for c in step_calls] or None)
        turn = ModelUsage(input_tokens=rec.tokens_sent, output_tokens=rec.tokens_out,
                          total_tokens=rec.tokens_sent + rec.tokens_out)
        self.usage = self.usage + turn
        self.output = ModelOutput(
            model=self.model, completion=rec.text, usage=turn, time=0.5,
            choices=[ChatCompletionChoice(
                message=assistant,
                stop_reason="tool_calls" if step_calls else "stop")])
        start, end = step_window(rec.step)
        meta: dict[str, Any] = {"step": rec.step, "attempts": rec.attempts,
                                "cumulative_tokens": rec.cumulative_tokens}
        if rec.decoding is not None:
            meta["decoding"] = rec.decoding
        self.add(ModelEvent(
            uuid=self.next_id(), timestamp=_at(self.when(start)), working_start=start / 1e9,
            completed=_at(end), working_time=(end - start) / 1e9, model=self.model,
            input=list(self.messages), tools=self.tools, tool_choice="auto",
            config=self.config, output=self.output, retries=rec.attempts - 1 or None,
            metadata=meta))
        self.messages.append(assistant)

    def tool_call(self, rec: ToolCallRecord) -> None:
        """A tool call: its ``ToolEvent`` and the tool message, as the session wrote it."""
        from inspect_ai.event import ToolEvent  # lazy: optional (export extra)
        from inspect_ai.model import ChatMessageTool  # lazy: optional (export extra)
        from inspect_ai.tool import ToolCallError  # lazy: optional (export extra)

        step_calls = self.calls[rec.step]
        slot = next(i for i, c in enumerate(step_calls) if c is rec)
        start, end = step_window(rec.step, slot, len(step_calls))
        content = tool_message(rec.result, delimit=self.delimit, ensure_ascii=self.ensure_ascii)
        failure = None
        if rec.status != "ok":
            failure = ToolCallError(type=_ERROR_TYPES.get(rec.status, "unknown"),
                                    message=_text(rec.result.get("error", rec.result)))
        meta: dict[str, Any] = {"step": rec.step, "status": rec.status}
        if rec.raw is not None:
            meta["raw"] = rec.raw
        self.add(ToolEvent(
            uuid=self.next_id(), timestamp=_at(self.when(start)), working_start=start / 1e9,
            completed=_at(end), working_time=(end - start) / 1e9, id=rec.id,
            function=rec.name or "", arguments=rec.arguments or {}, result=content,
            error=failure, failed=True if failure else None, metadata=meta))
        self.messages.append(ChatMessageTool(id=self.next_id(), content=content,
                                             tool_call_id=rec.id, function=rec.name or "",
                                             error=failure))

    def guardrail(self, rec: Guardrail) -> None:
        """A guardrail event: an ``InfoEvent``, and the sample's limit when it ended the
        run (the step limit or the token budget)."""
        from inspect_ai.event import InfoEvent, SampleLimitEvent  # lazy: optional (export extra)
        from inspect_ai.log import EvalSampleLimit  # lazy: optional (export extra)

        ns = self.when((rec.step - 1) * STEP_NS)
        data = _guardrail_data(rec)
        self.add(InfoEvent(uuid=self.next_id(), timestamp=_at(ns), working_start=ns / 1e9,
                           source=GUARDRAIL_SOURCE, data=data))
        limit_type = _LIMITS.get(rec.rule)
        if limit_type is not None:
            value = (rec.step if rec.rule == "step_limit"
                     else self.run.spec.limits.token_budget or 0)
            self.add(SampleLimitEvent(
                uuid=self.next_id(), timestamp=_at(ns), working_start=ns / 1e9,
                type=limit_type, message=data["text"], limit=float(value)))
            self.limit = EvalSampleLimit(type=limit_type, limit=float(value),
                                         reason=data["text"])

    def backend_error(self, rec: Error) -> None:
        """A backend error: a ``ModelEvent`` with the error, and the sample's error."""
        from inspect_ai.event import ModelEvent  # lazy: optional (export extra)
        from inspect_ai.log import EvalError  # lazy: optional (export extra)
        from inspect_ai.model import ModelOutput  # lazy: optional (export extra)

        start, end = step_window(rec.step)
        text = (f"{rec.kind}" + (f" (HTTP {rec.status})" if rec.status is not None else "")
                + f" after {rec.attempts} attempt(s): {rec.message}")
        self.add(ModelEvent(
            uuid=self.next_id(), timestamp=_at(self.when(start)), working_start=start / 1e9,
            completed=_at(end), working_time=(end - start) / 1e9, model=self.model,
            input=list(self.messages), tools=self.tools, tool_choice="auto",
            config=self.config, output=ModelOutput(model=self.model, error=text), error=text,
            retries=rec.attempts - 1 or None,
            metadata={"step": rec.step, "kind": rec.kind, "status": rec.status,
                      "retryable": rec.retryable, "history": rec.history}))
        self.error = EvalError(message=text, traceback="", traceback_ansi="")


def _sample_metadata(run: ExportRun) -> dict[str, Any]:
    """The sample's metadata: the run's keys and outcome, and its guardrail events."""
    tr = run.trace
    return {
        "run": run.key, "task": run.task, "backend": run.backend, "scenario": run.scenario,
        "trial": run.trial, "termination": tr.end.termination, "steps": tr.end.steps,
        "tokens_sent": tr.end.tokens_sent, "calls": tr.end.calls, "errors": tr.end.errors,
        "verified": run.verification.verified, "defences": tr.header.defences,
        "guardrails": [_guardrail_data(g) for g in run.guardrails()],
        "config_hash": tr.header.config_hash, "trace_sha256": tr.end.sha256,
        # a framework's run names its agent and ending (the lesson loop's runs: neither)
        **({"agent": run.agent, "ending": tr.end.ending} if run.agent is not None else {}),
    }


def build_sample(run: ExportRun, eval_id: str) -> EvalSample:
    """The sample (one epoch) of one run."""
    from inspect_ai.dataset import Sample  # lazy: optional (export extra)
    from inspect_ai.event import SampleInitEvent, ScoreEvent  # lazy: optional (export extra)
    from inspect_ai.log import EvalSample, condense_events  # lazy: optional (export extra)

    tr = run.trace
    b = _Sample(run, eval_id)
    # Inspect's own layout of a sample's events: init, then the solvers (here the agent
    # loop), then the scorers, each a span.
    b.begin("init", "init", 0)
    b.add(SampleInitEvent(uuid=b.next_id(), timestamp=_at(0), working_start=0.0,
                          sample=Sample(id=run.scenario, input=list(b.first), target="")))
    b.finish(0)
    b.begin("solvers", "solvers", 0)
    b.begin("reactlab_agent_loop", "solver", 0)
    for rec in tr.records:
        b.record(rec)
    end_ns = b.when(tr.end.steps * STEP_NS)
    b.finish(end_ns)
    b.finish(end_ns)
    score = _score(run)
    b.begin("scorers", "scorers", end_ns)
    b.begin(SCORER, "scorer", end_ns)
    b.add(ScoreEvent(uuid=b.next_id(), timestamp=_at(end_ns), working_start=end_ns / 1e9,
                     score=score, target="", scorer=SCORER))
    b.finish(end_ns)
    b.finish(end_ns)
    condensed, pools = condense_events(b.events)
    return EvalSample(
        id=run.scenario, epoch=run.trial or 1, input=b.first, target="", messages=b.messages,
        output=b.output, scores={SCORER: score}, metadata=_sample_metadata(run),
        events=condensed, events_data=pools,
        model_usage={b.model: b.usage} if tr.requests() else {},
        started_at=EPOCH.isoformat(), completed_at=_iso(end_ns),
        total_time=end_ns / 1e9, working_time=end_ns / 1e9,
        uuid=derived_id("inspect-sample", eval_id, run.key, length=22), error=b.error,
        limit=b.limit)


def build_log(runs: Sequence[ExportRun]) -> EvalLog:
    """The eval log of one (task, backend) group of runs."""
    from inspect_ai.log import (  # lazy: optional (export extra)
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelUsage  # lazy: optional (export extra)

    if not runs or len({(r.task, r.backend) for r in runs}) != 1:
        raise ExportError("an Inspect log holds the runs of one (task, backend)")
    head = runs[0]
    task, backend = head.task, head.backend
    run_id = derived_id("inspect-run", *(f"{r.key}:{r.trace.end.sha256}" for r in runs),
                        length=22)
    eval_id = derived_id("inspect-eval", task, backend, run_id, length=22)
    seen: dict[tuple[str, int], str] = {}
    for r in runs:
        sample = (r.scenario, r.trial or 1)
        if sample in seen:
            raise ExportError(f"runs {seen[sample]} and {r.key} would both be epoch "
                              f"{sample[1]} of sample {sample[0]!r} of {task}/{backend}")
        seen[sample] = r.key
    samples = [build_sample(r, eval_id) for r in runs]
    sample_ids = sorted({str(s.id) for s in samples})
    epochs = max(s.epoch for s in samples)
    usage: dict[str, ModelUsage] = {}
    for s in samples:
        for name, u in s.model_usage.items():
            usage[name] = usage[name] + u if name in usage else u
    verified = sum(r.verification.verified for r in runs)
    configured = getattr(head.backend_config, "model", None)
    group_model = f"{head.provider}/{head.model if configured else head.backend_config.mode}"
    versions = head.trace.header.versions
    spec = EvalSpec(
        eval_id=eval_id, run_id=run_id, created=EPOCH.isoformat(), task=task,
        task_id=task_id(task, backend), task_version=0,
        task_attribs={"question": head.trace.header.question, "tools": list(head.spec.tools)},
        dataset=EvalDataset(name=task, samples=len(sample_ids), sample_ids=sample_ids),
        model=group_model, model_generate_config=_generate_config(head),
        config=EvalConfig(epochs=epochs), packages={"reactlab": versions.get("reactlab", "")},
        metadata={"backend": backend, "backend_config": head.backend_config.to_dict(),
                  "exported_by": "reactlab export inspect",
                  "time_axis": "traces carry no clock: each run starts at 2000-01-01T00:00:00Z "
                               "and each step of the agent loop is one second"})
    results = EvalResults(
        total_samples=len(samples), completed_samples=len(samples),
        scores=[EvalScore(name=SCORER, scorer=SCORER, scored_samples=len(samples),
                          unscored_samples=0,
                          metrics={"accuracy": EvalMetric(name="accuracy",
                                                          value=verified / len(samples))})])
    last = max(r.trace.end.steps for r in runs) * STEP_NS
    return EvalLog(
        status="success", eval=spec,
        plan=EvalPlan(steps=[EvalPlanStep(solver="reactlab_agent_loop",
                                          params={"strategy": head.strategy})]),
        results=results,
        stats=EvalStats(started_at=EPOCH.isoformat(), completed_at=_iso(last),
                        model_usage=usage),
        samples=samples)


def write_logs(pairs: Iterable[tuple[str | Path, str | Path]], out_dir: str | Path
               ) -> list[Path]:
    """Write one log per (task, backend) of the (trace, verification) pairs into
    ``out_dir`` (published whole, with a checksum manifest); returns the paths written."""
    require("inspect_ai", "the Inspect export")
    from inspect_ai.log import write_eval_log  # lazy: optional (export extra)

    groups = group_runs(load_runs(pairs))
    out_dir = Path(out_dir)
    names = [log_name(task, backend) for task, backend in groups]

    def write(tmp: Path) -> list[Path]:
        paths = []
        for name, runs in zip(names, groups.values(), strict=True):
            path = tmp / name
            write_eval_log(build_log(runs), str(path), format="json")
            paths.append(path)
        return paths

    publish_dir(out_dir, write)
    return [out_dir / n for n in names]


def export_job(traces: Sequence[str], verified: Sequence[str], out_dir: str) -> str:
    """The pipeline's job (and the CLI's): write the logs; returns the summary line."""
    if len(traces) != len(verified):
        raise ExportError("export inspect: traces and verifications must pair up")
    written = write_logs(zip(traces, verified, strict=True), out_dir)
    return f"wrote {len(written)} Inspect logs ({len(traces)} runs) to {out_dir}"

