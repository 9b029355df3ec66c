"""The simulator base: what every simulated API shares, with per-API hooks.

A simulated API is a :class:`Simulator` subclass. The base owns the request path that is
the same for every API — read the body (:func:`reactlab.simulate.read_request`), validate
it, ask the API's :meth:`~Simulator.respond` for the scripted answer, send it as JSON or
as server-sent events — and the fault path (:meth:`~Simulator.fault_response`: transport
errors, status faults, broken bodies cut from the real answer). A subclass says how its
API differs, in hooks:

==========================  ==============================================================
``http``                    the httpx-like library its SDK's transport speaks (httpx, httpx2)
``broken_member``           the member a ``missing_fields`` fault drops (``output``, …)
``validate(body)``          RequestInvalid for a malformed body (deep, naming the field)
``step_of(body)``           the loop step of a request (1 + assistant turns in it)
``respond(policy, body,     (status, JSON body) of the scripted answer
input_tokens)``
``events(answer)``          the documented SSE event sequence of a 200 answer
``refusal(exc)``            the API's error body for a request it refused
``status_fault(fault)``     (error body, headers) the API sends for a status fault
``broken_source(answer)``   the answer a broken-body fault is cut from
``missing(path)``,          the API's RequestInvalid for a missing field / a field of the
``wrong_type(path, …)``     wrong type (used by :meth:`~Simulator.need`)
``content_type_refusal``    the API's RequestInvalid for a body not sent as JSON
``admit(body, headers)``    RequestInvalid for a body its headers do not allow (optional:
                            a feature that needs a beta header)
``expand(body, store)``     the request with server-kept state spliced in (optional)
``remember(store, body,     keep an answer for later requests (optional)
answer)``
==========================  ==============================================================

:class:`OpenAIErrors` implements the error hooks in the OpenAI APIs' shape, for the
Responses and Chat Completions simulators alike. The first four hooks run the API
module's own functions of the same names, given when the one instance is made
(``SIMULATOR = MySimulator(validate, step_of, respond, events)``); its bound
:meth:`~Simulator.handler` and :meth:`~Simulator.with_faults` are what the in-process
transports and the server call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, ClassVar

from reactlab.config.faults import Fault, FaultPlan
from reactlab.config.scripts import Action
from reactlab.core.errors import ScriptError
from reactlab.simulate import (
    FaultInjector,
    Handler,
    RequestInvalid,
    ResponseStore,
    ScriptedPolicy,
    ToolChoice,
    broken_body,
    content_type_refused,
    parse_tool_output,
    read_request,
    retry_after_headers,
    sse,
    tokens_of,
    unstreamed,
)

#: The extension of a simulator response that holds the answer it was built from.
ANSWER = "reactlab.answer"

#: An API module's functions that the hooks of the same names run.
Validate = Callable[[dict[str, Any]], None]
StepOf = Callable[[dict[str, Any]], int]
Respond = Callable[[ScriptedPolicy, dict[str, Any], int], tuple[int, dict[str, Any]]]
Events = Callable[[dict[str, Any]], list[dict[str, Any]]]


class Simulator:
    """One simulated API: the shared request and fault paths; hooks say what differs."""

    #: Short name of the API (``openai``, ``anthropic``, …): for messages and logs.
    name: ClassVar[str] = ""
    #: The httpx-like library whose Request / Response / errors the API's SDK uses.
    http: ClassVar[ModuleType]
    #: The answer member a ``missing_fields`` broken-body fault drops.
    broken_member: ClassVar[str] = ""

    def __init__(self, validate: Validate, step_of: StepOf, respond: Respond,
                 events: Events) -> None:
        self._validate, self._step_of = validate, step_of
        self._respond, self._events = respond, events

    # --- hooks --------------------------------------------------------------------------

    def validate(self, body: dict[str, Any]) -> None:
        """RequestInvalid for a malformed request body."""
        self._validate(body)

    def step_of(self, body: dict[str, Any]) -> int:
        """The loop step of a request: 1 + the assistant turns it holds."""
        return self._step_of(body)

    def respond(self, policy: ScriptedPolicy, body: dict[str, Any],
                input_tokens: int = 0) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) of the answer to a validated request."""
        return self._respond(policy, body, input_tokens)

    def events(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        """The server-sent events that stream a 200 answer."""
        return self._events(answer)

    def refusal(self, exc: RequestInvalid) -> dict[str, Any]:
        """The API's error body for a request refused before the model saw it."""
        raise NotImplementedError

    def status_fault(self, fault: Fault) -> tuple[dict[str, Any], dict[str, str]]:
        """(error body, headers) of a status fault."""
        raise NotImplementedError

    def broken_source(self, answer: dict[str, Any]) -> dict[str, Any]:
        """The answer a broken-body fault is cut from (default: the answer itself)."""
        return answer

    def missing(self, path: str) -> RequestInvalid:
        """The API's refusal of a required field that is absent (or null)."""
        raise NotImplementedError

    def wrong_type(self, path: str, expected: str, value: Any) -> RequestInvalid:
        """The API's refusal of a field of the wrong type (``expected`` in its words)."""
        raise NotImplementedError

    def content_type_refusal(self, content_type: str | None) -> RequestInvalid:
        """The API's refusal of a body whose Content-Type is not ``application/json``."""
        return content_type_refused(content_type)

    def admit(self, body: dict[str, Any], headers: Any) -> None:
        """RequestInvalid for a (validated) body that the request's headers do not allow,
        e.g. a beta feature without its beta header (default: every body is allowed)."""

    def expand(self, body: dict[str, Any], store: ResponseStore | None) -> dict[str, Any] | None:
        """The request with the state a server keeps spliced in (e.g. the conversation of
        ``previous_response_id``), None when the request uses none; RequestInvalid when
        it names state that is not there."""
        return None

    def remember(self, store: ResponseStore, body: dict[str, Any],
                 answer: dict[str, Any]) -> None:
        """Keep a 200 answer for later requests (default: nothing is kept)."""

    # --- shared -------------------------------------------------------------------------

    def need(self, d: dict[str, Any], key: str, kind: type | tuple[type, ...],
             expected: str, where: str) -> Any:
        """``d[key]``, which must be present and of ``kind`` (:func:`need`)."""
        return need(d, key, kind, expected, where, self.missing, self.wrong_type)

    def read(self, raw: bytes, content_type: str | None) -> dict[str, Any]:
        """The validated JSON body of a request (RequestInvalid otherwise)."""
        body = read_request(raw, content_type, self.content_type_refusal)
        self.validate(body)
        return body

    def refused(self, exc: RequestInvalid) -> Any:
        """The response to a refused request (status and body of the API)."""
        return self.http.Response(exc.status, json=self.refusal(exc))

    def reply(self, status: int, payload: dict[str, Any], stream: bool) -> Any:
        """The response carrying ``payload``: SSE for a streamed 200, JSON otherwise."""
        if status == 200 and stream:
            resp = self.http.Response(200, headers={"content-type": "text/event-stream"},
                                      content=sse(self.events(payload)))
        else:
            resp = self.http.Response(status, json=payload)
        resp.extensions[ANSWER] = payload
        return resp

    def handler(self, policy: ScriptedPolicy, store: ResponseStore | None = None) -> Handler:
        """A ``MockTransport`` handler serving ``policy``: stateless (each request holds
        the whole conversation) unless a ``store`` is given, as the server does."""

        def handle(request: Any) -> Any:
            try:
                body = self.read(request.content, request.headers.get("content-type"))
                self.admit(body, request.headers)
                expanded = self.expand(body, store)
            except RequestInvalid as exc:
                return self.refused(exc)
            if expanded is None:
                counted = unstreamed(request.content).decode("utf-8")
            else:
                body = expanded
                counted = json.dumps({k: v for k, v in body.items() if k != "stream"},
                                     ensure_ascii=False)
            status, payload = self.respond(policy, body, tokens_of(counted))
            if status == 200 and store is not None:
                self.remember(store, body, payload)
            return self.reply(status, payload, body.get("stream") is True)

        return handle

    def fault_response(self, fault: Fault, request: Any, handle: Handler) -> Any:
        """What the simulated API answers (or the transport raises) on a faulty attempt.

        A broken body is the same bytes whether the request asked for a stream or not
        (what a proxy answers in the API's place does not depend on it).
        """
        if fault.raises == "connect":
            raise self.http.ConnectError("simulated fault: connection refused",
                                         request=request)
        if fault.raises == "timeout":
            raise self.http.ReadTimeout("simulated fault: read timed out", request=request)
        if fault.status is not None:
            body, headers = self.status_fault(fault)
            return self.http.Response(fault.status, headers=headers or None, json=body)
        real = handle(request)
        answer = dict(real.extensions.get(ANSWER) or {})
        plain = (self.http.Response(real.status_code, json=self.broken_source(answer)).read()
                 if answer else real.read())
        content, ctype = broken_body(fault, plain, self.broken_member)
        return self.http.Response(200, headers={"content-type": ctype}, content=content)

    def with_faults(self, handle: Handler, plan: FaultPlan) -> FaultInjector:
        """``handle`` behind the faults of ``plan`` (which counts this run's attempts)."""
        return FaultInjector(handle, plan, self.step_of, self.fault_response)


def need(d: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
         where: str, missing: Callable[[str], RequestInvalid],
         wrong_type: Callable[[str, str, Any], RequestInvalid]) -> Any:
    """``d[key]``, which must be present and of ``kind`` (a bool is no number); the API's
    ``missing(path)`` or ``wrong_type(path, expected, value)`` refusal otherwise."""
    value = d.get(key)
    if value is None:
        raise missing(f"{where}.{key}")
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise wrong_type(f"{where}.{key}", expected, value)
    return value


def content_parts(parts: list[Any], where: str, missing: Callable[[str], RequestInvalid],
                  wrong_type: Callable[[str, str, Any], RequestInvalid],
                  ) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(path, part, type) of each content part of ``parts`` (at ``where``): an object with
    a string ``type``; the API's ``missing`` / ``wrong_type`` refusal otherwise."""
    for j, part in enumerate(parts):
        pw = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise wrong_type(pw, "an object", part)
        yield pw, part, need(part, "type", str, "a string", pw, missing, wrong_type)


# --- the OpenAI APIs' error shapes (Responses, Chat Completions) ---------------------------

# The error the OpenAI APIs send for each status: (type, code, message).
OPENAI_STATUS_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request (simulated fault)."),
    401: ("invalid_request_error", "invalid_api_key",
          "Incorrect API key provided (simulated fault)."),
    403: ("invalid_request_error", "unsupported_country_region_territory",
          "Country, region, or territory not supported (simulated fault)."),
    404: ("invalid_request_error", "model_not_found",
          "The model does not exist or you do not have access to it (simulated fault)."),
    409: ("invalid_request_error", None, "Conflict (simulated fault)."),
    422: ("invalid_request_error", None, "Unprocessable entity (simulated fault)."),
    429: ("requests", "rate_limit_exceeded",
          "Rate limit reached for requests (simulated fault)."),
    500: ("server_error", None,
          "The server had an error while processing your request (simulated fault)."),
    503: ("server_error", None,
          "The engine is currently overloaded, please try again later (simulated fault)."),
}


