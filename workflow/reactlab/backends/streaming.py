"""Streamed requests for the API adapters (backend option ``stream: true``).

With ``stream: true`` an adapter sends ``"stream": true`` and reads the answer from the
server-sent events with the SDK's own stream parser, then hands the loop exactly what
the non-streamed request would have given it:

* the Responses API's final object is the ``response.completed`` event's ``response``;
* a Messages API answer is accumulated from ``message_start``, ``content_block_*`` (text
  and ``input_json_delta`` pieces) and ``message_delta`` events; a tool call whose
  accumulated JSON does not parse (cut off at ``max_tokens``) holds the members complete
  before the cut, as the non-streamed answer's ``input`` does;
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
from reactlab.simulate import partial_object, unstreamed

__all__ = ["messages_final", "metering_hook", "responses_final", "unstreamed"]

def metering_hook(meter: RequestMeter) -> Callable[[Any], None]:
    """The adapters' metering hook, counting the body as the non-streamed request sends it."""
    from reactlab.backends import metering_hook as plain

    hook = plain(meter)

    def count(request: Any) -> None:
        hook(SimpleNamespace(content=unstreamed(request.content)))

    return count


def is_event_stream(http: Any) -> bool:
    return http.headers.get("content-type", "").split(";")[0].strip() == "text/event-stream"


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


def responses_final(client: Any, raw: Any) -> Any:
    """The Responses API answer of a streamed request (``with_raw_response`` result)."""
    from openai.types.responses import Response

    http = raw.http_response
    if not is_event_stream(http):
        return plain_answer(client, http, Response)
    final = None
    for event in raw.parse():
        if event.type == "response.completed":
            final = event.response
    if final is None:
        raise ValueError("the event stream ended without a response.completed event")
    return final


def messages_final(client: Any, raw: Any) -> Any:
    """The Messages API answer of a streamed request (``with_raw_response`` result)."""
    from anthropic.types import Message

    http = raw.http_response
    if not is_event_stream(http):
        return plain_answer(client, http, Message)
    message: dict[str, Any] | None = None
    pieces: dict[int, list[str]] = {}
    stopped = False
    for event in raw.parse():
        if event.type == "message_start":
            message = event.message.to_dict()
            message["content"] = []
        elif message is None:
            raise ValueError(f"a {event.type} event before message_start")
        elif event.type == "content_block_start":
            message["content"].append(event.content_block.to_dict())
            if event.content_block.type == "tool_use":
                pieces[event.index] = []
        elif event.type == "content_block_delta":
            block, delta = message["content"][event.index], event.delta
            if delta.type == "text_delta":
                block["text"] += delta.text
            elif delta.type == "input_json_delta":
                pieces[event.index].append(delta.partial_json)
        elif event.type == "content_block_stop" and event.index in pieces:
            text = "".join(pieces.pop(event.index))
            # Arguments that do not parse (a stream cut off at max_tokens) are read as the
            # SDK's own accumulator reads them: the members complete before the cut.
            message["content"][event.index]["input"] = partial_object(text) if text else {}
        elif event.type == "message_delta":
            message["stop_reason"] = event.delta.stop_reason
            message["stop_sequence"] = event.delta.stop_sequence
            message["usage"]["output_tokens"] = event.usage.output_tokens
            if event.usage.input_tokens is not None:
                message["usage"]["input_tokens"] = event.usage.input_tokens
        elif event.type == "message_stop":
            stopped = True
    if message is None or not stopped:
        raise ValueError("the event stream ended without message_stop")
    return client._process_response_data(data=message, cast_to=Message, response=http)
