"""Conformance: real agent frameworks and the SDKs' stream helpers against the server.

The simulator server (:class:`reactlab.simulate.server.ServerThread` on 127.0.0.1) is
driven by third-party code exactly as a user would point it at the server:

* the OpenAI Agents SDK (``openai-agents``): ``Runner.run`` and ``Runner.run_streamed``;
* pydantic-ai with ``OpenAIResponsesModel`` and ``AnthropicModel``: ``run`` and
  ``run_stream``;
* the SDKs' stream helpers: ``responses.stream()``, ``responses.create(stream=True)``,
  ``messages.stream()``;
* the lesson's own loop (reactlab's adapters) streaming over the socket.

over the scenarios correcto, argumentos_inventados, bucle, herramienta_desconocida,
json_invalido and fallo_429_recupera (a 429 with retry-after, then the correct run).
The expected answer of every run that finishes is the one the lesson's loop computes
in process for the same scenario (not a literal). Every response status is recorded by
an httpx event hook, so e.g. the 429 and each framework's request limit are checked on
the wire. Sockets: loopback only (conftest refuses everything; the fixture lets
127.0.0.1 through).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from reactlab import trace
from reactlab.config import RunSpec, load
from reactlab.runner import run_to_trace
from reactlab.simulate.server import RUN_HEADER, ServerThread
from tests.conftest import ROOT, run_specs

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # never export traces

SHIPPED = load(ROOT / "config.yaml")
TASK = "variacion_busi"
QUESTION = SHIPPED.raw["tasks"][TASK]["question"]
TIMEOUT = 10.0
LIMIT = 6  # each framework's turn / request limit
FINISHING = ["correcto", "argumentos_inventados", "json_invalido", "fallo_429_recupera"]
SCENARIOS = [*FINISHING, "bucle", "herramienta_desconocida"]



@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    srv = ServerThread(SHIPPED, task=TASK)
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


def _spec(scenario: str, provider: str = "openai") -> RunSpec:
    return next(r for r in SHIPPED.runs if (r.task, r.backend, r.scenario) == (
        TASK, provider, scenario))


@pytest.fixture(scope="module")
def lesson_answers(tmp_path_factory: pytest.TempPathFactory,
                   toolbox: Any) -> dict[str, str | None]:
    """The final answer of the lesson's loop, in process, per scenario (the expectation)."""
    ran = run_specs([_spec(s) for s in SCENARIOS], toolbox, tmp_path_factory.mktemp("lesson"))
    return {r.spec.scenario: trace.read(r.trace).end.answer for r in ran}


def _tool(toolbox: Any, name: str, **args: Any) -> str:
    """A tool as the lesson runs it: errors come back as data, JSON as the APIs get it."""
    return json.dumps(toolbox.execute(name, args))


