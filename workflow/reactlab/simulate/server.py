"""The scripted simulators as a real HTTP server (``python -m reactlab serve``).

Another agent framework can be tested against the scenarios of ``config.yaml`` by
pointing its OpenAI-compatible or Anthropic client at this server:

* the routes of every registered wire API (:mod:`reactlab.simulate.apis`): built in,
  ``POST /v1/responses`` (the OpenAI Responses API), ``POST /v1/chat/completions`` (the
  OpenAI Chat Completions API) and ``POST /v1/messages`` (the Anthropic Messages API);
* ``GET /v1/models`` — the model names served (OpenAI list shape; the Anthropic shape
  when the request carries an ``anthropic-version`` header, as the Anthropic SDK's does:
  each API's ``models_header``);
  ``GET /v1/models/{id}`` — one of them (404 in the API's shape for another name);
* ``POST /v1/messages/count_tokens``, ``POST /v1/responses/input_tokens`` — the tokens
  of a request body, the count its ``usage.input_tokens`` reports;
* ``GET /v1/responses/{id}`` — a Responses answer the server gave (not ``store: false``
  ones), kept in a bounded in-memory store (the least recently used of 1,024 dropped);
  ``previous_response_id`` continues such an answer (its input and output are put before
  the new input), and an unknown id gets the API's 400 ``previous_response_not_found``;
* ``GET /healthz``, ``GET /`` (what is served).

Answers come from the same :func:`respond` functions (and fault renderers) the
in-process ``MockTransport`` runs use, so the wire shapes have one implementation.

**Model names.** The model name chooses the script, as in the lesson:

* ``SCENARIO`` (e.g. ``correcto``) plays that scenario on the server's task (``--task``),
  or, without ``--task``, on the first task the scenario is paired with in the matrix;
* ``TASK/SCENARIO`` (e.g. ``cierre_acme/ticker_inexistente``) plays it on that task.

The answer's ``model`` is the name of the script that plays (``correcto`` for
``variacion_busi/correcto`` or ``fallo_429_recupera``), as a real API answers an alias
with the model it resolved to. A scenario that ``extends`` another plays the base's
script; one with ``faults`` also injects them (status and broken-body faults; ``raise``
faults have no HTTP form here and are skipped with a warning). Limits and defences are
the client's business (the agent loop's), so e.g. ``bucle_sin_limite`` answers like
``bucle``. Fault plans count the attempts of one run: send a distinct
``x-reactlab-run`` header per run to delimit runs exactly; without it the server takes
a request whose step is lower than the previous one's, or that repeats a step already
answered without a fault, as the start of a new run.

Requests are read and validated by the simulators' own code (a malformed one gets a 4xx
in the API's error shape); ``"stream": true`` is answered with server-sent events, one
event per chunk. Nothing in a response body depends on the wall clock (``created_at``
is 0).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reactlab.core.errors import CommandFailed
from reactlab.simulate import (
    Handler,
    RequestInvalid,
    ResponseStore,
    ScriptedPolicy,
    hosted_mcp,
    read_request,
)
from reactlab.simulate.apis import WireApi, api_for_path, apis
from reactlab.simulate.routes import MAX_BODY, extra_routes, read_body
from reactlab.simulate.served import FaultRuns, RunState, ServedModel, served_models

if TYPE_CHECKING:
    import uvicorn

    from reactlab.config import Config

log = logging.getLogger("reactlab.simulate.server")

RUN_HEADER = "x-reactlab-run"
_NO_SCRIPTS = ScriptedPolicy({}, {}, "")  # respond() with it gives the API's unknown-model 404
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


# --- the APIs -----------------------------------------------------------------------



class _JSONResponse(JSONResponse):
    """JSON with non-ASCII escaped: a lone surrogate echoed from a request cannot break it."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


def _error(api: WireApi, status: int, message: str, *, param: str | None = None,
           code: str | None = None, kind: str | None = None) -> JSONResponse:
    """An error in ``api``'s documented shape."""
    return _JSONResponse(api.error(status, message, param=param, code=code, kind=kind),
                         status_code=status)


def _simulator(api: WireApi) -> Any:
    """``api``'s simulator object (:class:`reactlab.simulate.base.Simulator`), or None for a
    simulator module that offers the plain functions (``validate``, ``handler(policy)``)."""
    return getattr(api.sim(), "SIMULATOR", None)


