"""``reactlab mcp``: the project's tools as an MCP server, driven by the official Python
client (the pinned ``mcp`` SDK) in process, over stdio and over Streamable HTTP.

What a client lists must be what the model reads in a run (the adapters' tool definitions)
plus, for MCP clients only, a description on each argument, ``additionalProperties: false``
and an output schema; what a call returns must be, byte for byte, the text the loop gives
the model for the same call in process (the loop's executor, then the API backends' result
text), for successes and errors alike, with a success's JSON also as ``structuredContent``;
an unknown tool and a line that is not JSON are protocol errors (docs/mcp.md).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

import anyio
import psutil
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client

from reactlab import config
from reactlab.agent.loop import guarded_execute
from reactlab.agent.types import ToolCall
from reactlab.backends import api_result_text, tool_definitions
from reactlab.core.errors import UsageError
from reactlab.mcp.listing import ARGUMENTS, RESULTS, input_schema
from reactlab.mcp.server import DEFAULT_PORT, make_server, tool_names
from reactlab.tools import TOOLS, ToolBox, json_schema
from tests.conftest import interrupt

ROOT = Path(__file__).resolve().parents[1]

#: Calls and what they exercise. The expected text is never written here: it is what the
#: loop gives the model for the same call, computed in process (:func:`in_process`).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("precio", {"ticker": "BUSI", "fecha": "2024-03-15"}),
    ("precio", {"ticker": "BUSI", "fecha": "2024-03-16"}),  # a Saturday: the last session
    # non-ASCII headlines and the injected items' "<...>": escapes and all, as in process
    ("buscar_noticias", {"ticker": "BUSI", "desde": "2024-04-08", "hasta": "2024-04-12"}),
    ("calculadora", {"expresion": "(27.88 - 26.19) / 26.19 * 100"}),
    ("variacion", {"ticker": "BUSI", "desde": "2024-03-15", "hasta": "2024-03-22"}),
    # errors
    ("precio", {"ticker": "ACME", "fecha": "2024-03-15"}),  # unknown ticker
    ("calculadora", {"expresion": "1/0"}),  # division by zero
    ("calculadora", {"expresion": "2**10"}),  # not arithmetic the calculator takes
    ("precio", {"ticker": "busi", "fecha": "2024-3-15"}),  # invalid arguments (patterns)
    ("precio", {"ticker": 1234, "fecha": "2024-02-30"}),  # wrong type, no such date
    ("precio", {"ticker": "BUSI", "fecha": "2024-03-15", "hora": "10:00"}),  # extra field
    ("variacion", {"ticker": "BUSI"}),  # missing arguments
    ("cotizacion", {"ticker": "BUSI"}),  # unknown tool
]


def in_process(toolbox: ToolBox, name: str, args: dict[str, Any],
               served: tuple[str, ...] = tuple(TOOLS)) -> tuple[str, bool]:
    """(text, is_error) of a call as the loop answers it in a run: its executor
    (:func:`reactlab.agent.loop.guarded_execute`) and the API backends' result text."""
    outcome = guarded_execute(ToolCall("call_1", name, args), toolbox, served, set())
    return api_result_text(outcome), outcome.is_error


def what_the_model_reads(names: tuple[str, ...]) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, schema) of each tool, as the API adapters send them."""
    return tool_definitions(SimpleNamespace(tools=names, tool_schemas=None))


def as_the_model_reads(schema: dict[str, Any]) -> dict[str, Any]:
    """A listed argument schema less what the server adds for MCP clients: each argument's
    description (a described argument) and the root's ``additionalProperties: false``."""
    out = dict(schema)
    assert out.pop("additionalProperties") is False
    props = {}
    for name, prop in out["properties"].items():
        prop = dict(prop)
        assert isinstance(prop.pop("description"), str) and prop, name
        props[name] = prop
    return {**out, "properties": props}


