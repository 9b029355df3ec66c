"""Provider faults injected in the simulators, and the adapters' bounded retries.

Faults reach the real SDKs through the simulated transports; waits go to an injected
``sleep`` that records instead of sleeping, so nothing here takes real time. The last
tests prove that no test can reach the network at all.
"""

from __future__ import annotations

import dataclasses
import json
import math
import socket
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

import reactlab.simulate.anthropic_messages as sim_anthropic
import reactlab.simulate.openai_responses as sim_openai
from reactlab import config, trace
from reactlab.agent.loop import run_agent
from reactlab.backends import open_session, retry
from reactlab.config import RunSpec
from reactlab.config.faults import Fault, FaultPlan, parse_fault, parse_plan
from reactlab.config.scripts import Script
from reactlab.config.settings import backend_settings
from reactlab.core.errors import (
    BackendError,
    ConfigError,
    NetworkError,
    ProtocolError,
    RequestTimeoutError,
)
from reactlab.runner import run_to_trace
from reactlab.simulate import ScriptedPolicy

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("openai", "anthropic")
SIMULATORS = {"openai": sim_openai, "anthropic": sim_anthropic}
NETWORK_REFUSED = "a test tried to open a network connection"


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return config.load(ROOT / "config.yaml")


def make_spec(cfg: config.Config, provider: str, faults: list[dict[str, Any]],
              scenario: str = "correcto", **backend: Any) -> RunSpec:
    """A shipped run with a fault plan and extra backend settings."""
    spec = cfg.run("variacion_busi", provider, scenario)
    return dataclasses.replace(spec, script=spec.script.replace(faults=faults),
                               backend_config=spec.backend_config.replace(**backend))


class Sleeps(list[float]):
    """An injected sleep: records the waits requested, sleeps for none."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def run_spec(spec: RunSpec, toolbox: Any
             ) -> tuple[dict[str, Any], list[dict[str, Any]], Sleeps, Any]:
    sleeps = Sleeps()
    session = open_session(spec, sleep=sleeps)
    records: list[dict[str, Any]] = []
    end = run_agent(session, toolbox, spec.tools, spec.limits.max_steps,
                    spec.limits.token_budget, lambda r: records.append(r.to_json()))
    return end.to_json(), records, sleeps, session


def first_error(spec: RunSpec) -> tuple[BackendError, Sleeps, Any]:
    """The BackendError of the run's first request."""
    sleeps = Sleeps()
    session = open_session(spec, sleep=sleeps)
    with pytest.raises(BackendError) as info:
        session.request(None)
    return info.value, sleeps, session


def of_type(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == kind]


# --------------------------------------------------------------------------- the fault model


def test_parse_fault_and_round_trip() -> None:
    raw = {"attempt": 2, "status": 429, "retry_after": 0.01}
    fault = parse_fault(raw)
    assert fault == Fault(attempt=2, status=429, retry_after=0.01)
    assert fault.to_dict() == raw
    stepped = parse_fault({"step": 3, "times": 2, "raise": "timeout"})
    assert (stepped.step, stepped.times, stepped.raises) == (3, 2, "timeout")
    assert parse_fault(stepped.to_dict()) == stepped
    assert parse_fault({"attempt": 1, "body": "html"}).body == "html"
    assert parse_plan(None) == ()