def _check(api: WireApi, raw: bytes, content_type: str | None,
           store: ResponseStore | None = None) -> dict[str, Any] | JSONResponse:
    """The validated JSON body of a request (its Content-Type checked as the API does; the
    state it names in ``store`` spliced in), or the API's 4xx for it."""
    simulator = _simulator(api)
    try:
        if simulator is None:
            body: dict[str, Any] = read_request(raw, content_type)
            api.sim().validate(body)
            return body
        body = simulator.read(raw, content_type)
        return simulator.expand(body, store) or body
    except RequestInvalid as exc:
        if simulator is None:
            return _error(api, exc.status, exc.message, param=exc.param, code=exc.code)
        return _JSONResponse(simulator.refusal(exc), status_code=exc.status)


def _to_response(resp: Any) -> Response:
    """A starlette Response from the simulator's httpx / httpx2 response, byte for byte.

    Server-sent events are sent one event per chunk (``cache-control: no-cache``), as the
    APIs stream them.
    """
    headers = {k: v for k, v in resp.headers.items()
               if k.lower() not in ("content-length", "transfer-encoding")}
    if headers.get("content-type", "").startswith("text/event-stream"):
        events = [e + b"\n\n" for e in resp.content.split(b"\n\n") if e]

        async def chunks() -> AsyncIterator[bytes]:
            for event in events:
                yield event

        return StreamingResponse(chunks(), status_code=resp.status_code,
                                 headers={**headers, "cache-control": "no-cache"})
    return Response(content=resp.content, status_code=resp.status_code, headers=headers)


def _note(request: Request, **details: Any) -> None:
    """Details for the request's log line."""
    request.state.reactlab = {**getattr(request.state, "reactlab", {}), **details}


# --- the app ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _State:
    """What the app serves and keeps across requests."""

    models: dict[str, ServedModel]
    runs: FaultRuns
    store: ResponseStore  # Responses answers, for GET /v1/responses/{id} and chaining


def _handler(state: _State, api: WireApi, served: ServedModel, body: dict[str, Any],
             request: Request) -> tuple[Handler, int, RunState | None]:
    """(handler, step, fault-plan state) of a request for ``served``'s script.

    The policy knows the requested name; the answer names the script that plays (as a
    real API answers an alias with the model it resolved to), so its bytes are those of
    the in-process run."""
    sim = api.sim()
    simulator = _simulator(api)
    name = body["model"]
    policy = ScriptedPolicy({name: served.script}, served.params, served.question,
                            answer_names={name: served.script.name}, tools=served.tools,
                            calls_need_tools=served.tools_sent)
    handle: Handler = (simulator.handler(policy, state.store) if simulator is not None
                       else sim.handler(policy))
    step: int = sim.step_of(body)
    _note(request, task=served.task, scenario=served.scenario, step=step)
    run = None
    if served.faults:
        run = state.runs.plan_for(api.name, served, request.headers.get(RUN_HEADER, ""), step)
        handle = sim.with_faults(handle, run.plan)
    return handle, step, run


async def _api_endpoint(state: _State, request: Request, api: WireApi) -> Response:
    """A POST to one of ``api``'s routes: checked, then answered by the script it names."""
    raw = await read_body(request, MAX_BODY)
    if raw is None:
        return _error(api, 413, f"Request exceeds the maximum size of {MAX_BODY} bytes")
    checked = _check(api, raw, request.headers.get("content-type"), state.store)
    if isinstance(checked, JSONResponse):
        return checked
    body = checked
    _note(request, model=body["model"],
          **({"stream": True} if body.get("stream") is True else {}))
    served = state.models.get(body["model"])
    if served is None:
        status, payload = api.sim().respond(_NO_SCRIPTS, body)
        return _JSONResponse(payload, status_code=status)
    handle, step, run = _handler(state, api, served, body, request)
    headers = {"content-type": request.headers.get("content-type", "")}
    if "anthropic-beta" in request.headers:  # the betas a request enables (hosted MCP)
        headers["anthropic-beta"] = request.headers["anthropic-beta"]
    http_request = api.http().Request("POST", str(request.url), content=raw, headers=headers)
    try:
        if hosted_mcp.requested(body):
            # the simulator calls the request's MCP servers itself: off the event loop
            resp = await run_in_threadpool(handle, http_request)
        else:
            resp = handle(http_request)
    except Exception:  # a bug, not a scenario: the API's 500, and the traceback logged
        log.exception("%s %s: the simulator failed", request.method, request.url.path)
        return _error(api, 500, "Internal server error (simulator failure)")
    if run is not None:
        fault = run.plan.log[-1][2]
        run.last_step, run.last_clean = step, fault is None
        if fault is not None:
            _note(request, fault=fault.to_dict())
    return _to_response(resp)


def _endpoint(state: _State, api: WireApi) -> Callable[[Request], Awaitable[Response]]:
    async def serve_api(request: Request) -> Response:
        return await _api_endpoint(state, request, api)

    return serve_api