class Wire:
    """Statuses of every response a client got (an httpx / httpx2 response hook)."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.streams = 0

    async def hook(self, response: Any) -> None:
        self.statuses.append(response.status_code)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            self.streams += 1

    def headers(self) -> dict[str, str]:
        return {RUN_HEADER: uuid.uuid4().hex}  # one fault-plan run per client


def _openai_client(server: ServerThread, wire: Wire) -> openai.AsyncOpenAI:
    http = httpx.AsyncClient(timeout=TIMEOUT, event_hooks={"response": [wire.hook]})
    return openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test",
                              http_client=http, default_headers=wire.headers())


def _anthropic_client(server: ServerThread, wire: Wire) -> anthropic.AsyncAnthropic:
    http = httpx2.AsyncClient(timeout=TIMEOUT, event_hooks={"response": [wire.hook]})
    return anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-test",
                                    http_client=http, default_headers=wire.headers())


def _check_wire(wire: Wire, scenario: str, streamed: bool) -> None:
    ok = [s for s in wire.statuses if s == 200]
    if scenario == "fallo_429_recupera":
        assert wire.statuses[0] == 429 and set(wire.statuses[1:]) == {200}, wire.statuses
    else:
        assert wire.statuses == ok, wire.statuses
    if scenario == "bucle":
        assert len(ok) == LIMIT  # the framework's limit stopped the loop, not the server
    assert wire.streams == (len(ok) if streamed else 0)


# --- OpenAI Agents SDK ------------------------------------------------------------------


def _agents_run(server: ServerThread, toolbox: Any, scenario: str, streamed: bool,
                wire: Wire, **run_config: Any) -> Any:
    from agents import (
        Agent,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)

    @function_tool
    def precio(ticker: str, fecha: str) -> str:
        """Precio de cierre de un ticker en una fecha (AAAA-MM-DD)."""
        return _tool(toolbox, "precio", ticker=ticker, fecha=fecha)

    @function_tool
    def calculadora(expresion: str) -> str:
        """Evalúa una expresión aritmética."""
        return _tool(toolbox, "calculadora", expresion=expresion)

    async def go() -> Any:
        client = _openai_client(server, wire)
        agent = Agent(name="analista", instructions="Usa las herramientas.",
                      tools=[precio, calculadora],
                      model=OpenAIResponsesModel(model=scenario, openai_client=client))
        config = RunConfig(tracing_disabled=True, **run_config)
        try:
            if streamed:
                result = Runner.run_streamed(agent, QUESTION, max_turns=LIMIT,
                                             run_config=config)
                async for _ in result.stream_events():
                    pass
                return result.final_output
            return (await Runner.run(agent, QUESTION, max_turns=LIMIT,
                                     run_config=config)).final_output
        finally:
            await client.close()

    return asyncio.run(go())


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("scenario", FINISHING)
def test_openai_agents_finish_with_the_lessons_answer(
        server: ServerThread, loopback: None, toolbox: Any, lesson_answers: dict[str, Any],
        scenario: str, streamed: bool) -> None:
    wire = Wire()
    answer = _agents_run(server, toolbox, scenario, streamed, wire)
    assert answer == lesson_answers[scenario] and "6.45 %" in answer
    _check_wire(wire, scenario, streamed)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_openai_agents_turn_limit_stops_the_loop(server: ServerThread, loopback: None,
                                                 toolbox: Any, streamed: bool) -> None:
    from agents.exceptions import MaxTurnsExceeded

    wire = Wire()
    with pytest.raises(MaxTurnsExceeded):
        _agents_run(server, toolbox, "bucle", streamed, wire)
    _check_wire(wire, "bucle", streamed)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_openai_agents_unknown_tool(server: ServerThread, loopback: None, toolbox: Any,
                                    lesson_answers: dict[str, Any], streamed: bool) -> None:
    """By default the SDK raises on a tool it does not have; told to return the error to
    the model, it recovers as the lesson's loop does."""
    from agents.exceptions import ModelBehaviorError

    wire = Wire()
    with pytest.raises(ModelBehaviorError, match="cotizacion"):
        _agents_run(server, toolbox, "herramienta_desconocida", streamed, wire)
    assert wire.statuses == [200]
    wire = Wire()
    answer = _agents_run(server, toolbox, "herramienta_desconocida", streamed, wire,
                         tool_not_found_behavior="return_error_to_model")
    assert answer == lesson_answers["herramienta_desconocida"]
    _check_wire(wire, "herramienta_desconocida", streamed)


# --- pydantic-ai ------------------------------------------------------------------------


def _pydantic_ai_run(server: ServerThread, toolbox: Any, scenario: str, provider: str,
                     streamed: bool, wire: Wire) -> Any:
    from pydantic_ai import Agent, UsageLimits

    async def go() -> Any:
        client: Any
        if provider == "openai":
            from pydantic_ai.models.openai import OpenAIResponsesModel
            from pydantic_ai.providers.openai import OpenAIProvider

            client = _openai_client(server, wire)
            model: Any = OpenAIResponsesModel(scenario,
                                              provider=OpenAIProvider(openai_client=client))
        else:
            from pydantic_ai.models.anthropic import AnthropicModel
            from pydantic_ai.providers.anthropic import AnthropicProvider

            client = _anthropic_client(server, wire)
            model = AnthropicModel(scenario, provider=AnthropicProvider(
                anthropic_client=client))
        agent = Agent(model)

        @agent.tool_plain
        def precio(ticker: str, fecha: str) -> str:
            """Precio de cierre de un ticker en una fecha (AAAA-MM-DD)."""
            return _tool(toolbox, "precio", ticker=ticker, fecha=fecha)

        @agent.tool_plain
        def calculadora(expresion: str) -> str:
            """Evalúa una expresión aritmética."""
            return _tool(toolbox, "calculadora", expresion=expresion)

        limits = UsageLimits(request_limit=LIMIT)
        try:
            if streamed:
                async with agent.run_stream(QUESTION, usage_limits=limits) as result:
                    return await result.get_output()
            return (await agent.run(QUESTION, usage_limits=limits)).output
        finally:
            await client.close()

    return asyncio.run(go())


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("scenario", [*FINISHING, "herramienta_desconocida"])
def test_pydantic_ai_finishes_with_the_lessons_answer(
        server: ServerThread, loopback: None, toolbox: Any, lesson_answers: dict[str, Any],
        scenario: str, provider: str, streamed: bool) -> None:
    wire = Wire()
    answer = _pydantic_ai_run(server, toolbox, scenario, provider, streamed, wire)
    assert answer == lesson_answers[scenario] and "6.45 %" in answer
    _check_wire(wire, scenario, streamed)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_pydantic_ai_request_limit_stops_the_loop(server: ServerThread, loopback: None,
                                                  toolbox: Any, provider: str,
                                                  streamed: bool) -> None:
    from pydantic_ai.exceptions import UsageLimitExceeded

    wire = Wire()
    with pytest.raises(UsageLimitExceeded, match="request_limit"):
        _pydantic_ai_run(server, toolbox, "bucle", provider, streamed, wire)
    _check_wire(wire, "bucle", streamed)


