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
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
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

from reactlab.config import resolved_scenario
from reactlab.config.faults import Fault, FaultPlan, parse_plan
from reactlab.config.scripts import ROOT_NAMES, Script
from reactlab.core.errors import CommandFailed, ConfigError, ReactlabError
from reactlab.simulate import (
    RequestInvalid,
    ResponseStore,
    ScriptedPolicy,
    hosted_mcp,
    read_request,
)
from reactlab.simulate.apis import WireApi, api_for_path, apis
from reactlab.simulate.routes import extra_routes

if TYPE_CHECKING:
    import uvicorn

    from reactlab.config import Config

log = logging.getLogger("reactlab.simulate.server")

RUN_HEADER = "x-reactlab-run"
MAX_BODY = 32 * 1024 * 1024  # bytes; larger requests get 413 (as the Messages API does)
_MAX_RUNS = 1024  # fault-plan states kept (least recently used dropped)
_NO_SCRIPTS = ScriptedPolicy({}, {}, "")  # respond() with it gives the API's unknown-model 404
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


# --- which model names are served -------------------------------------------------------


@dataclass(frozen=True)
class ServedModel:
    """One model name the server answers to: a scenario's script played on a task."""

    name: str
    task: str
    scenario: str
    script: Script
    params: Mapping[str, Any]
    question: str
    faults: tuple[Fault, ...] = ()


def served_models(config: Config, task: str | None = None) -> dict[str, ServedModel]:
    """Every model name served, in listing order: bare scenario names, then TASK/SCENARIO.

    ``task`` is the task bare names play (default: each scenario's first task in the
    matrix). A (task, scenario) pair is served when the task defines every parameter the
    script uses. Strategy scenarios (real models) are not served.
    """
    raw = config.raw
    tasks: Mapping[str, Any] = raw["tasks"]
    if task is not None and task not in tasks:
        raise ConfigError("task", f"no task named {task!r}; tasks: {', '.join(tasks)}")
    scenarios: dict[str, tuple[Script, tuple[Fault, ...]]] = {}
    for sid, declared in raw["scenarios"].items():
        if "strategy" in declared:
            continue
        resolved = resolved_scenario(raw, sid)
        faults = parse_plan(resolved.get("faults") or (), f"scenarios.{sid}.faults")
        if any(f.raises for f in faults):
            log.warning("scenario %s: `raise` faults cannot be served over HTTP; skipped", sid)
            faults = tuple(f for f in faults if f.raises is None)
        scenarios[sid] = (Script.from_config(resolved["model"], resolved), faults)

    def fits(t: str, sid: str) -> bool:
        return not (scenarios[sid][0].names() - set(tasks[t]["params"]) - ROOT_NAMES)

    default: dict[str, str] = {}
    for block in raw["matrix"]:
        for sid in block["scenarios"]:
            if sid in scenarios and sid not in default:
                default[sid] = block["tasks"][0]

    def entry(name: str, t: str, sid: str) -> ServedModel:
        script, faults = scenarios[sid]
        return ServedModel(name=name, task=t, scenario=sid, script=script,
                           params=tasks[t]["params"], question=tasks[t]["question"],
                           faults=faults)

    out: dict[str, ServedModel] = {}
    for sid in scenarios:
        t = task if task is not None else default.get(sid)
        if t is not None and fits(t, sid):
            out[sid] = entry(sid, t, sid)
    for t in tasks:
        for sid in scenarios:
            if fits(t, sid):
                out[f"{t}/{sid}"] = entry(f"{t}/{sid}", t, sid)
    return out


# --- fault plans across requests --------------------------------------------------------


@dataclass
class _RunState:
    plan: FaultPlan
    last_step: int = 0
    last_clean: bool = False  # the last attempt was answered without a fault


