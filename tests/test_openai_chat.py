"""The Chat Completions simulator and the ``openai_chat`` provider.

Read by the official openai SDK (``chat.completions``), in process and over the server's
``POST /v1/chat/completions``: the answer shapes are the SDK's types field for field (no
unknown member anywhere), every content form the API documents is read, malformed
requests get the API's error (message, param, code), streamed answers rebuild the plain
one (also with the SDK's own stream helper), with the usage chunk when asked for. The
adapter sends only what its backend config asks for; a streamed run records and replays.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from reactlab.backends.openai_chat import OpenAIChatSession
from reactlab.config import RunSpec, load, load_yaml, parse, validate_schema
from reactlab.config.faults import FaultPlan, parse_plan
from reactlab.core.errors import ConfigError
from reactlab.runner import run_to_trace
from reactlab.simulate import ScriptedPolicy
from reactlab.simulate import openai_chat as sim
from reactlab.simulate.server import ServerThread

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = load(ROOT / "config.yaml")
CHAT_RUNS = [r for r in SHIPPED.runs  # the lesson loop's runs (frameworks: test_agent_*)
             if r.backend == "openai_chat" and r.framework is None
             and r.mcp is None]  # an MCP task's tools are its server's (test_mcp.py)
TIMEOUT = 10.0
TOOLS = [{"type": "function", "function": {
    "name": "precio", "description": "Cierre de una acción.",
    "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}}}}]
QUESTION = [{"role": "user", "content": "¿Cuánto cambió BUSI?"}]


def _policy(name: str) -> ScriptedPolicy:
    spec = next(r for r in CHAT_RUNS if r.scenario == name)
    return ScriptedPolicy({name: spec.script_obj()}, spec.params, spec.question)


def _client(name: str, plan: FaultPlan | None = None) -> openai.OpenAI:
    handle = sim.handler(_policy(name))
    transport = httpx.MockTransport(sim.with_faults(handle, plan) if plan else handle)
    return openai.OpenAI(api_key="sk-test", base_url="http://simulado/v1", max_retries=0,
                         http_client=httpx.Client(transport=transport))


def _post(body: Any, name: str = "correcto", content_type: str = "application/json"
          ) -> httpx.Response:
    handle = sim.handler(_policy(name))
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return handle(httpx.Request("POST", "http://simulado" + sim.ROUTE, content=content,
                                headers={"content-type": content_type}))


def _no_unknown_members(model: Any, where: str = "") -> None:
    """Every member of the answer is a field the SDK's type declares (recursively)."""
    if isinstance(model, BaseModel):
        assert not model.model_extra, f"{where}: unknown members {model.model_extra}"
        for name in type(model).model_fields:
            _no_unknown_members(getattr(model, name), f"{where}.{name}")
    elif isinstance(model, list):
        for i, item in enumerate(model):
            _no_unknown_members(item, f"{where}[{i}]")


# --- answers ------------------------------------------------------------------------------


def test_a_tool_call_answer_in_the_sdks_types() -> None:
    client = _client("correcto")
    r = client.chat.completions.create(model="correcto", messages=QUESTION, tools=TOOLS)
    _no_unknown_members(r)
    assert (r.object, r.created, r.model) == ("chat.completion", 0, "correcto")
    assert r.id.startswith("chatcmpl-") and len(r.choices) == 1
    choice = r.choices[0]
    assert (choice.index, choice.finish_reason, choice.message.role) == (0, "tool_calls",
                                                                         "assistant")
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert [c.id for c in calls] == ["call_0_0", "call_0_1"]
    assert {c.type for c in calls} == {"function"}
    assert [json.loads(c.function.arguments) for c in calls] == [
        {"ticker": "BUSI", "fecha": "2024-03-15"}, {"ticker": "BUSI", "fecha": "2024-03-22"}]
    u = r.usage
    assert u.prompt_tokens > 0 and u.completion_tokens > 0
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    # the same conversation state gives the same id; another state another one
    again = client.chat.completions.create(model="correcto", messages=QUESTION, tools=TOOLS)
    other = client.chat.completions.create(model="correcto", messages=QUESTION)
    assert again.id == r.id != other.id


def _answered(name: str, results: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """QUESTION, an assistant turn calling ``precio`` once per result, and the results."""
    return [*QUESTION,
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function",
                 "function": {"name": "precio", "arguments": "{}"}} for cid, _ in results]},
            *({"role": "tool", "tool_call_id": cid, "content": text} for cid, text in results)]


