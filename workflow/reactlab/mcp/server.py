"""The project's tools as an MCP server (docs/mcp.md), on the official SDK's low-level
``Server`` (the pinned ``mcp`` package).

What a client lists is what the model reads in a run: each tool's name, its Spanish
description (:data:`reactlab.tools.TOOLS`) and its argument schema
(:func:`reactlab.tools.json_schema`), unchanged; the low-level server is used because it
lists a schema exactly as given (``MCPServer`` derives one from a function's signature).

A call runs :meth:`reactlab.tools.ToolBox.execute`, the loop's executor: the same pydantic
models validate the arguments, and the result is one text block written by
:func:`reactlab.backends.api_result_text`, the function that writes every tool result an
API backend sends the model, so that the text is byte for byte what the model reads in
process. A tool's error (invalid arguments, an unknown ticker, a division by zero, a tool
that is not served) is a result with ``isError: true`` and that same text, never a
protocol error. Two failures the SDK answers before a call reaches the tools are protocol
errors (-32602, invalid params): arguments that are not a JSON object, a name that is not a
string. There is no ``structuredContent``: a host then has one form of the result to give
its model, the exact text.

Transports: stdio (standard output carries nothing but JSON-RPC; logs go to standard
error) and Streamable HTTP (``/mcp``; on a loopback host, requests whose Host or Origin is
not a loopback name are refused, the SDK's DNS-rebinding protection).
"""

from __future__ import annotations

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

from reactlab import config as config_module
from reactlab import data
from reactlab.agent.types import ToolCall, ToolOutcome
from reactlab.backends import api_result_text
from reactlab.core.errors import CommandFailed, UsageError
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


def tool_list(names: Sequence[str]) -> list[types.Tool]:
    """The tools as ``tools/list`` gives them: name, Spanish description, argument schema."""
    return [types.Tool(name=n, description=TOOLS[n].description, input_schema=json_schema(n))
            for n in names]


def tool_result(box: ToolBox, name: str, arguments: Mapping[str, Any] | None,
                served: Collection[str]) -> types.CallToolResult:
    """One ``tools/call``: the loop's executor and the text the model reads.

    Omitted arguments are an empty object (MCP's meaning). A tool that is not in
    ``served`` is as unknown as one that does not exist (the executor's ``allowed``).
    """
    args = {} if arguments is None else dict(arguments)
    result = box.execute(name, args, served)
    outcome = ToolOutcome(ToolCall(id="mcp", name=name, arguments=args), result,
                          "unknown" if name not in served
                          else "error" if "error" in result else "ok")
    return types.CallToolResult(content=[types.TextContent(text=api_result_text(outcome))],
                                is_error=outcome.is_error)


def make_server(box: ToolBox, names: Sequence[str] = tuple(TOOLS)) -> Server[Any]:
    """An MCP server (SDK low-level ``Server``) offering tools ``names`` over ``box``."""
    served = tuple(names)
    tools = tool_list(served)

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[t.model_copy(deep=True) for t in tools])

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        # Each tool answers from memory in well under a millisecond (the calculator's
        # caps bound it): no thread is needed to keep the event loop free.
        return tool_result(box, params.name, params.arguments, served)

    def input_schema(name: str) -> dict[str, Any] | None:
        return json_schema(name) if name in served else None

    return Server(SERVER_NAME, version=_version(), on_list_tools=list_tools,
                  on_call_tool=call_tool, get_tool_input_schema=input_schema)


def _version() -> str:
    try:
        return metadata.version("reactlab")
    except metadata.PackageNotFoundError:  # run from a checkout without installing it
        return ""


def _quiet_sdk_loggers() -> None:
    """The SDK's per-request INFO lines would drown the server's own (on stderr)."""
    for name in ("mcp", "uvicorn.error"):
        logging.getLogger(name).setLevel(logging.WARNING)


def serve_stdio(server: Server[Any]) -> None:
    """Serve over this process's stdin and stdout until the client closes stdin."""
    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

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
         news: str | None = None, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """``reactlab mcp``: serve the chosen tools over ``transport`` (stdio or http)."""
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
    server = make_server(box, names)
    log.info("serving %d tools: %s", len(names), ", ".join(names))
    if transport == "stdio":
        serve_stdio(server)
    else:
        serve_http(server, host, port)
