"""Streamed requests for the API adapters (backend option ``stream: true``): what the
stream readers share.

With ``stream: true`` an adapter sends ``"stream": true`` and reads the answer from the
server-sent events with the SDK's own stream parser, then hands the loop exactly what
the non-streamed request would have given it. Each adapter's ``read_stream`` knows its
API's events (:mod:`reactlab.backends.adapter`; e.g. the Responses API's final object is
the ``response.completed`` event's ``response``, a Messages API answer is accumulated
from its events); here:

* a 200 that is not an event stream (a broken body, an HTML page from a proxy) is read as
  the SDK reads a non-streamed answer, so it fails the same way.

Tokens are counted on the body without its ``"stream": true`` member (:func:`unstreamed`),
byte for byte the body the non-streamed request sends: a streamed trace equals the
non-streamed one.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from reactlab.agent.types import RequestMeter
from reactlab.backends import metering_hook as plain_metering_hook
from reactlab.simulate import unstreamed

__all__ = ["is_event_stream", "metering_hook", "plain_answer", "unstreamed"]

def metering_hook(meter: RequestMeter) -> Callable[[Any], None]:
    """The adapters' metering hook, counting the body as the non-streamed request sends it."""
    hook = plain_metering_hook(meter)

    def count(request: Any) -> None:
        hook(SimpleNamespace(content=unstreamed(request.content)))

    return count


def is_event_stream(http: Any) -> bool:
    content_type: str = http.headers.get("content-type", "")
    return content_type.split(";")[0].strip() == "text/event-stream"


def plain_answer(client: Any, http: Any, cast_to: type) -> Any:
    """A non-SSE 200 read as the SDK reads a non-streamed answer (JSON → ``cast_to``; a
    body that is not JSON and not declared JSON → its text)."""
    http.read()
    if not http.headers.get("content-type", "*").split(";")[0].endswith("json"):
        try:
            data = http.json()
        except Exception:
            return http.text
    else:
        data = http.json()
    return client._process_response_data(data=data, cast_to=cast_to, response=http)