class _FaultRuns:
    """The fault plan of the run in progress, per (API, model name, run header)."""

    def __init__(self, limit: int = _MAX_RUNS) -> None:
        self.limit = limit
        self.states: OrderedDict[tuple[str, str, str], _RunState] = OrderedDict()

    def plan_for(self, api: str, served: ServedModel, run_id: str, step: int) -> _RunState:
        key = (api, served.name, run_id)
        state = self.states.get(key)
        if state is None or step < state.last_step or (
                step == state.last_step and state.last_clean):
            state = _RunState(FaultPlan(served.faults))
        self.states[key] = state
        self.states.move_to_end(key)
        while len(self.states) > self.limit:
            self.states.popitem(last=False)
        return state


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


class _TooLarge(ReactlabError):
    pass


async def _read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


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


def make_app(config: Config, task: str | None = None) -> Starlette:
    """The ASGI app serving ``config``'s scripted scenarios (see the module docstring)."""
    models = served_models(config, task)
    runs = _FaultRuns()
    store = ResponseStore()  # Responses answers, for GET /v1/responses/{id} and chaining

    async def api_endpoint(request: Request, api: WireApi) -> Response:
        try:
            raw = await _read_body(request)
        except _TooLarge:
            return _error(api, 413, f"Request exceeds the maximum size of {MAX_BODY} bytes")
        url = str(request.url)
        checked = _check(api, raw, request.headers.get("content-type"), store)
        if isinstance(checked, JSONResponse):
            return checked
        body = checked
        sim = api.sim()
        simulator = _simulator(api)
        name = body["model"]
        _note(request, model=name, **({"stream": True} if body.get("stream") is True else {}))
        served = models.get(name)
        if served is None:
            status, payload = sim.respond(_NO_SCRIPTS, body)
            return _JSONResponse(payload, status_code=status)
        # The policy knows the requested name; the answer names the script that plays
        # (as a real API answers an alias with the model it resolved to), so its bytes are
        # those of the in-process run.
        policy = ScriptedPolicy({name: served.script}, served.params, served.question,
                                answer_names={name: served.script.name})
        handle = (simulator.handler(policy, store) if simulator is not None
                  else sim.handler(policy))
        step = sim.step_of(body)
        _note(request, task=served.task, scenario=served.scenario, step=step)
        state = None
        if served.faults:
            state = runs.plan_for(api.name, served, request.headers.get(RUN_HEADER, ""),
                                  step)
            handle = sim.with_faults(handle, state.plan)
        headers = {"content-type": request.headers.get("content-type", "")}
        if "anthropic-beta" in request.headers:  # the betas a request enables (hosted MCP)
            headers["anthropic-beta"] = request.headers["anthropic-beta"]
        http_request = api.http().Request("POST", url, content=raw, headers=headers)
        try:
            if hosted_mcp.requested(body):
                # the simulator calls the request's MCP servers itself: off the event loop
                resp = await run_in_threadpool(handle, http_request)
            else:
                resp = handle(http_request)
        except Exception:  # a bug, not a scenario: the API's 500, and the traceback logged
            log.exception("%s %s: the simulator failed", request.method, request.url.path)
            return _error(api, 500, "Internal server error (simulator failure)")
        if state is not None:
            fault = state.plan.log[-1][2]
            state.last_step, state.last_clean = step, fault is None
            if fault is not None:
                _note(request, fault=fault.to_dict())
        return _to_response(resp)

    def endpoint(api: WireApi) -> Callable[[Request], Awaitable[Response]]:
        async def serve_api(request: Request) -> Response:
            return await api_endpoint(request, api)

        return serve_api

    served_apis = list(apis().values())

    async def list_models(request: Request) -> Response:
        names = list(models)
        listing = next((a for a in served_apis if a.models_list is not None
                        and a.models_header is not None and a.models_header in request.headers),
                       None) or next(a for a in served_apis if a.models_list is not None)
        assert listing.models_list is not None
        return _JSONResponse(listing.models_list(names))

    async def healthz(request: Request) -> Response:
        return _JSONResponse({"status": "ok", "models": len(models)})

    async def http_error(request: Request, exc: Exception) -> Response:
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

    routes = [Route(path, endpoint(api), methods=["POST"])
              for api in served_apis for path in api.routes]
    routes += [
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    routes += extra_routes(models, store, lambda: routes)
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
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
    import uvicorn

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
    import uvicorn

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
        import uvicorn

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
