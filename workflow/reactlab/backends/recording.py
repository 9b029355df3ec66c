"""Recording and replay of the HTTP exchanges of an API run, at the transport boundary.

A live run talks to a real API; its answers cannot be had again. So every HTTP attempt of
the run is recorded by a transport wrapped around the real one (it sees exactly what goes
over the wire), and the run can later be replayed offline, with no key, through the same
SDK, adapter and loop: the replay transport answers each request with the next recorded
response after checking that the request is the one that was recorded. The replayed
trace is byte-identical to the live one.

The recording (a JSONL file, written atomically at the end of the run, also when it ends
in ``backend_error``) holds one record per attempt::

    {"attempt": 1,
     "request": {"method": "POST", "url": "https://api.openai.com/v1/responses",
                 "headers": {...}, "body": {...the JSON body...}},
     "response": {"status": 200, "headers": {"content-type": "application/json", ...},
                  "body": "...the response text..."}}

or, when the attempt got no answer (connection refused, timeout), ``"error": {"type":
"ConnectError", "message": "..."}`` instead of ``"response"``. A body that is not JSON
(request) or not UTF-8 (response) is kept as ``body_text`` / ``body_base64``.

What is never recorded
    * request headers that carry credentials: ``authorization``, ``x-api-key``,
      ``api-key``, cookies, and every header whose name contains ``key``, ``token``,
      ``secret``, ``auth``, ``password``, ``cookie`` or ``session`` (and the
      organisation / project ids);
    * credentials in the URL (user info; query parameters named like the headers above);
    * response headers other than ``content-type``, ``retry-after``, ``retry-after-ms``,
      the request id (``request-id``, ``x-request-id``) and the rate-limit headers;
    * the key itself anywhere: if it is 8 characters or longer, every occurrence in what
      is recorded (a server that echoes it in an error, say) becomes ``[redacted]``.

The SDK sees the same filtered response in the live run as in its replay (only the kept
headers, the body with the key redacted, a ``retry-after`` HTTP date turned into the
seconds it meant then), so that what reaches the trace is a function of the recording.

Importing this module imports no HTTP library: the transports are built for the library
(``httpx`` or ``httpx2``) that the adapter passes in.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from reactlab.backends.retry import retry_after
from reactlab.core.errors import ProtocolError, RecordingError
from reactlab.core.io import write_bytes_atomic

REDACTED = "[redacted]"
MIN_SECRET = 8  # shorter "keys" (EMPTY, none: local servers) are not scrubbed from text
SECRET_WORDS = ("key", "token", "secret", "auth", "password", "cookie", "session")
DROPPED_HEADERS = frozenset({"openai-organization", "openai-project"})
KEPT_RESPONSE_HEADERS = frozenset({"content-type", "retry-after", "retry-after-ms"})
REPLAY_API_KEY = "replay-without-key"  # what the SDK is given in replay (nothing is sent)


def sensitive(name: str) -> bool:
    """Whether a header or query parameter name may carry a credential."""
    low = name.lower()
    return low in DROPPED_HEADERS or any(w in low for w in SECRET_WORDS)


def kept_response_header(name: str) -> bool:
    low = name.lower()
    return (low in KEPT_RESPONSE_HEADERS or low.endswith("request-id")
            or "ratelimit" in low)


def scrub(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``[redacted]``."""
    if secret and len(secret) >= MIN_SECRET and secret in text:
        return text.replace(secret, REDACTED)
    return text


def _scrub_json(value: Any, secret: str | None) -> Any:
    if isinstance(value, str):
        return scrub(value, secret)
    if isinstance(value, list):
        return [_scrub_json(v, secret) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_json(v, secret) for k, v in value.items()}
    return value


