"""A stdio relay between a framework's own MCP client and its server: how such a run is
traced, recorded and replayed (docs/mcp.md, "Frameworks take MCP tools").

A framework that takes its tools over MCP starts the server itself, through its own MCP
client (the Agents SDK's ``MCPServerStdio``, pydantic-ai's ``MCPToolset``, ...). The
pipeline gives it one of these commands instead of the server's::

    python -m reactlab.mcp.relay --log EXCHANGES.jsonl -- COMMAND ARG...
    python -m reactlab.mcp.relay --log EXCHANGES.jsonl --replay RECORDING

The first starts ``COMMAND ARG...`` as its child and copies the stdio transport's
newline-delimited JSON-RPC messages both ways, byte for byte. Each request of the
client (``initialize``, ``tools/list``, ``tools/call``...) and the server's answer are
appended to the log as one line ``{"seq", "request", "response" | "failure"}`` when the
answer comes; ``seq`` numbers the requests in the order the client sent them, and
``request`` is the message's ``method`` and ``params`` (no JSON-RPC id). A JSON-RPC error
is a ``failure`` of kind ``rpc`` that keeps the error object; a request left without an
answer is one of kind ``closed`` (the server ended first) or ``unanswered`` (the client
did). Notifications, and what the server sends of its own accord, pass through
unrecorded. The run's tool executions are read from this log (:func:`executions`), and
its MCP recording, in the format of the lesson loop's (:mod:`reactlab.mcp.recording`: a
header with the server's identity and its tool list, the exchanges, a checksum), is
written from it when the run ends (:func:`write_recording`). The child's stderr is
appended to ``EXCHANGES.jsonl.stderr`` (a server's own warnings are the run's log, not
the pipeline's terminal: :func:`server_stderr`).

With ``--replay`` no server is started: the relay answers each request of the client
from the recording's next exchange, once it is checked to be the recorded request
(:meth:`reactlab.mcp.recording.ToolReplay.take`), and logs it as above. A recording
that fails its checks, or a request that is not the recorded one, ends the relay (the
client reads a closed connection) with the error in ``EXCHANGES.jsonl.problem``, which
:func:`check_replay` raises in the run's process, as it does for recorded exchanges left
unused.

A run whose framework starts its server more than once logs the sessions one after the
other in the same log: each relay numbers its requests after the lines already there.
The relay ends when the client closes its stdin (the child's stdin is closed and the
child waited for) or on SIGTERM / SIGINT (the child is terminated, then killed after
:data:`GRACE` seconds): no server process outlives it.
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
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from reactlab.core.errors import RecordingError

if TYPE_CHECKING:
    from reactlab.mcp.recording import ToolReplay

__all__ = ["GRACE", "check_replay", "command", "environment", "exchanges", "executions",
           "main", "outcome", "replay_command", "server_stderr", "write_recording"]

#: Seconds a terminated child is given before it is killed.
GRACE = 5.0
#: Where the 2026-07-28 protocol carries the client's revision and the server's identity.
_PROTOCOL_META = "io.modelcontextprotocol/protocolVersion"
_SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


def command(log: str | Path, server: list[str]) -> list[str]:
    """The command line that runs ``server`` behind the relay, logging to ``log``."""
    return [sys.executable, "-m", "reactlab.mcp.relay", "--log", str(log), "--", *server]


def replay_command(log: str | Path, recording: str | Path) -> list[str]:
    """The command line of a relay that answers from ``recording``, logging to ``log``."""
    return [sys.executable, "-m", "reactlab.mcp.relay", "--log", str(log),
            "--replay", str(recording)]


def stderr_file(log: str | Path) -> Path:
    """Where the relay appends its server's stderr: beside the log."""
    return Path(f"{log}.stderr")


def problem_file(log: str | Path) -> Path:
    """Where a replaying relay writes why it stopped: beside the log."""
    return Path(f"{log}.problem")


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


# --- the log, read in the run's process ------------------------------------------------


def exchanges(log: str | Path) -> list[dict[str, Any]]:
    """The exchanges a relay logged, in the order the client sent their requests,
    numbered as a recording's (``{"exchange": n, "request", "response" | "failure"}``);
    none if the log was never written."""
    path = Path(log)
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    entries.sort(key=lambda e: e["seq"])
    return [{"exchange": n, **{k: v for k, v in e.items() if k != "seq"}}
            for n, e in enumerate(entries, 1)]


def _params(request: dict[str, Any]) -> dict[str, Any]:
    params = request.get("params")
    return params if isinstance(params, dict) else {}