def test_a_text_answer_and_n_choices() -> None:
    client = _client("titular_inventado")
    messages = _answered("titular_inventado", [("c1", '{"resultado": []}')])
    r = client.chat.completions.create(model="titular_inventado", messages=messages, n=3)
    _no_unknown_members(r)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert {c.finish_reason for c in r.choices} == {"stop"}
    assert {c.message.content for c in r.choices} == {
        'Hubo una noticia: "Busmar Hogar dispara su beneficio un 40 %".'}
    assert all(c.message.tool_calls is None for c in r.choices)


def test_every_content_form_is_read_and_results_pair_by_id() -> None:
    """Parts in every role, results out of order and as text parts: the scripted model
    reads the results in the order of its calls (the calculator gets 20.0/10.0)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": "Usa las herramientas."}]},
        {"role": "developer", "content": "Sé breve.", "name": "guia"},
        {"role": "user", "name": "ana", "content": [
            {"type": "text", "text": "¿Cuánto cambió BUSI?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA",
                                                "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "file", "file": {"file_data": "AAAA", "filename": "a.pdf"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Voy."}],
         "refusal": None, "tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "precio",
                                                           "arguments": "{}"}},
             {"id": "c2", "type": "function", "function": {"name": "precio",
                                                           "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": [
            {"type": "text", "text": '{"resultado": '},
            {"type": "text", "text": '{"cierre": 20.0}}'}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"resultado": {"cierre": 10.0}}'},
    ]
    resp = _post({"model": "correcto", "messages": messages, "tools": TOOLS})
    assert resp.status_code == 200, resp.text
    call = resp.json()["choices"][0]["message"]["tool_calls"][0]
    assert call["id"] == "call_2_0"
    assert json.loads(call["function"]["arguments"]) == {"expresion": "(20.0/10.0 - 1)*100"}
    # the deprecated forms are read too: a function message, an assistant function_call
    old = [*QUESTION, {"role": "assistant", "content": None,
                       "function_call": {"name": "precio", "arguments": "{}"}},
           {"role": "function", "name": "precio", "content": None}]
    resp = _post({"model": "titular_inventado", "messages": old}, "titular_inventado")
    assert resp.status_code == 200, resp.text


def test_the_invalid_json_scenario_sends_an_arguments_string_that_does_not_parse() -> None:
    r = _client("json_invalido").chat.completions.create(model="json_invalido",
                                                          messages=QUESTION, tools=TOOLS)
    args = r.choices[0].message.tool_calls[0].function.arguments
    assert isinstance(args, str) and args.startswith('{"ticker": "BUSI"')
    with pytest.raises(ValueError):
        json.loads(args)


# --- streaming ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["correcto", "json_invalido", "titular_inventado"])
def test_stream_with_usage_rebuilds_the_plain_answer(name: str) -> None:
    client = _client(name)
    messages = (_answered(name, [("c1", '{"resultado": []}')])
                if name == "titular_inventado" else QUESTION)
    plain = client.chat.completions.create(model=name, messages=messages, tools=TOOLS)
    chunks = list(client.chat.completions.create(
        model=name, messages=messages, tools=TOOLS, stream=True,
        stream_options={"include_usage": True}))
    for chunk in chunks:
        _no_unknown_members(chunk)
        assert (chunk.id, chunk.object, chunk.model) == (plain.id, "chat.completion.chunk",
                                                         plain.model)
    *body, last = chunks
    assert last.choices == [] and last.usage == plain.usage  # the usage chunk
    assert all(c.usage is None and len(c.choices) == 1 for c in body)
    assert body[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in body] == [None] * (len(body) - 1) + [
        plain.choices[0].finish_reason]
    message = plain.choices[0].message
    text = "".join(c.choices[0].delta.content or "" for c in body)
    assert text == (message.content or "")
    if message.tool_calls:
        ids = [tc.id for c in body for tc in c.choices[0].delta.tool_calls or [] if tc.id]
        assert ids == [tc.id for tc in message.tool_calls]
        for i, call in enumerate(message.tool_calls):
            pieces = [tc.function.arguments for c in body
                      for tc in c.choices[0].delta.tool_calls or [] if tc.index == i]
            assert "".join(pieces) == call.function.arguments and len(pieces) > 1


def test_stream_without_usage_and_the_sdks_stream_helper() -> None:
    client = _client("correcto")
    plain = client.chat.completions.create(model="correcto", messages=QUESTION, tools=TOOLS)
    raw = client.chat.completions.with_raw_response.create(
        model="correcto", messages=QUESTION, tools=TOOLS, stream=True)
    text = raw.http_response.read().decode()
    assert text.endswith("data: [DONE]\n\n") and "event:" not in text
    assert '"usage"' not in text  # no usage member unless asked for
    with client.chat.completions.stream(model="correcto", messages=QUESTION,
                                        tools=TOOLS) as stream:
        final = stream.get_final_completion()
    assert final.id == plain.id and final.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, c.function.arguments)
            for c in final.choices[0].message.tool_calls] == [
        (c.id, c.function.name, c.function.arguments)
        for c in plain.choices[0].message.tool_calls]


def test_stream_of_n_choices_carries_each_index() -> None:
    client = _client("correcto")
    chunks = list(client.chat.completions.create(model="correcto", messages=QUESTION,
                                                 tools=TOOLS, n=2, stream=True))
    finished = [c.choices[0].index for c in chunks if c.choices[0].finish_reason]
    assert finished == [0, 1]


def test_usage_counts_the_body_without_its_streaming_members() -> None:
    body = {"model": "correcto", "messages": QUESTION, "tools": TOOLS}
    plain = _post(body).json()["usage"]["prompt_tokens"]
    streamed = _post({**body, "stream": True, "stream_options": {"include_usage": True}})
    last = json.loads(streamed.text.split("data: ")[-2])
    assert last["usage"]["prompt_tokens"] == plain
    for content in (b'{"model":"m","stream":true,"stream_options":{"include_usage":true},'
                    b'"messages":[{"role":"user","content":"\\"stream\\":true"}]}',
                    b'{"stream_options": {"include_usage": true}, "model": "m", '
                    b'"stream": true, "messages": []}'):
        out = sim.unstreamed_body(content)
        expected = {k: v for k, v in json.loads(content).items()
                    if k not in ("stream", "stream_options")}
        assert json.loads(out) == expected and len(out) < len(content)
    # a body laid out in another way is still answered (its other members, compact)
    spread = b'{\n  "model": "correcto",\n  "stream" :  true,\n  "messages": []\n}'
    assert json.loads(sim.unstreamed_body(spread)) == {"model": "correcto", "messages": []}
    pretty = json.dumps({**body, "stream": True}, indent=2).encode()
    resp = _post(pretty)
    assert resp.status_code == 200 and resp.text.endswith("data: [DONE]\n\n")


# --- refusals -----------------------------------------------------------------------------

_OK: dict[str, Any] = {"model": "correcto", "messages": QUESTION, "tools": TOOLS}
_CALLS = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "precio", "arguments": "{}"}}]}]


@pytest.mark.parametrize(("change", "param", "code", "message"), [
    ({"model": None}, "model", "missing_required_parameter", "Missing required parameter"),
    ({"messages": []}, "messages", "empty_array", "empty array"),
    ({"messages": "hola"}, "messages", "invalid_type", "expected an array"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "invalid_value",
     "Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and "
     "'developer'."),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content", "invalid_type",
     "expected one of a string or array of objects, but got an integer instead."),
    ({"messages": [{"role": "user", "content": []}]}, "messages[0].content", "empty_array",
     "empty array"),
    ({"messages": [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]},
     "messages[0].content[0].type", "invalid_value", "'input_text'"),
    ({"messages": [{"role": "system", "content": [
        {"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content[0].type", "invalid_value", "Supported values are: 'text'."),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]},
     "messages[0].content[0].text", "missing_required_parameter", "text"),
    ({"messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "x", "format": "ogg"}}]}]},
     "messages[0].content[0].input_audio.format", "invalid_value", "'ogg'"),
    ({"messages": [*_CALLS, {"role": "tool", "content": "x"}]}, "messages.[2].tool_call_id",
     None, "messages with role 'tool' must have a 'tool_call_id'"),
    ({"messages": [*QUESTION, {"role": "tool", "tool_call_id": "c1", "content": "x"}]},
     "messages.[1].role", None, "must be a response to a preceeding message with "
     "'tool_calls'"),
    ({"messages": [*_CALLS, {"role": "tool", "tool_call_id": "c9", "content": "x"}]},
     "messages.[2].role", None, "must be a response to a preceeding message"),
    ({"messages": [*_CALLS, {"role": "user", "content": "y"}]}, "messages.[2].role", None,
     "The following tool_call_ids did not have response messages: c1"),
    ({"messages": _CALLS}, "messages.[1].role", None, "did not have response messages: c1"),
    ({"messages": [*QUESTION, {"role": "assistant", "content": None}]},
     "messages.[1].content", None, "expected a string, got null"),
    ({"messages": [*QUESTION, {"role": "assistant", "tool_calls": []}]},
     "messages[1].tool_calls", "empty_array", "empty array"),
    ({"messages": [*QUESTION, {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "precio", "arguments": {}}}]}]},
     "messages[1].tool_calls[0].function.arguments", "invalid_type", "expected a string"),
    ({"foo": 1}, None, None, "Unrecognized request argument supplied: foo"),
    ({"temperature": 3}, "temperature", "decimal_above_max_value", "<= 2"),
    ({"temperature": True}, "temperature", "invalid_type", "but got a boolean"),
    ({"n": 0}, "n", "integer_below_min_value", ">= 1"),
    ({"max_tokens": 0}, "max_tokens", "integer_below_min_value", ">= 1"),
    ({"max_completion_tokens": 1.5}, "max_completion_tokens", "invalid_type", "integer"),
    ({"stream_options": {"include_usage": True}}, "stream_options", None,
     "only allowed when 'stream' is enabled"),
    ({"stream": True, "stream_options": {"include_usage": "yes"}},
     "stream_options.include_usage", "invalid_type", "a boolean"),
    ({"tools": None, "tool_choice": "auto"}, "tool_choice", None,
     "only allowed when 'tools' are specified"),
    ({"tools": None, "parallel_tool_calls": False}, "parallel_tool_calls", None,
     "only allowed when 'tools' are specified"),
    ({"tool_choice": "sometimes"}, "tool_choice", "invalid_value", "'none', 'auto', and "
     "'required'"),
    ({"tool_choice": {"type": "function", "function": {"name": "cotizacion"}}},
     "tool_choice", "invalid_value", "'cotizacion'"),
    ({"tools": [{"type": "function", "function": {"name": "mal nombre"}}]},
     "tools[0].function.name", "invalid_value", "does not match pattern"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0].type", "invalid_value", "'retrieval'"),
    ({"tools": [{"type": "function"}]}, "tools[0].function", "missing_required_parameter",
     "tools[0].function"),
])
def test_malformed_requests_get_the_apis_400(change: dict[str, Any], param: str | None,
                                             code: str | None, message: str) -> None:
    body = {k: v for k, v in {**copy.deepcopy(_OK), **change}.items() if v is not None}
    resp = _post(body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert set(resp.json()) == {"error"}
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param,
                                                              code)
    assert message in error["message"]
    # and the SDK raises its 400 error with that body (a field it does not know travels
    # in extra_body; without a model the SDK refuses before sending)
    if "model" in body:
        known = {k: v for k, v in body.items() if k != "foo"}
        extra = {k: v for k, v in body.items() if k == "foo"}
        with pytest.raises(openai.BadRequestError) as info:
            _client("correcto").chat.completions.create(**known, extra_body=extra or None)
        assert info.value.body == error


def test_bodies_that_are_not_json_objects_are_refused() -> None:
    assert _post(b"[]").status_code == 400
    assert _post(b'{"model": ').status_code == 400
    assert _post(json.dumps(_OK).encode(), content_type="text/plain").status_code == 400


def test_an_unknown_model_is_the_apis_404() -> None:
    resp = _post({**_OK, "model": "gpt-9"})
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        _client("correcto").chat.completions.create(model="gpt-9", messages=QUESTION)


# --- faults -------------------------------------------------------------------------------


def test_faults_answer_the_openai_error_shapes() -> None:
    client = _client("correcto", FaultPlan(parse_plan([
        {"step": 1, "status": 429, "retry_after": 0.01}])))
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="correcto", messages=QUESTION, tools=TOOLS)
    assert info.value.response.headers["retry-after-ms"] == "10"
    assert info.value.body["code"] == "rate_limit_exceeded"
    ok = client.chat.completions.create(model="correcto", messages=QUESTION, tools=TOOLS)
    assert ok.choices[0].finish_reason == "tool_calls"  # the retry is answered
    client = _client("correcto", FaultPlan(parse_plan([{"step": 1,
                                                        "body": "missing_fields"}])))
    raw = client.chat.completions.with_raw_response.create(model="correcto",
                                                           messages=QUESTION, tools=TOOLS)
    payload = json.loads(raw.http_response.read())
    assert "choices" not in payload and payload["object"] == "chat.completion"


# --- the adapter --------------------------------------------------------------------------


def _spec(scenario: str = "correcto", **config: Any) -> RunSpec:
    spec = next(r for r in CHAT_RUNS if r.scenario == scenario and r.task == "variacion_busi")
    return dataclasses.replace(spec, backend_config=spec.backend_config.replace(**config))


def _bodies(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    original = sim.handler

    def wrapped(policy: Any) -> Any:
        inner = original(policy)

        def handle(request: Any) -> Any:
            seen.append(json.loads(request.content))
            return inner(request)

        return handle

    monkeypatch.setattr(sim, "handler", wrapped)
    return seen


@pytest.mark.parametrize(("config", "keys"), [
    ({}, {"model", "messages", "tools"}),
    ({"stream": True}, {"model", "messages", "tools", "stream"}),
    ({"stream": True, "stream_include_usage": True},
     {"model", "messages", "tools", "stream", "stream_options"}),
])
def test_the_adapter_sends_only_what_is_configured(config: dict[str, Any], keys: set[str],
                                                   toolbox: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = _bodies(monkeypatch)
    end = run_to_trace(_spec(**config), toolbox, tmp_path / "t.jsonl")
    assert end["termination"] == "answer" and len(bodies) == 3
    assert all(set(b) == keys for b in bodies)
    first, last = bodies[0]["messages"], bodies[-1]["messages"]
    assert first == [{"role": "user", "content": _spec().question}]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "tool", "assistant",
                                         "tool"]
    assert last[1]["content"] is None and [c["id"] for c in last[1]["tool_calls"]] == [
        m["tool_call_id"] for m in last[2:4]]
    assert bodies[0]["tools"][0]["type"] == "function"
    assert set(bodies[0]["tools"][0]["function"]) == {"name", "description", "parameters"}


def test_live_sampling_options_and_the_system_prompt_are_sent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    raw = load_yaml(ROOT / "config.yaml")
    raw["live"] = {"enabled": True}
    spec = parse(raw).run("variacion_busi", "openai_chat_live", "react")
    spec = dataclasses.replace(
        spec, backend_config=spec.backend_config.replace(temperature=0, max_tokens=80),
        agent=spec.agent.replace(send_system_prompt=True))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    session = OpenAIChatSession(spec)  # live: nothing is sent until a request
    assert session.extra["temperature"] == 0 and session.extra["max_tokens"] == 80
    assert session.history == [{"role": "system", "content": spec.agent.system_prompt},
                               {"role": "user", "content": spec.question}]
    plain = OpenAIChatSession(parse(raw).run("variacion_busi", "openai_chat_live", "react"))
    assert "max_tokens" not in plain.extra and "temperature" not in plain.extra


@pytest.mark.parametrize("scenario", ["json_invalido", "fallo_429_recupera"])
def test_a_streamed_run_records_and_replays(scenario: str, toolbox: Any,
                                            tmp_path: Path) -> None:
    spec = _spec(scenario)
    streamed = _spec(scenario, stream=True, stream_include_usage=True)
    plain, live, replayed, rec = (tmp_path / n for n in (
        "plain.jsonl", "live.jsonl", "replayed.jsonl", "rec.jsonl"))
    run_to_trace(spec, toolbox, plain)
    run_to_trace(streamed, toolbox, live, recording=rec)
    records = [json.loads(line) for line in rec.read_text().splitlines()]
    assert any(r["response"]["headers"]["content-type"] == "text/event-stream"
               for r in records)
    run_to_trace(streamed, toolbox, replayed, replay=rec)
    assert replayed.read_bytes() == live.read_bytes()
    assert live.read_text().splitlines()[1:-1] == plain.read_text().splitlines()[1:-1]


def test_stream_include_usage_only_on_openai_chat(raw_config: dict) -> None:
    raw = copy.deepcopy(raw_config)
    raw["backends"]["openai_chat"].update(stream=True, stream_include_usage=True)
    validate_schema(raw)
    raw["backends"]["openai"]["stream_include_usage"] = True
    with pytest.raises(ConfigError):
        validate_schema(raw)


def test_the_default_matrix_runs_the_lessons_scenarios_on_chat_completions() -> None:
    by_api = {b: {(r.task, r.scenario) for r in SHIPPED.runs
                  if r.backend == b and r.framework is None and r.mcp is None}
              for b in ("openai", "openai_chat")}
    assert by_api["openai_chat"] == by_api["openai"] and len(CHAT_RUNS) == 23


# --- over the server ----------------------------------------------------------------------


def test_the_server_route_streams_what_the_simulator_streams(loopback: None) -> None:
    body = {**_OK, "stream": True, "stream_options": {"include_usage": True}}
    in_process = _post(body).content
    with ServerThread(SHIPPED) as server, httpx.Client(timeout=TIMEOUT) as http:
        resp = http.post(server.url + sim.ROUTE, content=json.dumps(body).encode(),
                         headers={"content-type": "application/json"})
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.content == in_process
        client = openai.OpenAI(api_key="sk-test", base_url=server.url + "/v1",
                               http_client=http, max_retries=0)
        r = client.chat.completions.create(model="variacion_busi/correcto",
                                           messages=QUESTION, tools=TOOLS)
        assert r.model == "correcto" and r.choices[0].finish_reason == "tool_calls"
        bad = http.post(server.url + sim.ROUTE, json={"model": "correcto", "messages": []})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "empty_array"


_FUZZ_OK: dict[str, Any] = {
    "model": "correcto", "tools": TOOLS, "messages": [
        {"role": "system", "content": "Usa las herramientas."},
        {"role": "user", "content": [{"type": "text", "text": "¿Cuánto cambió BUSI?"}]},
        *_CALLS[1:],
        {"role": "tool", "tool_call_id": "c1",
         "content": [{"type": "text", "text": '{"resultado": {"cierre": 1}}'}]}]}
_FIELDS = {"model", "role", "type", "id", "name", "arguments", "text", "tool_call_id",
           "content", "messages", "tool_calls", "function"}
_WRONG = [5, 1.5, True, [], {}, [None], [5], {"a": 1}, "x"]


def _fuzz_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in _FIELDS:
                out.append((*path, k))
            if k != "parameters":
                out += _fuzz_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _fuzz_paths(v, (*path, i))
    return out


def test_fuzzed_bodies_get_a_shaped_4xx_and_never_a_5xx(loopback: None) -> None:
    """300 seeded corruptions of a valid body (a field of any level given a value of
    another type, a truncated body): a 400 in the API's shape over the socket, the same
    in process, and the server healthy afterwards."""
    sim.validate(copy.deepcopy(_FUZZ_OK))
    rng = random.Random("20261201-chat")
    statuses: dict[int, int] = {}
    with ServerThread(SHIPPED) as server, httpx.Client(timeout=TIMEOUT) as http:
        for _ in range(300):
            body = copy.deepcopy(_FUZZ_OK)
            if rng.random() < 0.85:
                path = rng.choice(_fuzz_paths(body))
                target = body
                for key in path[:-1]:
                    target = target[key]
                wrong = rng.choice([w for w in _WRONG if w != target[path[-1]]])
                target[path[-1]] = wrong
                content = json.dumps(body).encode()
            else:
                raw = json.dumps(body).encode()
                content = raw[: rng.randrange(1, len(raw) - 1)]
            resp = http.post(server.url + sim.ROUTE, content=content,
                             headers={"content-type": "application/json"})
            local = _post(content)
            statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1
            if resp.status_code == 200:  # a corruption the API accepts (e.g. a name)
                continue
            assert 400 <= resp.status_code < 500, resp.text
            assert set(resp.json()) == {"error"}
            assert set(resp.json()["error"]) == {"message", "type", "param", "code"}
            assert (local.status_code, local.json()) == (resp.status_code, resp.json())
        assert http.get(server.url + "/healthz").json()["status"] == "ok"
    assert not any(s >= 500 for s in statuses) and statuses.get(400, 0) > 250, statuses