def openai_error_body(kind: str, message: str, param: str | None = None,
                      code: str | None = None) -> dict[str, Any]:
    """The OpenAI APIs' error shape."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class OpenAIErrors:
    """The error hooks of :class:`Simulator` in the OpenAI APIs' shapes (a mixin)."""

    def refusal(self, exc: RequestInvalid) -> dict[str, Any]:
        return openai_error_body("invalid_request_error", exc.message, exc.param, exc.code)

    def status_fault(self, fault: Fault) -> tuple[dict[str, Any], dict[str, str]]:
        status = fault.status
        assert status is not None
        kind, code, message = OPENAI_STATUS_ERRORS.get(status, (
            "server_error" if status >= 500 else "invalid_request_error", None,
            f"HTTP {status} (simulated fault)."))
        return openai_error_body(kind, message, None, code), retry_after_headers(fault)

    def missing(self, path: str) -> RequestInvalid:
        return RequestInvalid(f"Missing required parameter: '{path}'.", path,
                              code="missing_required_parameter")

    def wrong_type(self, path: str, expected: str, value: Any) -> RequestInvalid:
        got = "null" if value is None else type(value).__name__
        return RequestInvalid(f"Invalid type for '{path}': expected {expected}, but got "
                              f"{got} instead.", path, code="invalid_type")

    def content_type_refusal(self, content_type: str | None) -> RequestInvalid:
        shown = (content_type or "")[:80]
        return RequestInvalid(
            f"Unsupported content type: '{shown}'. This API method only accepts "
            "'application/json' requests, but you specified the header 'Content-Type: "
            f"{shown}'. Please try again with a supported content type.",
            code="unsupported_content_type")