def check_schemas(name: str, input_schema: dict[str, Any],
                  output_schema: dict[str, Any] | None) -> None:
    """Tool ``name``'s listed schemas: the argument schema is the model's (equal as a JSON
    value and, below the root, byte for byte: the root's keys come in the SDK's order for
    the protocol version, docs/mcp.md) plus the MCP additions; the output schema is the
    ``{"resultado": ...}`` object, closed, its result's schema the tool's."""
    schema = json_schema(name)
    assert [p["description"] for p in input_schema["properties"].values()] == \
        list(ARGUMENTS[name].values())
    assert list(ARGUMENTS[name]) == list(schema["properties"])
    bare = as_the_model_reads(input_schema)
    assert bare == schema and sorted(bare) == sorted(schema)
    for key, value in schema.items():
        assert json.dumps(bare[key]) == json.dumps(value), key
    assert output_schema == {"type": "object", "properties": {"resultado": RESULTS[name]},
                             "required": ["resultado"], "additionalProperties": False}


def check_listing(tools: list[Any], names: tuple[str, ...] = tuple(TOOLS)) -> None:
    """The listing is what the model reads: names in order, descriptions exact, schemas
    as :func:`check_schemas` says."""
    expected = what_the_model_reads(names)
    assert [t.name for t in tools] == [n for n, _, _ in expected]
    for tool, (name, description, _) in zip(tools, expected, strict=True):
        assert tool.description == description
        check_schemas(name, tool.input_schema, tool.output_schema)


async def check_calls(client: Client, toolbox: ToolBox) -> tuple[int, int]:
    """Every call of :data:`CALLS` over ``client`` equals the in-process text, and a
    success's ``structuredContent`` is that text's JSON (which the official client checks
    against the tool's output schema); a tool that does not exist is JSON-RPC error -32602.
    Returns (isError results, protocol errors)."""
    errors = unknown = 0
    for name, args in CALLS:
        text, is_error = in_process(toolbox, name, args)
        if name not in TOOLS:
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, args)
            assert (refused.value.code, refused.value.message) == (-32602,
                                                                   f"Unknown tool: {name}")
            unknown += 1
            continue
        result = await client.call_tool(name, args)
        assert [c.type for c in result.content] == ["text"], (name, args)
        assert result.content[0].text == text, (name, args)
        assert result.is_error is is_error, (name, args)
        assert result.structured_content == (None if is_error else json.loads(text))
        errors += is_error
    return errors, unknown


def test_the_calls_cover_successes_and_errors(toolbox: ToolBox) -> None:
    """The table is not vacuous: it has both kinds, and the errors it means to have."""
    answers = [in_process(toolbox, n, a) for n, a in CALLS]
    assert sum(e for _, e in answers) == 8 and sum(not e for _, e in answers) == 5
    texts = "\n".join(t for t, _ in answers)
    for needle in ("ticker desconocido: ACME", "divisi\\u00f3n por cero",
                   "herramienta desconocida: cotizacion", "hora: campo no permitido",
                   "Field required", "<INFORMATION>", "log\\u00edstico"):
        assert needle in texts, needle


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_in_memory_client_sees_what_the_model_reads(toolbox: ToolBox, mode: str) -> None:
    """The official client in process: the initialize handshake (2025-11-25, "legacy") and
    the 2026-07-28 per-request protocol ("auto" picks it)."""
    server = make_server(toolbox)

    async def go() -> int:
        async with Client(server, mode=mode) as client:
            check_listing((await client.list_tools()).tools)
            return await check_calls(client, toolbox)

    assert anyio.run(go) == (7, 1)


def test_lesson_schemas_are_the_models_own(toolbox: ToolBox) -> None:
    """``--lesson-schemas``: the argument schemas exactly as the model reads them (for runs
    that take these tools over MCP and must read what they read in process); listing the
    described ones never changes the model's."""
    before = [json.dumps(json_schema(n)) for n in TOOLS]
    described, lesson = make_server(toolbox), make_server(toolbox, lesson_schemas=True)

    async def go() -> None:
        async with Client(described, mode="legacy") as client:
            check_listing((await client.list_tools()).tools)
        async with Client(lesson, mode="legacy") as client:
            tools = (await client.list_tools()).tools
        assert [(t.name, t.description, t.input_schema) for t in tools] == \
            what_the_model_reads(tuple(TOOLS))
        for tool in tools:
            schema = json_schema(tool.name)
            assert sorted(tool.input_schema) == sorted(schema)
            for key, value in schema.items():
                assert json.dumps(tool.input_schema[key]) == json.dumps(value), key
            check_schemas(tool.name, input_schema(tool.name), tool.output_schema)

    anyio.run(go)
    assert [json.dumps(json_schema(n)) for n in TOOLS] == before