def executions(log: str | Path,
               results: str = "text") -> list[tuple[str, Any, dict[str, Any]]]:
    """The tool executions a relay logged: (name, arguments, result as the trace records
    it: :func:`outcome`) of each ``tools/call`` the server answered, with a result or a
    JSON-RPC error, in the order the client sent them."""
    out: list[tuple[str, Any, dict[str, Any]]] = []
    for rec in exchanges(log):
        if rec["request"].get("method") != "tools/call":
            continue
        if "response" in rec:
            result = rec["response"]
        elif "error" in rec["failure"]:
            result = {"jsonrpc_error": rec["failure"]["error"]}
        else:
            continue
        params = _params(rec["request"])
        out.append((str(params.get("name")), params.get("arguments"), outcome(result, results)))
    return out


def handshake(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What the server said of itself to the client, as a recording's header takes it
    (:func:`reactlab.mcp.recording.header`): its ``initialize`` result, or on the
    2026-07-28 protocol (no handshake) the identity its ``server/discover`` result
    carries and the revision the client asked for; {} when it said nothing."""
    for rec in records:
        method, response = rec["request"].get("method"), rec.get("response")
        if method == "initialize" and isinstance(response, dict):
            return response
        if method == "server/discover" and isinstance(response, dict):
            meta = response.get("_meta")
            asked = _params(rec["request"]).get("_meta")
            return {"serverInfo": meta.get(_SERVER_INFO_META) if isinstance(meta, dict)
                    else None,
                    "protocolVersion": asked.get(_PROTOCOL_META) if isinstance(asked, dict)
                    else None}
    return {}


def listed_tools(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The server's whole tool list as the client's first listing got it (every page),
    None when the client listed none to its last page."""
    tools: list[dict[str, Any]] = []
    for rec in records:
        if rec["request"].get("method") != "tools/list":
            continue
        response = rec.get("response")
        if not isinstance(response, dict) or not isinstance(response.get("tools"), list):
            return None
        tools += response["tools"]
        if not response.get("nextCursor"):
            return tools
    return None


def write_recording(log: str | Path, path: str | Path, server: str, digest: str) -> Path:
    """Write the run's MCP recording at ``path`` (atomically) from the relay's ``log``: the
    header holds what the server said of itself and the tool list the client listed (the
    planned list, whose hash is ``digest``, when the client listed none: from the
    planning cache), then every exchange."""
    # (the relay's own process starts without the config package: ~0.4 s)
    from reactlab.config.mcp_lists import planned_list  # lazy: the config package
    from reactlab.mcp.recording import ToolRecorder, header  # lazy: the config package

    records = exchanges(log)
    tools = listed_tools(records)
    if tools is None:
        tools = planned_list(server, digest) or []
    recorder = ToolRecorder(header(server, handshake(records), tools))
    recorder.records = records
    return recorder.write(path)


def check_replay(log: str | Path, player: ToolReplay) -> None:
    """RecordingError when the replaying relay stopped on a problem (its recording
    failed its checks, the client sent a request that is not the recorded one), or when
    the run left recorded exchanges unused."""
    problem = problem_file(log)
    if problem.exists():
        raise RecordingError(problem.read_text(encoding="utf-8").strip())
    player.used = len(exchanges(log))
    player.check_finished()


# --- the relay's own process -----------------------------------------------------------


def _message(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _request(message: dict[str, Any] | None) -> dict[str, Any] | None:
    """A client's request as a recording keeps it (its method and params), None for a
    message that is no request (a notification, an answer, a line that is not JSON)."""
    if message is None or not isinstance(message.get("method"), str) or "id" not in message:
        return None
    return {"method": message["method"],
            **({"params": message["params"]} if "params" in message else {})}


def _id(message: dict[str, Any]) -> str:
    return json.dumps(message.get("id"), sort_keys=True)


def _answered(request: dict[str, Any], message: dict[str, Any]) -> tuple[str, Any]:
    """How the server's answer ``message`` is logged: ``("response", result)``, or a
    failure that keeps what a replay sends back (``error``, or a ``result`` that is no
    object)."""
    method = request["method"]
    if "error" in message:
        error = message["error"]
        detail = error.get("message") if isinstance(error, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return "failure", {"kind": "rpc", "message": f"{method}: JSON-RPC error {code}: "
                           f"{detail}", "detail": detail, "error": error}
    if isinstance(message["result"], dict):
        return "response", message["result"]
    return "failure", {"kind": "malformed", "message": f"{method}: an answer without a "
                       "result object", "result": message["result"]}


class _Log:
    """The relay's log: one line per exchange, numbered after the lines already there
    (the earlier sessions of the run)."""

    def __init__(self, path: Path) -> None:
        self.offset = len(path.read_bytes().splitlines()) if path.exists() else 0
        self.count = 0
        self.file: IO[str] = path.open("a", encoding="utf-8")
        self.lock = threading.Lock()

    def number(self) -> int:
        with self.lock:
            self.count += 1
            return self.offset + self.count - 1

    def write(self, seq: int, request: dict[str, Any], key: str, value: Any) -> None:
        with self.lock:
            self.file.write(json.dumps({"seq": seq, "request": request, key: value},
                                       ensure_ascii=False) + "\n")
            self.file.flush()


class _Relay:
    def __init__(self, server: list[str], log: Path) -> None:
        with stderr_file(log).open("ab") as err:
            self.child = subprocess.Popen(server, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=err, bufsize=0)
        self.log = _Log(log)
        self.pending: dict[str, tuple[int, dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.client_closed = False

    def to_server(self, source: IO[bytes]) -> None:
        """Copy the client's messages to the server; note each request by id."""
        assert self.child.stdin is not None
        try:
            for line in source:
                message = _message(line)
                request = _request(message)
                if message is not None and request is not None:
                    with self.lock:
                        self.pending[_id(message)] = (self.log.number(), request)
                self.child.stdin.write(line)
                self.child.stdin.flush()
            self.client_closed = True  # (not when the server's end broke first)
        except (BrokenPipeError, ValueError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                self.child.stdin.close()

    def to_client(self, sink: IO[bytes]) -> None:
        """Copy the server's messages to the client; log each answered request."""
        assert self.child.stdout is not None
        for line in self.child.stdout:
            message = _message(line)
            if message is not None and "method" not in message and (
                    "result" in message or "error" in message):
                with self.lock:
                    call = self.pending.pop(_id(message), None)
                if call is not None:
                    self.log.write(call[0], call[1], *_answered(call[1], message))
            try:
                sink.write(line)
                sink.flush()
            except (BrokenPipeError, OSError):
                break

    def unanswered(self) -> None:
        """Log the requests left without an answer, in order."""
        kind, what = (("unanswered", "no answer before the client closed the connection")
                      if self.client_closed else
                      ("closed", "the server closed the connection before answering"))
        with self.lock:
            left = sorted(self.pending.values(), key=lambda p: p[0])
            self.pending.clear()
        for seq, request in left:
            self.log.write(seq, request, "failure",
                           {"kind": kind, "message": f"{request['method']}: {what}"})

    def stop(self) -> None:
        if self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(GRACE)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def _relay(server: list[str], log: Path) -> int:
    relay = _Relay(server, log)

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
        relay.unanswered()
        relay.log.file.close()
    return code if code is not None and code >= 0 else 1


def _reply(message: dict[str, Any], rec: dict[str, Any]) -> bytes | None:
    """The line that answers the client's ``message`` as the recorded exchange ``rec``
    was answered; None when it was not (the connection closed, or no answer came)."""
    failure = rec.get("failure", {})
    if "response" in rec:
        body: dict[str, Any] = {"result": rec["response"]}
    elif "error" in failure or "result" in failure:
        body = {k: failure[k] for k in ("error", "result") if k in failure}
    else:
        return None
    answer = {"jsonrpc": "2.0", "id": message["id"], **body}
    return (json.dumps(answer, ensure_ascii=False) + "\n").encode("utf-8")


def _replay(recording: str, log: Path, source: IO[bytes], sink: IO[bytes]) -> int:
    """Answer the client's requests from ``recording``; 1 when it stopped on a problem
    (written to the problem file, for :func:`check_replay`)."""
    # lazy: the recording's module imports the config package (~0.4 s): only a replay
    from reactlab.mcp.recording import ToolReplay

    book = _Log(log)
    try:
        player = ToolReplay.load(recording)
        player.used = book.offset
        for line in source:
            message = _message(line)
            request = _request(message)
            if message is None or request is None:
                continue
            rec = player.take(request)
            key = "response" if "response" in rec else "failure"
            book.write(book.number(), request, key, rec[key])
            reply = _reply(message, rec)
            if reply is None and rec[key].get("kind") == "unanswered":
                continue
            if reply is None:
                return 0  # the server had closed the connection here
            sink.write(reply)
            sink.flush()
    except RecordingError as exc:
        problem_file(log).write_text(f"{exc}\n", encoding="utf-8")
        return 1
    except (BrokenPipeError, OSError):
        return 0
    finally:
        book.file.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactlab.mcp.relay",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, help="the JSONL file of the exchanges")
    parser.add_argument("--replay", metavar="RECORDING",
                        help="answer from this MCP recording; no server is started")
    parser.add_argument("server", nargs=argparse.REMAINDER,
                        help="-- then the server's command and arguments")
    a = parser.parse_args(argv)
    server = a.server[1:] if a.server[:1] == ["--"] else a.server
    if a.replay is not None:
        if server:
            parser.error("--replay starts no server: give no command")
        return _replay(a.replay, Path(a.log), sys.stdin.buffer, sys.stdout.buffer)
    if not server:
        parser.error("give the server's command after --, or --replay RECORDING")
    return _relay(server, Path(a.log))


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    # no interpreter shutdown: the reader thread may still block in a read of stdin (the
    # server ended first), which shutdown would abort on ("could not acquire lock")
    os._exit(status)
