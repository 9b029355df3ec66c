"""Tests of the simulators served over real HTTP (``reactlab.simulate.server``) on loopback.

The central property: the official SDKs pointed at the server over a real socket write
traces byte-identical to the in-process ``MockTransport`` runs, for every scripted API run
of the shipped matrix. Then the documented shapes and errors as ``curl`` sees them.

Sockets: conftest's autouse fixture refuses every connection; ``loopback`` lets
connections to 127.0.0.1 / localhost / ::1 through and still refuses anything else.
Every request has a timeout and every server is shut down in a ``finally``.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from reactlab import trace
from reactlab.backends import metering_hook
from reactlab.backends.anthropic_messages import AnthropicMessagesSession
from reactlab.backends.openai_chat import OpenAIChatSession
from reactlab.backends.openai_responses import OpenAIResponsesSession
from reactlab.config import RunSpec, load
from reactlab.core.errors import ConfigError
from reactlab.runner import run_to_trace
from reactlab.simulate.server import RUN_HEADER, ServerThread, served_models

ROOT = Path(__file__).resolve().parents[1]
CURL = "/usr/bin/curl"
TIMEOUT = 10.0  # seconds, for every request a test makes
#: the lesson's tools as a raw request offers them (a request with no tools is answered
#: in text, as a real API answers it: docs/simulators.md)
TOOLS_OA = [{"type": "function", "name": n, "parameters": {"type": "object"}}
            for n in ("precio", "calculadora")]
TOOLS_AN = [{"name": n, "input_schema": {"type": "object"}} for n in ("precio", "calculadora")]

SHIPPED = load(ROOT / "config.yaml")
# Every run of the shipped matrix on an API backend: variacion_busi (faults included),
# cierre_acme, noticias_busi and noticias_busi_abril.
API_RUNS = [r for r in SHIPPED.runs  # the lesson loop's (a framework brings its client)
            if r.backend_config.provider in ("openai", "anthropic", "openai_chat")
            and r.backend_config.mode == "simulated" and r.framework is None
            and r.mcp is None]  # an MCP task's tools are its server's (test_mcp.py)



@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    srv = ServerThread(SHIPPED)
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


def test_loopback_fixture_still_refuses_other_hosts(loopback: None) -> None:
    with pytest.raises(RuntimeError, match="not loopback"):
        socket.create_connection(("192.0.2.1", 80), timeout=1)
    with socket.socket() as s, pytest.raises(RuntimeError, match="not loopback"):
        s.connect(("192.0.2.1", 80))


# --- parity with the in-process runs -----------------------------------------------------


def _served_name(spec: RunSpec) -> str:
    """The model name the socket run sends: the script's model name, as in process, except
    for a scenario with faults, which the server knows by the scenario's own name (its
    script's name, e.g. `correcto`, plays without faults)."""
    return spec.scenario if spec.script.faults else spec.script.model


def _metering(session: Any, sent_as: str, counted_as: str,
              seen: list[bytes]) -> Callable[[Any], None]:
    """The adapter's metering hook, counting the body as the in-process run sends it.

    The bodies differ only by the model name when the name had to change
    (:func:`_served_name`); that one JSON string is swapped back before counting, and the
    test checks it occurs exactly once and that nothing else differs.
    """
    from reactlab.backends import streaming

    # a streaming session counts its body without the "stream" member, as in process
    hook = (streaming.metering_hook if session.stream else metering_hook)(session.meter)
    sent, counted = json.dumps(sent_as).encode(), json.dumps(counted_as).encode()

    def count(request: Any) -> None:
        seen.append(bytes(request.content))
        content = request.content
        if sent != counted:
            assert content.count(sent) == 1, content
            content = content.replace(sent, counted)
            assert json.loads(content) == {**json.loads(request.content), "model": counted_as}
        hook(SimpleNamespace(content=content))

    return count


