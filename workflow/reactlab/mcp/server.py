"""The project's tools as an MCP server (docs/mcp.md), on the official SDK's low-level
``Server`` (the pinned ``mcp`` package).

What a client lists is what the model reads in a run, with more for MCP clients: each
tool's name, its Spanish description (:data:`reactlab.tools.TOOLS`), its argument schema
(:func:`reactlab.tools.json_schema`) with a Spanish description on each argument and
``additionalProperties: false``, and an ``outputSchema`` (:mod:`reactlab.mcp.listing`,
which leaves the model's own schema untouched); the low-level server is used because it
lists a schema exactly as given (``MCPServer`` derives one from a function's signature).

A call runs :meth:`reactlab.tools.ToolBox.execute`, the loop's executor: the same pydantic
models validate the arguments, and the result is one text block written by
:func:`reactlab.backends.api_result_text`, the function that writes every tool result an
API backend sends the model, so that the text is byte for byte what the model reads in
process; a success also carries that text's JSON object as ``structuredContent``. A
tool's error (invalid arguments, an unknown ticker, a division by zero) is a result with
``isError: true`` and that same text. Protocol errors, as the specification has them: a
tool that does not exist or is not served is JSON-RPC error -32602 (invalid params, "errors
in finding the tool"), as are arguments that are not a JSON object and a name that is not
a string (the SDK's checks); a message that is not JSON is -32700 (parse error, ``id``
null), and over stdio a JSON line that is not a JSON-RPC message is -32600 (invalid
request).

Transports: stdio (standard output carries nothing but JSON-RPC; logs go to standard
error) and Streamable HTTP (``/mcp``; on a loopback host, requests whose Host or Origin is
not a loopback name are refused, the SDK's DNS-rebinding protection).
"""

from __future__ import annotations

import json
import logging
import socket
import tempfile
from collections.abc import Collection, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from reactlab import config as config_module
from reactlab import data
from reactlab.agent.types import ToolCall, ToolOutcome
from reactlab.backends import api_result_text
from reactlab.core.errors import CommandFailed, UsageError
from reactlab.mcp.listing import input_schema, output_schema
from reactlab.tools import TOOLS, ToolBox, json_schema

log = logging.getLogger(__name__)

#: The server's name in ``serverInfo``.
SERVER_NAME = "reactlab"
#: The Streamable HTTP endpoint's path.
HTTP_PATH = "/mcp"
#: The default port of ``reactlab mcp --transport http`` (``reactlab serve`` has 8000).
DEFAULT_PORT = 8001
#: Hosts on which the HTTP server refuses requests from non-loopback names.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def tool_names(*, tools: str | None = None, task: str | None = None,
               cfg: config_module.Config | None = None) -> tuple[str, ...]:
    """The tools to serve: ``tools`` (comma-separated names), the ``tools:`` of task
    ``task`` in ``cfg``, or, with neither, the lesson's four (in their order).

    UsageError for an unknown or repeated name, an unknown task, or both at once.
    """
    if tools is not None and task is not None:
        raise UsageError("mcp: give --tools or --task, not both")
    if task is not None:
        if cfg is None:
            raise UsageError("mcp: --task needs the config that defines the task")
        tasks = cfg.raw["tasks"]
        if task not in tasks:
            raise UsageError(f"mcp: --task {task!r} is not a task of the config; its tasks "
                             f"are {', '.join(tasks)}")
        names = [str(n) for n in tasks[task]["tools"]]
        where = f"task {task!r}"
    elif tools is not None:
        names = [n.strip() for n in tools.split(",")]
        where = "--tools"
    else:
        return tuple(TOOLS)
    for n in names:
        if n not in TOOLS:
            raise UsageError(f"mcp: {where} names {n!r}, which is not one of the project's "
                             f"tools ({', '.join(TOOLS)})")
    if len(set(names)) != len(names) or not names:
        raise UsageError(f"mcp: {where} must name each tool once, at least one")
    return tuple(names)


