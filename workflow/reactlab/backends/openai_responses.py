"""OpenAI Responses API adapter (official ``openai`` SDK, ``httpx`` transport).

What this API does its own way: the conversation is a flat list of ``input`` items
(``function_call`` items kept as the answer gave them, ``function_call_output`` items for
the results), tools are ``{"type": "function", "name", "description", "parameters"}``,
the system prompt is ``instructions``, and a streamed answer is the ``response`` of the
``response.completed`` event. Modes, transport, metering, retries and error translation
are the shared base's (:mod:`reactlab.backends.adapter`). With ``base_url`` the same
adapter talks to any OpenAI-compatible server that implements ``POST /v1/responses``
(vLLM, llama.cpp's server, Ollama): ``base_url: http://localhost:8000/v1`` and any
non-empty key.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, cast

import httpx
import openai
from openai.types.responses import Response

from reactlab.agent.types import ToolOutcome
from reactlab.backends import api_result_text, parsed_call, streaming
from reactlab.backends.adapter import Answer, ApiSession, answer_items, content_text
from reactlab.core.errors import StreamError
from reactlab.simulate.apis import OPENAI_RESPONSES

if TYPE_CHECKING:
    import httpx2


def read_response(r: Any) -> Answer:
    """(calls, text, output items to keep) of a Response; ProtocolError if the
    object is not a Responses API answer (an HTML page, JSON without ``output`` ...)."""
    output = answer_items(r, Response, "a Responses API object", "output")
    calls = []
    for o in output:
        if getattr(o, "type", None) == "function_call":
            calls.append(parsed_call(o.call_id, o.name, o.arguments))
    text = r.output_text
    dumped = [o.model_dump(exclude_none=True) for o in output]
    return calls, text, dumped


def openai_client(key: str, base_url: str | None, http: httpx.Client) -> openai.OpenAI:
    """The ``openai`` client of a session on ``http`` (``max_retries=0``: the retries are
    ours), for the Responses and the Chat Completions adapters alike."""
    # openai annotates http_client as an httpx2.Client; it takes an httpx.Client too (the
    # same interface: the sessions of the openai providers run on httpx, registry.py)
    return openai.OpenAI(api_key=key, base_url=base_url,
                         http_client=cast("httpx2.Client", http), max_retries=0)


def responses_final(client: Any, raw: Any) -> Any:
    """The Responses API answer of a streamed request (``with_raw_response`` result):
    the ``response`` of its ``response.completed`` event."""
    http = raw.http_response
    if not streaming.is_event_stream(http):
        return streaming.plain_answer(client, http, Response)
    final = None
    for event in raw.parse():
        if event.type == "response.completed":
            final = event.response
    if final is None:
        raise StreamError("the event stream ended without a response.completed event")
    return final


class OpenAIResponsesSession(ApiSession):
    api = OPENAI_RESPONSES
    sdk: ClassVar[ModuleType] = openai
    simulated_base_url = "http://simulado/v1"
    system_field = "instructions"
    catch = (openai.OpenAIError, ValueError, AttributeError, TypeError, KeyError)
    answer_type = Response
    read = staticmethod(read_response)
    read_stream = staticmethod(responses_final)

    @classmethod
    def read_payload(cls, payload: dict[str, Any]) -> Answer:
        # Built as the SDK builds an answer it received (``construct``: nested models,
        # no validation): the SDK's types may require fields a simulated answer leaves out
        # (``usage.input_tokens_details.cache_write_tokens`` in openai 3.57).
        return read_response(Response.model_construct(**payload))

    @staticmethod
    def sent_results(body: dict[str, Any]) -> dict[str, str]:
        items = body.get("input")
        return {str(i.get("call_id")): content_text(i.get("output"))
                for i in (items if isinstance(items, list) else ()) if isinstance(i, dict)
                and i.get("type") == "function_call_output"}

    def make_client(self, key: str, base_url: str | None, http: httpx.Client) -> openai.OpenAI:
        return openai_client(key, base_url, http)

    def tool_definition(self, name: str, description: str,
                        schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "name": name, "description": description,
                "parameters": schema}

    def create(self, stream: bool) -> Any:
        if not stream:
            return self.client.responses.create(model=self.model, input=self.history,
                                                **self.extra)
        return self.client.responses.with_raw_response.create(
            model=self.model, input=self.history, stream=True, **self.extra)

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        for oc in outcomes:
            self.history.append({"type": "function_call_output", "call_id": oc.call.id,
                                 "output": api_result_text(oc)})
