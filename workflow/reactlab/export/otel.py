"""OpenTelemetry GenAI spans: one OTLP JSON file per run, written with the OTel SDK.

Each run becomes one trace, written by the SDK's own OTLP JSON file exporter
(``opentelemetry-exporter-otlp-json-file``) as one line: an ``ExportTraceServiceRequest``
in the protobuf JSON mapping, the format of the OTLP file exporter and of the
collector's ``otlpjsonfile`` receiver. Its spans follow the GenAI semantic conventions:

* ``invoke_agent reactlab`` (INTERNAL), the whole run: ``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.agent.name``, ``gen_ai.conversation.id`` (the run
  key), ``gen_ai.request.model``, the run's total ``gen_ai.usage.input_tokens`` /
  ``output_tokens``, the question (after the system prompt, where the trace header says
  the session sent it) as ``gen_ai.input.messages`` and the answer as
  ``gen_ai.output.messages``; ``error.type`` and an ERROR status when the run ended
  without an answer (its termination: ``step_limit``, ``token_budget``,
  ``backend_error``, ``plan_failed``); an event per guardrail (``reactlab.guardrail``,
  with ``error.type`` = the rule and ``gen_ai.tool.call.id`` for a call it stopped); the
  verifier's verdict as a ``gen_ai.evaluation.result`` event (``gen_ai.evaluation.name``
  ``verifier``, ``score.value`` 1 or 0, ``score.label`` ``verified`` / ``rejected``,
  ``explanation``: the findings);
* ``chat {model}`` (CLIENT), one per request, a child of the agent span: the request
  parameters (``gen_ai.request.max_tokens``: the backend's output-token cap, whichever
  config key sets it), the tokens sent and received, ``gen_ai.response.finish_reasons`` and the
  model's turn as ``gen_ai.output.messages``; a backend error is an ERROR status with
  ``error.type`` (its kind) and ``http.response.status_code``;
* ``execute_tool {tool}`` (INTERNAL), one per call, a child of the agent span as well
  (the tool runs after the model's turn, not inside it) with a link to the ``chat`` span
  that asked for it: ``gen_ai.tool.name`` / ``type`` / ``call.id`` /
  ``call.arguments`` / ``call.result``; a call not executed as asked is an ERROR with
  ``error.type`` its status (``invalid``, ``unknown``, ``error``, ``repeated``,
  ``blocked``).

Every attribute name is one of the package ``opentelemetry-semantic-conventions``
(``tests/test_exports.py`` checks them all). Times are the step axis of
:mod:`reactlab.export`; trace and span ids come from a deterministic id generator seeded
with the run key and the trace's checksum; the resource is built explicitly (no
detectors, no environment variables) with a pinned ``service.instance.id``; the sampler
and the span limits are explicit too, so ``OTEL_*`` variables cannot change the bytes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.core.io import write_text_atomic
from reactlab.export import (
    EPOCH_NS,
    STEP_NS,
    ExportError,
    ExportRun,
    derived_id,
    load_runs,
    require,
    step_window,
)
from reactlab.trace.integrity import publish_dir
from reactlab.trace.records import Answer, Error, Guardrail, Request, ToolCallRecord

__all__ = ["AGENT_NAME", "export_job", "run_path", "spans_json", "write_spans"]

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import Span, Tracer

AGENT_NAME = "reactlab"
SCOPE = "reactlab.export.otel"
# Attribute keys: every one is in opentelemetry-semantic-conventions (tests check them).
OP, PROVIDER, MODEL = "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"
IN_TOKENS, OUT_TOKENS = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
ERROR_TYPE = "error.type"


def run_path(key: str) -> str:
    """The file of one run, relative to the export folder: ``{key}.jsonl``."""
    return f"{key}.jsonl"


def _id_generator(scope: str) -> IdGenerator:
    """The SDK's id generator, deterministic: ids are hashes of ``scope`` (the run) and a
    counter. The class is made here: subclassing the SDK's at module top would import
    opentelemetry with this module."""
    # lazy: optional (export extra)
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class Ids(IdGenerator):
        def __init__(self) -> None:
            self.spans = 0

        def generate_trace_id(self) -> int:
            return int(derived_id("otel-trace", scope, length=32), 16) or 1

        def generate_span_id(self) -> int:
            self.spans += 1
            return int(derived_id("otel-span", scope, self.spans, length=16), 16) or 1

        def is_trace_id_random(self) -> bool:
            return False

    return Ids()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _messages(role: str, text: str | None, calls: Sequence[ToolCallRecord] = (),
              finish: str | None = None) -> str:
    """Messages in the GenAI conventions' JSON shape (``parts`` of text and tool calls)."""
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"type": "text", "content": text})
    for c in calls:
        parts.append({"type": "tool_call", "id": c.id, "name": c.name,
                      "arguments": c.arguments if c.arguments is not None else c.raw})
    message: dict[str, Any] = {"role": role, "parts": parts}
    if finish is not None:
        message["finish_reason"] = finish
    return _json([message])