def redact_url(url: str, secret: str | None = None) -> str:
    """The URL without user info and without query parameters that may be credentials."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if not sensitive(k)])
    return scrub(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)), secret)


def _headers(items: Any, keep: Any, secret: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in items:
        low = name.lower()
        if keep(low):
            value = scrub(value, secret)
            out[low] = f"{out[low]}, {value}" if low in out else value
    return out


def request_record(request: Any, secret: str | None = None) -> dict[str, Any]:
    """What is recorded of a request (method, URL, safe headers, body)."""
    rec: dict[str, Any] = {
        "method": request.method,
        "url": redact_url(str(request.url), secret),
        "headers": _headers(request.headers.multi_items(), lambda n: not sensitive(n), secret),
    }
    content = request.content
    try:
        rec["body"] = _scrub_json(json.loads(content), secret)
    except ValueError:
        rec["body_text"] = scrub(content.decode("utf-8", errors="replace"), secret)
    return rec


def _normalise_retry_after(headers: dict[str, str]) -> None:
    """A ``retry-after`` HTTP date becomes the seconds it meant when it arrived, so that a
    replay waits (and records) the same as the live run did."""
    raw = headers.get("retry-after")
    if raw is None:
        return
    try:
        float(raw)
    except ValueError:
        seconds = retry_after({"retry-after": raw})
        if seconds is None:
            del headers["retry-after"]
        else:
            headers["retry-after"] = f"{seconds:.3f}"


def _body_fields(content: bytes) -> dict[str, str]:
    try:
        return {"body": content.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_base64": base64.b64encode(content).decode("ascii")}


def _body_bytes(rec: Mapping[str, Any]) -> bytes:
    if "body_base64" in rec:
        return base64.b64decode(rec["body_base64"])
    return str(rec.get("body", "")).encode("utf-8")


def _transport_error(lib: ModuleType, error: Mapping[str, Any], request: Any) -> Exception:
    """The HTTP library's exception of a recorded failed attempt (its type and message)."""
    cls = getattr(lib, str(error.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, lib.TransportError)):
        cls = lib.TransportError
    exc: Exception = cls(str(error.get("message", "")), request=request)
    return exc


def _response(lib: ModuleType, rec: Mapping[str, Any], request: Any) -> Any:
    return lib.Response(int(rec["status"]), headers=dict(rec.get("headers", {})),
                        content=_body_bytes(rec), request=request)


def _atomic_write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    data = b"".join(
        (json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n").encode(
            "utf-8", errors="backslashreplace")
        for r in records)
    write_bytes_atomic(path, data)