@pytest.mark.parametrize(("entry", "field", "words"), [
    ({"attempt": 1, "status": 429, "colour": "red"}, "faults[0].colour", "unknown key"),
    ({"status": 429}, "faults[0]", "exactly one of `attempt` or `step`"),
    ({"attempt": 1, "step": 1, "status": 429}, "faults[0]", "exactly one of `attempt`"),
    ({"attempt": 1}, "faults[0]", "exactly one of `status`, `body` or `raise`"),
    ({"attempt": 1, "status": 500, "body": "html"}, "faults[0]", "exactly one of `status`"),
    ({"attempt": 1, "status": 200}, "faults[0].status", "between 400 and 599"),
    ({"attempt": 1, "status": "429"}, "faults[0].status", "must be an integer"),
    ({"attempt": True, "status": 429}, "faults[0].attempt", "must be an integer"),
    ({"attempt": 0, "status": 429}, "faults[0].attempt", "between 1 and"),
    ({"attempt": 1, "body": "html", "retry_after": 1}, "faults[0].retry_after",
     "goes with `status` only"),
    ({"attempt": 1, "status": 429, "retry_after": -1}, "faults[0].retry_after", "seconds"),
    ({"attempt": 1, "status": 429, "retry_after": math.nan}, "faults[0].retry_after",
     "seconds"),
    ({"attempt": 1, "body": "xml"}, "faults[0].body", "truncated, html, missing_fields"),
    ({"attempt": 1, "raise": "dns"}, "faults[0].raise", "connect, timeout"),
    ({"attempt": 1, "times": 2, "status": 500}, "faults[0].times", "goes with `step` only"),
    ("429", "faults[0]", "a fault is a mapping"),
])
def test_parse_fault_errors_name_the_key(entry: Any, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_plan([entry])
    assert info.value.field == field
    assert words in info.value.message


def test_parse_plan_refuses_overlaps_and_non_lists() -> None:
    with pytest.raises(ConfigError, match=r"attempt 2 already has a fault \(faults\[0\]\)"):
        parse_plan([{"attempt": 2, "status": 500}, {"attempt": 2, "status": 429}])
    with pytest.raises(ConfigError, match="use `times`"):
        parse_plan([{"step": 1, "status": 500}, {"step": 1, "status": 429}])
    with pytest.raises(ConfigError, match="a list of mappings"):
        parse_plan({"attempt": 1, "status": 500})  # type: ignore[arg-type]


def test_fault_plan_counts_attempts_and_steps() -> None:
    plan = FaultPlan(parse_plan([{"attempt": 1, "status": 429},
                                 {"step": 2, "times": 2, "status": 500},
                                 {"attempt": 5, "raise": "connect"}]))
    got = [plan.next(step) for step in (1, 1, 2, 2, 2, 3)]
    assert [f and (f.status or f.raises) for f in got] == [429, None, 500, 500, "connect", None]
    assert plan.attempts == 6 and plan.per_step == {1: 2, 2: 3, 3: 1}
    assert not FaultPlan() and plan


# --------------------------------------------------------------------------- the retry policy


def test_retry_after_headers() -> None:
    assert retry.retry_after({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert retry.retry_after({"retry-after": "7"}) == 7.0
    assert retry.retry_after({"retry-after": "0.5"}) == 0.5
    assert retry.retry_after({"retry-after": "soon"}) is None
    assert retry.retry_after({"retry-after-ms": "-5"}) is None
    assert retry.retry_after({"retry-after-ms": "nan", "retry-after": "2"}) == 2.0
    assert retry.retry_after({}) is None and retry.retry_after(None) is None
    now = 1_700_000_000.0  # an HTTP date 30 s after `now`
    date = "Tue, 14 Nov 2023 22:13:50 GMT"
    assert retry.retry_after({"retry-after": date}, now=now) == pytest.approx(30.0)
    assert retry.retry_after({"retry-after": date}, now=now + 60) == 0.0


def test_backoff_schedule_and_cap() -> None:
    policy = retry.RetryPolicy()
    assert (policy.max_attempts, policy.max_wait) == (3, 10.0)
    assert [policy.wait(n, None) for n in (1, 2, 3, 4, 5, 6)] == [0.5, 1, 2, 4, 8, 10]
    assert policy.wait(1, 0.01) == 0.01
    assert policy.wait(1, 3600) == 10.0
    assert retry.RetryPolicy(max_wait=0).wait(3, 5) == 0
    assert retry.RetryPolicy.from_settings(backend_settings(
        {"provider": "openai", "mode": "simulated", "max_attempts": 5, "max_wait": 2})) == \
        retry.RetryPolicy(max_attempts=5, max_wait=2.0)


@pytest.mark.parametrize(("settings", "field"), [
    ({"max_attempts": 0}, "backends.x.max_attempts"),
    ({"max_attempts": 2.0}, "backends.x.max_attempts"),
    ({"max_attempts": True}, "backends.x.max_attempts"),
    ({"max_wait": -1}, "backends.x.max_wait"),
    ({"max_wait": math.inf}, "backends.x.max_wait"),
    ({"max_wait": "10"}, "backends.x.max_wait"),
])
def test_retry_settings_are_checked(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        backend_settings({"provider": "openai", "mode": "simulated", **settings}, "backends.x")
    assert info.value.field == field


def test_status_classification() -> None:
    kinds = {s: retry.kind_for_status(s) for s in (400, 401, 403, 404, 408, 409, 422, 429,
                                                   500, 502, 503, 504, 529)}
    assert kinds == {400: "client", 401: "client", 403: "client", 404: "client",
                     408: "timeout", 409: "server", 422: "client", 429: "rate_limit",
                     500: "server", 502: "server", 503: "server", 504: "server",
                     529: "server"}
    retried = {s for s in kinds if retry.is_retryable(retry.status_error(s, "x"))}
    assert retried == {408, 409, 429, 500, 502, 503, 504, 529}
    assert retry.is_retryable(NetworkError("x"))
    assert retry.is_retryable(RequestTimeoutError("x"))
    assert not retry.is_retryable(ProtocolError("x"))
    assert "check the API key" in str(retry.status_error(401, "no"))


# --------------------------------------------------------------------------- the simulators

_BODY = {"openai": {"model": "m", "input": [{"role": "user", "content": "¿?"}]},
         "anthropic": {"model": "m", "max_tokens": 5,
                       "messages": [{"role": "user", "content": "¿?"}]}}
_LIB = {"openai": httpx, "anthropic": httpx2}


def _faulty(provider: str, *faults: dict[str, Any]) -> tuple[Any, Any]:
    """A fault-wrapped simulator handler and a request for it."""
    policy = ScriptedPolicy({"m": Script("m", ({"answer": "hola"},))}, {}, "¿?")
    sim = SIMULATORS[provider]
    handle = sim.with_faults(sim.handler(policy), FaultPlan(parse_plan(list(faults))))
    lib = _LIB[provider]
    request = lib.Request("POST", "http://simulado/v1/x", json=_BODY[provider])
    return handle, request


ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                   403: "permission_error", 404: "not_found_error",
                   422: "invalid_request_error", 429: "rate_limit_error", 500: "api_error",
                   503: "api_error", 529: "overloaded_error"}


@pytest.mark.parametrize("status", sorted(ANTHROPIC_TYPES))
@pytest.mark.parametrize("provider", PROVIDERS)
def test_error_responses_have_the_documented_shape(provider: str, status: int) -> None:
    handle, request = _faulty(provider, {"attempt": 1, "status": status, "retry_after": 1.5})
    response = handle(request)
    assert response.status_code == status
    assert response.headers["retry-after"] == "2"  # HTTP has whole seconds
    assert response.headers["retry-after-ms"] == "1500"
    body = response.json()
    if provider == "openai":
        assert set(body) == {"error"}
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["message"]
    else:
        assert body["type"] == "error"
        assert set(body["error"]) == {"type", "message"}
        assert body["error"]["type"] == ANTHROPIC_TYPES[status]
    # the next attempt is not faulted: the policy answers
    assert handle(request).status_code == 200


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_retry_after_headers_unless_asked(provider: str) -> None:
    handle, request = _faulty(provider, {"attempt": 1, "status": 503})
    response = handle(request)
    assert response.status_code == 503
    assert "retry-after" not in response.headers
    assert "retry-after-ms" not in response.headers


@pytest.mark.parametrize("provider", PROVIDERS)
def test_broken_bodies_are_200s(provider: str) -> None:
    field = {"openai": "output", "anthropic": "content"}[provider]
    handle, request = _faulty(provider, {"attempt": 1, "body": "truncated"},
                              {"attempt": 2, "body": "html"},
                              {"attempt": 3, "body": "missing_fields"},
                              {"attempt": 4, "body": "empty"})
    truncated, html, missing, empty = (handle(request) for _ in range(4))
    whole = handle(request).content
    # Broken bodies are cut from the answer as it was before usage was counted (no usage
    # in a Responses answer, zeros in a Messages one) and with its ids and request echoes
    # frozen, so fault traces keep their bytes.
    answer = json.loads(whole)
    assert answer["usage"]["input_tokens"] > 0
    if provider == "openai":
        for key in ("usage", "previous_response_id", "store"):
            del answer[key]
        answer.update(id="resp_sim", parallel_tool_calls=True, tool_choice="auto", tools=[])
        answer["output"][0]["id"] = "msg_1"
    else:
        answer["usage"] = {"input_tokens": 0, "output_tokens": 0}
        answer["id"] = "msg_sim"
    whole = _LIB[provider].Response(200, json=answer).content
    assert all(r.status_code == 200 for r in (truncated, html, missing, empty))
    assert truncated.content and whole.startswith(truncated.content)
    assert len(truncated.content) == len(whole) // 2
    with pytest.raises(ValueError):
        json.loads(truncated.content)
    assert html.headers["content-type"].startswith("text/html")
    assert html.text.lstrip().lower().startswith("<!doctype html>")
    payload = missing.json()
    assert field not in payload and payload["model"] == "m"
    assert field in json.loads(whole)
    assert empty.content == b""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_transport_faults_raise_the_librarys_errors(provider: str) -> None:
    lib = _LIB[provider]
    handle, request = _faulty(provider, {"attempt": 1, "raise": "connect"},
                              {"attempt": 2, "raise": "timeout"})
    with pytest.raises(lib.ConnectError):
        handle(request)
    with pytest.raises(lib.ReadTimeout):
        handle(request)
    assert handle(request).status_code == 200


# --------------------------------------------------------------------------- retries, end to end


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_then_200_is_one_step_with_two_attempts(cfg: config.Config, toolbox: Any,
                                                    provider: str) -> None:
    clean, clean_records, _, _ = run_spec(make_spec(cfg, provider, []), toolbox)
    spec = make_spec(cfg, provider, [{"attempt": 1, "status": 429, "retry_after": 0.01}])
    end, records, sleeps, session = run_spec(spec, toolbox)
    assert end == clean  # same steps, calls, answer and tokens
    assert sleeps == [0.01]
    requests = of_type(records, "request")
    assert [r["attempts"] for r in requests] == [2, 1, 1]
    # tokens_sent counts the logical request once, not once per attempt
    assert [r["tokens_sent"] for r in requests] == [
        r["tokens_sent"] for r in of_type(clean_records, "request")]
    assert session.faults.attempts == 4


@pytest.mark.parametrize("provider", PROVIDERS)
def test_attempt_log_of_a_retried_step(cfg: config.Config, provider: str) -> None:
    spec = make_spec(cfg, provider, [{"attempt": 1, "status": 429, "retry_after": 0.01}])
    sleeps = Sleeps()
    session = open_session(spec, sleep=sleeps)
    turn = session.request(None)
    assert turn.attempts == 2
    assert session.last_attempts == [
        {"attempt": 1, "status": 429, "kind": "rate_limit",
         "error": session.last_attempts[0]["error"], "retry_after": 0.01, "wait": 0.01},
        {"attempt": 2, "status": 200}]
    assert "429" in session.last_attempts[0]["error"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_step_starts_a_fresh_attempt_log(cfg: config.Config, toolbox: Any,
                                              provider: str) -> None:
    spec = make_spec(cfg, provider, [{"attempt": 1, "status": 500}])
    end, _, _, session = run_spec(spec, toolbox)
    assert end["termination"] == "answer"
    assert session.last_attempts == [{"attempt": 1, "status": 200}]


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit"), (500, "server"),
                                              (503, "server"), (529, "server")])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_repeated_failures_stop_at_max_attempts(cfg: config.Config, toolbox: Any,
                                                provider: str, status: int, kind: str) -> None:
    spec = make_spec(cfg, provider, [{"step": 1, "times": 100, "status": status}])
    end, records, sleeps, session = run_spec(spec, toolbox)
    assert session.faults.attempts == 3
    assert sleeps == [0.5, 1.0]  # backoff; nothing slept after the last attempt
    assert end["termination"] == "backend_error"
    assert (end["steps"], end["calls"], end["tokens_sent"]) == (1, 0, 0)
    err = records[-1]
    assert (err["type"], err["kind"], err["status"]) == ("error", kind, status)
    assert "gave up after 3 attempts" in err["message"]
    assert of_type(records, "request") == []


@pytest.mark.parametrize("max_attempts", [1, 2, 5])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_max_attempts_is_configurable(cfg: config.Config, provider: str,
                                      max_attempts: int) -> None:
    spec = make_spec(cfg, provider, [{"step": 1, "times": 100, "status": 503}],
                     max_attempts=max_attempts)
    exc, sleeps, session = first_error(spec)
    assert session.faults.attempts == exc.attempts == max_attempts
    assert sleeps == [0.5, 1.0, 2.0, 4.0][: max_attempts - 1]
    history = exc.history
    assert [h["attempt"] for h in history] == list(range(1, max_attempts + 1))
    assert [h["wait"] for h in history] == [*sleeps, None]
    assert {(h["status"], h["kind"]) for h in history} == {(503, "server")}
    assert exc.retryable is True
    assert session.last_attempts == history


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_client_errors_are_not_retried(cfg: config.Config, toolbox: Any, provider: str,
                                       status: int) -> None:
    spec = make_spec(cfg, provider, [{"step": 1, "times": 100, "status": status}])
    end, records, sleeps, session = run_spec(spec, toolbox)
    assert session.faults.attempts == 1
    assert sleeps == []
    assert end["termination"] == "backend_error"
    err = records[-1]
    assert (err["kind"], err["status"]) == ("client", status)
    assert "gave up" not in err["message"]
    assert ("check the API key" in err["message"]) == (status == 401)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_client_error_carries_its_single_attempt(cfg: config.Config, provider: str) -> None:
    exc, _, _ = first_error(make_spec(cfg, provider, [{"attempt": 1, "status": 401}]))
    assert (exc.kind, exc.status, exc.attempts) == ("client", 401, 1)
    assert exc.retryable is False
    assert exc.history == [{"attempt": 1, "status": 401, "kind": "client",
                            "error": str(exc), "retry_after": None, "wait": None}]
    assert "check the API key" in str(exc)


@pytest.mark.parametrize(("max_wait", "expected"), [(None, 10.0), (2.5, 2.5), (0, 0.0)])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_hour_of_retry_after_is_capped(cfg: config.Config, toolbox: Any, provider: str,
                                          max_wait: float | None, expected: float) -> None:
    extra = {} if max_wait is None else {"max_wait": max_wait}
    spec = make_spec(cfg, provider, [{"attempt": 1, "status": 429, "retry_after": 3600}],
                     **extra)
    end, records, sleeps, _ = run_spec(spec, toolbox)
    assert end["termination"] == "answer"
    assert sleeps == [expected]
    assert all(s <= (10.0 if max_wait is None else max_wait) for s in sleeps)
    assert of_type(records, "request")[0]["attempts"] == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_cap_is_recorded_next_to_what_was_asked(cfg: config.Config, provider: str) -> None:
    spec = make_spec(cfg, provider, [{"step": 1, "times": 9, "status": 429,
                                      "retry_after": 3600}])
    exc, sleeps, _ = first_error(spec)
    assert sleeps == [10.0, 10.0]
    assert [(h["retry_after"], h["wait"]) for h in exc.history] == [
        (3600.0, 10.0), (3600.0, 10.0), (3600.0, None)]


@pytest.mark.parametrize("body", ["truncated", "html", "missing_fields", "empty"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_broken_200s_are_protocol_errors(cfg: config.Config, toolbox: Any, provider: str,
                                         body: str) -> None:
    spec = make_spec(cfg, provider, [{"step": 2, "body": body}])
    end, records, sleeps, session = run_spec(spec, toolbox)
    assert end["termination"] == "backend_error"
    assert end["steps"] == 2 and end["calls"] == 2
    err = records[-1]
    assert (err["type"], err["kind"], err["status"]) == ("error", "protocol", None)
    assert session.faults.attempts == 2  # not retried
    assert sleeps == []
    assert session.last_attempts[-1]["kind"] == "protocol"


@pytest.mark.parametrize(("fault", "kind"), [("connect", "connection"), ("timeout", "timeout")])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_transport_failures_are_retried_within_the_bound(
        cfg: config.Config, toolbox: Any, provider: str, fault: str, kind: str) -> None:
    spec = make_spec(cfg, provider, [{"step": 1, "times": 100, "raise": fault}])
    end, records, sleeps, session = run_spec(spec, toolbox)
    assert session.faults.attempts == 3
    assert sleeps == [0.5, 1.0]
    assert end["termination"] == "backend_error"
    err = records[-1]
    assert (err["kind"], err["status"]) == (kind, None)
    assert "gave up after 3 attempts" in err["message"]


@pytest.mark.parametrize("fault", ["connect", "timeout"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_transport_failure_that_passes(cfg: config.Config, toolbox: Any, provider: str,
                                         fault: str) -> None:
    spec = make_spec(cfg, provider, [{"step": 3, "times": 2, "raise": fault}])
    end, records, sleeps, _ = run_spec(spec, toolbox)
    assert end["termination"] == "answer"
    assert [r["attempts"] for r in of_type(records, "request")] == [1, 1, 3]
    assert sleeps == [0.5, 1.0]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_mixed_faults_on_one_step(cfg: config.Config, toolbox: Any, provider: str) -> None:
    spec = make_spec(cfg, provider, [
        {"attempt": 2, "raise": "timeout"},
        {"attempt": 3, "status": 503, "retry_after": 0.02},
        {"attempt": 4, "status": 529}], max_attempts=5)
    end, records, sleeps, session = run_spec(spec, toolbox)
    assert end["termination"] == "answer"  # step 2 needs 4 attempts; 5 allowed
    assert session.faults.attempts == 6
    assert [r["attempts"] for r in of_type(records, "request")] == [1, 4, 1]
    assert sleeps == [0.5, 0.02, 2.0]  # backoff, the server's retry-after, backoff


@pytest.mark.parametrize("provider", PROVIDERS)
def test_mixed_faults_default_bound(cfg: config.Config, toolbox: Any, provider: str) -> None:
    spec = make_spec(cfg, provider, [{"attempt": 2, "raise": "timeout"},
                                     {"attempt": 3, "status": 503, "retry_after": 0.02},
                                     {"attempt": 4, "status": 529}])
    end, records, sleeps, session = run_spec(spec, toolbox)
    # with the default 3 attempts, step 2 fails for good on its third attempt (the 529)
    assert end["termination"] == "backend_error"
    assert (records[-1]["kind"], records[-1]["status"]) == ("server", 529)
    assert sleeps == [0.5, 0.02]
    assert session.faults.attempts == 4


# --------------------------------------------------------------------------- traces and lesson


@pytest.mark.parametrize("provider", PROVIDERS)
def test_runner_writes_attempts_and_errors(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           provider: str) -> None:
    sleeps = Sleeps()
    monkeypatch.setattr(retry, "default_sleep", sleeps)
    ok = make_spec(cfg, provider, [{"step": 2, "status": 500}])
    end = run_to_trace(ok, toolbox, tmp_path / "ok.jsonl")
    assert end["termination"] == "answer"
    tr = trace.read(tmp_path / "ok.jsonl")
    assert [r.attempts for r in tr.requests()] == [1, 2, 1]
    assert tr.header.spec["script"]["faults"] == [{"step": 2, "status": 500}]
    bad = make_spec(cfg, provider, [{"step": 1, "times": 10, "status": 529}])
    end = run_to_trace(bad, toolbox, tmp_path / "bad.jsonl")
    assert end["termination"] == "backend_error"
    tr = trace.read(tmp_path / "bad.jsonl")
    errors = [e.to_json() for e in tr.errors()]
    assert len(errors) == 1 and (errors[0]["kind"], errors[0]["status"]) == ("server", 529)
    assert sleeps == [0.5, 0.5, 1.0]


@pytest.mark.parametrize(("provider", "tokens"), [("openai", 630), ("anthropic", 643)])
def test_retries_leave_the_lessons_tokens_intact(raw_config: dict, toolbox: Any, provider: str,
                                                 tokens: int) -> None:
    lesson = config.load_yaml(ROOT / "workflow" / "configs" / "lesson.yaml")  # tools not sent
    spec = config.parse(config.merge(raw_config, lesson)).run("variacion_busi", provider,
                                                              "correcto")
    spec = dataclasses.replace(spec, script=spec.script.replace(faults=[
        {"step": s, "status": 429, "retry_after": 0} for s in (1, 2, 3)]))
    end, records, sleeps, session = run_spec(spec, toolbox)
    assert (end["steps"], end["calls"], end["errors"], end["tokens_sent"]) == (3, 3, 0, tokens)
    assert [r["attempts"] for r in of_type(records, "request")] == [2, 2, 2]
    assert sleeps == [0.0, 0.0, 0.0]
    assert session.faults.attempts == 6


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_budget_counts_each_logical_request_once(cfg: config.Config, toolbox: Any,
                                                     provider: str) -> None:
    clean = make_spec(cfg, provider, [])
    end_clean, _, _, _ = run_spec(clean, toolbox)
    budget = end_clean["tokens_sent"]  # exactly enough for the clean run
    spec = dataclasses.replace(make_spec(cfg, provider, [{"step": 3, "status": 500}]),
                               limits={"max_steps": 6, "token_budget": budget})
    end, records, _, _ = run_spec(spec, toolbox)
    assert end["termination"] == "answer"
    assert end["tokens_sent"] == budget
    assert of_type(records, "request")[-1]["attempts"] == 2


def test_no_faults_no_wrapper(cfg: config.Config) -> None:
    for provider in PROVIDERS:
        session = open_session(make_spec(cfg, provider, []), sleep=Sleeps())
        assert not session.faults


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_bad_fault_plan_fails_when_the_session_opens(cfg: config.Config,
                                                       provider: str) -> None:
    with pytest.raises(ConfigError, match=r"faults\[0\]\.raise"):
        open_session(make_spec(cfg, provider, [{"attempt": 1, "raise": "dns"}]))


# --------------------------------------------------------------------------- no network


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Fail (and record) any name lookup: proves the fixture stops traffic before DNS."""
    lookups: list[tuple[Any, ...]] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        lookups.append(args)
        raise OSError("name lookup attempted")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return lookups


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/", "http://api.openai.com/v1/models",
                                 "https://api.anthropic.com/v1/messages"])
@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_no_test_can_reach_the_network(lib: Any, url: str, no_dns: list) -> None:
    with lib.Client() as client, pytest.raises(RuntimeError, match=NETWORK_REFUSED):
        client.get(url)
    assert no_dns == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sdks_without_a_mock_transport_cannot_reach_the_network(provider: str,
                                                                no_dns: list) -> None:
    """The SDKs' default clients, as a user would build them: the fixture's error comes
    out (openai lets it through as it is, anthropic wraps it in APIConnectionError)."""
    with pytest.raises(Exception) as info:  # the chain is checked below
        if provider == "openai":
            import openai

            openai.OpenAI(api_key="sk-x", max_retries=0).responses.create(
                model="m", input="hola")
        else:
            import anthropic

            anthropic.Anthropic(api_key="sk-x", max_retries=0).messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "hola"}])
    chain = [info.value, info.value.__cause__]
    assert any(isinstance(e, RuntimeError) and NETWORK_REFUSED in str(e) for e in chain), chain
    assert no_dns == []