# --- the SDKs' stream helpers -----------------------------------------------------------


def test_sdk_stream_helpers_over_the_socket(server: ServerThread, loopback: None) -> None:
    question = [{"role": "user", "content": QUESTION}]
    # the tools offered (a request that offers none is answered in text, as a real API's)
    oa_tools = [{"type": "function", "name": "precio", "parameters": {"type": "object"}}]
    an_tools = [{"name": "precio", "input_schema": {"type": "object"}}]
    with httpx.Client(timeout=TIMEOUT) as http:
        oa = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", http_client=http,
                           max_retries=0)
        plain = oa.responses.create(model="correcto", input=question, tools=oa_tools)
        with oa.responses.stream(model="correcto", input=question, tools=oa_tools) as stream:
            kinds = [e.type for e in stream]
            final = stream.get_final_response()
        events = list(oa.responses.create(model="correcto", input=question, tools=oa_tools,
                                          stream=True))
    assert final.model_dump(exclude_none=True) == plain.model_dump(exclude_none=True)
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.type for e in events] == kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert plain.usage is not None and final.usage == plain.usage  # same body tokens
    with httpx2.Client(timeout=TIMEOUT) as http2:
        an = anthropic.Anthropic(base_url=server.url, api_key="sk-test", http_client=http2,
                                 max_retries=0)
        plain_m = an.messages.create(model="correcto", max_tokens=100, messages=question,
                                     tools=an_tools)
        with an.messages.stream(model="correcto", max_tokens=100, messages=question,
                                tools=an_tools) as ms:
            mkinds = [e.type for e in ms]
            final_m = ms.get_final_message()
        raw = list(an.messages.create(model="correcto", max_tokens=100, messages=question,
                                      tools=an_tools, stream=True))
    assert final_m.model_dump(exclude_none=True) == plain_m.model_dump(exclude_none=True)
    assert [e.type for e in raw][:2] == ["message_start", "content_block_start"]
    assert [e.type for e in raw][-2:] == ["message_delta", "message_stop"]
    assert "input_json" in mkinds and mkinds[-1] == "message_stop"


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_lessons_loop_streaming_over_the_socket(server: ServerThread, loopback: None,
                                                toolbox: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                scenario: str, provider: str) -> None:
    """reactlab's own adapters with ``stream: true`` over the socket write the trace of the
    in-process, non-streamed run, byte for byte."""
    import dataclasses

    import reactlab.backends
    import reactlab.backends.retry
    from tests.test_server import socket_session

    monkeypatch.setattr(reactlab.backends.retry, "default_sleep", lambda seconds: None)
    spec = _spec(scenario, provider)
    in_process = tmp_path / "in_process.jsonl"
    run_to_trace(spec, toolbox, in_process)
    sessions: list[Any] = []

    def open_streamed(s: RunSpec, **_: Any) -> Any:
        streamed = dataclasses.replace(s, backend_config=s.backend_config.replace(stream=True))
        sessions.append(socket_session(streamed, server.url, []))
        return sessions[-1]

    monkeypatch.setattr(reactlab.backends, "open_session", open_streamed)
    over_socket = tmp_path / "over_socket.jsonl"
    run_to_trace(spec, toolbox, over_socket)
    assert len(sessions) == 1 and sessions[0].stream
    assert over_socket.read_bytes() == in_process.read_bytes()
