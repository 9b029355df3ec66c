"""A stdio relay that logs an MCP server's tool calls: how a framework's own MCP client
is traced (docs/mcp.md, "Frameworks take MCP tools").

A framework that takes its tools over MCP starts the server itself, through its own MCP
client (the Agents SDK's ``MCPServerStdio``, pydantic-ai's ``MCPToolset``, ...). The
pipeline gives it this command instead of the server's::

    python -m reactlab.mcp.relay --log CALLS.jsonl -- COMMAND ARG...

The relay starts ``COMMAND ARG...`` as its child and copies the stdio transport's
newline-delimited JSON-RPC messages both ways, byte for byte; each ``tools/call``
request and its response are appended to ``CALLS.jsonl`` as one line ``{"name",
"arguments", "result"}`` (``result``: the MCP result, or ``{"jsonrpc_error": ...}``), in
the order the answers came. The framework's run is then traced from both wires: the model
side from the simulator's exchanges, the tool side from this log
(:func:`executions`). The child's stderr is appended to ``CALLS.jsonl.stderr`` (a
server's own warnings are the run's log, not the pipeline's terminal:
:func:`server_stderr`). The relay ends when the client
closes its stdin (the child's stdin is closed and the child waited for) or on SIGTERM /
SIGINT (the child is terminated, then killed after :data:`GRACE` seconds): no server
process outlives it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

__all__ = ["GRACE", "command", "environment", "executions", "main", "outcome",
           "server_stderr"]

#: Seconds a terminated child is given before it is killed.
GRACE = 5.0


def command(log: str | Path, server: list[str]) -> list[str]:
    """The command line that runs ``server`` behind the relay, logging to ``log``."""
    return [sys.executable, "-m", "reactlab.mcp.relay", "--log", str(log), "--", *server]


def stderr_file(log: str | Path) -> Path:
    """Where the relay appends its server's stderr: beside the calls' log."""
    return Path(f"{log}.stderr")


def server_stderr(log: str | Path) -> str:
    """What the server behind a relay wrote on its stderr ("" if nothing)."""
    path = stderr_file(log)
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The relay's (and so its server's) environment: this process's, with the folder
    this package is imported from first on ``PYTHONPATH`` (so ``-m reactlab.mcp.relay``
    finds the same code from any working directory), then ``extra``."""
    root = str(Path(__file__).resolve().parents[2])  # the folder holding reactlab/
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else ""),
            **(extra or {})}


def outcome(result: Any, results: str = "text") -> dict[str, Any]:
    """A logged MCP answer as the trace's tool result, read as the project's own MCP
    client reads one (:func:`reactlab.mcp.source.result_of`, with the server's
    ``results`` setting); a JSON-RPC error as that client's failure text."""
    # lazy: the relay's own process (python -m) starts without config and pydantic (~0.5 s)
    from reactlab.mcp.source import FAILURES, result_of

    if not isinstance(result, dict):
        return {"error": FAILURES["malformed"]}
    if "jsonrpc_error" in result:
        error = result["jsonrpc_error"]
        detail = error.get("message") if isinstance(error, dict) else None
        return {"error": FAILURES["rpc"].format(detail=detail or "sin detalle")}
    return result_of(result, results)


def executions(log: str | Path,
               results: str = "text") -> list[tuple[str, Any, dict[str, Any]]]:
    """The tool executions a relay logged: (name, arguments, result as the trace records
    it: :func:`outcome`), in the order the server answered them (none if the log was
    never written)."""
    path = Path(log)
    if not path.exists():
        return []
    out: list[tuple[str, Any, dict[str, Any]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        out.append((entry["name"], entry["arguments"], outcome(entry["result"], results)))
    return out


def _message(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _Relay:
    def __init__(self, server: list[str], log: Path) -> None:
        with stderr_file(log).open("ab") as err:
            self.child = subprocess.Popen(server, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=err, bufsize=0)
        self.log: IO[str] = log.open("a", encoding="utf-8")
        self.pending: dict[Any, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def to_server(self, source: IO[bytes]) -> None:
        """Copy the client's messages to the server; note each ``tools/call`` by id."""
        assert self.child.stdin is not None
        try:
            for line in source:
                message = _message(line)
                if message is not None and message.get("method") == "tools/call":
                    params = message.get("params") or {}
                    with self.lock:
                        self.pending[message.get("id")] = {
                            "name": params.get("name"), "arguments": params.get("arguments")}
                self.child.stdin.write(line)
                self.child.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                self.child.stdin.close()

    def to_client(self, sink: IO[bytes]) -> None:
        """Copy the server's messages to the client; log each answered ``tools/call``."""
        assert self.child.stdout is not None
        for line in self.child.stdout:
            message = _message(line)
            if message is not None and "method" not in message and (
                    "result" in message or "error" in message):
                with self.lock:
                    call = self.pending.pop(message.get("id"), None)
                if call is not None:
                    result = (message["result"] if "result" in message
                              else {"jsonrpc_error": message["error"]})
                    self.log.write(json.dumps({**call, "result": result},
                                              ensure_ascii=False) + "\n")
                    self.log.flush()
            try:
                sink.write(line)
                sink.flush()
            except (BrokenPipeError, OSError):
                break

    def stop(self) -> None:
        if self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(GRACE)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactlab.mcp.relay",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, help="the JSONL file of tool calls")
    parser.add_argument("server", nargs=argparse.REMAINDER,
                        help="-- then the server's command and arguments")
    a = parser.parse_args(argv)
    server = a.server[1:] if a.server[:1] == ["--"] else a.server
    if not server:
        parser.error("give the server's command after --")
    relay = _Relay(server, Path(a.log))

    def on_signal(signum: int, frame: object) -> None:
        relay.stop()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    reader = threading.Thread(target=relay.to_server, args=(sys.stdin.buffer,), daemon=True)
    reader.start()
    try:
        relay.to_client(sys.stdout.buffer)
        try:
            code = relay.child.wait(GRACE)
        except subprocess.TimeoutExpired:
            relay.stop()
            code = relay.child.returncode
    finally:
        relay.stop()
        relay.log.close()
    return code if code is not None and code >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
