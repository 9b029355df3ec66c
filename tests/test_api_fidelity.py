"""What real clients rely on: the simulators' shapes, choices, ids, routes and refusals.

In process (the simulators' handlers, driven by the official SDKs over a MockTransport)
and over loopback (the server): tool_choice and the parallel flags obeyed by the
scripted model on all three APIs and echoed where the API echoes them (Responses; a
chat.completion has no such members); ids derived from the request; Messages arguments that are not
JSON cut off at max_tokens (never a string input); streamed usage with input tokens;
``thread`` refused with ``thread_unsupported_request``; past the end the final answer
repeated; foreign tool results answered; the routes ``count_tokens``, ``input_tokens``,
``GET /v1/models/{id}``, ``GET /v1/responses/{id}``, ``previous_response_id`` and
``GET /``; the Content-Type check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from reactlab.config import load
from reactlab.simulate import ScriptedPolicy
from reactlab.simulate import anthropic_messages as sim_anthropic
from reactlab.simulate import openai_chat as sim_chat
from reactlab.simulate import openai_responses as sim_openai
from reactlab.simulate.server import ServerThread

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = load(ROOT / "config.yaml")
TASK = "variacion_busi"
TIMEOUT = 10.0
QUESTION = [{"role": "user", "content": "¿Cuánto cambió BUSI?"}]
TOOLS_OA = [{"type": "function", "name": n, "parameters": {"type": "object"}}
            for n in ("precio", "calculadora")]
TOOLS_AN = [{"name": n, "input_schema": {"type": "object"}} for n in ("precio", "calculadora")]
TOOLS_CHAT = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
              for n in ("precio", "calculadora")]


def _policy(scenario: str) -> ScriptedPolicy:
    spec = SHIPPED.run(TASK, "openai", scenario)
    return ScriptedPolicy({scenario: spec.script_obj()}, spec.params, spec.question)


def _oa(scenario: str) -> openai.OpenAI:
    http = httpx.Client(transport=httpx.MockTransport(sim_openai.handler(_policy(scenario))))
    return openai.OpenAI(base_url="http://simulado/v1", api_key="x", http_client=http,
                         max_retries=0)


def _chat(scenario: str) -> openai.OpenAI:
    http = httpx.Client(transport=httpx.MockTransport(sim_chat.handler(_policy(scenario))))
    return openai.OpenAI(base_url="http://simulado/v1", api_key="x", http_client=http,
                         max_retries=0)


def _an(scenario: str) -> anthropic.Anthropic:
    http = httpx2.Client(transport=httpx2.MockTransport(
        sim_anthropic.handler(_policy(scenario))))
    return anthropic.Anthropic(base_url="http://simulado", api_key="x", http_client=http,
                               max_retries=0)


def _price(args: dict[str, Any]) -> str:
    return json.dumps({"resultado": {"ticker": args["ticker"], "fecha": args["fecha"],
                                     "cierre": 100.0 if args["fecha"] < "2024-03-20"
                                     else 110.0}})


# --- answers the SDK's own types accept -------------------------------------------------


def test_responses_answer_validates_as_the_sdks_response() -> None:
    """A Response validated (not constructed) by the SDK's model: its usage carries every
    required field (``input_tokens_details.cache_write_tokens`` since openai 3.x), as a
    client that validates the JSON it reads (the Agents SDK's traces do) needs."""
    from openai.types.responses import Response

    http = httpx.Client(transport=httpx.MockTransport(sim_openai.handler(
        _policy("correcto"))))
    raw = http.post("http://simulado/v1/responses", json={
        "model": "correcto", "input": QUESTION, "tools": TOOLS_OA})
    assert raw.status_code == 200
    usage = Response.model_validate(raw.json()).usage
    assert usage is not None and usage.input_tokens_details.cache_write_tokens == 0


# --- tool_choice and the parallel flags ------------------------------------------------


def test_responses_tool_choice_none_required_named_and_echo() -> None:
    oa = _oa("correcto")
    none = oa.responses.create(model="correcto", input=QUESTION, tools=TOOLS_OA,
                               tool_choice="none")
    assert [o.type for o in none.output] == ["message"]  # no call under none
    assert none.tool_choice == "none" and [t.name for t in none.tools] == [
        "precio", "calculadora"]  # echoed as sent
    named = oa.responses.create(model="correcto", input=QUESTION, tools=TOOLS_OA,
                                tool_choice={"type": "function", "name": "calculadora"})
    assert [o.name for o in named.output] == ["calculadora"]
    assert named.tool_choice.name == "calculadora"
    # required on a step that answers: the model calls again instead
    history: list[Any] = [*QUESTION]
    for _ in range(2):
        r = oa.responses.create(model="correcto", input=history, tools=TOOLS_OA)
        history += [o.model_dump(exclude_none=True) for o in r.output]
        history += [{"type": "function_call_output", "call_id": o.call_id,
                     "output": _price(json.loads(o.arguments)) if o.name == "precio"
                     else json.dumps({"resultado": 10.0})} for o in r.output]
    answer = oa.responses.create(model="correcto", input=history, tools=TOOLS_OA)
    assert answer.output[0].type == "message"
    forced = oa.responses.create(model="correcto", input=history, tools=TOOLS_OA,
                                 tool_choice="required")
    assert [o.name for o in forced.output] == ["calculadora"]


def test_responses_answer_validates_as_the_sdks_response_type() -> None:
    # the SDK's ``Response`` requires ``usage.input_tokens_details.cache_write_tokens``;
    # a client that validates the answer (not the SDK's lax parse) refused one without it
    from openai.types.responses import Response

    raw = _oa("correcto").responses.with_raw_response.create(model="correcto",
                                                             input=QUESTION, tools=TOOLS_OA)
    answer = Response.model_validate(json.loads(raw.http_response.content))
    assert answer.usage is not None and answer.usage.input_tokens_details.cache_write_tokens == 0


def test_responses_parallel_off_plays_one_call_per_turn() -> None:
    oa = _oa("correcto")
    history: list[Any] = [*QUESTION]
    names: list[list[str]] = []
    for _ in range(5):
        r = oa.responses.create(model="correcto", input=history, tools=TOOLS_OA,
                                parallel_tool_calls=False)
        assert r.parallel_tool_calls is False
        if r.output[0].type == "message":
            break
        names.append([o.name for o in r.output])
        history += [o.model_dump(exclude_none=True) for o in r.output]
        history += [{"type": "function_call_output", "call_id": o.call_id,
                     "output": _price(json.loads(o.arguments)) if o.name == "precio"
                     else json.dumps({"resultado": 10.0})} for o in r.output]
    assert names == [["precio"], ["precio"], ["calculadora"]]
    assert "10.00 %" in r.output_text  # the script went on as with parallel calls
    ids = [x["call_id"] for x in history if x.get("type") == "function_call"]
    assert len(ids) == len(set(ids)) == 3


def test_messages_tool_choice_and_disable_parallel_tool_use() -> None:
    an = _an("correcto")
    one = an.messages.create(model="correcto", max_tokens=100, messages=QUESTION,
                             tools=TOOLS_AN, tool_choice={
                                 "type": "auto", "disable_parallel_tool_use": True})
    assert [b.name for b in one.content] == ["precio"]
    none = an.messages.create(model="correcto", max_tokens=100, messages=QUESTION,
                              tools=TOOLS_AN, tool_choice={"type": "none"})
    assert [b.type for b in none.content] == ["text"] and none.stop_reason == "end_turn"
    assert "?" in none.content[0].text  # the answer, its unfilled figure written '?'
    tool = an.messages.create(model="correcto", max_tokens=100, messages=QUESTION,
                              tools=TOOLS_AN, tool_choice={"type": "tool",
                                                           "name": "calculadora"})
    assert [b.name for b in tool.content] == ["calculadora"]
    anyc = an.messages.create(model="correcto", max_tokens=100, messages=QUESTION,
                              tools=TOOLS_AN, tool_choice={"type": "any"})
    assert [b.name for b in anyc.content] == ["precio", "precio"]


def _chat_results(calls: list[Any]) -> list[dict[str, Any]]:
    """The assistant message of ``calls`` and the tool messages answering them."""
    return [{"role": "assistant", "tool_calls": [c.model_dump() for c in calls]},
            *({"role": "tool", "tool_call_id": c.id,
               "content": _price(json.loads(c.function.arguments))
               if c.function.name == "precio" else json.dumps({"resultado": 10.0})}
              for c in calls)]


def test_chat_tool_choice_none_required_and_named() -> None:
    chat = _chat("correcto")
    auto = chat.chat.completions.create(model="correcto", messages=QUESTION, tools=TOOLS_CHAT)
    assert [c.function.name for c in auto.choices[0].message.tool_calls] == [
        "precio", "precio"]  # what the script does unforced: two parallel calls
    none = chat.chat.completions.create(model="correcto", messages=QUESTION,
                                        tools=TOOLS_CHAT, tool_choice="none")
    message = none.choices[0].message
    assert message.tool_calls is None and none.choices[0].finish_reason == "stop"
    assert "?" in message.content  # the answer, its unfilled figure written '?'
    named = chat.chat.completions.create(
        model="correcto", messages=QUESTION, tools=TOOLS_CHAT,
        tool_choice={"type": "function", "function": {"name": "calculadora"}})
    assert [c.function.name for c in named.choices[0].message.tool_calls] == ["calculadora"]
    assert named.choices[0].finish_reason == "tool_calls"
    # required on a step that answers: the model calls again instead
    history: list[Any] = [*QUESTION]
    for _ in range(2):
        r = chat.chat.completions.create(model="correcto", messages=history, tools=TOOLS_CHAT)
        history += _chat_results(r.choices[0].message.tool_calls)
    answer = chat.chat.completions.create(model="correcto", messages=history, tools=TOOLS_CHAT)
    assert answer.choices[0].message.tool_calls is None
    assert "10.00 %" in answer.choices[0].message.content
    forced = chat.chat.completions.create(model="correcto", messages=history,
                                          tools=TOOLS_CHAT, tool_choice="required")
    assert [c.function.name for c in forced.choices[0].message.tool_calls] == ["calculadora"]
    # the chat.completion object has no tool_choice / parallel_tool_calls member to echo
    assert "tool_choice" not in forced.model_dump() and not forced.model_extra


def test_chat_parallel_off_plays_one_call_per_turn() -> None:
    chat = _chat("correcto")
    history: list[Any] = [*QUESTION]
    names: list[list[str]] = []
    for _ in range(5):
        r = chat.chat.completions.create(model="correcto", messages=history,
                                         tools=TOOLS_CHAT, parallel_tool_calls=False)
        calls = r.choices[0].message.tool_calls
        if calls is None:
            break
        names.append([c.function.name for c in calls])
        history += _chat_results(calls)
    assert names == [["precio"], ["precio"], ["calculadora"]]
    assert "10.00 %" in r.choices[0].message.content  # the script went on as in parallel
    ids = [c["id"] for m in history for c in m.get("tool_calls", [])]
    assert len(ids) == len(set(ids)) == 3


def test_chat_tool_choice_streamed_equals_plain() -> None:
    chat = _chat("correcto")
    for choice in ("none", {"type": "function", "function": {"name": "calculadora"}}):
        kwargs: dict[str, Any] = {"model": "correcto", "messages": QUESTION,
                                  "tools": TOOLS_CHAT, "tool_choice": choice,
                                  "parallel_tool_calls": False}
        plain = chat.chat.completions.create(**kwargs).choices[0].message
        assert [c.function.name for c in plain.tool_calls or []] == (
            [] if choice == "none" else ["calculadora"])
        with chat.chat.completions.stream(**kwargs) as stream:
            streamed = stream.get_final_completion().choices[0].message
        assert streamed.content == plain.content
        assert [(c.id, c.function.name, c.function.arguments)
                for c in streamed.tool_calls or []] == [
            (c.id, c.function.name, c.function.arguments) for c in plain.tool_calls or []]


def test_tool_choice_naming_a_tool_not_offered_is_refused() -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _oa("correcto").responses.create(model="correcto", input=QUESTION, tools=TOOLS_OA,
                                         tool_choice={"type": "function", "name": "otra"})
    assert info.value.body["param"] == "tool_choice"
    with pytest.raises(openai.BadRequestError) as info:
        _chat("correcto").chat.completions.create(
            model="correcto", messages=QUESTION, tools=TOOLS_CHAT,
            tool_choice={"type": "function", "function": {"name": "otra"}})
    assert info.value.body["param"] == "tool_choice"


# --- ids ------------------------------------------------------------------------------


def test_ids_are_unique_per_conversation_and_equal_streamed() -> None:
    an = _an("correcto")
    first = an.messages.create(model="correcto", max_tokens=100, messages=QUESTION)
    other = an.messages.create(model="correcto", max_tokens=100,
                               messages=[{"role": "user", "content": "otra"}])
    again = an.messages.create(model="correcto", max_tokens=100, messages=QUESTION)
    assert first.id != other.id and first.id == again.id  # deterministic, per request
    assert first.id.startswith("msg_") and first.id != "msg_sim"
    with an.messages.stream(model="correcto", max_tokens=100, messages=QUESTION) as s:
        assert s.get_final_message().id == first.id
    oa = _oa("correcto")
    r1 = oa.responses.create(model="correcto", input=QUESTION)
    r2 = oa.responses.create(model="correcto", input=[{"role": "user", "content": "otra"}])
    assert r1.id != r2.id and r1.id.startswith("resp_")


# --- Messages: invalid arguments as the API can send them; streamed usage ---------------


def test_messages_invalid_arguments_are_cut_off_at_max_tokens() -> None:
    an = _an("json_invalido")
    plain = an.messages.create(model="json_invalido", max_tokens=100, messages=QUESTION)
    (block,) = plain.content
    assert plain.stop_reason == "max_tokens"
    assert block.type == "tool_use" and block.input == {"ticker": "BUSI"}  # an object
    with an.messages.stream(model="json_invalido", max_tokens=100, messages=QUESTION) as s:
        pieces = [e.partial_json for e in s if e.type == "input_json"]
        final = s.get_final_message()
    with pytest.raises(ValueError):
        json.loads("".join(pieces))  # the streamed arguments do not parse
    assert final.stop_reason == "max_tokens" and final.content[0].input == block.input


def test_streamed_message_delta_usage_carries_input_tokens() -> None:
    an = _an("correcto")
    events = list(an.messages.create(model="correcto", max_tokens=100, messages=QUESTION,
                                     stream=True))
    start, delta = events[0], events[-2]
    assert delta.type == "message_delta"
    assert delta.usage.input_tokens == start.message.usage.input_tokens > 0
    assert delta.usage.output_tokens > 0


def test_thread_requests_get_thread_unsupported_request() -> None:
    an = _an("correcto")
    with pytest.raises(anthropic.BadRequestError) as info:
        an.messages.create(model="correcto", max_tokens=100, messages=QUESTION,
                           extra_body={"thread": {"type": "continue",
                                                  "previous_message_id": "msg_x"}})
    error = info.value.body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["details"] == {"error_code": "thread_unsupported_request"}


# --- scripts: past the end, foreign results ----------------------------------------------


def test_asked_to_go_on_after_its_answer_the_model_repeats_it() -> None:
    an = _an("herramienta_equivocada")
    messages: list[Any] = [*QUESTION]
    texts = []
    for _ in range(4):
        m = an.messages.create(model="herramienta_equivocada", max_tokens=100,
                               messages=messages)
        messages.append({"role": "assistant", "content": [
            b.model_dump(exclude_none=True) for b in m.content]})
        if m.stop_reason == "tool_use":
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": "[]"}
                for b in m.content]})
        else:
            texts.append(m.content[0].text)
            messages.append({"role": "user", "content": "Continúa."})
    assert len(texts) == 3 and len(set(texts)) == 1