def test_a_tasks_tools_only(toolbox: ToolBox) -> None:
    """A task's tools are served and no others: a tool it does not offer is as unknown as
    one that does not exist (-32602), as the loop of a run of that task has it unknown
    (its ``allowed``)."""
    cfg = config.load(ROOT / "config.yaml")
    names = tool_names(task="variacion_busi_alto", cfg=cfg)
    assert names == tuple(cfg.raw["tasks"]["variacion_busi_alto"]["tools"])
    assert names == ("variacion", "buscar_noticias")
    server = make_server(toolbox, names)
    args = {"ticker": "BUSI", "fecha": "2024-03-15"}

    async def go() -> None:
        async with Client(server, mode="legacy") as client:
            check_listing((await client.list_tools()).tools, names)
            with pytest.raises(MCPError) as refused:
                await client.call_tool("precio", args)
            assert (refused.value.code, refused.value.message) == (-32602,
                                                                   "Unknown tool: precio")
            assert "herramienta desconocida: precio" in \
                in_process(toolbox, "precio", args, names)[0]
            result = await client.call_tool("variacion", {"ticker": "BUSI"})
            assert (result.content[0].text, result.is_error) == \
                in_process(toolbox, "variacion", {"ticker": "BUSI"}, names)

    anyio.run(go)


def test_tool_names() -> None:
    cfg = config.load(ROOT / "config.yaml")
    assert tool_names() == tuple(TOOLS) == ("precio", "buscar_noticias", "calculadora",
                                            "variacion")
    assert tool_names(tools="calculadora, precio") == ("calculadora", "precio")
    for bad, match in [({"tools": "precio,cotizacion"}, "'cotizacion', which is not"),
                       ({"tools": "precio,precio"}, "each tool once"),
                       ({"tools": ""}, "'', which is not"),
                       ({"task": "no_such_task", "cfg": cfg}, "not a task of the config"),
                       ({"task": "variacion_busi", "tools": "precio", "cfg": cfg}, "not both")]:
        with pytest.raises(UsageError, match=match):
            tool_names(**bad)


