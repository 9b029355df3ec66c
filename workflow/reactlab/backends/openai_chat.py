"""OpenAI Chat Completions adapter (official ``openai`` SDK, ``chat.completions``, ``httpx``).

The provider ``openai_chat``. Modes: ``simulated`` (the scripted simulator
:mod:`reactlab.simulate.openai_chat` behind an ``httpx.MockTransport``) and ``live`` (a
real ``httpx.HTTPTransport``). Live, it talks to any server that speaks
``POST /v1/chat/completions`` — the OpenAI API, vLLM, llama.cpp's server, Ollama,
SGLang, ``transformers serve``: ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``; the
SDK's default without it), ``model`` (the id the server knows) and ``api_key_env`` (the
NAME of the variable holding the key; a local server takes any non-empty value). Every
attempt goes through :mod:`reactlab.backends.recording` (recorded when asked; replayed
instead of sent with ``replay``), so a run against a server can be re-run offline.

What is sent is only what the run needs: ``model``, ``messages`` and the task's
``tools`` (``{"type": "function", "function": {...}}``); ``temperature``, ``top_p``
and ``max_tokens`` when the backend config sets them. ``tool_choice``,
``parallel_tool_calls`` and ``response_format`` are never sent, and ``stream_options``
only with ``stream_include_usage: true``: several OpenAI-compatible servers refuse them
(``transformers serve`` does).

With ``stream: true`` the answer is read from the ``chat.completion.chunk`` events and
accumulated into the object the plain request returns (:func:`chat_final`); the tokens
of a request are counted on its body without ``stream`` / ``stream_options``
(:func:`reactlab.simulate.openai_chat.unstreamed_body`), so a streamed trace is
byte-identical to the plain one.

A server that parses no calls out of the model's text (llama.cpp's server on SmolLM2:
docs/local-models.md, "The llama.cpp server") answers a call as text, ``<tool_call>``
blocks in ``content`` and no ``tool_calls``. With ``text_tool_calls: hermes`` the session
reads those blocks with the local backends' parser
(:func:`reactlab.backends.local.hermes.parse_tool_calls`): ids ``call_<turn>_<i>`` as on
the local text path, a malformed block an invalid call (answered with an error, never
run), the turn's text what is left around the blocks. The assistant message goes back
as the server sent it (the model's own text, calls included), the results as ``tool``
messages with those ids.

Retries are the project's own (:mod:`reactlab.backends.retry`); the SDK client keeps
``max_retries=0``. A tool result goes back as a ``tool`` message whose ``content`` is
the result text (``json.dumps`` defaults, as the other HTTP adapters send it).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar

import httpx
import openai
from openai.types.chat import ChatCompletion

from reactlab.agent.types import RequestMeter, ToolCall, ToolOutcome
from reactlab.backends import (
    api_result_text,
    metering_hook,
    parsed_call,
    protocol_error,
    streaming,
)
from reactlab.backends.adapter import Answer, ApiSession, content_text
from reactlab.backends.local.hermes import calls_from_text, parse_tool_calls
from reactlab.backends.openai_responses import openai_client
from reactlab.core.errors import UsageError
from reactlab.simulate.apis import OPENAI_CHAT
from reactlab.simulate.openai_chat import unstreamed_body

# What a broken 200 can raise inside the SDK or while reading the parsed object.
_CAUGHT = (openai.OpenAIError, ValueError, AttributeError, TypeError, KeyError, IndexError)


def read_completion(r: Any) -> Answer:
    """(calls, text, [the assistant message to keep]) of a ChatCompletion; ProtocolError
    if the object is not a Chat Completions answer (an HTML page, JSON without
    ``choices`` ...)."""
    if not isinstance(r, ChatCompletion):
        raise protocol_error(None, "expected a Chat Completions object, got "
                                   f"{type(r).__name__} {str(r)[:80]!r}")
    choices = getattr(r, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise protocol_error(None, "the response has no `choices`")
    message = choices[0].message
    calls: list[ToolCall] = []
    kept_calls: list[dict[str, Any]] = []
    for c in message.tool_calls or []:
        if c.type == "function":
            calls.append(parsed_call(c.id, c.function.name, c.function.arguments))
            kept_calls.append({"id": c.id, "type": "function", "function": {
                "name": c.function.name, "arguments": c.function.arguments}})
        else:  # a custom tool: its input is free text, not JSON arguments
            calls.append(ToolCall(id=c.id, name=c.custom.name, arguments=None,
                                  raw=c.custom.input))
            kept_calls.append({"id": c.id, "type": "custom", "custom": {
                "name": c.custom.name, "input": c.custom.input}})
    text = message.content or ""
    # content may be null only beside tool calls (the API refuses it otherwise)
    content = message.content if message.content is not None or kept_calls else ""
    kept: dict[str, Any] = {"role": "assistant", "content": content}
    if message.refusal is not None:
        kept["refusal"] = message.refusal
    if kept_calls:
        kept["tool_calls"] = kept_calls
    return calls, text, [kept]


def chat_final(client: Any, raw: Any) -> Any:
    """The ChatCompletion a streamed request (``with_raw_response`` result) amounts to.

    Chunks are accumulated per choice: content and refusal deltas appended, each tool
    call opened by the delta carrying its ``index`` and ``id`` and its argument pieces
    appended; ``finish_reason`` from the choice's last chunk; ``usage`` from the chunk
    that carries it (``stream_options.include_usage``). A 200 that is not an event
    stream is read as the plain answer is (and fails the same way).
    """
    http = raw.http_response
    if not streaming.is_event_stream(http):
        return streaming.plain_answer(client, http, ChatCompletion)
    head: dict[str, Any] | None = None
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in raw.parse():
        if head is None:
            head = {"id": chunk.id, "object": "chat.completion", "created": chunk.created,
                    "model": chunk.model}
            for key in ("service_tier", "system_fingerprint"):
                if getattr(chunk, key, None) is not None:
                    head[key] = getattr(chunk, key)
        if chunk.usage is not None:
            usage = chunk.usage.to_dict()
        for c in chunk.choices:
            choice = choices.setdefault(c.index, {
                "index": c.index, "finish_reason": None, "logprobs": None,
                "message": {"role": "assistant", "content": None}, "calls": {}})
            message, delta = choice["message"], c.delta
            if delta.content is not None:
                message["content"] = (message["content"] or "") + delta.content
            if delta.refusal is not None:
                message["refusal"] = (message.get("refusal") or "") + delta.refusal
            for tc in delta.tool_calls or []:
                call = choice["calls"].setdefault(tc.index, {
                    "id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if tc.id is not None:
                    call["id"] = tc.id
                if tc.type is not None:
                    call["type"] = tc.type
                if tc.function is not None:
                    call["function"]["name"] += tc.function.name or ""
                    call["function"]["arguments"] += tc.function.arguments or ""
            if c.finish_reason is not None:
                choice["finish_reason"] = c.finish_reason
    if head is None:
        raise UsageError("the event stream ended without a chat.completion.chunk")
    out = []
    for index in sorted(choices):
        choice = choices[index]
        calls = choice.pop("calls")
        if calls:
            choice["message"]["tool_calls"] = [calls[k] for k in sorted(calls)]
        if choice["finish_reason"] is None:
            raise UsageError(f"the event stream ended before choice {index} finished")
        out.append(choice)
    data = {**head, "choices": out, **({"usage": usage} if usage is not None else {})}
    return client._process_response_data(data=data, cast_to=ChatCompletion, response=http)


def _stream_metering_hook(meter: RequestMeter) -> Callable[[Any], None]:
    """Counts a streamed request's body as the plain request sends it."""
    hook = metering_hook(meter)

    def count(request: Any) -> None:
        hook(SimpleNamespace(content=unstreamed_body(request.content)))

    return count