def test_foreign_tool_results_are_answered() -> None:
    """Bare numbers as tool results: the scripted model reads them as the results."""
    oa = _oa("correcto")
    r = oa.responses.create(model="correcto", input=QUESTION)
    history: list[Any] = [*QUESTION, *[o.model_dump(exclude_none=True) for o in r.output]]
    history += [{"type": "function_call_output", "call_id": o.call_id, "output": v}
                for o, v in zip(r.output, ("191.5", "203.9"), strict=True)]
    r = oa.responses.create(model="correcto", input=history)
    assert json.loads(r.output[0].arguments) == {"expresion": "(203.9/191.5 - 1)*100"}


# --- the server's routes and the Content-Type check --------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    srv = ServerThread(SHIPPED, task=TASK)
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


def test_previous_response_id_and_get_response(server: ServerThread, loopback: None) -> None:
    with httpx.Client(timeout=TIMEOUT) as http:
        oa = openai.OpenAI(base_url=server.url + "/v1", api_key="x", http_client=http,
                           max_retries=0)
        first = oa.responses.create(model="correcto", input=QUESTION, tools=TOOLS_OA)
        outputs = [{"type": "function_call_output", "call_id": o.call_id,
                    "output": _price(json.loads(o.arguments))} for o in first.output]
        chained = oa.responses.create(model="correcto", input=outputs, tools=TOOLS_OA,
                                      previous_response_id=first.id)
        whole = oa.responses.create(model="correcto", tools=TOOLS_OA, input=[
            *QUESTION, *[o.model_dump(exclude_none=True) for o in first.output], *outputs])
        assert chained.output[0].arguments == whole.output[0].arguments  # same conversation
        assert chained.previous_response_id == first.id
        assert oa.responses.retrieve(chained.id).model_dump() == chained.model_dump()
        with pytest.raises(openai.BadRequestError) as bad:
            oa.responses.create(model="correcto", input="x", previous_response_id="resp_no")
        assert bad.value.body["code"] == "previous_response_not_found"
        with pytest.raises(openai.NotFoundError):
            oa.responses.retrieve("resp_no")
        unstored = oa.responses.create(model="correcto", input="y", store=False)
        with pytest.raises(openai.NotFoundError):
            oa.responses.retrieve(unstored.id)
        counted = oa.responses.input_tokens.count(model="correcto", input="hola")
        sent = oa.responses.create(model="correcto", input="hola")  # the same body
        assert counted.input_tokens == sent.usage.input_tokens > 0
        assert oa.models.retrieve("variacion_busi/correcto").id == "variacion_busi/correcto"
        with pytest.raises(openai.NotFoundError):
            oa.models.retrieve("no_existe")


