"""Fuzz: hundreds of malformed requests to both endpoints of the server (issue 10).

A seeded generator (``random.Random(SEED)``: the same bodies on every run) corrupts valid
requests in the ways clients and proxies break them: a required field of any nesting
level replaced by a value of the wrong type, a truncated body, bytes that are not UTF-8
JSON, the right JSON in UTF-16/32 or under another content type, JSON nested past the
recursion limit, non-positive token limits, tool results for calls that do not exist.
Every one must get a 4xx in the API's documented error shape (never a 5xx, never a
scripted answer), the in-process simulator must answer it identically, and the server
must still be healthy afterwards. The other routes (``count_tokens``, ``input_tokens``,
``GET /v1/models/{id}``, ``GET /v1/responses/{id}``, ``previous_response_id``) get
malformed bodies and hostile ids: never a 5xx. Loopback only; bounded (``COUNT`` per
endpoint).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

from reactlab.config import load
from reactlab.simulate import ScriptedPolicy
from reactlab.simulate import anthropic_messages as sim_anthropic
from reactlab.simulate import openai_responses as sim_openai
from reactlab.simulate.server import ServerThread

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = load(ROOT / "config.yaml")
SEED = 20261201
COUNT = 300  # malformed bodies per endpoint
TIMEOUT = 10.0

OPENAI_OK: dict[str, Any] = {
    "model": "correcto", "instructions": "Usa las herramientas.",
    "tools": [{"type": "function", "name": "precio", "description": "d",
               "parameters": {"type": "object", "properties": {}}}],
    "input": [
        {"role": "user", "content": "¿Cuánto cambió BUSI?"},
        {"role": "user", "content": [{"type": "input_text", "text": "hola"}]},
        {"type": "function_call", "call_id": "c1", "name": "precio", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "{\"resultado\": {\"cierre\": 1}}"}]},
    ]}
ANTHROPIC_OK: dict[str, Any] = {
    "model": "correcto", "max_tokens": 100, "system": "Usa las herramientas.",
    "tools": [{"name": "precio", "description": "d", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "¿Cuánto cambió BUSI?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "voy"},
            {"type": "tool_use", "id": "t1", "name": "precio", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1",
             "content": [{"type": "text", "text": "{\"resultado\": {\"cierre\": 1}}"}]}]},
    ]}

_STR_FIELDS = {"model", "role", "type", "call_id", "name", "arguments", "text", "id",
               "tool_use_id"}
_NOT_STR = [None, 5, 1.5, True, [], {}, [None], {"a": 1}]
_CONTENT_FIELDS = {"content", "output", "input", "messages"}
_NOT_CONTENT = [5, 1.5, True, {}, [None], [5], ["x"], [[]], [{"type": 5}]]


def _paths(value: Any, api: str, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths of the fields a corruption may hit (required, with a known type)."""
    if isinstance(value, dict):
        for k, v in value.items():
            skip = api == "anthropic" and k == "input"  # tool_use input: any object
            if k in _STR_FIELDS or (k in _CONTENT_FIELDS and not skip):
                yield (*path, k)
            if k not in ("parameters", "input_schema") and not skip:
                yield from _paths(v, api, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, api, (*path, i))


def _set(body: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        body = body[key]
    body[path[-1]] = value


def malformed(api: str, rng: random.Random) -> tuple[bytes, str | None]:
    """One malformed request: (body bytes, content type)."""
    ok = OPENAI_OK if api == "openai" else ANTHROPIC_OK
    kind = rng.choice(["field", "field", "field", "truncated", "junk", "encoding",
                       "content_type", "deep", "limit", "unknown_id", "not_object"])
    body = copy.deepcopy(ok)
    if kind == "field":
        path = rng.choice(list(_paths(body, api)))
        wrong = _NOT_STR if path[-1] in _STR_FIELDS else _NOT_CONTENT
        _set(body, path, rng.choice(wrong))
    elif kind == "truncated":
        raw = json.dumps(ok).encode()
        return raw[: rng.randrange(1, len(raw) - 1)], "application/json"
    elif kind == "junk":
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        return b"\xff" + raw, "application/json"  # never UTF-8
    elif kind == "encoding":
        return json.dumps(ok).encode(rng.choice(["utf-16", "utf-16-le", "utf-32"])), (
            rng.choice([None, "application/json", "application/json; charset=utf-16"]))
    elif kind == "content_type":
        return json.dumps(ok).encode(), rng.choice(
            ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
             "application/json; charset=latin-1", "text/json"])
    elif kind == "deep":
        depth = rng.choice([1_000, 5_000, 50_000])
        return ("[" * depth + "]" * depth).encode(), "application/json"
    elif kind == "limit":
        key = "max_output_tokens" if api == "openai" else "max_tokens"
        body[key] = rng.choice([0, -1, -(2 ** 40), 1.5, "100", True, None if api == "openai"
                                else []])
        if body[key] is None:
            body[key] = 0
    elif kind == "unknown_id":
        if api == "openai":
            body["input"][-1]["call_id"] = f"c{rng.randrange(2, 10 ** 6)}"
        else:
            body["messages"][-1]["content"][0]["tool_use_id"] = f"t{rng.randrange(2, 10 ** 6)}"
    else:
        return json.dumps(rng.choice([None, [], [ok], "x", 5, True])).encode(), (
            "application/json")
    return json.dumps(body).encode(), "application/json"