def _models_listing(models: dict[str, ServedModel], served_apis: list[WireApi],
                    ) -> Callable[[Request], Awaitable[Response]]:
    """``GET /v1/models`` in the shape of the API whose header the request carries."""

    async def list_models(request: Request) -> Response:
        listing = next((a for a in served_apis if a.models_list is not None
                        and a.models_header is not None and a.models_header in request.headers),
                       None) or next(a for a in served_apis if a.models_list is not None)
        assert listing.models_list is not None
        return _JSONResponse(listing.models_list(list(models)))

    return list_models


async def _http_error(request: Request, exc: Exception) -> Response:
    """A 404, a 405 or another HTTP error of the router, in the path's API's shape."""
    assert isinstance(exc, HTTPException)
    api = api_for_path(request.url.path)
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 404:
        resp = _error(api, 404, api.not_found(where))
    elif exc.status_code == 405:
        resp = _error(api, 405, f"Method not allowed ({where})")
    else:
        resp = _error(api, exc.status_code, str(exc.detail))
    resp.headers.update(exc.headers or {})
    return resp


def make_app(config: Config, task: str | None = None) -> Starlette:
    """The ASGI app serving ``config``'s scripted scenarios (see the module docstring)."""
    models = served_models(config, task)
    state = _State(models, FaultRuns(), ResponseStore())
    served_apis = list(apis().values())

    async def healthz(request: Request) -> Response:
        return _JSONResponse({"status": "ok", "models": len(models)})

    routes = [Route(path, _endpoint(state, api), methods=["POST"])
              for api in served_apis for path in api.routes]
    routes += [
        Route("/v1/models", _models_listing(models, served_apis), methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    routes += extra_routes(models, state.store, lambda: routes)
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.add_middleware(_LogRequests)
    app.state.models = models
    return app


class _LogRequests:
    """Logs one INFO line per request: method, path, status and what was served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            details = scope.get("state", {}).get("reactlab", {})
            extra = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}"
                             for k, v in details.items())
            log.info("%s %s -> %d%s", scope["method"], scope["path"], status,
                     f" {extra}" if extra else "")


# --- running it -------------------------------------------------------------------------


def _uvicorn_config(app: Starlette, host: str, port: int) -> uvicorn.Config:
    import uvicorn  # lazy: heavy (uvicorn), only a server that runs needs it

    return uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False,
                          lifespan="off", loop="asyncio", http="h11", ws="none",
                          timeout_graceful_shutdown=5)


def _warn_if_exposed(host: str) -> None:
    if host not in _LOOPBACK:
        log.warning("serving on %s: the simulator has no authentication; "
                    "loopback (127.0.0.1) is the intended use", host)


def serve(config: Config, host: str = "127.0.0.1", port: int = 8000, *,
          task: str | None = None) -> None:
    """Serve ``config``'s scenarios until interrupted (Ctrl-C)."""
    import uvicorn  # lazy: heavy (uvicorn), only a server that runs needs it

    app = make_app(config, task)
    _warn_if_exposed(host)
    log.info("serving %d model names (e.g. %s) on http://%s:%d",
             len(app.state.models), ", ".join(list(app.state.models)[:3]), host, port)
    uvicorn.Server(_uvicorn_config(app, host, port)).run()


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class ServerThread:
    """The server in a background thread, for tests and embedding::

        with ServerThread(config.load("config.yaml")) as server:   # port 0: an ephemeral port
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test")

    Leaving the block (or :meth:`stop`) shuts the server down and joins the thread.
    """

    def __init__(self, config: Config, host: str = "127.0.0.1", port: int = 0, *,
                 task: str | None = None, startup_timeout: float = 10.0) -> None:
        self.app = make_app(config, task)
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` with the port actually bound."""
        return _url(self.host, self.port)

    def _run(self) -> None:
        assert self._server is not None
        try:
            self._server.run()
        except BaseException as exc:  # uvicorn exits with SystemExit when it cannot bind
            self._error = exc

    def start(self) -> ServerThread:
        import uvicorn  # lazy: heavy (uvicorn), only a server that runs needs it

        _warn_if_exposed(self.host)
        self._server = server = uvicorn.Server(_uvicorn_config(self.app, self.host, self.port))
        self._thread = threading.Thread(target=self._run, name="reactlab-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            self.stop()
            why = repr(self._error) if self._error is not None else (
                f"not started after {self.startup_timeout} s")
            raise CommandFailed(f"the reactlab server on {self.host}:{self.port} did not "
                               f"start: {why}")
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        self._server = self._thread = None

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