def test_count_tokens_models_and_index(server: ServerThread, loopback: None) -> None:
    with httpx2.Client(timeout=TIMEOUT) as http:
        an = anthropic.Anthropic(base_url=server.url, api_key="x", http_client=http,
                                 max_retries=0)
        counted = an.messages.count_tokens(model="correcto", messages=QUESTION)
        plain = an.messages.create(model="correcto", max_tokens=100, messages=QUESTION)
        assert 0 < counted.input_tokens < plain.usage.input_tokens  # no max_tokens member
        assert an.models.retrieve("correcto").id == "correcto"
        with pytest.raises(anthropic.NotFoundError):
            an.models.retrieve("no_existe")
        with pytest.raises(anthropic.NotFoundError):
            an.messages.count_tokens(model="no_existe", messages=QUESTION)
    index = httpx.get(server.url + "/", timeout=TIMEOUT).json()
    assert "POST /v1/messages/count_tokens" in index["routes"]


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_json_without_its_content_type_is_refused(server: ServerThread, loopback: None,
                                                  content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    with httpx.Client(timeout=TIMEOUT) as http:
        r = http.post(server.url + "/v1/responses", headers=headers,
                      content=json.dumps({"model": "correcto", "input": "x"}))
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "unsupported_content_type"
        assert r.json()["error"]["type"] == "invalid_request_error"
        r = http.post(server.url + "/v1/messages", headers=headers, content=json.dumps(
            {"model": "correcto", "max_tokens": 5, "messages": QUESTION}))
        assert r.status_code == 400 and r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "invalid_request_error"
