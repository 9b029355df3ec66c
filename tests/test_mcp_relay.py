"""The stdio relay that traces a framework's own MCP client (reactlab.mcp.relay): driven
by the official Python client against the project's own server (``python -m reactlab
mcp``), it must pass the session through unchanged, log every ``tools/call`` with its
answer, map each answer to the trace's result exactly as the tools give it in process,
and leave no server process behind."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from reactlab.mcp import relay

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("precio", {"ticker": "BUSI", "fecha": "2024-03-15"}),
    ("calculadora", {"expresion": "(27.88 - 26.19) / 26.19 * 100"}),
    ("precio", {"ticker": "ACME", "fecha": "2024-03-15"}),  # unknown ticker: a tool error
    ("precio", {"ticker": "busi", "fecha": "2024-3-15"}),  # invalid arguments
    ("buscar_noticias", {"ticker": "BUSI", "desde": "2024-04-08", "hasta": "2024-04-12"}),
]


def _session(data_files: tuple[Path, Path], log: Path) -> tuple[list[Any], list[int]]:
    """Run the calls through the relay; the results the client got and the pids of the
    relay's children seen while the session was open."""
    line = relay.command(log, [sys.executable, "-m", "reactlab", "mcp",
                               "--prices", str(data_files[0]), "--news", str(data_files[1])])
    params = StdioServerParameters(command=line[0], args=line[1:], env=relay.environment())
    got: list[Any] = []
    children: list[int] = []

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            relays = [p for p in psutil.Process().children(recursive=True)
                      if "reactlab.mcp.relay" in " ".join(p.cmdline())]
            children.extend(c.pid for r in relays for c in r.children(recursive=True))
            listed = await s.list_tools()
            assert {t.name for t in listed.tools} >= {name for name, _ in CALLS}
            for name, arguments in CALLS:
                got.append(await s.call_tool(name, arguments))

    anyio.run(main)
    return got, children


def test_relay_logs_each_call_as_the_tools_answer_in_process(
        data_files: tuple[Path, Path], toolbox: Any, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    got, children = _session(data_files, log)
    executions = relay.executions(log, results="lesson")  # the project's server's setting
    assert [(n, a) for n, a, _ in executions] == CALLS  # every call, in order
    for (name, arguments, result), answer in zip(executions, got, strict=True):
        # the client saw the server's answer unchanged, and the log maps it to what the
        # tool gives in process (errors as data included)
        assert result == toolbox.execute(name, arguments)
        assert bool(answer.is_error) == ("error" in result)
    assert sum("error" in r for _, _, r in executions) == 2
    assert children, "the relay started the server as its child"
    assert not [pid for pid in children if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("answer", [
    {"content": [{"type": "text", "text": '{"resultado": 1.5}'}]},
    {"content": [{"type": "text", "text": "no such table: t"}], "isError": True},
    {"content": [{"type": "text", "text": "[('BUSI', 26.19)]"}]},
    {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"content": "not a list"},
])
@pytest.mark.parametrize("results", ["text", "json", "lesson"])
def test_a_logged_answer_reads_as_the_projects_own_client_reads_it(answer: Any,
                                                                    results: str) -> None:
    from reactlab.mcp.source import result_of

    assert relay.outcome(answer, results) == result_of(answer, results)


def test_a_logged_jsonrpc_error_is_the_clients_failure_text() -> None:
    from reactlab.mcp.source import FAILURES

    assert relay.outcome({"jsonrpc_error": {"code": -32602, "message": "Invalid params"}}) \
        == {"error": FAILURES["rpc"].format(detail="Invalid params")}
    assert relay.outcome("not a result") == {"error": FAILURES["malformed"]}


def test_relay_without_a_server_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        relay.main(["--log", "x.jsonl", "--"])
    assert exc.value.code == 2
