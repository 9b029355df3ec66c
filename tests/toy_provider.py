"""A toy provider, in this one module: a made-up wire API, its simulator and its adapter.

Importing this module registers the provider ``toy`` (:func:`reactlab.backends.registry.register`);
nothing else in the project names it. tests/test_toy_provider.py then runs scripted
scenarios through it: the pipeline's run job, the HTTP server (loopback), the streamed
path. It proves that a provider is one registered object.

The wire API ("toy turns", ``POST /v1/toy/turns``)::

    request   {"model": str, "turns": [TURN...], "tools": [{"name", "about", "schema"}],
               "stream": bool (optional)}
    TURN      {"who": "user", "say": str}
            | {"who": "bot", "say": str, "calls": [{"ref", "tool", "args": str}]}
            | {"who": "tool", "ref": str, "out": str}
    answer    {"model": str, "say": str, "calls": [{"ref", "tool", "args": str}]}
    error     {"oops": {"status": int, "why": str}}
    stream    text/event-stream: "say" events with a piece of text, one "call" event per
              call, then "done" with the whole answer.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from reactlab.agent.types import ToolCall, ToolOutcome
from reactlab.backends import api_result_text, parse_arguments, protocol_error, retry, streaming
from reactlab.backends.adapter import Answer, ApiSession
from reactlab.backends.registry import CONVERSATION, Provider, register
from reactlab.config.faults import Fault, FaultPlan
from reactlab.core.errors import NetworkError, RequestTimeoutError, ScriptError
from reactlab.simulate import (
    FaultInjector,
    Handler,
    RequestInvalid,
    ScriptedPolicy,
    broken_body,
    count_runs,
    pair_results,
    parse_tool_output,
    read_request,
    retry_after_headers,
    sse,
    text_chunks,
    tokens_of,
    unstreamed,
)
from reactlab.simulate.apis import WireApi

ROUTE = "/v1/toy/turns"

# --- the simulator (what simulate/<api>.py holds for a real API) ---------------------------


def error_body(status: int, message: str, *, param: str | None = None,
               code: str | None = None, kind: str | None = None) -> dict[str, Any]:
    return {"oops": {"status": status, "why": message}}


def _turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in body.get("turns") or [] if isinstance(t, dict)]


def step_of(body: dict[str, Any]) -> int:
    return count_runs([t.get("who") == "bot" for t in _turns(body)]) + 1


def validate(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str):
        raise RequestInvalid("model: a string, please", "model")
    turns = body.get("turns")
    if not isinstance(turns, list) or not turns:
        raise RequestInvalid("turns: a non-empty list, please", "turns")
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or turn.get("who") not in ("user", "bot", "tool"):
            raise RequestInvalid(f"turns[{i}]: who is user, bot or tool", f"turns[{i}]")


def respond(policy: ScriptedPolicy, body: dict[str, Any],
            input_tokens: int = 0) -> tuple[int, dict[str, Any]]:
    turns = _turns(body)
    try:
        outputs = pair_results(
            [c["ref"] for t in turns if t["who"] == "bot" for c in t.get("calls", [])],
            [(t["ref"], t["out"]) for t in turns if t["who"] == "tool"], "ref")
    except RequestInvalid as exc:
        return 400, error_body(400, exc.message)
    model = body["model"]
    try:
        action = policy.act(model, count_runs([t["who"] == "bot" for t in turns]),
                            [parse_tool_output(o) for o in outputs], "\n".join(outputs))
        resolved = policy.resolve(model)
    except KeyError:
        return 404, error_body(404, f"no model {model}")
    except ScriptError as exc:
        return 400, error_body(400, str(exc))
    n = len(outputs)
    calls = [{"ref": f"t{n}_{i}", "tool": c.name, "args": c.arguments_text()}
             for i, c in enumerate(action.calls)]
    return 200, {"model": resolved, "say": action.text or "", "calls": calls,
                 "used": input_tokens}


def events(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [*({"type": "say", "piece": p} for p in text_chunks(answer["say"])),
            *({"type": "call", "call": c} for c in answer["calls"]),
            {"type": "done", "answer": answer}]


def handler(policy: ScriptedPolicy) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        try:
            body = read_request(request.content, request.headers.get("content-type"))
            validate(body)
        except RequestInvalid as exc:
            return httpx.Response(exc.status, json=error_body(exc.status, exc.message))
        status, payload = respond(policy, body,
                                  tokens_of(unstreamed(request.content).decode("utf-8")))
        if status == 200 and body.get("stream") is True:
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  content=sse(events(payload)))
        return httpx.Response(status, json=payload)

    return handle


def fault_response(fault: Fault, request: httpx.Request, handle: Handler) -> httpx.Response:
    if fault.raises == "connect":
        raise httpx.ConnectError("toy fault: connection refused", request=request)
    if fault.raises == "timeout":
        raise httpx.ReadTimeout("toy fault: read timed out", request=request)
    if fault.status is not None:
        return httpx.Response(fault.status, headers=retry_after_headers(fault),
                              json=error_body(fault.status, "toy fault"))
    content, ctype = broken_body(fault, handle(request).read(), "calls")
    return httpx.Response(200, headers={"content-type": ctype}, content=content)


def with_faults(handle: Handler, plan: FaultPlan) -> FaultInjector:
    return FaultInjector(handle, plan, step_of, fault_response)


TOY_API = WireApi(name="toy_turns", routes=(ROUTE,), simulator=__name__, http_library="httpx",
                  error=error_body, not_found=lambda where: f"toy: nothing at {where}")

# --- the adapter (what backends/<api>.py holds for a real API) ----------------------------


class ToyClient:
    """The toy API's client: one POST (there is no SDK)."""

    def __init__(self, http: httpx.Client, base_url: str) -> None:
        self.http, self.url = http, base_url.rstrip("/") + ROUTE

    def post(self, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(self.url, content=json.dumps(body).encode(),
                              headers={"content-type": "application/json"})


def read_answer(answer: Any) -> Answer:
    if not isinstance(answer, dict) or not isinstance(answer.get("calls"), list):
        raise protocol_error(None, f"not a toy answer: {str(answer)[:80]!r}")
    calls = []
    for c in answer["calls"]:
        args, raw = parse_arguments(c["args"])
        calls.append(ToolCall(id=c["ref"], name=c["tool"], arguments=args, raw=raw))
    return calls, answer["say"], [{"who": "bot", "say": answer["say"],
                                   "calls": answer["calls"]}]


def read_events(client: ToyClient, response: httpx.Response) -> Any:
    if not streaming.is_event_stream(response):
        return response.json()
    for block in response.text.split("\n\n"):
        data = next((line[6:] for line in block.splitlines() if line.startswith("data: ")),
                    None)
        if data is not None and json.loads(data)["type"] == "done":
            return json.loads(data)["answer"]
    raise ValueError("the toy stream ended without a done event")


class ToySession(ApiSession):
    api = TOY_API
    simulated_base_url = "http://simulado-toy"
    system_field = "system"
    catch = (httpx.HTTPError, ValueError, KeyError, TypeError)
    read = staticmethod(read_answer)
    read_stream = staticmethod(read_events)

    def make_client(self, key: str, base_url: str | None, http: httpx.Client) -> ToyClient:
        return ToyClient(http, base_url or "http://toy.invalid")

    def tool_definition(self, name: str, description: str,
                        schema: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "about": description, "schema": schema}

    def create(self, stream: bool) -> Any:
        body = {"model": self.model, "turns": self.history, **self.extra,
                **({"stream": True} if stream else {})}
        response = self.client.post(body)
        if response.status_code >= 400:
            raise retry.status_error(response.status_code, response.text)
        return response if stream else response.json()

    def translate_error(self, exc: Exception) -> Exception:
        if isinstance(exc, httpx.TimeoutException):
            return RequestTimeoutError(str(exc))
        if isinstance(exc, httpx.TransportError):
            return NetworkError(str(exc))
        return protocol_error(exc)

    def _remember(self, items: list[dict[str, Any]]) -> None:
        self.history += items

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        self.history += [{"who": "tool", "ref": oc.call.id, "out": api_result_text(oc)}
                         for oc in outcomes]

    def user_message(self, text: str) -> Any:
        return {"who": "user", "say": text}

    def add_system_prompt(self, text: str) -> None:
        self.history.insert(0, {"who": "user", "say": text})


# --- the one registration -------------------------------------------------------------------

TOY = register(Provider("toy", {CONVERSATION: (__name__, "ToySession")}, api=TOY_API,
                        packages=("httpx",), loggers=("toyapi",)))