class OpenAIChatSession(ApiSession):
    api = OPENAI_CHAT
    sdk: ClassVar[ModuleType] = openai
    simulated_base_url = "http://simulado/v1"
    system_field = "messages"  # a system message first in the conversation
    catch = _CAUGHT
    answer_type = ChatCompletion
    read = staticmethod(read_completion)
    read_stream = staticmethod(chat_final)

    @staticmethod
    def sent_results(body: dict[str, Any]) -> dict[str, str]:
        return {str(m.get("tool_call_id")): content_text(m.get("content"))
                for m in body.get("messages") or () if isinstance(m, dict)
                and m.get("role") == "tool"}

    def __init__(self, spec: Any, **kwargs: Any) -> None:
        super().__init__(spec, **kwargs)
        settings = spec.backend_config
        # max_tokens too when the config sets it (the base passes temperature and top_p)
        if settings.max_output_tokens is not None:
            self.extra["max_tokens"] = settings.max_output_tokens
        self.text_tool_calls = getattr(settings, "text_tool_calls", None) is not None
        self.stream_extra: dict[str, Any] = {"stream": True}
        if settings.stream_include_usage:
            self.stream_extra["stream_options"] = {"include_usage": True}

    def make_client(self, key: str, base_url: str | None, http: httpx.Client) -> openai.OpenAI:
        if self.stream:  # count the body without its streaming members, stream_options too
            http.event_hooks = {"request": [_stream_metering_hook(self.meter)]}
        return openai_client(key, base_url, http)

    def add_system_prompt(self, text: str) -> None:
        self.history.insert(0, {"role": "system", "content": text})

    def tool_definition(self, name: str, description: str,
                        schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name, "description": description,
                                                 "parameters": schema}}

    def create(self, stream: bool) -> Any:
        if not stream:
            return self.client.chat.completions.create(model=self.model,
                                                       messages=self.history, **self.extra)
        return self.client.chat.completions.with_raw_response.create(
            model=self.model, messages=self.history, **self.extra, **self.stream_extra)

    def _attempt(self) -> Answer:
        calls, text, items = super()._attempt()
        if self.text_tool_calls and not calls:
            parsed = parse_tool_calls(text)
            if parsed.calls:  # the turn's number: the assistant messages before it
                turn = sum(1 for m in self.history if m.get("role") == "assistant")
                return list(calls_from_text(parsed, turn)), parsed.content, items
        return calls, text, items

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        for oc in outcomes:
            self.history.append({"role": "tool", "tool_call_id": oc.call.id,
                                 "content": api_result_text(oc)})
