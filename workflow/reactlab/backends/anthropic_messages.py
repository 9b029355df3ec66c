"""Anthropic Messages API adapter (official ``anthropic`` 2.x SDK, ``httpx2`` transport).

What this API does its own way: the conversation is ``messages`` of alternating roles
(an answer's content blocks kept as one ``assistant`` message, all tool results of a
step as ``tool_result`` blocks of one ``user`` message, with ``is_error``), tools are
``{"name", "description", "input_schema"}``, the system prompt is ``system``, every
request carries ``max_tokens`` (the backend's, default in the config schema), and a
streamed answer is accumulated from its events (:func:`messages_final`). Modes,
transport, metering, retries and error translation are the shared base's
(:mod:`reactlab.backends.adapter`).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import anthropic
import httpx2
from anthropic.types import Message

from reactlab.agent.types import ToolCall, ToolOutcome
from reactlab.backends import api_result_text, parsed_call, streaming
from reactlab.backends.adapter import Answer, ApiSession, answer_items, content_text
from reactlab.core.errors import StreamError
from reactlab.simulate import cut_json, partial_object
from reactlab.simulate.apis import ANTHROPIC_MESSAGES

if TYPE_CHECKING:
    from reactlab.backends.recording import Recorder, Replay
    from reactlab.config import RunSpec


def read_message(r: Any) -> Answer:
    """(calls, text, content blocks to keep) of a Message; ProtocolError if the
    object is not a Messages API answer (an HTML page, JSON without ``content`` ...)."""
    content = answer_items(r, Message, "a Messages API object", "content")
    calls = []
    cut_off = getattr(r, "stop_reason", None) == "max_tokens"
    for i, b in enumerate(content):
        if getattr(b, "type", None) == "tool_use":
            if cut_off and i == len(content) - 1 and isinstance(b.input, dict):
                # The answer ran out of tokens inside this call: its input holds only the
                # members complete before the cut, so the call is malformed. `raw` is that
                # input as text cut before its closing brace (what a stream carries).
                calls.append(ToolCall(id=b.id, name=b.name, arguments=None,
                                      raw=cut_json(b.input)))
                continue
            calls.append(parsed_call(b.id, b.name, b.input))
    text = "".join(b.text for b in content if getattr(b, "type", None) == "text")
    dumped = [b.model_dump(exclude_none=True, warnings=False) for b in content]
    return calls, text, dumped


def messages_final(client: Any, raw: Any) -> Any:
    """The Messages API answer of a streamed request (``with_raw_response`` result),
    accumulated from ``message_start``, ``content_block_*`` (text and
    ``input_json_delta`` pieces) and ``message_delta`` events; a tool call whose
    accumulated JSON does not parse (cut off at ``max_tokens``) holds the members complete
    before the cut, as the non-streamed answer's ``input`` does."""
    http = raw.http_response
    if not streaming.is_event_stream(http):
        return streaming.plain_answer(client, http, Message)
    message: dict[str, Any] | None = None
    pieces: dict[int, list[str]] = {}
    stopped = False
    for event in raw.parse():
        if event.type == "message_start":
            message = event.message.to_dict()
            message["content"] = []
        elif message is None:
            raise StreamError(f"a {event.type} event before message_start")
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
        raise StreamError("the event stream ended without message_stop")
    return client._process_response_data(data=message, cast_to=Message, response=http)


class AnthropicMessagesSession(ApiSession):
    api = ANTHROPIC_MESSAGES
    sdk: ClassVar[ModuleType] = anthropic
    simulated_base_url = "http://simulado"
    system_field = "system"
    catch = (anthropic.AnthropicError, ValueError, AttributeError, TypeError, KeyError)
    answer_type = Message
    read = staticmethod(read_message)
    read_stream = staticmethod(messages_final)

    @staticmethod
    def sent_results(body: dict[str, Any]) -> dict[str, str]:
        out: dict[str, str] = {}
        for m in body.get("messages") or ():
            if isinstance(m, dict) and m.get("role") == "user" and isinstance(
                    m.get("content"), list):
                for block in m["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        out[str(block.get("tool_use_id"))] = content_text(block.get("content"))
        return out

    def __init__(self, spec: RunSpec, *, sleep: Callable[[float], None] | None = None,
                 recorder: Recorder | None = None, replay: Replay | None = None) -> None:
        super().__init__(spec, sleep=sleep, recorder=recorder, replay=replay)
        self.max_tokens = spec.backend_config.max_tokens

    def make_client(self, key: str, base_url: str | None,
                    http: httpx2.Client) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key=key, base_url=base_url, http_client=http,
                                   max_retries=0)

    def tool_definition(self, name: str, description: str,
                        schema: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "description": description, "input_schema": schema}

    def create(self, stream: bool) -> Any:
        if not stream:
            return self.client.messages.create(model=self.model, max_tokens=self.max_tokens,
                                               messages=self.history, **self.extra)
        return self.client.messages.with_raw_response.create(
            model=self.model, max_tokens=self.max_tokens, messages=self.history, stream=True,
            **self.extra)

    def _remember(self, items: list[dict[str, Any]]) -> None:
        self.history.append({"role": "assistant", "content": items})

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        if not outcomes:
            return
        self.history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": oc.call.id,
             "content": api_result_text(oc), "is_error": oc.is_error}
            for oc in outcomes]})