@pytest.mark.parametrize(("argv", "message"), [
    (["--tools", "precio,cotizacion"], "mcp: --tools names 'cotizacion', which is not one"),
    (["--task", "no_such_task"], "mcp: --task 'no_such_task' is not a task of the config"),
    (["--prices", "p.parquet"], "mcp: --prices and --news go together"),
    (["--config", "no/such/config.yaml"], "mcp: no config at no/such/config.yaml"),
    (["--prices", "no/such/p.parquet", "--news", "no/such/n.parquet"],
     "no/such/p.parquet: file not found"),
])
def test_cli_errors_are_one_line(argv: list[str], message: str,
                                 capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad option is one line on stderr and status 2, before anything is served."""
    from reactlab.cli import main

    monkeypatch.chdir(ROOT)
    assert main(["mcp", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"reactlab: error: {message}"), lines


def test_a_taken_port_is_one_line(data_files: tuple[Path, Path],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from reactlab.cli import main

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["mcp", *_server_args(data_files, "--transport", "http", "--port",
                                          str(port))[3:]]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        f"reactlab: error: mcp: cannot listen on 127.0.0.1 port {port}: ")


def test_the_cli_port_is_the_servers_default() -> None:
    from reactlab.cli import build_parser

    assert build_parser().parse_args(["mcp"]).port == DEFAULT_PORT


# --------------------------------------------------------------------------- processes


def _env() -> dict[str, str]:
    """This interpreter's environment (its PYTHONPATH included) for a server process."""
    return dict(os.environ)


def _server_args(data_files: tuple[Path, Path], *more: str) -> list[str]:
    prices, news = data_files
    return ["-m", "reactlab", "mcp", "--prices", str(prices), "--news", str(news), *more]


def test_stdio_official_client(toolbox: ToolBox, data_files: tuple[Path, Path]) -> None:
    """``python -m reactlab mcp`` as a stdio subprocess of the official client: the same
    listing and calls; when the client closes its stdin, the process ends by itself
    (its last log line written), and none is left."""
    params = StdioServerParameters(command=sys.executable, args=_server_args(data_files),
                                   env=_env(), cwd=str(ROOT))
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:

        async def go() -> list[int]:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                pids = [p.pid for p in me.children(recursive=True) if p.pid not in before]
                check_listing((await client.list_tools()).tools)
                assert await check_calls(client, toolbox) == (7, 1)
            return pids

        pids = anyio.run(go)
        errlog.seek(0)
        log = errlog.read()
    assert len(pids) == 1, pids
    assert not psutil.pid_exists(pids[0])
    # it exited on its own: the SDK's client kills a server still alive 2 s after it
    # closed its stdin, and a kill would cut this last line
    assert log.splitlines()[-1] == "reactlab.mcp.server: stdin closed: the MCP server stops"
    assert "Traceback" not in log


def _rpc(id_: int, method: str, params: dict[str, Any] | None = None) -> str:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg) + "\n"


def test_stdio_no_arguments_only_jsonrpc_on_stdout(toolbox: ToolBox) -> None:
    """``python -m reactlab mcp`` with no arguments (from the project folder: its config,
    its data) serves the lesson's four tools over stdio; standard output carries JSON-RPC
    and nothing else, and closing stdin ends it with status 0. A line that is not JSON is
    answered -32700 with id null (before the handshake too), a JSON line that is not a
    JSON-RPC message -32600 (with its id), a blank line not at all; an unknown tool is
    -32602."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}
    script = ('{"jsonrpc": "2.0", "id": 0, "method": "ping"\n'  # no closing brace
              + _rpc(1, "initialize", init)
              + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
              + _rpc(2, "tools/list")
              + _rpc(3, "tools/call", {"name": "calculadora", "arguments": {"expresion": "7/2"}})
              + _rpc(4, "tools/call", {"name": "calculadora", "arguments": {"expresion": "7/0"}})
              + _rpc(5, "tools/call", {"name": "precio", "arguments": ["BUSI"]})
              + " \n" + "not json\n"
              + json.dumps({"jsonrpc": "2.0", "id": 6, "method": 6}) + "\n"
              + _rpc(7, "tools/call", {"name": "cotizacion", "arguments": {}}))
    proc = subprocess.Popen([sys.executable, "-m", "reactlab", "mcp"], cwd=ROOT, env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        proc.stdin.write(script)
        proc.stdin.flush()
        # the replies first: requests still running when stdin closes are cancelled
        for _ in range(9):
            out.next(time.monotonic() + 60)
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.text()
    replies = [json.loads(line) for line in out.all()]  # JSON, every line
    assert all(r.get("jsonrpc") == "2.0" for r in replies)
    # not JSON: parse errors, id null, in the order of the lines
    assert [r for r in replies if r["id"] is None] == 2 * [
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}]
    assert replies[0]["id"] is None  # the first line's, before the handshake
    by_id = {r["id"]: r for r in replies if r["id"] is not None}
    assert sorted(by_id) == [1, 2, 3, 4, 5, 6, 7] and len(replies) == 9
    assert by_id[1]["result"]["serverInfo"]["name"] == "reactlab"
    assert by_id[1]["result"]["capabilities"].get("tools") is not None
    listed = by_id[2]["result"]["tools"]
    assert [(t["name"], t["description"], as_the_model_reads(t["inputSchema"]))
            for t in listed] == what_the_model_reads(tuple(TOOLS))
    for tool in listed:
        check_schemas(tool["name"], tool["inputSchema"], tool["outputSchema"])
    for id_, expr in ((3, "7/2"), (4, "7/0")):  # the calculator reads no data
        result = by_id[id_]["result"]
        text, is_error = in_process(toolbox, "calculadora", {"expresion": expr})
        assert result["content"] == [{"type": "text", "text": text}]
        assert result.get("isError", False) is is_error
        assert result.get("structuredContent") == (None if is_error else json.loads(text))
    # arguments that are not an object: the SDK refuses the request (docs/mcp.md)
    assert by_id[5]["error"]["code"] == -32602
    assert by_id[6]["error"] == {"code": -32600, "message": "Invalid Request"}
    assert by_id[7]["error"] == {"code": -32602, "message": "Unknown tool: cotizacion"}
    assert "Traceback" not in err.text()


class Lines:
    """The lines of a process's pipe, read by a thread as they come (a ``select`` on a
    buffered text pipe would miss the lines already in its buffer)."""

    def __init__(self, stream: IO[str] | None) -> None:
        assert stream is not None
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._seen: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def next(self, deadline: float) -> str:
        """The next line; AssertionError at ``deadline`` or at the end of the stream."""
        try:
            line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no line in time; so far: {self.text()}") from None
        assert line is not None, f"the stream ended; it said: {self.text()}"
        self._seen.append(line)
        return line

    def all(self, timeout: float = 30) -> list[str]:
        """Every line, once the stream has ended."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the stream did not end"
        while (line := self._queue.get_nowait()) is not None:
            self._seen.append(line)
        return list(self._seen)

    def text(self) -> str:
        return "".join(self._seen)


