"""Live mode, recording and replay, offline: the live backends against a loopback server.

The server (``FakeAPI``, a ThreadingHTTPServer on 127.0.0.1, port 0) answers like the
provider's API by handing each request body to the project's simulator, so the live
adapters go through the official SDKs and their real transports (``httpx.HTTPTransport``
/ ``httpx2.HTTPTransport``) over a real socket. Only loopback connections are allowed
(fixture ``loopback``); everything else stays refused as in every other test.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

import reactlab.simulate.anthropic_messages as sim_anthropic
import reactlab.simulate.openai_chat as sim_chat
import reactlab.simulate.openai_responses as sim_openai
from reactlab import config, trace
from reactlab.backends import recording, retry
from reactlab.backends.recording import RecordingError
from reactlab.cli import main
from reactlab.config import RunSpec
from reactlab.config.faults import FaultPlan, parse_plan
from reactlab.core.errors import BackendError
from reactlab.runner import run_to_trace
from reactlab.simulate import ScriptedPolicy

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("openai", "anthropic", "openai_chat")
SIMULATORS = {"openai": sim_openai, "anthropic": sim_anthropic, "openai_chat": sim_chat}
LIBS = {"openai": httpx, "anthropic": httpx2, "openai_chat": httpx}
PATHS = {"openai": "/v1/responses", "anthropic": "/v1/messages",
         "openai_chat": "/v1/chat/completions"}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
           "openai_chat": "OPENAI_API_KEY"}
KEY = "sk-test-SECRET-123"
NETWORK_REFUSED = "a test tried to open a network connection"

# Taken at import, before conftest's autouse fixture replaces them for each test.
_REAL_CONNECT = socket.socket.connect
_REAL_CREATE_CONNECTION = socket.create_connection
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-allow connections to loopback addresses only (conftest refuses all of them)."""

    def host_of(address: Any) -> Any:
        return address[0] if isinstance(address, tuple) else address

    def connect(self: socket.socket, address: Any) -> Any:
        if host_of(address) not in LOOPBACK:
            raise RuntimeError(NETWORK_REFUSED)
        return _REAL_CONNECT(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if host_of(address) not in LOOPBACK:
            raise RuntimeError(NETWORK_REFUSED)
        return _REAL_CREATE_CONNECTION(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", create_connection)


def test_loopback_fixture_still_refuses_other_hosts(loopback: None) -> None:
    with httpx.Client() as client, pytest.raises(RuntimeError, match=NETWORK_REFUSED):
        client.get("http://192.0.2.1:9/")


class Sleeps(list[float]):
    """An injected sleep: records the waits requested, sleeps for none."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Sleeps:
    """Every default sleep of the retry loop, recorded (a replay must call none)."""
    s = Sleeps()
    monkeypatch.setattr(retry, "default_sleep", s)
    return s


# --------------------------------------------------------------------------- the fake API

Responder = Callable[[Any, Mapping[str, str]], Any]


class FakeAPI:
    """A loopback HTTP server that answers like the provider's API (the simulator).

    ``faults`` is a fault plan as in config.yaml; a ``raise`` fault makes the server drop
    the connection without answering. ``respond`` replaces the simulator.
    """

    def __init__(self, provider: str, policy: ScriptedPolicy,
                 faults: list[dict[str, Any]] | None = None,
                 respond: Responder | None = None) -> None:
        self.provider = provider
        self.lib = LIBS[provider]
        sim = SIMULATORS[provider]
        handle = sim.handler(policy)
        plan = FaultPlan(parse_plan(faults or []))
        self.handle = sim.with_faults(handle, plan) if plan else handle
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return self.root if self.provider == "anthropic" else self.root + "/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                api.requests.append({"path": self.path, "headers": headers, "body": body})
                request = api.lib.Request("POST", api.root + self.path, content=body,
                                          headers={"content-type":
                                                   headers.get("content-type", "")})
                try:
                    if self.path != PATHS[api.provider]:
                        response = api.lib.Response(404, json={"error": "no such path"})
                    elif api.respond is not None:
                        response = api.respond(request, headers)
                    else:
                        response = api.handle(request)
                except (httpx.TransportError, httpx2.TransportError):
                    self.close_connection = True  # drop it: the client gets no answer
                    return
                content = response.read()
                self.send_response(response.status_code)
                for name in ("content-type", "retry-after", "retry-after-ms", "request-id"):
                    if name in response.headers:
                        self.send_header(name, response.headers[name])
                self.send_header("x-request-id", "req_loopback")
                self.send_header("set-cookie", "session=loopback-cookie")
                self.send_header("openai-organization", "org-loopback")
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

        return Handler

    def __enter__(self) -> FakeAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


# --------------------------------------------------------------------------- specs


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["live"] = {"enabled": True}
    return config.parse(raw)


def live_spec(cfg: config.Config, provider: str, api: FakeAPI) -> RunSpec:
    spec = cfg.run("variacion_busi", f"{provider}_live", "react")
    return dataclasses.replace(spec, backend_config=spec.backend_config.replace(
        base_url=api.base_url))


def policy_for(cfg: config.Config, provider: str, scenario: str = "correcto") -> ScriptedPolicy:
    """The scripted scenario, served under the live backend's model name."""
    scripted = cfg.run("variacion_busi", provider, scenario)
    live = cfg.run("variacion_busi", f"{provider}_live", "react")
    return ScriptedPolicy({live.backend_config.model: scripted.script_obj()},
                          scripted.params, scripted.question)


@pytest.fixture
def serve(cfg: config.Config, loopback: None) -> Iterator[Callable[..., FakeAPI]]:
    """Start FakeAPIs for a test; all are stopped at its end."""
    started: list[FakeAPI] = []

    def start(provider: str, **kwargs: Any) -> FakeAPI:
        api = FakeAPI(provider, policy_for(cfg, provider), **kwargs).__enter__()
        started.append(api)
        return api

    yield start
    for api in started:
        api.__exit__()


def records(path: Path) -> list[dict[str, Any]]:
    return recording.read(path)


def live_and_replay(spec: RunSpec, toolbox: Any, tmp_path: Path, provider: str,
                    monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Path, Path]:
    """Run live (fake key set), then replay with the variable unset; the two traces."""
    monkeypatch.setenv(KEY_ENV[provider], KEY)
    live, rec = tmp_path / "live.jsonl", tmp_path / "recording.jsonl"
    end = run_to_trace(spec, toolbox, live, recording=rec)
    monkeypatch.delenv(KEY_ENV[provider])
    replayed = tmp_path / "replay.jsonl"
    assert run_to_trace(spec, toolbox, replayed, replay=rec) == end
    assert replayed.read_bytes() == live.read_bytes()
    return end, live, rec


# --------------------------------------------------------------------------- live + replay


@pytest.mark.parametrize("provider", PROVIDERS)
def test_live_run_is_recorded_and_replays_byte_identically(
        provider: str, cfg: config.Config, serve: Callable[..., FakeAPI], toolbox: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeps: Sleeps,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api = serve(provider)
    spec = live_spec(cfg, provider, api)
    end, live, rec = live_and_replay(spec, toolbox, tmp_path, provider, monkeypatch)

    assert end["termination"] == "answer"
    assert "6.45 %" in end["answer"]
    assert (end["steps"], end["calls"], end["errors"]) == (3, 3, 0)
    tr = trace.read(live)
    assert tr.header.spec["backend_config"]["base_url"] == api.base_url
    assert [r.attempts for r in tr.requests()] == [1, 1, 1]

    # the key went over the wire (so it had every chance to leak) ...
    assert len(api.requests) == 3  # the replay sent nothing
    for req in api.requests:  # (anthropic 2.x sends it as a bearer token too)
        auth = req["headers"].get("x-api-key") or req["headers"]["authorization"]
        assert auth in (KEY, f"Bearer {KEY}")
    # ... and one record per attempt, exactly what the server got, without credentials
    recs = records(rec)
    assert [r["attempt"] for r in recs] == [1, 2, 3]
    for r, req in zip(recs, api.requests, strict=True):
        assert r["request"]["method"] == "POST"
        assert r["request"]["url"] == api.root + PATHS[provider]
        assert r["request"]["body"] == json.loads(req["body"])
        assert r["response"]["status"] == 200
        sent = r["request"]["headers"]
        assert not {"authorization", "x-api-key", "cookie", "idempotency-key"} & set(sent)
        assert not [h for h in sent if "key" in h or "token" in h or "secret" in h]
        assert "user-agent" in sent and "content-type" in sent
        got = r["response"]["headers"]
        assert got["content-type"] == "application/json"
        assert got["x-request-id"] == "req_loopback"
        assert "set-cookie" not in got and "openai-organization" not in got
        assert json.loads(r["response"]["body"])["model"] == spec.backend_config.model
    # the key is in none of the files, nor in the logs
    for path in (live, rec, tmp_path / "replay.jsonl"):
        assert KEY.encode() not in path.read_bytes()
        assert b"SECRET" not in path.read_bytes()
    assert caplog.records  # the SDKs and httpx logged at DEBUG
    assert KEY not in caplog.text
    assert sleeps == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_429_is_retried_recorded_and_replayed_without_sleeping(
        provider: str, cfg: config.Config, serve: Callable[..., FakeAPI], toolbox: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeps: Sleeps) -> None:
    api = serve(provider, faults=[{"step": 1, "status": 429, "retry_after": 0.01}])
    spec = live_spec(cfg, provider, api)
    end, live, rec = live_and_replay(spec, toolbox, tmp_path, provider, monkeypatch)

    assert end["termination"] == "answer" and "6.45 %" in end["answer"]
    assert sleeps == [0.01]  # the live run waited what the server asked; the replay none
    assert len(api.requests) == 4
    recs = records(rec)
    assert [r["response"]["status"] for r in recs] == [429, 200, 200, 200]
    first, second = recs[0], recs[1]
    assert first["request"]["body"] == second["request"]["body"]  # the same step, again
    assert first["response"]["headers"]["retry-after-ms"] == "10"
    assert first["response"]["headers"]["retry-after"] == "1"
    history = trace.read(live).requests()[0]
    assert history.attempts == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_dropped_connection_is_recorded_and_replayed(
        provider: str, cfg: config.Config, serve: Callable[..., FakeAPI], toolbox: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeps: Sleeps) -> None:
    api = serve(provider, faults=[{"step": 2, "raise": "connect"}])
    spec = live_spec(cfg, provider, api)
    end, _, rec = live_and_replay(spec, toolbox, tmp_path, provider, monkeypatch)

    assert end["termination"] == "answer"
    assert sleeps == [0.5]  # backoff after a connection error
    recs = records(rec)
    assert "response" not in recs[1]
    assert recs[1]["error"]["type"] == "RemoteProtocolError"
    assert [("response" in r) for r in recs] == [True, False, True, True]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_401_names_the_variable_and_the_echoed_key_is_redacted(
        provider: str, cfg: config.Config, serve: Callable[..., FakeAPI], toolbox: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeps: Sleeps) -> None:
    lib = LIBS[provider]

    def reject(request: Any, headers: Mapping[str, str]) -> Any:
        key = headers.get("x-api-key") or headers.get("authorization", "").split()[-1]
        return lib.Response(401, json={"error": {
            "message": f"Incorrect API key provided: {key}", "type": "authentication_error",
            "code": "invalid_api_key"}})

    api = serve(provider, respond=reject)
    spec = live_spec(cfg, provider, api)
    end, live, rec = live_and_replay(spec, toolbox, tmp_path, provider, monkeypatch)

    assert end["termination"] == "backend_error"
    (error,) = trace.read(live).errors()
    assert (error.kind, error.status, error.attempts) == ("client", 401, 1)
    assert f"check the API key in ${KEY_ENV[provider]}" in error.message
    assert recording.REDACTED in error.message
    for path in (live, rec):
        assert KEY.encode() not in path.read_bytes()
    assert recording.REDACTED in records(rec)[0]["response"]["body"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("value", [None, "", "   "])
def test_a_missing_key_fails_before_any_request(
        provider: str, value: str | None, cfg: config.Config,
        serve: Callable[..., FakeAPI], toolbox: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    api = serve(provider)
    if value is None:
        monkeypatch.delenv(KEY_ENV[provider], raising=False)
    else:
        monkeypatch.setenv(KEY_ENV[provider], value)
    out, rec = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    with pytest.raises(BackendError) as info:
        run_to_trace(live_spec(cfg, provider, api), toolbox, out, recording=rec)
    assert info.value.kind == "client"
    assert f"set the environment variable {KEY_ENV[provider]}" in str(info.value)
    assert api.requests == []
    assert not out.exists() and not rec.exists()


# --------------------------------------------------------------------------- replay failures


@pytest.fixture(params=PROVIDERS)
def recorded(request: pytest.FixtureRequest, cfg: config.Config,
             serve: Callable[..., FakeAPI], toolbox: Any, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> tuple[RunSpec, Path, FakeAPI]:
    """A recorded live run; the key is unset again afterwards."""
    provider = request.param
    api = serve(provider)
    spec = live_spec(cfg, provider, api)
    monkeypatch.setenv(KEY_ENV[provider], KEY)
    rec = tmp_path / "recording.jsonl"
    run_to_trace(spec, toolbox, tmp_path / "live.jsonl", recording=rec)
    monkeypatch.delenv(KEY_ENV[provider])
    return spec, rec, api


def rewrite(path: Path, recs: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs),
                    encoding="utf-8")


def test_a_tampered_recording_diverges(recorded: tuple[RunSpec, Path, FakeAPI],
                                       toolbox: Any, tmp_path: Path) -> None:
    spec, rec, api = recorded
    recs = records(rec)
    body = recs[1]["request"]["body"]
    conversation = body["input"] if "input" in body else body["messages"]
    conversation[0]["content"] = "¿Cuánto cambió ACME?"
    rewrite(rec, recs)
    out = tmp_path / "replay.jsonl"
    end = run_to_trace(spec, toolbox, out, replay=rec)
    assert end["termination"] == "backend_error"
    (error,) = trace.read(out).errors()
    assert error.kind == "protocol" and error.step == 2
    assert error.retryable is False
    assert "replay diverged at attempt 2" in error.message
    assert "[0].content" in error.message and "ACME" in error.message
    assert len(api.requests) == 3  # the replay sent nothing


def test_a_recording_that_runs_out_ends_the_run(recorded: tuple[RunSpec, Path, FakeAPI],
                                                toolbox: Any, tmp_path: Path) -> None:
    spec, rec, _ = recorded
    rewrite(rec, records(rec)[:1])
    out = tmp_path / "replay.jsonl"
    end = run_to_trace(spec, toolbox, out, replay=rec)
    assert end["termination"] == "backend_error"
    (error,) = trace.read(out).errors()
    assert error.kind == "protocol"
    assert "replay ran out" in error.message and "holds 1 attempts" in error.message


def test_unused_recorded_attempts_fail_the_replay(recorded: tuple[RunSpec, Path, FakeAPI],
                                                  toolbox: Any, tmp_path: Path) -> None:
    spec, rec, _ = recorded
    recs = records(rec)
    rewrite(rec, [*recs, {**recs[-1], "attempt": len(recs) + 1}])
    out = tmp_path / "replay.jsonl"
    with pytest.raises(RecordingError, match="ended after 3 of the 4 recorded attempts"):
        run_to_trace(spec, toolbox, out, replay=rec)
    assert not out.exists()


def test_a_damaged_recording_is_refused(recorded: tuple[RunSpec, Path, FakeAPI],
                                        toolbox: Any, tmp_path: Path) -> None:
    spec, rec, _ = recorded
    lines = rec.read_text(encoding="utf-8").splitlines(keepends=True)
    rec.write_text(lines[0] + lines[2], encoding="utf-8")  # attempt 2 missing
    with pytest.raises(RecordingError, match="line 2 is not the record of attempt 2"):
        run_to_trace(spec, toolbox, tmp_path / "x.jsonl", replay=rec)
    with pytest.raises(RecordingError, match="cannot read the recording"):
        run_to_trace(spec, toolbox, tmp_path / "x.jsonl", replay=tmp_path / "none.jsonl")


# --------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cli_records_and_replays(provider: str, cfg: config.Config,
                                 serve: Callable[..., FakeAPI], data_files: tuple[Path, Path],
                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    api = serve(provider)
    spec = live_spec(cfg, provider, api)
    base = ["run", "--spec", spec.to_json(), "--prices", str(data_files[0]),
            "--news", str(data_files[1])]
    rec = tmp_path / "rec.jsonl"
    monkeypatch.delenv(KEY_ENV[provider], raising=False)
    assert main([*base, "--out", str(tmp_path / "none.jsonl"), "--recording", str(rec)]) == 2
    assert f"set the environment variable {KEY_ENV[provider]}" in capsys.readouterr().err
    monkeypatch.setenv(KEY_ENV[provider], KEY)
    assert main([*base, "--out", str(tmp_path / "live.jsonl"), "--recording", str(rec)]) == 0
    monkeypatch.delenv(KEY_ENV[provider])
    assert main([*base, "--out", str(tmp_path / "replay.jsonl"), "--replay", str(rec)]) == 0
    assert ((tmp_path / "live.jsonl").read_bytes()
            == (tmp_path / "replay.jsonl").read_bytes())
    assert KEY not in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--out", "x", "--recording", str(rec), "--replay", str(rec)])


# --------------------------------------------------------------------------- offline pieces


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_simulated_run_records_and_replays_too(provider: str, cfg: config.Config,
                                                 toolbox: Any, tmp_path: Path) -> None:
    """No socket at all: the recorder wraps the simulator's MockTransport (faults too)."""
    spec = cfg.run("variacion_busi", provider, "fallo_429_recupera")
    live, rec, replayed = (tmp_path / n for n in ("s.jsonl", "r.jsonl", "p.jsonl"))
    end = run_to_trace(spec, toolbox, live, recording=rec)
    assert end["termination"] == "answer"
    assert [r["response"]["status"] for r in records(rec)] == [429, 200, 200, 200]
    run_to_trace(spec, toolbox, replayed, replay=rec)
    assert replayed.read_bytes() == live.read_bytes()


def test_local_backends_cannot_record(cfg: config.Config, toolbox: Any,
                                      tmp_path: Path) -> None:
    spec = cfg.run("variacion_busi", "local", "correcto")
    with pytest.raises(RecordingError, match="no HTTP layer"):
        run_to_trace(spec, toolbox, tmp_path / "t.jsonl", recording=tmp_path / "r.jsonl")


def test_redaction_helpers() -> None:
    assert recording.redact_url("https://user:pw@api.example.com/v1/responses"
                                "?api-key=abc&api_version=2&access_token=x") == (
        "https://api.example.com/v1/responses?api_version=2")
    assert all(recording.sensitive(h) for h in (
        "Authorization", "x-api-key", "api-key", "Cookie", "Idempotency-Key",
        "x-goog-api-key", "proxy-authorization", "x-auth-token", "openai-organization"))
    assert not any(recording.sensitive(h) for h in (
        "content-type", "user-agent", "anthropic-version", "x-stainless-os"))
    assert recording.scrub(f"key {KEY}!", KEY) == "key [redacted]!"
    assert recording.scrub("EMPTY response", "EMPTY") == "EMPTY response"  # too short


def test_first_difference() -> None:
    diff = recording.first_difference
    assert diff({"a": [1, {"b": "x"}]}, {"a": [1, {"b": "x"}]}) is None
    assert diff({"a": [1, {"b": "x"}]}, {"a": [1, {"b": "y"}]}) == 'a[1].b: recorded "x", sent "y"'
    assert diff({"a": 1}, {"a": 1, "c": 2}) == "c: only in the sent body"
    assert diff({"a": [1, 2]}, {"a": [1]}) == "a: 2 items recorded, 1 sent"
    assert diff({"a": True}, {"a": 1}) is not None
    assert diff({"a": 1}, {"a": 1.0}) is None  # JSON-equal


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_the_recorder_filters_what_the_sdk_reads_back(lib: Any) -> None:
    """Kept headers only, the key redacted, a retry-after date turned into seconds: the
    live run reads exactly what its replay will."""
    import email.utils
    import time

    when = email.utils.formatdate(time.time() + 30, usegmt=True)

    def handler(request: Any) -> Any:
        return lib.Response(429, headers={"retry-after": when, "set-cookie": "a=b",
                                          "request-id": "req_1"},
                            json={"error": {"message": f"slow down, {KEY}"}})

    recorder = recording.Recorder()
    transport = recorder.wrap(lib, lib.MockTransport(handler), secret=KEY)
    with lib.Client(transport=transport) as client:
        got = client.post("http://api.example/v1/x?key=abc", json={"q": KEY},
                          headers={"authorization": f"Bearer {KEY}", "x-trace": "t"})
    (rec,) = recorder.records
    assert rec["request"]["url"] == "http://api.example/v1/x"
    assert rec["request"]["body"] == {"q": recording.REDACTED}
    assert "authorization" not in rec["request"]["headers"]
    assert rec["request"]["headers"]["x-trace"] == "t"
    assert set(got.headers) - {"content-length"} == {"content-type", "retry-after",
                                                     "request-id"}
    assert 25 < float(got.headers["retry-after"]) <= 30
    assert rec["response"]["headers"]["retry-after"] == got.headers["retry-after"]
    assert KEY not in got.text and recording.REDACTED in got.text
    assert KEY not in json.dumps(recorder.records)
    replay = recording.Replay(recorder.records)
    with lib.Client(transport=replay.transport(lib)) as client:
        again = client.post("http://elsewhere/v1/x", json={"q": recording.REDACTED})
    assert (again.status_code, again.text, dict(again.headers)) == (
        got.status_code, got.text, dict(got.headers))
    replay.check_finished()