def load_toolbox(config_path: str | Path = "config.yaml", prices: str | Path | None = None,
                 news: str | Path | None = None,
                 cfg: config_module.Config | None = None) -> ToolBox:
    """The tools over the data a run reads.

    ``prices`` and ``news`` when given (both). Otherwise the config's ``data:`` as the
    pipeline resolves it (relative to the config's folder): the user's file when it exists,
    else the generated file under ``data/generated/``; when that one has not been
    generated yet, it is generated from ``data.seed`` into a temporary folder (the same
    bytes as the pipeline's ``generate_data`` rule writes), which is removed once the
    tools have read it. DataError when a file does not fit; ConfigError for the config.
    """
    if (prices is None) != (news is None):
        raise UsageError("mcp: --prices and --news go together")
    if prices is not None and news is not None:
        return ToolBox.from_files(prices, news)
    if cfg is None:
        cfg = config_module.load(config_path, servers="skip")
    root = Path(config_path).parent
    paths = {kind: root / config_module.data_source(cfg.raw, kind, root)
             for kind in ("prices", "news")}
    if all(p.is_file() for p in paths.values()):
        return ToolBox.from_files(paths["prices"], paths["news"])
    seed = int(cfg.raw["data"]["seed"])
    with tempfile.TemporaryDirectory(prefix="reactlab-mcp-") as tmp:
        generated = dict(zip(("prices", "news"), data.write(Path(tmp), seed), strict=True))
        missing = [str(p) for p in paths.values() if not p.is_file()]
        log.info("%s not generated yet: generated from seed %d for this server (run "
                 "`snakemake` to write it)", " and ".join(missing), seed)
        return ToolBox.from_files(*(p if p.is_file() else generated[k]
                                    for k, p in paths.items()))


def tool_list(names: Sequence[str], *, lesson_schemas: bool = False) -> list[types.Tool]:
    """The tools as ``tools/list`` gives them: name, Spanish description, argument schema
    (described, closed: :func:`reactlab.mcp.listing.input_schema`; with
    ``lesson_schemas``, the model's own, :func:`reactlab.tools.json_schema`), output
    schema."""
    return [types.Tool(name=n, description=TOOLS[n].description,
                       input_schema=json_schema(n) if lesson_schemas else input_schema(n),
                       output_schema=output_schema(n))
            for n in names]


def unknown_tool(name: str) -> MCPError:
    """The protocol error for a tool that does not exist or is not served: -32602 with the
    specification's own message (the model never reads it: a run's loop refuses an unknown
    tool before any server sees it)."""
    return MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")


def tool_result(box: ToolBox, name: str, arguments: Mapping[str, Any] | None,
                served: Collection[str]) -> types.CallToolResult:
    """One ``tools/call``: the loop's executor and the text the model reads; a success
    also as ``structuredContent``, the text's JSON object (``{"resultado": ...}``).

    Omitted arguments are an empty object (MCP's meaning). MCPError -32602 for a tool
    that is not in ``served`` (:func:`unknown_tool`), whether it exists or not.
    """
    if name not in served:
        raise unknown_tool(name)
    args = {} if arguments is None else dict(arguments)
    result = box.execute(name, args, served)
    outcome = ToolOutcome(ToolCall(id="mcp", name=name, arguments=args), result,
                          "error" if "error" in result else "ok")
    text = api_result_text(outcome)
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                structured_content=None if outcome.is_error
                                else json.loads(text),
                                is_error=outcome.is_error)


def make_server(box: ToolBox, names: Sequence[str] = tuple(TOOLS), *,
                lesson_schemas: bool = False) -> Server[Any]:
    """An MCP server (SDK low-level ``Server``) offering tools ``names`` over ``box``;
    ``lesson_schemas``: list the argument schemas exactly as the model reads them in
    process (:func:`tool_list`)."""
    served = tuple(names)
    tools = tool_list(served, lesson_schemas=lesson_schemas)

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[t.model_copy(deep=True) for t in tools])

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        # Each tool answers from memory in well under a millisecond (the calculator's
        # caps bound it): no thread is needed to keep the event loop free.
        return tool_result(box, params.name, params.arguments, served)

    schemas = {t.name: t.input_schema for t in tools}

    def schema_of(name: str) -> dict[str, Any] | None:
        return schemas.get(name)

    return Server(SERVER_NAME, version=_version(), on_list_tools=list_tools,
                  on_call_tool=call_tool, get_tool_input_schema=schema_of)


def _version() -> str:
    try:
        return metadata.version("reactlab")
    except metadata.PackageNotFoundError:  # run from a checkout without installing it
        return ""


def _quiet_sdk_loggers() -> None:
    """The SDK's per-request INFO lines would drown the server's own (on stderr)."""
    for name in ("mcp", "uvicorn.error"):
        logging.getLogger(name).setLevel(logging.WARNING)


def rejection(exc: Exception) -> types.JSONRPCError:
    """The answer to a stdio line the transport could not read as a JSON-RPC message
    (``exc``, the SDK's ValidationError): -32700 (parse error) for a line that is not
    JSON, -32600 (invalid request) for JSON that is not a JSON-RPC message, with its
    ``id`` when it has a valid one, else ``id`` null (JSON-RPC 2.0, section 5)."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if not errors or any(e["type"] == "json_invalid" for e in errors):
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=types.PARSE_ERROR, message="Parse error"))
    # the message itself is the input of an error about the message as a whole (a missing
    # member, not a dict) rather than about one of its members' values
    whole = [e["input"] for e in errors if len(e["loc"]) == 1
             or (len(e["loc"]) == 2 and e["type"] == "missing")]
    id_ = whole[0].get("id") if whole and isinstance(whole[0], dict) else None
    valid = isinstance(id_, str) or (isinstance(id_, int) and not isinstance(id_, bool))
    return types.JSONRPCError(jsonrpc="2.0", id=id_ if valid else None, error=types.ErrorData(
        code=types.INVALID_REQUEST, message="Invalid Request"))


def _blank(exc: Exception) -> bool:
    """Whether the transport failed to read a line that is empty or only whitespace."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    line = errors[0].get("input") if errors else None
    return isinstance(line, str) and line.strip() == ""