def _tracer(run: ExportRun, exporter: SpanExporter) -> tuple[TracerProvider, Tracer]:
    from opentelemetry.sdk.resources import Resource  # lazy: optional (export extra)
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider  # lazy: optional (export extra)
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # lazy: optional (export extra)
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON  # lazy: optional (export extra)

    resource = Resource({
        "service.name": "reactlab",
        "service.version": run.trace.header.versions.get("reactlab", ""),
        "service.instance.id": derived_id("otel-instance", run.key),
    })
    limits = SpanLimits(max_attributes=128, max_span_attributes=128, max_events=128,
                        max_links=128, max_event_attributes=128, max_link_attributes=128,
                        max_attribute_length=SpanLimits.UNSET,
                        max_span_attribute_length=SpanLimits.UNSET)
    provider = TracerProvider(sampler=ALWAYS_ON, resource=resource, shutdown_on_exit=False,
                              id_generator=_id_generator(f"{run.key}:{run.trace.end.sha256}"),
                              span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, provider.get_tracer(SCOPE, run.trace.header.versions.get("reactlab"))


def _agent_span(run: ExportRun, tracer: Tracer) -> Span:
    """The run's ``invoke_agent`` span, started: the question in, the run's tokens."""
    from opentelemetry.trace import SpanKind  # lazy: optional (export extra)

    tr = run.trace
    question: list[dict[str, Any]] = []
    agent = run.spec.agent
    if run.system_prompt_sent:  # as the session said (trace header)
        question.append({"role": "system", "parts": [{"type": "text",
                                                      "content": agent.system_prompt}]})
    question.append({"role": "user", "parts": [{"type": "text", "content": tr.header.question}]})
    agent_name = run.agent or AGENT_NAME  # a framework's agent, or the lesson's loop
    out_tokens = sum(r.tokens_out for r in tr.requests())
    root = tracer.start_span(
        f"invoke_agent {agent_name}", kind=SpanKind.INTERNAL, start_time=EPOCH_NS,
        attributes={OP: "invoke_agent", PROVIDER: run.provider, MODEL: run.model,
                    "gen_ai.agent.name": agent_name,
                    "gen_ai.conversation.id": run.key, IN_TOKENS: tr.end.tokens_sent,
                    OUT_TOKENS: out_tokens, "gen_ai.input.messages": _json(question)})
    if not root.is_recording():
        raise ExportError("the OpenTelemetry SDK is disabled (OTEL_SDK_DISABLED is set): "
                          "no span can be recorded")
    return root


def _chat_attributes(run: ExportRun) -> dict[str, Any]:
    """What every ``chat`` span of the run says: the operation, provider, model and
    request parameters, and the conversation."""
    return {OP: "chat", PROVIDER: run.provider, MODEL: run.model,
            **{f"gen_ai.request.{k}": v for k, v in run.request_params().items()},
            "gen_ai.conversation.id": run.key}


def _chat_span(run: ExportRun, tracer: Tracer, parent: Context, rec: Request,
               step_calls: Sequence[ToolCallRecord]) -> Span:
    """One request's ``chat`` span (ended): tokens, finish reason, the model's turn."""
    from opentelemetry.trace import SpanKind  # lazy: optional (export extra)

    start, stop = step_window(rec.step)
    finish = "tool_call" if step_calls else "stop"
    span = tracer.start_span(
        f"chat {run.model}", context=parent, kind=SpanKind.CLIENT,
        start_time=EPOCH_NS + start,
        attributes={**_chat_attributes(run), IN_TOKENS: rec.tokens_sent,
                    OUT_TOKENS: rec.tokens_out, "gen_ai.response.model": run.model,
                    "gen_ai.response.finish_reasons": [finish],
                    "gen_ai.output.messages": _messages("assistant", rec.text,
                                                        step_calls, finish)})
    span.end(end_time=EPOCH_NS + stop)
    return span


def _tool_span(tracer: Tracer, parent: Context, rec: ToolCallRecord,
               step_calls: Sequence[ToolCallRecord], chat: Span | None) -> None:
    """One call's ``execute_tool`` span, linked to the ``chat`` span that asked for it;
    an ERROR when the call was not executed as asked."""
    from opentelemetry.trace import (  # lazy: optional (export extra)
        Link,
        SpanKind,
        Status,
        StatusCode,
    )

    slot = next(i for i, c in enumerate(step_calls) if c is rec)
    start, stop = step_window(rec.step, slot, len(step_calls))
    name = rec.name or ""
    attributes: dict[str, Any] = {
        OP: "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": rec.id,
        "gen_ai.tool.call.arguments": (_json(rec.arguments) if rec.arguments is not None
                                       else str(rec.raw)),
        "gen_ai.tool.call.result": _json(rec.result)}
    if rec.status != "ok":
        attributes[ERROR_TYPE] = rec.status
    links = [Link(chat.get_span_context())] if chat is not None else []
    span = tracer.start_span(f"execute_tool {name}".rstrip(), context=parent,
                             kind=SpanKind.INTERNAL, start_time=EPOCH_NS + start,
                             attributes=attributes, links=links)
    if rec.status != "ok":
        span.set_status(Status(StatusCode.ERROR, rec.status))
    span.end(end_time=EPOCH_NS + stop)


def _error_span(run: ExportRun, tracer: Tracer, parent: Context, rec: Error) -> None:
    """A backend error: a ``chat`` span with an ERROR status, its kind and HTTP status."""
    from opentelemetry.trace import SpanKind, Status, StatusCode  # lazy: optional (export extra)

    start, stop = step_window(rec.step)
    attributes = {**_chat_attributes(run), ERROR_TYPE: rec.kind}
    if rec.status is not None:
        attributes["http.response.status_code"] = rec.status
    span = tracer.start_span(f"chat {run.model}", context=parent,
                             kind=SpanKind.CLIENT, start_time=EPOCH_NS + start,
                             attributes=attributes)
    span.set_status(Status(StatusCode.ERROR, rec.message))
    span.end(end_time=EPOCH_NS + stop)


def _guardrail_event(root: Span, rec: Guardrail) -> None:
    """A guardrail event on the agent span, at the end of its step."""
    event: dict[str, Any] = {ERROR_TYPE: rec.rule}
    if rec.id is not None:
        event["gen_ai.tool.call.id"] = rec.id
    root.add_event("reactlab.guardrail", event,
                   timestamp=EPOCH_NS + max(rec.step - 1, 0) * STEP_NS + STEP_NS - 1)


def _end_agent_span(run: ExportRun, root: Span) -> None:
    """The verifier's verdict, the answer and the run's ending, then the span's end."""
    from opentelemetry.trace import Status, StatusCode  # lazy: optional (export extra)

    end = run.trace.end
    v = run.verification
    root.add_event("gen_ai.evaluation.result", {
        "gen_ai.evaluation.name": "verifier",
        "gen_ai.evaluation.score.value": 1.0 if v.verified else 0.0,
        "gen_ai.evaluation.score.label": "verified" if v.verified else "rejected",
        "gen_ai.evaluation.explanation": "; ".join(f.message for f in v.findings)
        or "no findings"}, timestamp=EPOCH_NS + end.steps * STEP_NS)
    if end.answer is not None:
        root.set_attribute("gen_ai.output.messages",
                           _messages("assistant", end.answer, (), "stop"))
    if end.termination != "answer":
        root.set_attribute(ERROR_TYPE, end.termination)
        root.set_status(Status(StatusCode.ERROR, end.termination))
    root.end(end_time=EPOCH_NS + end.steps * STEP_NS)


def _record_spans(run: ExportRun, tracer: Tracer) -> None:
    """Every span of the run, in the order of its trace's records."""
    from opentelemetry.trace import set_span_in_context  # lazy: optional (export extra)

    root = _agent_span(run, tracer)
    parent = set_span_in_context(root)
    calls = run.calls_by_step()
    chats: dict[int, Span] = {}
    for rec in run.trace.records:
        if isinstance(rec, Request):
            chats[rec.step] = _chat_span(run, tracer, parent, rec, calls.get(rec.step, []))
        elif isinstance(rec, ToolCallRecord):
            _tool_span(tracer, parent, rec, calls[rec.step], chats.get(rec.step))
        elif isinstance(rec, Guardrail):
            _guardrail_event(root, rec)
        elif isinstance(rec, Error):
            _error_span(run, tracer, parent, rec)
        elif not isinstance(rec, Answer):
            raise TypeError(f"unexpected record {rec!r:.80}")
    _end_agent_span(run, root)


def spans_json(run: ExportRun) -> str:
    """The OTLP JSON line of one run (the file exporter's bytes)."""
    # lazy: optional (export extra)
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter

    # lazy: optional (export extra)
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider, tracer = _tracer(run, memory)
    try:
        _record_spans(run, tracer)
    finally:
        provider.shutdown()
    spans = sorted(memory.get_finished_spans(),
                   key=lambda s: (s.start_time, -(s.end_time or 0), s.context.span_id))
    stream = io.StringIO()
    file_exporter = FileSpanExporter(stream=stream)
    if file_exporter.export(spans).name != "SUCCESS":
        raise ExportError(f"{run.key}: the OTLP JSON exporter failed (see the log)")
    return stream.getvalue()


def write_spans(pairs: Iterable[tuple[str | Path, str | Path]], out_dir: str | Path
                ) -> list[Path]:
    """Write one OTLP JSON file per run of the (trace, verification) pairs into
    ``out_dir`` (``{task}/{backend}/{scenario}.jsonl``; published whole, with a checksum
    manifest); returns the paths written."""
    require("opentelemetry.sdk", "the OpenTelemetry export")
    require("opentelemetry.exporter.otlp.json.file", "the OpenTelemetry export")
    runs = load_runs(pairs)
    out_dir = Path(out_dir)
    texts = [(run_path(r.key), spans_json(r)) for r in runs]

    def write(tmp: Path) -> list[Path]:
        for rel, text in texts:
            write_text_atomic(tmp / rel, text)
        return [tmp / rel for rel, _ in texts]

    publish_dir(out_dir, write)
    return [out_dir / rel for rel, _ in texts]


def export_job(traces: Sequence[str], verified: Sequence[str], out_dir: str) -> str:
    """The pipeline's job (and the CLI's): write the span files; returns the summary."""
    if len(traces) != len(verified):
        raise ExportError("export otel: traces and verifications must pair up")
    written = write_spans(zip(traces, verified, strict=True), out_dir)
    return f"wrote {len(written)} OTLP JSON span files to {out_dir}"
