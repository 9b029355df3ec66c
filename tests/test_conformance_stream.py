"""Streaming (SSE) in the in-process simulators and the pipeline's own adapters (issue 10).

The central property: with the backend option ``stream: true`` the adapters read every
answer from server-sent events, and the traces they write are byte-identical to the
non-streamed ones, for every scripted API run of the shipped matrix (faults included).
Then the event sequences, read by the SDKs' own stream helpers.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from reactlab.backends import streaming
from reactlab.config import load
from reactlab.core.errors import ConfigError
from reactlab.runner import run_to_trace
from reactlab.simulate import ScriptedPolicy
from reactlab.simulate import anthropic_messages as sim_anthropic
from reactlab.simulate import openai_responses as sim_openai

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = load(ROOT / "config.yaml")
API_RUNS = [r for r in SHIPPED.runs  # the lesson loop's (a framework brings its client)
            if r.backend_config.provider in ("openai", "anthropic", "openai_chat")
            and r.backend_config.mode == "simulated" and r.framework is None
            and r.mcp is None]  # an MCP task's tools are its server's (test_mcp.py)


@pytest.mark.parametrize("spec", API_RUNS, ids=lambda r: r.key)
def test_streamed_trace_equals_the_non_streamed_one(spec: Any, toolbox: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import reactlab.backends
    import reactlab.backends.retry

    monkeypatch.setattr(reactlab.backends.retry, "default_sleep", lambda seconds: None)
    plain = tmp_path / "plain.jsonl"
    run_to_trace(spec, toolbox, plain)

    opened: list[Any] = []
    streams = []
    real_open, real_check = reactlab.backends.open_session, streaming.is_event_stream

    def open_streamed(s: Any, **kw: Any) -> Any:
        # the trace is written for the same spec; only the session streams (Chat
        # Completions also asks for the usage chunk: stream_options is not counted)
        chat = s.backend_config.provider == "openai_chat"
        extra = {"stream_include_usage": True} if chat else {}
        streamed = dataclasses.replace(s, backend_config=s.backend_config.replace(
            stream=True, **extra))
        opened.append(real_open(streamed, **kw))
        return opened[-1]

    def check(http: Any) -> bool:
        streams.append(real_check(http))
        return streams[-1]

    monkeypatch.setattr(reactlab.backends, "open_session", open_streamed)
    monkeypatch.setattr(streaming, "is_event_stream", check)
    streamed = tmp_path / "streamed.jsonl"
    run_to_trace(spec, toolbox, streamed)
    assert len(opened) == 1 and opened[0].stream
    assert streams  # answers were read through the streaming path ...
    if not spec.script.faults:
        assert all(streams)  # ... and, without a broken-body fault, every one was SSE
    assert streamed.read_bytes() == plain.read_bytes()


def test_the_stream_parity_covers_both_providers_and_the_faults() -> None:
    assert {r.backend_config.provider for r in API_RUNS} == {"openai", "anthropic",
                                                             "openai_chat"}
    assert {"fallo_429_recupera", "fallo_servidor_persistente", "fallo_respuesta_rota",
            "json_invalido", "bucle"} <= {r.scenario for r in API_RUNS}


def test_stream_option_in_the_config_schema(raw_config: dict) -> None:
    from reactlab.config import validate_schema

    raw = copy.deepcopy(raw_config)
    raw["backends"]["openai"]["stream"] = True
    validate_schema(raw)
    raw["backends"]["local"]["stream"] = True
    with pytest.raises(ConfigError):
        validate_schema(raw)
    raw = copy.deepcopy(raw_config)
    raw["backends"]["openai"]["stream"] = "yes"
    with pytest.raises(ConfigError):
        validate_schema(raw)


@pytest.mark.parametrize("content", [
    b'{"model":"m","stream":true,"input":"x"}',
    b'{"stream":true,"input":"{\\"stream\\":true,\\"a\\":1}","model":"m"}',
    b'{"input":[{"stream":true,"x":1}],"model":"m","stream":true}',
    b'{"model": "m", "stream": true, "input": "x"}',
])
def test_unstreamed_removes_only_the_top_level_member(content: bytes) -> None:
    out = streaming.unstreamed(content)
    body = json.loads(content)
    del body["stream"]
    assert json.loads(out) == body and len(out) < len(content)
    assert streaming.unstreamed(out) == out  # nothing to remove any more


# --- the event sequences, read by the SDKs' own stream helpers --------------------------


def _policy(name: str) -> ScriptedPolicy:
    spec = next(r for r in API_RUNS if r.scenario == name)
    return ScriptedPolicy({name: spec.script_obj()}, spec.params, spec.question)


def _openai(name: str) -> openai.OpenAI:
    http = httpx.Client(transport=httpx.MockTransport(sim_openai.handler(_policy(name))))
    return openai.OpenAI(api_key="sk-test", base_url="http://simulado/v1", http_client=http,
                         max_retries=0)


def _anthropic(name: str) -> anthropic.Anthropic:
    http = httpx2.Client(transport=httpx2.MockTransport(sim_anthropic.handler(_policy(name))))
    return anthropic.Anthropic(api_key="sk-test", base_url="http://simulado",
                               http_client=http, max_retries=0)


@pytest.mark.parametrize("name", ["correcto", "json_invalido"])
def test_responses_stream_helper_rebuilds_the_answer(name: str) -> None:
    client = _openai(name)
    question = [{"role": "user", "content": "x"}]
    plain = client.responses.create(model=name, input=question)
    with client.responses.stream(model=name, input=question) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    # the helper returns its parsed subclasses (parsed_arguments=None): compare the data
    assert final.model_dump(exclude_none=True) == plain.model_dump(exclude_none=True)
    assert plain.usage is not None and plain.usage.input_tokens > 0
    calls = len(plain.output)
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == calls
    assert kinds.count("response.function_call_arguments.done") == calls
    assert "response.function_call_arguments.delta" in kinds
    events = list(client.responses.create(model=name, input=question, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_responses_stream_of_a_text_answer() -> None:
    client = _openai("correcto")
    items: list[Any] = [{"role": "user", "content": "x"}]
    for _ in range(2):  # play the two calling steps, then the text answer
        r = client.responses.create(model="correcto", input=items)
        items += [o.model_dump(exclude_none=True) for o in r.output]
        items += [{"type": "function_call_output", "call_id": o.call_id,
                   "output": json.dumps({"resultado": {"cierre": 10 + i}})
                   if o.name == "precio" else json.dumps({"resultado": 10.0})}
                  for i, o in enumerate(r.output)]
    plain = client.responses.create(model="correcto", input=items)
    with client.responses.stream(model="correcto", input=items) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert final.output_text == plain.output_text and "10.00 %" in plain.output_text
    assert kinds == ["response.created", "response.in_progress",
                     "response.output_item.added", "response.content_part.added",
                     *["response.output_text.delta"] * kinds.count(
                         "response.output_text.delta"),
                     "response.output_text.done", "response.content_part.done",
                     "response.output_item.done", "response.completed"]
    assert kinds.count("response.output_text.delta") > 1


@pytest.mark.parametrize("name", ["correcto", "json_invalido"])
def test_messages_stream_helper_rebuilds_the_answer(name: str) -> None:
    client = _anthropic(name)
    question = [{"role": "user", "content": "x"}]
    plain = client.messages.create(model=name, max_tokens=100, messages=question)
    with client.messages.stream(model=name, max_tokens=100, messages=question) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "input_json" in kinds and "message_delta" in kinds
    assert (final.stop_reason, final.usage.input_tokens, final.usage.output_tokens) == (
        plain.stop_reason, plain.usage.input_tokens, plain.usage.output_tokens)
    assert [b.name for b in final.content] == [b.name for b in plain.content]
    if name == "correcto":  # raw (invalid) arguments cannot round-trip the SDK's JSON parser
        assert [b.input for b in final.content] == [b.input for b in plain.content]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_streamed_run_records_and_replays(provider: str, toolbox: Any,
                                            tmp_path: Path) -> None:
    """The recording of a streamed run keeps the event stream; replayed (streaming again),
    it gives the same trace, which is the non-streamed one."""
    spec = next(r for r in API_RUNS if (r.task, r.backend_config.provider, r.scenario) == (
        "variacion_busi", provider, "json_invalido"))
    streamed = dataclasses.replace(spec, backend_config=spec.backend_config.replace(
        stream=True))
    plain, live, replayed, rec = (tmp_path / n for n in (
        "plain.jsonl", "live.jsonl", "replayed.jsonl", "rec.jsonl"))
    run_to_trace(spec, toolbox, plain)
    run_to_trace(streamed, toolbox, live, recording=rec)
    records = [json.loads(line) for line in rec.read_text().splitlines()]
    assert records and all(r["response"]["headers"]["content-type"] == "text/event-stream"
                           for r in records)
    assert all(r["request"]["body"]["stream"] is True for r in records)
    run_to_trace(streamed, toolbox, replayed, replay=rec)
    assert replayed.read_bytes() == live.read_bytes()
    # the streamed spec's header names the option; everything after it is the plain run's
    assert live.read_text().splitlines()[1:-1] == plain.read_text().splitlines()[1:-1]