def socket_session(spec: RunSpec, url: str, seen: list[bytes]) -> Any:
    """The adapter's own session, its SDK client swapped for one on a real socket
    (``seen`` collects the bodies it sends)."""
    name, run = _served_name(spec), {RUN_HEADER: uuid.uuid4().hex}
    provider = spec.backend_config.provider
    if provider in ("openai", "openai_chat"):
        session: Any = (OpenAIResponsesSession if provider == "openai"
                        else OpenAIChatSession)(spec)
        session.client.close()
        http = httpx.Client(timeout=TIMEOUT, event_hooks={"request": [
            _metering(session, name, session.model, seen)]})
        session.client = openai.OpenAI(api_key="sk-test", base_url=url + "/v1",
                                       http_client=http, max_retries=0, default_headers=run)
    else:
        session = AnthropicMessagesSession(spec)
        session.client.close()
        http2 = httpx2.Client(timeout=TIMEOUT, event_hooks={"request": [
            _metering(session, name, session.model, seen)]})
        session.client = anthropic.Anthropic(api_key="sk-test", base_url=url,
                                             http_client=http2, max_retries=0,
                                             default_headers=run)
    session.model = name
    return session


@pytest.mark.parametrize("spec", API_RUNS, ids=lambda r: r.key)
def test_sdk_over_socket_writes_the_in_process_trace(
        spec: RunSpec, server: ServerThread, toolbox: Any, tmp_path: Path,
        loopback: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import reactlab.backends.retry

    # The waits between attempts are recorded in the trace; nothing needs to wait them.
    monkeypatch.setattr(reactlab.backends.retry, "default_sleep", lambda seconds: None)
    in_process = tmp_path / "in_process.jsonl"
    run_to_trace(spec, toolbox, in_process)

    import reactlab.backends

    sessions: list[Any] = []
    seen: list[bytes] = []

    def open_socket_session(s: RunSpec, **_: Any) -> Any:
        sessions.append(socket_session(s, server.url, seen))
        return sessions[-1]

    monkeypatch.setattr(reactlab.backends, "open_session", open_socket_session)
    over_socket = tmp_path / "over_socket.jsonl"
    run_to_trace(spec, toolbox, over_socket)
    assert len(sessions) == 1 and str(sessions[0].client.base_url).startswith(server.url)
    assert seen  # the requests went through the socket client

    a, b = trace.read(in_process), trace.read(over_socket)
    assert [*b.records, b.end] == [*a.records, a.end]
    assert over_socket.read_bytes() == in_process.read_bytes()


def test_parity_covers_the_tasks_and_the_faults() -> None:
    tasks = {r.task for r in API_RUNS}
    assert {"variacion_busi", "cierre_acme", "noticias_busi", "noticias_busi_abril"} <= tasks
    assert {r.scenario for r in API_RUNS if r.script.faults} == {
        "fallo_429_recupera", "fallo_servidor_persistente", "fallo_respuesta_rota"}
    assert len(API_RUNS) == 69
    assert {r.backend_config.provider for r in API_RUNS} == {"openai", "anthropic",
                                                             "openai_chat"}


def test_sdk_model_lists(server: ServerThread, loopback: None) -> None:
    with httpx.Client(timeout=TIMEOUT) as http:
        oa = openai.OpenAI(api_key="sk-test", base_url=server.url + "/v1", http_client=http,
                           max_retries=0)
        ids = [m.id for m in oa.models.list()]
    with httpx2.Client(timeout=TIMEOUT) as http2:
        an = anthropic.Anthropic(api_key="sk-test", base_url=server.url, http_client=http2,
                                 max_retries=0)
        page = an.models.list()
        ids2 = [m.id for m in page.data]
    assert ids == ids2 == list(served_models(SHIPPED))
    assert ids[0] == "correcto"
    assert "cierre_acme/ticker_inexistente" in ids


def test_sdk_unknown_model_raises_not_found(server: ServerThread, loopback: None) -> None:
    with httpx.Client(timeout=TIMEOUT) as http:
        oa = openai.OpenAI(api_key="sk-test", base_url=server.url + "/v1", http_client=http,
                           max_retries=0)
        with pytest.raises(openai.NotFoundError) as e1:
            oa.responses.create(model="gpt-4o", input="hola")
    assert e1.value.code == "model_not_found"
    with httpx2.Client(timeout=TIMEOUT) as http2:
        an = anthropic.Anthropic(api_key="sk-test", base_url=server.url, http_client=http2,
                                 max_retries=0)
        with pytest.raises(anthropic.NotFoundError) as e2:
            an.messages.create(model="claude-x", max_tokens=10,
                               messages=[{"role": "user", "content": "hola"}])
    assert e2.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


# --- curl: the documented shapes ---------------------------------------------------------


def curl(server: ServerThread | str, path: str, body: str | None = None, *,
         method: str = "POST", headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """(status, parsed JSON body) of one curl request to a server (or its base URL)."""
    base = server if isinstance(server, str) else server.url
    cmd = [CURL, "-s", "--max-time", str(TIMEOUT), "-X", method, base + path,
           "-w", "\n%{http_code}"]
    for k, v in {"content-type": "application/json", **(headers or {})}.items():
        cmd += ["-H", f"{k}: {v}"]
    if body is not None:
        cmd += ["--data-binary", "@-"]  # the body from stdin: no limit on its size
    proc = subprocess.run(cmd, input=body, capture_output=True, text=True,
                          timeout=TIMEOUT + 10, check=True)
    text, _, code = proc.stdout.rpartition("\n")
    return int(code), json.loads(text)


def _openai_error(payload: Any) -> dict[str, Any]:
    assert set(payload) == {"error"}
    assert set(payload["error"]) == {"message", "type", "param", "code"}
    return payload["error"]


def _anthropic_error(payload: Any) -> dict[str, Any]:
    assert set(payload) == {"type", "error"} and payload["type"] == "error"
    assert set(payload["error"]) == {"type", "message"}
    return payload["error"]


def test_curl_responses_shape(server: ServerThread) -> None:
    status, r = curl(server, "/v1/responses", json.dumps(
        {"model": "correcto", "input": "¿Cuánto cambió BUSI?", "tools": TOOLS_OA}))
    assert status == 200
    assert {"id", "object", "created_at", "status", "model", "output"} <= set(r)
    assert (r["object"], r["status"], r["model"], r["created_at"]) == (
        "response", "completed", "correcto", 0)
    calls = r["output"]
    assert [c["type"] for c in calls] == ["function_call", "function_call"]
    assert {"id", "call_id", "name", "arguments", "status"} <= set(calls[0])
    assert [json.loads(c["arguments"]) for c in calls] == [
        {"ticker": "BUSI", "fecha": "2024-03-15"}, {"ticker": "BUSI", "fecha": "2024-03-22"}]


def test_curl_messages_shape(server: ServerThread) -> None:
    status, m = curl(server, "/v1/messages", json.dumps({
        "model": "cierre_acme/ticker_inexistente", "max_tokens": 100, "tools": TOOLS_AN,
        "messages": [{"role": "user", "content": "¿Cuál fue el cierre de ACME?"}]}))
    assert status == 200
    assert {"id", "type", "role", "model", "content", "stop_reason", "usage"} <= set(m)
    assert (m["type"], m["role"], m["stop_reason"]) == ("message", "assistant", "tool_use")
    assert m["model"] == "ticker_inexistente"  # the script that played (an alias resolved)
    assert m["content"] == [{"type": "tool_use", "id": "toolu_0_0", "name": "precio",
                             "input": {"ticker": "ACME", "fecha": "2024-03-15"}}]


def test_curl_plays_a_whole_conversation(server: ServerThread) -> None:
    """The answer of the last step, from a conversation a client writes by hand."""
    question = "¿Cuál fue el cierre de ACME el 2024-03-15?"
    result = json.dumps({"error": "ticker desconocido"})
    status, r = curl(server, "/v1/responses", json.dumps({"model": "ticker_inexistente",
        "input": [{"role": "user", "content": question},
                  {"type": "function_call", "call_id": "c1", "name": "precio",
                   "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c1", "output": result}]}))
    assert status == 200
    assert r["output"][0]["type"] == "message"
    assert r["output"][0]["content"][0]["text"] == (
        "No hay datos de ACME: la herramienta indica que el ticker no existe.")


def test_curl_bodies_are_deterministic(server: ServerThread) -> None:
    body = json.dumps({"model": "correcto", "input": "x"})
    assert curl(server, "/v1/responses", body) == curl(server, "/v1/responses", body)


@pytest.mark.parametrize(("path", "body", "status", "param"), [
    ("/v1/responses", "{not json", 400, None),
    ("/v1/responses", '{"input": "x"}', 400, "model"),
    ("/v1/responses", '{"model": "correcto"}', 400, "input"),
    ("/v1/responses", '{"model": 7, "input": "x"}', 400, "model"),
    ("/v1/responses", '["model", "input"]', 400, None),
])
def test_curl_openai_bad_requests(server: ServerThread, path: str, body: str, status: int,
                                  param: str | None) -> None:
    got, payload = curl(server, path, body)
    assert got == status
    err = _openai_error(payload)
    assert (err["type"], err["param"]) == ("invalid_request_error", param)


@pytest.mark.parametrize(("body", "field"), [
    ("{not json", None),
    ('{"max_tokens": 5, "messages": []}', "model"),
    ('{"model": "correcto", "max_tokens": 5}', "messages"),
    ('{"model": "correcto", "messages": []}', "max_tokens"),
])
def test_curl_anthropic_bad_requests(server: ServerThread, body: str,
                                     field: str | None) -> None:
    got, payload = curl(server, "/v1/messages", body)
    assert got == 400
    err = _anthropic_error(payload)
    assert err["type"] == "invalid_request_error"
    if field is not None:
        assert err["message"] == f"{field}: Field required"


def test_curl_hostile_bodies(server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> None:
    """Answered in the API's shape, never a crash: a lone surrogate as the model name,
    JSON nested past Python's recursion limit, a body over the size limit."""
    import reactlab.simulate.server

    status, payload = curl(server, "/v1/responses", '{"model": "\\ud800", "input": "x"}')
    assert status == 404 and _openai_error(payload)["code"] == "model_not_found"
    status, payload = curl(server, "/v1/messages", "[" * 100_000 + "]" * 100_000)
    assert status == 400 and _anthropic_error(payload)["type"] == "invalid_request_error"
    monkeypatch.setattr(reactlab.simulate.server, "MAX_BODY", 1000)
    big = json.dumps({"model": "correcto", "input": "x" * 2000})
    status, payload = curl(server, "/v1/messages", big)
    assert status == 413 and _anthropic_error(payload)["type"] == "request_too_large"
    status, payload = curl(server, "/v1/responses", big)
    assert status == 413 and _openai_error(payload)["type"] == "invalid_request_error"


def test_curl_unknown_model(server: ServerThread) -> None:
    status, payload = curl(server, "/v1/responses", '{"model": "gpt-4o", "input": "x"}')
    assert status == 404
    assert _openai_error(payload)["code"] == "model_not_found"
    status, payload = curl(server, "/v1/messages",
                           '{"model": "claude-x", "max_tokens": 5, "messages": []}')
    assert status == 404
    assert _anthropic_error(payload)["type"] == "not_found_error"
    # a scenario on a task that lacks its parameters is not served either
    status, _ = curl(server, "/v1/responses", '{"model": "cierre_acme/correcto", "input": "x"}')
    assert status == 404


@pytest.mark.parametrize(("method", "path", "status", "anthropic_shape"), [
    ("GET", "/v1/responses", 405, False),
    ("GET", "/v1/messages", 405, True),
    ("POST", "/v1/models", 405, False),
    ("GET", "/v1/chat/completions", 405, False),
    ("POST", "/v1/completions", 404, False),
    ("POST", "/v1/messages/batches", 404, True),
    ("GET", "/nada", 404, False),
])
def test_curl_wrong_method_and_path(server: ServerThread, method: str, path: str, status: int,
                                    anthropic_shape: bool) -> None:
    got, payload = curl(server, path, method=method)
    assert got == status
    err = _anthropic_error(payload) if anthropic_shape else _openai_error(payload)
    assert err["type"] == ("not_found_error" if anthropic_shape and status == 404
                           else "invalid_request_error")


def test_curl_models_and_health(server: ServerThread) -> None:
    status, listing = curl(server, "/v1/models", method="GET")
    assert status == 200 and listing["object"] == "list"
    assert listing["data"][0] == {"id": "correcto", "object": "model", "created": 0,
                                  "owned_by": "reactlab"}
    status, health = curl(server, "/healthz", method="GET")
    assert (status, health) == (200, {"status": "ok", "models": len(listing["data"])})


def test_curl_fault_scenario_per_run_header(server: ServerThread) -> None:
    """A fault plan per run: each new run header meets the 429 again, then recovers."""
    body = json.dumps({"model": "fallo_429_recupera", "input": "x"})
    for run in ("a", "b"):
        assert curl(server, "/v1/responses", body, headers={RUN_HEADER: run})[0] == 429
        assert curl(server, "/v1/responses", body, headers={RUN_HEADER: run})[0] == 200
    # without the header: a repeat of a step already answered cleanly starts a new run
    assert [curl(server, "/v1/responses", body)[0] for _ in range(4)] == [429, 200, 429, 200]
    status, payload = curl(server, "/v1/messages", json.dumps(
        {"model": "fallo_429_recupera", "max_tokens": 5, "messages": [
            {"role": "user", "content": "x"}]}), headers={RUN_HEADER: "c"})
    assert status == 429
    assert _anthropic_error(payload)["type"] == "rate_limit_error"


def test_requests_are_logged(server: ServerThread, caplog: pytest.LogCaptureFixture) -> None:
    # The server thread writes a line after the answer is sent, so a previous test's
    # last request may still be logged here: wait for this request's line.
    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "reactlab.simulate.server"
                and r.getMessage().startswith("POST /v1/responses")]

    with caplog.at_level(logging.INFO, logger="reactlab.simulate.server"):
        curl(server, "/v1/responses", '{"model": "correcto", "input": "x"}')
        deadline = time.monotonic() + TIMEOUT
        while not lines() and time.monotonic() < deadline:
            time.sleep(0.01)
    (line,) = lines()
    assert line.startswith("POST /v1/responses -> 200 ")
    assert 'model="correcto" task="variacion_busi" scenario="correcto" step=1' in line


# --- model names, lifecycle, command line -----------------------------------------------


def test_model_names() -> None:
    models = served_models(SHIPPED)
    assert models["correcto"].task == "variacion_busi"
    assert models["ticker_inexistente"].task == "cierre_acme"
    assert models["inyeccion_obedece"].task == "noticias_busi_abril"
    assert models["bucle_sin_limite"].script.name == "bucle"  # extends: the base's script
    assert models["fallo_429_recupera"].faults and not models["correcto"].faults
    assert "react" not in models and "variacion_busi/plan_execute" not in models
    assert "cierre_acme/correcto" not in models  # the task lacks {desde}, {hasta}
    on_task = served_models(SHIPPED, task="noticias_busi")
    assert on_task["correcto"].task == "noticias_busi"
    assert "cierre_inventado" not in on_task  # needs {fecha}
    with pytest.raises(ConfigError, match="no task named 'nada'"):
        served_models(SHIPPED, task="nada")


def test_server_thread_reports_a_port_in_use() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        srv = ServerThread(SHIPPED, port=port, startup_timeout=5)
        try:
            with pytest.raises(RuntimeError, match="did not start"):
                srv.start()
        finally:
            srv.stop()


def test_server_thread_stops(loopback: None) -> None:
    with ServerThread(SHIPPED) as srv:
        url = srv.url
        with httpx.Client(timeout=TIMEOUT) as http:
            assert http.get(url + "/healthz").status_code == 200
    with httpx.Client(timeout=TIMEOUT) as http, pytest.raises(httpx.ConnectError):
        http.get(url + "/healthz")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serve(tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "reactlab", "serve", "--port", str(port),
                                 "--task", "variacion_busi"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            probe = subprocess.run([CURL, "-s", "--max-time", "2", url + "/healthz"],
                                   capture_output=True, text=True, timeout=10, check=False)
            if probe.returncode == 0 or time.monotonic() > deadline or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert probe.returncode == 0, log.read_text()
        status, r = curl(url, "/v1/responses", json.dumps(
            {"model": "correcto", "input": "x", "tools": TOOLS_OA}))
        assert status == 200 and r["output"][0]["name"] == "precio"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    text = log.read_text()
    assert "POST /v1/responses -> 200" in text


def test_cli_serve_unknown_task() -> None:
    proc = subprocess.run([sys.executable, "-m", "reactlab", "serve", "--task", "nada"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith("reactlab: error: ")
    assert "no task named 'nada'" in proc.stderr


# --- tool results by id, deep validation, usage (issue 10) --------------------------------


def post(server: ServerThread, path: str, content: bytes,
         content_type: str | None = "application/json") -> httpx.Response:
    """One raw POST over loopback (for bodies curl cannot send as they are)."""
    headers = {} if content_type is None else {"content-type": content_type}
    with httpx.Client(timeout=TIMEOUT) as http:
        return http.post(server.url + path, content=content, headers=headers)


QUESTION = "¿Cuánto cambió BUSI?"
FIRST = json.dumps({"resultado": {"cierre": 100}})
SECOND = json.dumps({"resultado": {"cierre": 110}})
EXPECTED = {"expresion": "(110/100 - 1)*100"}  # ok[1] / ok[0]: the second call's result first


def _responses_turn(first: Any, second: Any, order: str = "ab",
                    ids: tuple[str, str] = ("call_a", "call_b")) -> dict[str, Any]:
    calls = [{"type": "function_call", "call_id": "call_a", "name": "precio",
              "arguments": "{}"},
             {"type": "function_call", "call_id": "call_b", "name": "precio",
              "arguments": "{}"}]
    outs = {"a": {"type": "function_call_output", "call_id": ids[0], "output": first},
            "b": {"type": "function_call_output", "call_id": ids[1], "output": second}}
    return {"model": "correcto", "tools": TOOLS_OA,
            "input": [{"role": "user", "content": QUESTION}, *calls, *[outs[k] for k in order]]}


def _messages_turn(first: Any, second: Any, order: str = "ab",
                   ids: tuple[str, str] = ("tu_a", "tu_b")) -> dict[str, Any]:
    uses = [{"type": "tool_use", "id": i, "name": "precio", "input": {}}
            for i in ("tu_a", "tu_b")]
    outs = {"a": {"type": "tool_result", "tool_use_id": ids[0], "content": first},
            "b": {"type": "tool_result", "tool_use_id": ids[1], "content": second}}
    return {"model": "correcto", "max_tokens": 100, "tools": TOOLS_AN, "messages": [
        {"role": "user", "content": QUESTION}, {"role": "assistant", "content": uses},
        {"role": "user", "content": [outs[k] for k in order]}]}


def _parts(text: str, kind: str) -> list[dict[str, str]]:
    """``text`` as a list of content parts, split in two (a reader must join them)."""
    half = len(text) // 2
    return [{"type": kind, "text": text[:half]}, {"type": kind, "text": text[half:]}]


@pytest.mark.parametrize("order", ["ab", "ba"])
@pytest.mark.parametrize("form", ["string", "parts"])
def test_tool_results_in_every_form_matched_by_id(server: ServerThread, form: str,
                                                  order: str) -> None:
    """Results as strings or lists of text parts, in call order or reversed: the script
    reads each call's own result (a positional reader would swap them when reversed)."""
    oa = (FIRST, SECOND) if form == "string" else (
        _parts(FIRST, "input_text"), _parts(SECOND, "input_text"))
    status, r = curl(server, "/v1/responses", json.dumps(_responses_turn(*oa, order)))
    assert status == 200, r
    assert [json.loads(o["arguments"]) for o in r["output"]] == [EXPECTED]
    an = (FIRST, SECOND) if form == "string" else (_parts(FIRST, "text"),
                                                   _parts(SECOND, "text"))
    status, m = curl(server, "/v1/messages", json.dumps(_messages_turn(*an, order)))
    assert status == 200, m
    assert [b["input"] for b in m["content"]] == [EXPECTED]


def test_tool_result_ids_that_match_no_call(server: ServerThread) -> None:
    status, r = curl(server, "/v1/responses", json.dumps(
        _responses_turn(FIRST, SECOND, ids=("call_a", "call_zz"))))
    err = _openai_error(r)
    assert status == 400 and "call_zz" in err["message"] and err["param"] == "input"
    status, r = curl(server, "/v1/responses", json.dumps(
        _responses_turn(FIRST, SECOND, ids=("call_a", "call_a"))))
    assert status == 400 and "more than one result" in _openai_error(r)["message"]
    status, m = curl(server, "/v1/messages", json.dumps(
        _messages_turn(FIRST, SECOND, ids=("tu_zz", "tu_b"))))
    err = _anthropic_error(m)
    assert status == 400 and "tu_zz" in err["message"]
    assert err["type"] == "invalid_request_error"


_OK_OPENAI = {"model": "correcto", "input": "x"}
_OK_ANTHROPIC = {"model": "correcto", "max_tokens": 5,
                 "messages": [{"role": "user", "content": "x"}]}
_DEEP = "[" * 900 + "]" * 900  # JSON nested just under the decoder's recursion limit

MALFORMED_OPENAI: list[tuple[str, Any]] = [
    ("null body", None),
    ("input [null]", {**_OK_OPENAI, "input": [None]}),
    ("content 5", {**_OK_OPENAI, "input": [{"role": "user", "content": 5}]}),
    ("content [null]", {**_OK_OPENAI, "input": [{"role": "user", "content": [None]}]}),
    ("part text 5", {**_OK_OPENAI, "input": [{"role": "user", "content": [
        {"type": "input_text", "text": 5}]}]}),
    ("unknown item type", {**_OK_OPENAI, "input": [{"type": "nada"}]}),
    ("bad role", {**_OK_OPENAI, "input": [{"role": "robot", "content": "x"}]}),
    ("call without call_id", {**_OK_OPENAI, "input": [
        {"type": "function_call", "name": "precio", "arguments": "{}"}]}),
    ("output 5", {**_OK_OPENAI, "input": [
        {"type": "function_call", "call_id": "c", "name": "precio", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": 5}]}),
    ("max_output_tokens 0", {**_OK_OPENAI, "max_output_tokens": 0}),
    ("max_output_tokens -1", {**_OK_OPENAI, "max_output_tokens": -1}),
    ("stream 'yes'", {**_OK_OPENAI, "stream": "yes"}),
    ("tools {}", {**_OK_OPENAI, "tools": {}}),
]
DEEP_OPENAI = {**_OK_OPENAI, "tools": TOOLS_OA, "input": [
    {"role": "user", "content": "x"},
    {"type": "function_call", "call_id": "c", "name": "precio", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c", "output": _DEEP}]}
MALFORMED_ANTHROPIC: list[tuple[str, Any]] = [
    ("null body", None),
    ("messages [null]", {**_OK_ANTHROPIC, "messages": [None]}),
    ("content 5", {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": 5}]}),
    ("content [null]", {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": [None]}]}),
    ("text block without text", {**_OK_ANTHROPIC, "messages": [
        {"role": "user", "content": [{"type": "text"}]}]}),
    ("result content 5", {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": 5}]}]}),
    ("max_tokens 0", {**_OK_ANTHROPIC, "max_tokens": 0}),
    ("max_tokens -3", {**_OK_ANTHROPIC, "max_tokens": -3}),
    ("max_tokens true", {**_OK_ANTHROPIC, "max_tokens": True}),
    ("bad role", {**_OK_ANTHROPIC, "messages": [{"role": "system", "content": "x"}]}),
    ("system 5", {**_OK_ANTHROPIC, "system": 5}),
    ("tool_use input a string", {**_OK_ANTHROPIC, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "precio", "input": '{"ticker": '}]}]}),
]
DEEP_ANTHROPIC = {**_OK_ANTHROPIC, "tools": TOOLS_AN, "messages": [
    {"role": "user", "content": "x"},
    {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "precio", "input": {}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": _DEEP}]}]}


def test_deep_tool_output_is_read_as_text_and_answered_leniently(server: ServerThread,
                                                                 loopback: None) -> None:
    """JSON nested too deeply is read as text: a result not in the lesson's shape, so the
    scripted model goes on, writing the fields it cannot fill as '?' (no 4xx, no 5xx)."""
    resp = post(server, "/v1/responses", json.dumps(DEEP_OPENAI).encode())
    assert resp.status_code == 200, resp.text
    assert resp.json()["output"][0]["arguments"] == '{"expresion": "(?/? - 1)*100"}'
    resp = post(server, "/v1/messages", json.dumps(DEEP_ANTHROPIC).encode())
    assert resp.status_code == 200, resp.text
    assert resp.json()["content"][0]["input"] == {"expresion": "(?/? - 1)*100"}


@pytest.mark.parametrize(("what", "body"), MALFORMED_OPENAI, ids=[w for w, _ in MALFORMED_OPENAI])
def test_malformed_responses_requests_get_a_shaped_400(server: ServerThread, loopback: None,
                                                       what: str, body: Any) -> None:
    resp = post(server, "/v1/responses", json.dumps(body).encode())
    assert resp.status_code == 400, resp.text
    _openai_error(resp.json())


@pytest.mark.parametrize(("what", "body"), MALFORMED_ANTHROPIC,
                         ids=[w for w, _ in MALFORMED_ANTHROPIC])
def test_malformed_messages_requests_get_a_shaped_400(server: ServerThread, loopback: None,
                                                      what: str, body: Any) -> None:
    resp = post(server, "/v1/messages", json.dumps(body).encode())
    assert resp.status_code == 400, resp.text
    assert _anthropic_error(resp.json())["type"] == "invalid_request_error"


@pytest.mark.parametrize(("content_type", "encoding"), [
    ("text/plain", "utf-8"), (None, "utf-16"), ("application/json", "utf-16"),
    ("application/json; charset=utf-16", "utf-16"), ("application/x-www-form-urlencoded",
                                                      "utf-8")])
def test_bodies_not_sent_as_utf8_json_are_refused(server: ServerThread, loopback: None,
                                                  content_type: str | None,
                                                  encoding: str) -> None:
    for path, body, check in (("/v1/responses", _OK_OPENAI, _openai_error),
                              ("/v1/messages", _OK_ANTHROPIC, _anthropic_error)):
        resp = post(server, path, json.dumps(body).encode(encoding), content_type)
        assert resp.status_code == 400, (path, resp.text)
        check(resp.json())
        # the same body as UTF-8 JSON is served; without a content type it is refused
        assert post(server, path, json.dumps(body).encode()).status_code == 200
        refused = post(server, path, json.dumps(body).encode(), None)
        assert refused.status_code == 400
        check(refused.json())
    refused = post(server, "/v1/responses", json.dumps(_OK_OPENAI).encode(), "text/plain")
    assert refused.json()["error"]["code"] == "unsupported_content_type"
    assert "Unsupported content type: 'text/plain'" in refused.json()["error"]["message"]


def test_usage_counts_the_request_body_and_the_answer(server: ServerThread) -> None:
    from reactlab.core.tokens import count

    body = json.dumps({"model": "correcto", "input": "¿Cuánto cambió BUSI?",
                       "tools": TOOLS_OA})
    status, r = curl(server, "/v1/responses", body)
    calls = r["output"]
    out = sum(count(c["name"]) + count(c["arguments"]) for c in calls)
    assert status == 200 and r["usage"] == {
        "input_tokens": count(body),
        "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
        "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": count(body) + out}
    body = json.dumps(_messages_turn(FIRST, SECOND))
    status, m = curl(server, "/v1/messages", body)
    assert status == 200
    text = m["content"][0]
    assert m["usage"] == {"input_tokens": count(body), "output_tokens": count(
        text["name"]) + count(json.dumps(text["input"], ensure_ascii=False,
                                         separators=(",", ":")))}
    assert m["usage"]["input_tokens"] > 50 and m["usage"]["output_tokens"] > 5