def openai_play(policy: ScriptedPolicy, model: str, outputs: list[str], turn: int,
                choice: ToolChoice, calls_made: int, *, unknown: RequestInvalid,
                where: str, seen: str | None = None) -> tuple[Action, str]:
    """The scripted model's action on ``turn`` of a conversation whose tool outputs are
    ``outputs`` (in the order of the calls; ``seen``: the text they came in, default
    ``outputs`` joined), and the answer's model name; when it cannot
    play, the OpenAI APIs' refusal as a RequestInvalid (status, message, param, code):
    ``unknown`` for a model not served, a script error, or a tool output nested too
    deeply for the scripted model (``where`` names the conversation's field)."""
    results = [parse_tool_output(o) for o in outputs]
    try:
        action = policy.act(model, turn, results,
                            "\n".join(outputs) if seen is None else seen, choice, calls_made)
        return action, policy.resolve(model)
    except KeyError:
        raise unknown from None
    except ScriptError as exc:
        raise RequestInvalid(str(exc), code="script_error") from None
    except RecursionError:
        raise RequestInvalid("a tool output is nested too deeply for the scripted model",
                             where, code="script_error") from None


# --- the Messages API's error shapes -------------------------------------------------------


def anthropic_error_body(kind: str, message: str) -> dict[str, Any]:
    """The Messages API's error shape."""
    return {"type": "error", "error": {"type": kind, "message": message}}


# The documented error type of each status, and the message of each type.
_ANTHROPIC_STATUS_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
    429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}
ANTHROPIC_ERROR_MESSAGES = {
    "invalid_request_error": "Invalid request", "authentication_error": "invalid x-api-key",
    "billing_error": "Billing issue",
    "permission_error": "Your API key does not have permission to use the specified "
    "resource", "not_found_error": "Not found",
    "request_too_large": "Request exceeds the maximum allowed number of bytes",
    "rate_limit_error": "Number of requests has exceeded your rate limit",
    "api_error": "Internal server error", "timeout_error": "Request timed out",
    "overloaded_error": "Overloaded"}


def anthropic_error_type(status: int) -> str:
    """The Messages API's error type of an HTTP status."""
    return _ANTHROPIC_STATUS_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error")