class Recorder:
    """Collects the exchanges of one run; :meth:`write` publishes them atomically."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def wrap(self, lib: ModuleType, inner: Any, *, secret: str | None = None) -> Any:
        """A ``lib.BaseTransport`` that sends through ``inner`` and records every attempt.

        ``secret`` (the API key) is redacted from everything recorded and from the
        response the SDK gets.
        """
        return _transport_classes(lib)[0](self, lib, inner, secret)

    def exchange(self, lib: ModuleType, inner: Any, request: Any, secret: str | None) -> Any:
        rec: dict[str, Any] = {"attempt": len(self.records) + 1,
                               "request": request_record(request, secret)}
        try:
            response = inner.handle_request(request)
            try:
                content = response.read()
            finally:
                response.close()
        except lib.TransportError as exc:
            rec["error"] = {"type": type(exc).__name__, "message": scrub(str(exc), secret)}
            self.records.append(rec)
            # the SDK gets the same exception (type and message) as it will in replay
            raise _transport_error(lib, rec["error"], request) from exc
        headers = _headers(response.headers.multi_items(), kept_response_header, secret)
        _normalise_retry_after(headers)
        rec["response"] = {"status": response.status_code, "headers": headers,
                           **_body_fields(content)}
        if "body" in rec["response"]:
            rec["response"]["body"] = scrub(rec["response"]["body"], secret)
        self.records.append(rec)
        return _response(lib, rec["response"], request)

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        _atomic_write_lines(path, self.records)
        return path


def read(path: str | Path) -> list[dict[str, Any]]:
    """The records of a recording; RecordingError says what is wrong with the file."""
    return read_numbered(path, "recording", "attempt",
                         lambda rec: isinstance(rec.get("request"), dict)
                         and ("response" in rec) != ("error" in rec))


def read_numbered(path: str | Path, what: str, counter: str,
                  valid: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The JSON lines of a recording file (``what``: its name in messages), record ``i``
    carrying ``i`` in its ``counter`` field and passing ``valid``; RecordingError says
    what is wrong with the file (also for the MCP tool recordings,
    :mod:`reactlab.mcp.recording`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordingError(f"cannot read the {what} {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise RecordingError(f"{path}: not UTF-8 ({exc})") from exc
    records: list[dict[str, Any]] = []
    for i, line in enumerate(text.splitlines(), 1):
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise RecordingError(f"{path}: line {i} is not valid JSON ({exc})") from exc
        if not isinstance(rec, dict) or rec.get(counter) != i or not valid(rec):
            raise RecordingError(f"{path}: line {i} is not the record of {counter} {i}")
        records.append(rec)
    return records


def first_difference(recorded: Any, sent: Any, where: str = "") -> str | None:
    """Where two JSON values first differ, as ``path: recorded X, sent Y``; None if equal."""
    if isinstance(recorded, dict) and isinstance(sent, dict):
        for k in [*recorded, *(k for k in sent if k not in recorded)]:
            if k not in sent or k not in recorded:
                side = "sent" if k not in recorded else "recorded"
                return f"{where}.{k}".lstrip(".") + f": only in the {side} body"
            found = first_difference(recorded[k], sent[k], f"{where}.{k}")
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(sent, list):
        for i, (a, b) in enumerate(zip(recorded, sent, strict=False)):
            found = first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        if len(recorded) != len(sent):
            return (f"{where.lstrip('.') or 'body'}: {len(recorded)} items recorded, "
                    f"{len(sent)} sent")
        return None
    if recorded == sent and isinstance(recorded, bool) == isinstance(sent, bool):
        return None
    return (f"{where.lstrip('.') or 'body'}: recorded {json.dumps(recorded)[:120]}, "
            f"sent {json.dumps(sent)[:120]}")


class Replay:
    """Answers a run's requests from a recording, in order, checking each request."""

    def __init__(self, records: list[dict[str, Any]], source: str = "the recording") -> None:
        self.records = records
        self.source = source
        self.used = 0
        self.failed = False

    @classmethod
    def load(cls, path: str | Path) -> Replay:
        return cls(read(path), str(path))

    def transport(self, lib: ModuleType) -> Any:
        """A ``lib.BaseTransport`` that answers from the recording (nothing is sent)."""
        return _transport_classes(lib)[1](self, lib)

    def _fail(self, message: str) -> ProtocolError:
        self.failed = True
        return ProtocolError(message)

    def answer(self, lib: ModuleType, request: Any) -> Any:
        n = self.used + 1
        if n > len(self.records):
            raise self._fail(f"replay ran out: {self.source} holds {len(self.records)} "
                             f"attempts and the run made another request "
                             f"({request.method} {request.url.path})")
        rec = self.records[n - 1]
        recorded = rec["request"]
        if (request.method, request.url.path) != (
                recorded.get("method"), urlsplit(str(recorded.get("url", ""))).path):
            raise self._fail(f"replay diverged at attempt {n}: {request.method} "
                             f"{request.url.path} sent, {recorded.get('method')} "
                             f"{urlsplit(str(recorded.get('url', ''))).path} recorded")
        try:
            sent: Any = json.loads(request.content)
        except ValueError:
            sent = None
        if "body" in recorded:
            diff = first_difference(recorded["body"], sent)
        else:
            text = request.content.decode("utf-8", errors="replace")
            diff = None if text == recorded.get("body_text") else "body: the text differs"
        if diff is not None:
            raise self._fail(f"replay diverged at attempt {n}: the request body differs "
                             f"from the recording at {diff}")
        self.used = n
        if "error" in rec:
            raise _transport_error(lib, rec["error"], request)
        return _response(lib, rec["response"], request)

    def check_finished(self) -> None:
        """RecordingError when a run that did not fail left recorded attempts unused."""
        if not self.failed and self.used != len(self.records):
            raise RecordingError(
                f"replay of {self.source}: the run ended after {self.used} of the "
                f"{len(self.records)} recorded attempts; it is not the run that was recorded")


class _Recording:
    """A transport that sends through ``inner`` and records each attempt (the behaviour of
    the recording transport; :func:`_transport_classes` puts it on the library's base)."""

    def __init__(self, recorder: Recorder, lib_: ModuleType, inner: Any,
                 secret: str | None) -> None:
        self.recorder, self.lib, self.inner, self.secret = recorder, lib_, inner, secret

    def handle_request(self, request: Any) -> Any:
        return self.recorder.exchange(self.lib, self.inner, request, self.secret)

    def close(self) -> None:
        self.inner.close()


class _Replaying:
    """A transport that answers every request from a recording (the behaviour of the
    replay transport; :func:`_transport_classes` puts it on the library's base)."""

    def __init__(self, replay: Replay, lib_: ModuleType) -> None:
        self.replay, self.lib = replay, lib_

    def handle_request(self, request: Any) -> Any:
        return self.replay.answer(self.lib, request)


@cache
def _transport_classes(lib: ModuleType) -> tuple[type, type]:
    """(recording, replay) transport classes for ``lib`` (httpx or httpx2): the behaviours
    above first, then ``lib.BaseTransport`` (what the client calls on its transport
    besides ``handle_request``: the context manager, ``close``). Built with ``type()``:
    the base is the library the session runs on, known only at run time."""
    base = lib.BaseTransport
    return (type("RecordingTransport", (_Recording, base), {}),
            type("ReplayTransport", (_Replaying, base), {}))