def _shaped(api: str, status: int, payload: Any) -> None:
    assert 400 <= status < 500, (status, payload)
    if api == "openai":
        assert set(payload) == {"error"}
        assert set(payload["error"]) == {"message", "type", "param", "code"}
        assert payload["error"]["type"] == "invalid_request_error"
    else:
        assert set(payload) == {"type", "error"} and payload["type"] == "error"
        assert payload["error"]["type"] == "invalid_request_error"
        assert isinstance(payload["error"]["message"], str)



def test_the_generator_is_seeded_and_the_bases_are_valid() -> None:
    a = [malformed("openai", random.Random(SEED)) for _ in range(3)]
    b = [malformed("openai", random.Random(SEED)) for _ in range(3)]
    assert a == b
    sim_openai.validate(copy.deepcopy(OPENAI_OK))
    sim_anthropic.validate(copy.deepcopy(ANTHROPIC_OK))


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_fuzzed_bodies_get_a_shaped_4xx(api: str, loopback: None) -> None:
    rng = random.Random(f"{SEED}-{api}")
    path = "/v1/responses" if api == "openai" else "/v1/messages"
    sim, lib = (sim_openai, httpx) if api == "openai" else (sim_anthropic, httpx2)
    spec = next(r for r in SHIPPED.runs if r.scenario == "correcto")
    in_process = sim.handler(ScriptedPolicy({"correcto": spec.script_obj()}, spec.params,
                                            spec.question))
    statuses: dict[int, int] = {}
    with ServerThread(SHIPPED) as server, httpx.Client(timeout=TIMEOUT) as http:
        for _ in range(COUNT):
            content, ctype = malformed(api, rng)
            headers = {} if ctype is None else {"content-type": ctype}
            resp = http.post(server.url + path, content=content, headers=headers)
            _shaped(api, resp.status_code, resp.json())
            statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1
            local = in_process(lib.Request("POST", "http://simulado" + path, content=content,
                                           headers=headers))
            assert (local.status_code, local.json()) == (resp.status_code, resp.json())
        assert http.get(server.url + "/healthz").json()["status"] == "ok"
        ok = http.post(server.url + path, json={"model": "correcto", "input": "x"}
                       if api == "openai" else {"model": "correcto", "max_tokens": 5,
                                                "messages": [{"role": "user", "content": "x"}]})
        assert ok.status_code == 200, ok.text
    assert sum(statuses.values()) == COUNT and set(statuses) == {400}


def _shaped_or_ok(api: str, status: int, payload: Any) -> None:
    """A 200, or a 4xx in the API's error shape (type as the status says); never a 5xx."""
    assert status < 500, (status, payload)
    if status == 200:
        return
    if api == "openai":
        assert set(payload) == {"error"}
        assert set(payload["error"]) == {"message", "type", "param", "code"}
    else:
        assert set(payload) == {"type", "error"} and payload["type"] == "error"
        assert isinstance(payload["error"]["message"], str)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_fuzzed_requests_to_the_other_routes_never_get_a_5xx(api: str, loopback: None) -> None:
    """The token-counting routes get the malformed bodies; the GET routes by id, random
    and hostile ids; ``previous_response_id`` random ids. 0 × 5xx, the server healthy."""
    rng = random.Random(f"{SEED}-{api}-routes")
    count_path = "/v1/responses/input_tokens" if api == "openai" else "/v1/messages/count_tokens"
    ids = ["x", "resp_" + "0" * 40, "a..b", "%00", "a/b/c", "é" * 50,
           "correcto", "variacion_busi/correcto", "x" * 5000]
    statuses: dict[int, int] = {}
    headers = {"anthropic-version": "2023-06-01"} if api == "anthropic" else {}
    with ServerThread(SHIPPED) as server, httpx.Client(timeout=TIMEOUT) as http:
        for _ in range(COUNT // 3):
            content, ctype = malformed(api, rng)
            resp = http.post(server.url + count_path, content=content,
                             headers={} if ctype is None else {"content-type": ctype})
            _shaped_or_ok(api, resp.status_code, resp.json())
            statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1
        for rid in ids + [f"r{rng.randrange(10 ** 9)}" for _ in range(20)]:
            paths = [f"/v1/models/{rid}"] + ([f"/v1/responses/{rid}"] if api == "openai"
                                            else [])
            for path in paths:
                resp = http.get(server.url + path, headers=headers)
                assert resp.status_code in (200, 404), (path, resp.status_code)
                _shaped_or_ok(api, resp.status_code, resp.json())
                statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1
            if api == "openai":
                resp = http.post(server.url + "/v1/responses", json={
                    "model": "correcto", "input": "x", "previous_response_id": rid})
                assert resp.status_code == 400, resp.text
                assert resp.json()["error"]["code"] == "previous_response_not_found"
        assert http.get(server.url + "/healthz").json()["status"] == "ok"
        assert http.get(server.url + "/").status_code == 200
    assert not any(s >= 500 for s in statuses), statuses
    assert any(400 <= s < 500 for s in statuses) and 200 in statuses