def _unreadable(exc: Exception) -> SessionMessage | None:
    """The answer to a line the stdio transport could not read (:func:`rejection`, logged),
    or None for a blank line, which is no message."""
    if _blank(exc):
        return None
    answer = rejection(exc)
    log.info("a line that is not %s: answered %d", "JSON" if answer.error.code ==
             types.PARSE_ERROR else "a JSON-RPC message", answer.error.code)
    return SessionMessage(answer)


def serve_stdio(server: Server[Any]) -> None:
    """Serve over this process's stdin and stdout until the client closes stdin.

    The transport's messages are relayed to the server, except the lines it could not
    read, which the SDK would drop unanswered: those are answered here (:func:`rejection`).
    """
    async def run() -> None:
        async with stdio_server() as (read, write):
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception]()

            async def relay() -> None:
                try:
                    async with read, send:
                        async for item in read:
                            if not isinstance(item, Exception):
                                await send.send(item)
                            elif (answer := _unreadable(item)) is not None:
                                await write.send(answer)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the server is gone: nothing is left to answer

            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                await server.run(receive, write, server.create_initialization_options())

    _quiet_sdk_loggers()
    try:
        anyio.run(run)
    except KeyboardInterrupt:  # Ctrl-C in a terminal: end quietly
        log.info("interrupted: the MCP server stopped")
        return
    log.info("stdin closed: the MCP server stops")


def http_url(host: str, port: int) -> str:
    """The endpoint's URL: ``http://HOST:PORT/mcp``."""
    return f"http://[{host}]:{port}{HTTP_PATH}" if ":" in host else \
        f"http://{host}:{port}{HTTP_PATH}"


def serve_http(server: Server[Any], host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Serve over Streamable HTTP at ``http_url(host, port)`` until interrupted.

    Port 0 takes a free port; the URL logged (stderr) names the port bound. The socket is
    bound and listening before the URL is logged, so a client that read it can connect.
    """
    if host not in LOOPBACK:
        log.warning("serving on %s: the MCP server has no authentication, and the DNS "
                    "rebinding protection is on for a loopback host only", host)
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:  # the port is taken, the address is not this machine's ...
        raise CommandFailed(f"mcp: cannot listen on {host} port {port}: {exc.strerror or exc}"
                            ) from None
    url = http_url(host, sock.getsockname()[1])
    log.info("serving MCP over Streamable HTTP on %s", url)
    _quiet_sdk_loggers()
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on",
                            loop="asyncio", http="h11", ws="none",
                            timeout_graceful_shutdown=5)
    try:
        # uvicorn shuts down gracefully on SIGINT or SIGTERM, then raises the signal again:
        # SIGINT (Ctrl-C) is a KeyboardInterrupt here and ends the command with status 0.
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    log.info("interrupted: the MCP server stopped")


def main(*, transport: str = "stdio", config_path: str = "config.yaml",
         task: str | None = None, tools: str | None = None, prices: str | None = None,
         news: str | None = None, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
         lesson_schemas: bool = False) -> None:
    """``reactlab mcp``: serve the chosen tools over ``transport`` (stdio or http);
    ``lesson_schemas`` (``--lesson-schemas``): the model's own argument schemas."""
    if transport not in ("stdio", "http"):
        raise UsageError(f"mcp: --transport {transport!r}: stdio or http")
    if (prices is None) != (news is None):
        raise UsageError("mcp: --prices and --news go together")
    needs_config = task is not None or prices is None
    if needs_config and not Path(config_path).is_file():
        raise UsageError(f"mcp: no config at {config_path}: run it in the project folder, "
                         "or give --config (or --prices and --news)")
    cfg = config_module.load(config_path, servers="skip") if needs_config else None
    names = tool_names(tools=tools, task=task, cfg=cfg)
    box = load_toolbox(config_path, prices, news, cfg)
    server = make_server(box, names, lesson_schemas=lesson_schemas)
    log.info("serving %d tools: %s", len(names), ", ".join(names))
    if transport == "stdio":
        serve_stdio(server)
    else:
        serve_http(server, host, port)
