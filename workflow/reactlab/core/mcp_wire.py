"""The wire of the project's MCP client: JSON-RPC 2.0 to a tool server, no project meaning.

Two transports of the MCP specification: **stdio** (the server is a child process; one
JSON-RPC message per line on its stdin and stdout; its stderr is drained and its last
lines kept for error messages) and **Streamable HTTP** (each message a POST to the
server's URL, answered with a JSON body or an SSE stream; the session id the server gives
at initialisation goes with every later message). On top of either: the handshake
(``initialize``, then ``notifications/initialized``) and ``tools/list`` with its pages.

The client is synchronous, one request in flight at a time, every request under a
deadline (the server's ``timeout``), every message under a size cap. A failure raises
:class:`~reactlab.core.errors.ToolServerError` with its ``kind`` and never leaves a
process behind: a stdio server runs in its own process group, and :meth:`StdioWire.close`
(also after a timeout, a malformed answer or a message over the cap: the stream can no
longer be trusted) ends the whole group, politely first (stdin closed, then SIGTERM),
then with SIGKILL.

It lives in ``core`` because two stages speak it: the config reads a server's tool list
at planning (:mod:`reactlab.config.mcp`), and the tool source calls the tools during a run
(:mod:`reactlab.mcp.source`). What a result means to the model is the tool source's.
Importing this module imports no HTTP library (``httpx`` is imported when an HTTP wire
starts).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from reactlab.core.errors import ToolServerError

#: The protocol revision the client asks for (a server answers with the one it speaks).
PROTOCOL_VERSION = "2025-06-18"
CLIENT_INFO = {"name": "reactlab", "version": "1"}
#: Seconds a stdio server is given to exit after its stdin closes, then after SIGTERM.
GRACE = 1.0
_STDERR_LINES = 20
#: How often a waiting request checks that the server is still running (seconds).
_POLL = 0.05


class Wire(Protocol):
    """One connection to a server: requests with a deadline, notifications, close;
    ``server``: the server's answer to ``initialize`` (its ``serverInfo``,
    ``protocolVersion``...), set by :func:`open_wire`."""

    server: dict[str, Any]

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        ...

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None: ...

    def close(self) -> None: ...


def _message(n: int, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def _answer(msg: Any, n: int, where: str) -> dict[str, Any] | None:
    """The ``result`` of the answer to request ``n``; None for a message that is not the
    answer (a notification, a request of the server); ToolServerError for a JSON-RPC
    error answer or a message that is not JSON-RPC."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        raise ToolServerError("malformed", f"{where}: not a JSON-RPC 2.0 message")
    if "method" in msg:
        return None
    if msg.get("id") != n:
        raise ToolServerError("malformed", f"{where}: an answer to request {msg.get('id')!r} "
                                           f"while request {n} was waiting")
    if "error" in msg:
        err = msg["error"]
        text = err.get("message") if isinstance(err, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        raise ToolServerError("rpc", f"{where}: JSON-RPC error {code}: {text}",
                              detail=str(text),
                              code=code if type(code) is int else None)
    result = msg.get("result")
    if not isinstance(result, dict):
        raise ToolServerError("malformed", f"{where}: an answer without a result object")
    return result


class StdioWire:
    """A server started as ``command args`` with ``env`` added to this environment, spoken
    to over its stdin and stdout."""

    def __init__(self, command: str, args: Sequence[str] = (), *,
                 env: Mapping[str, str] | None = None, cwd: str | None = None,
                 timeout: float = 30.0, max_bytes: int = 1_000_000, name: str = "server") -> None:
        self.name = name
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.server: dict[str, Any] = {}
        self._n = 0
        self._dead: ToolServerError | None = None
        self._lines: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        try:
            self.proc = subprocess.Popen(
                [command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=cwd, env={**os.environ, **(env or {})},
                start_new_session=True)  # its own process group: close() ends all of it
        except OSError as exc:
            raise ToolServerError("start", f"MCP server {name}: cannot start {command!r}: "
                                           f"{exc.strerror or exc}") from exc
        self._threads = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._drain, daemon=True)]
        for t in self._threads:
            t.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        """The stdout reader: whole lines, or ``too_large`` for a line over the cap (read
        to its end and dropped), then ``eof``."""
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                line = out.readline(self.max_bytes + 1)
                if not line:
                    break
                if len(line) > self.max_bytes and not line.endswith(b"\n"):
                    size = len(line)
                    while line and not line.endswith(b"\n"):
                        line = out.readline(1 << 20)
                        size += len(line)
                    self._lines.put(("too_large", size))
                    continue
                self._lines.put(("line", line))
        except (OSError, ValueError):
            pass
        self._lines.put(("eof", None))

    def _drain(self) -> None:
        err = self.proc.stderr
        assert err is not None
        with contextlib.suppress(OSError, ValueError):
            for line in err:
                self._stderr.append(line.decode("utf-8", "replace").rstrip())

    def stderr_tail(self) -> str:
        return " | ".join(self._stderr)

    def _fail(self, kind: str, message: str, context: str | None = None) -> ToolServerError:
        """Record the failure, end the server (its stream can no longer be trusted)."""
        self._dead = ToolServerError(kind, f"MCP server {self.name}: {message}",
                                     context=context)
        self.close()
        return self._dead

    def _send(self, msg: Mapping[str, Any]) -> None:
        if self._dead is not None:
            raise ToolServerError("closed", f"{self._dead.message} (it was stopped)",
                                  context=self._dead.context)
        data = (json.dumps(msg, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            stdin.flush()
        except (OSError, ValueError):
            raise self._fail("closed", "its stdin is closed (the process ended)",
                             self._exit_note()) from None

    def _exit_note(self) -> str | None:
        """The exit status and the last lines of stderr, for the person (never recorded:
        :attr:`ToolServerError.context`)."""
        code = self.proc.poll()
        tail = self.stderr_tail()
        parts = ([f"it exited with status {code}"] if code is not None else []) + (
            [f"stderr: {tail[-500:]}"] if tail else [])
        return "; ".join(parts) or None

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self._n += 1
        n = self._n
        self._send(_message(n, method, params))
        deadline = time.monotonic() + self.timeout
        where = f"{method} (request {n})"
        while True:
            left = deadline - time.monotonic()
            try:
                kind, value = self._lines.get(timeout=min(max(left, 0.0), _POLL))
            except queue.Empty:
                if self.proc.poll() is not None and self._lines.empty():
                    # the server ended while a process it started keeps its stdout open
                    kind, value = "eof", None
                elif left <= 0:
                    raise self._fail("timeout", f"no answer to {where} within "
                                                f"{self.timeout:g} s") from None
                else:
                    continue
            if kind == "eof":
                # let the process finish so that its status and last words are known
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=0.5)
                raise self._fail("closed", f"the process ended before answering {where}",
                                 self._exit_note())
            if kind == "too_large":
                raise self._fail("too_large", f"a message of {value} bytes, over the "
                                              f"{self.max_bytes} bytes allowed, for {where}")
            try:
                msg = json.loads(value)
            except ValueError:
                raise self._fail("malformed", f"a line that is not JSON while {where} "
                                              f"waited: {value[:120]!r}") from None
            try:
                result = _answer(msg, n, f"{self.name}: {where}")
            except ToolServerError as exc:
                if exc.kind == "rpc":
                    raise
                raise self._fail(exc.kind, str(exc).split(": ", 1)[-1]) from None
            if result is not None:
                return result
            if "id" in msg:  # a request of the server (ping, sampling...): not supported
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": {}}
                           if msg["method"] == "ping" else
                           {"jsonrpc": "2.0", "id": msg["id"],
                            "error": {"code": -32601, "message": "method not found"}})

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = dict(params)
        self._send(msg)

    def close(self) -> None:
        """End the server and every process of its group; idempotent."""
        proc = self.proc
        if proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()
        try:
            proc.wait(timeout=GRACE if self._dead is None else 0.05)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=GRACE)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # the group may outlive its leader (a server's own children): kill it, and wait
        # until the kernel has taken every member down (a SIGKILL is not instant)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        _wait_group_gone(proc.pid, GRACE)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
        for t in self._threads:
            t.join(timeout=GRACE)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie does not count: only its
    parent can reap it, and it holds nothing)."""
    try:
        entries = os.listdir("/proc")
    except OSError:  # no procfs: ask the kernel, zombies included
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                return True
    return False


def _wait_group_gone(pgid: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


class HttpWire:
    """A server at ``url``, spoken to over Streamable HTTP (JSON or SSE answers)."""

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None,
                 timeout: float = 30.0, max_bytes: int = 1_000_000,
                 name: str = "server") -> None:
        import httpx  # lazy: heavy (httpx); only a server spoken to over HTTP needs it

        self.name = name
        self.url = url
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._n = 0
        self._session: str | None = None
        self._version: str | None = None
        self._headers = dict(headers or {})
        self._client = httpx.Client(timeout=timeout)
        self.server: dict[str, Any] = {}
        self._httpx = httpx

    def _post(self, msg: Mapping[str, Any]) -> Any:
        headers = {"accept": "application/json, text/event-stream",
                   "content-type": "application/json", **self._headers}
        if self._session is not None:
            headers["mcp-session-id"] = self._session
        if self._version is not None:
            headers["mcp-protocol-version"] = self._version
        return self._client.stream("POST", self.url, headers=headers,
                                   content=json.dumps(msg, ensure_ascii=False).encode())

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self._n += 1
        n = self._n
        where = f"{self.name}: {method} (request {n})"
        deadline = time.monotonic() + self.timeout
        try:
            with self._post(_message(n, method, params)) as resp:
                if resp.status_code >= 400:
                    raise ToolServerError("rpc", f"{where}: HTTP {resp.status_code}",
                                          http_status=resp.status_code)
                if "mcp-session-id" in resp.headers:
                    self._session = resp.headers["mcp-session-id"]
                ctype = resp.headers.get("content-type", "")
                body = bytearray()
                if ctype.startswith("text/event-stream"):
                    for msg in self._events(resp, where, deadline):
                        result = _answer(msg, n, where)
                        if result is not None:
                            return result
                    raise ToolServerError("closed", f"{where}: the event stream ended "
                                                    "without the answer")
                for chunk in resp.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise ToolServerError("too_large", f"{where}: an answer over the "
                                                           f"{self.max_bytes} bytes allowed")
        except self._httpx.TimeoutException:
            raise ToolServerError("timeout", f"{where}: no answer within "
                                             f"{self.timeout:g} s") from None
        except self._httpx.HTTPError as exc:
            raise ToolServerError("closed", f"{where}: {type(exc).__name__}",
                                  context=str(exc) or None) from None
        try:
            msg = json.loads(bytes(body))
        except ValueError:
            raise ToolServerError("malformed", f"{where}: the answer is not JSON") from None
        result = _answer(msg, n, where)
        if result is None:
            raise ToolServerError("malformed", f"{where}: no answer in the body")
        return result

    def _events(self, resp: Any, where: str, deadline: float) -> Any:
        """The JSON messages of an SSE stream (``data:`` lines, events split by blanks)."""
        data: list[str] = []
        size = 0
        for line in resp.iter_lines():
            if time.monotonic() > deadline:
                raise ToolServerError("timeout", f"{where}: no answer within "
                                                 f"{self.timeout:g} s")
            size += len(line)
            if size > self.max_bytes:
                raise ToolServerError("too_large", f"{where}: an answer over the "
                                                   f"{self.max_bytes} bytes allowed")
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif line == "" and data:
                try:
                    yield json.loads("\n".join(data))
                except ValueError:
                    raise ToolServerError("malformed", f"{where}: an event that is not "
                                                       "JSON") from None
                data = []

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = dict(params)
        try:
            with self._post(msg) as resp:
                resp.read()
        except self._httpx.HTTPError as exc:
            raise ToolServerError("closed", f"{self.name}: {method}: {type(exc).__name__}",
                                  context=str(exc) or None) from None

    def initialized(self, result: Mapping[str, Any]) -> None:
        version = result.get("protocolVersion")
        self._version = version if isinstance(version, str) else None

    def close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(self._httpx.HTTPError):
                self._client.delete(self.url, headers={"mcp-session-id": self._session})
        self._client.close()


def open_wire(*, name: str, command: str | None = None, args: Sequence[str] = (),
              env: Mapping[str, str] | None = None, url: str | None = None,
              headers: Mapping[str, str] | None = None,
              timeout: float = 30.0, max_bytes: int = 1_000_000,
              cwd: str | None = None) -> StdioWire | HttpWire:
    """A wire to the server (stdio for ``command``, Streamable HTTP for ``url``, with
    ``headers`` sent on every HTTP message: authorization, for one), after the handshake.
    A failure of the handshake closes it and raises ToolServerError (its ``http_status``
    kept)."""
    wire: StdioWire | HttpWire
    if command is not None:
        wire = StdioWire(command, args, env=env, cwd=cwd, timeout=timeout,
                         max_bytes=max_bytes, name=name)
    elif url is not None:
        wire = HttpWire(url, headers=headers, timeout=timeout, max_bytes=max_bytes,
                        name=name)
    else:
        raise ToolServerError("start", f"MCP server {name}: neither a command nor a url")
    try:
        result = wire.request("initialize", {"protocolVersion": PROTOCOL_VERSION,
                                             "capabilities": {}, "clientInfo": CLIENT_INFO})
        if isinstance(wire, HttpWire):
            wire.initialized(result)
        wire.notify("notifications/initialized")
    except ToolServerError as exc:
        wire.close()
        raise ToolServerError("start", f"{exc.message} (during the handshake)",
                              http_status=exc.http_status, context=exc.context) from exc
    wire.server = result
    return wire


def list_tools(wire: Wire) -> list[dict[str, Any]]:
    """The server's tools (every page of ``tools/list``), as the server sent them."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(1000):
        result = wire.request("tools/list", {"cursor": cursor} if cursor else None)
        page = result.get("tools")
        if not isinstance(page, list) or not all(
                isinstance(t, dict) and isinstance(t.get("name"), str) for t in page):
            raise ToolServerError("malformed", "tools/list: `tools` is not a list of tools")
        tools += page
        cursor = result.get("nextCursor")
        if not cursor:
            return tools
    raise ToolServerError("malformed", "tools/list: more than 1000 pages")