@contextmanager
def http_server(data_files: tuple[Path, Path]) -> Iterator[tuple[str, subprocess.Popen[str],
                                                                 Lines]]:
    """``reactlab mcp --transport http --port 0``: (its URL, read from its log; the
    process; its log). Stopped with SIGINT (Ctrl-C) on leaving, killed if it does not
    stop."""
    proc = subprocess.Popen([sys.executable, *_server_args(data_files, "--transport", "http",
                                                           "--port", "0")],
                            cwd=ROOT, env=_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = Lines(proc.stderr)
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            found = re.search(r"Streamable HTTP on (http://\S+)", log.next(deadline))
            url = found.group(1) if found else None
        yield url, proc, log
    finally:
        interrupt(proc)


def test_streamable_http_official_client(toolbox: ToolBox, data_files: tuple[Path, Path],
                                         loopback: None) -> None:
    """Streamable HTTP on a free loopback port: the official client, both protocol eras;
    a body that is not JSON is answered -32700 with id null (both eras); a foreign Host
    header is refused (DNS-rebinding protection); Ctrl-C ends it with 0."""
    import httpx2

    with http_server(data_files) as (url, proc, log):
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        async def go(mode: str) -> None:
            async with Client(url, mode=mode) as client:
                check_listing((await client.list_tools()).tools)
                assert await check_calls(client, toolbox) == (7, 1)

        for mode in ("legacy", "auto"):
            anyio.run(go, mode)
        body = _rpc(1, "ping")
        headers = {"content-type": "application/json",
                   "accept": "application/json, text/event-stream"}
        foreign = httpx2.post(url, content=body, headers={**headers, "host": "evil.example"})
        assert 400 <= foreign.status_code < 500
        for era in ({}, {"mcp-protocol-version": "2026-07-28"}):
            bad = httpx2.post(url, content=body[:-2], headers={**headers, **era})
            assert bad.status_code == 400, era
            answer = bad.json()
            assert (answer["jsonrpc"], answer["id"], answer["error"]["code"]) == \
                ("2.0", None, -32700), era
            assert answer["error"]["message"].startswith("Parse error"), era
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
        assert proc.stdout is not None
        out = proc.stdout.read()
    assert proc.returncode == 0, log.text()
    assert out == ""
    assert log.all()[-1] == "reactlab.mcp.server: interrupted: the MCP server stopped\n"
    assert "Traceback" not in log.text()
