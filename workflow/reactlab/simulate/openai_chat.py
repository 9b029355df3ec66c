"""Simulated OpenAI Chat Completions API (``POST /v1/chat/completions``).

The route most OpenAI-compatible clients default to, and the one every open-model server
speaks (vLLM, llama.cpp's server, Ollama, SGLang, ``transformers serve``). Shapes follow
the API reference and the official SDK's types (``openai.types.chat``), field for field.

Requests
    A UTF-8 JSON object sent as ``application/json``, validated deeply
    (:func:`validate`) before the script sees it, so a malformed request gets the API's
    400 shape (``{"error": {"message", "type", "param", "code"}}``), never a scripted
    answer. Unknown top-level fields are refused as the API refuses them
    ("Unrecognized request argument supplied"). Every message form the API documents is
    read: ``system`` / ``developer`` / ``user`` / ``assistant`` / ``tool`` / ``function``
    (deprecated) roles; ``content`` as a string or an array of parts (``text``,
    ``image_url``, ``input_audio`` and ``file`` for users; ``text`` and ``refusal`` for
    the assistant; ``text`` for the rest); assistant ``tool_calls`` (``function`` and
    ``custom``), ``refusal``, ``audio``, ``name``. The conversation must be well formed
    as the API requires: a ``tool`` message answers a call of the assistant message
    right before it (or before the other ``tool`` messages after it), and every call of
    an assistant message is answered before the next non-tool message. Tool results are
    matched to the calls by ``tool_call_id``, in any order.

Answers
    ``chat.completion`` with ``n`` identical choices (default 1); a choice's ``message``
    carries the scripted text (``finish_reason: "stop"``) or the scripted calls with
    ids (``finish_reason: "tool_calls"``; arguments are a JSON string, which the API
    documents may not parse: the ``json_invalido`` scenario sends such a string).
    ``usage``: ``prompt_tokens`` are the o200k_base tokens of the request body without
    its streaming members (the count a trace records for it), ``completion_tokens``
    those of the answer's text, or of each call's name and arguments. The ``id`` is
    ``chatcmpl-`` and a digest of that body: unique per conversation state, and the same
    for the streamed and the plain request. Nothing depends on the wall clock
    (``created`` is 0). ``tool_choice`` and ``parallel_tool_calls`` are obeyed
    (:func:`tool_choice`, :class:`~reactlab.simulate.ToolChoice`); the answer does not
    echo them, as the API's ``chat.completion`` object has no such members.

Streaming
    ``"stream": true`` gets the same answer as ``chat.completion.chunk`` server-sent
    events (``data: {...}`` lines, then ``data: [DONE]``): a first chunk with the role,
    content deltas or, per call, a chunk with its id, type and name and then argument
    deltas, and a last chunk per choice with its ``finish_reason``. With
    ``stream_options.include_usage`` every chunk carries ``"usage": null`` and one more
    chunk with empty ``choices`` and the usage comes before ``[DONE]``.
    No ``obfuscation`` padding is sent (as with ``include_obfuscation: false``).

Faults (:mod:`reactlab.config.faults`) are injected around the handler as for the other
APIs: a status fault answers the OpenAI error of that status, a broken-body fault cuts
or replaces the real answer (``missing_fields`` drops ``choices``).
"""

from __future__ import annotations

import hashlib
import json
from types import ModuleType
from typing import Any, ClassVar, cast

import httpx

from reactlab.simulate import (
    Handler,
    RequestInvalid,
    ScriptedPolicy,
    call_number,
    count_runs,
    drop_member,
    pair_results,
    read_results,
    text_chunks,
    tokens_of,
)
from reactlab.simulate.base import (
    ANSWER,
    OpenAIErrors,
    Simulator,
    openai_error_body,
    openai_play,
)
from reactlab.simulate.openai_chat_requests import (
    STREAM_MEMBERS,
    content_text,
    messages_of,
    missing_parameter,
    offered,
    step_of,
    tool_choice,
    type_error,
    validate,
)

# The request side (validation, turns, tool choice) is openai_chat_requests'; these are
# this API's names for it, as the other simulator modules have them.
__all__ = ["ROUTE", "STREAM_MEMBERS", "chunks", "completion_id", "content_text",
           "error_body", "handler", "offered", "respond", "sse", "step_of", "tool_choice",
           "unstreamed_body", "usage", "validate"]

ROUTE = "/v1/chat/completions"

error_body = openai_error_body  # the Chat Completions API's error shape


# --- answers --------------------------------------------------------------------------


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The Chat Completions ``usage`` object."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def completion_id(body: dict[str, Any]) -> str:
    """``chatcmpl-`` and a digest of the body without its streaming members."""
    plain = {k: v for k, v in body.items() if k not in STREAM_MEMBERS}
    digest = hashlib.sha256(json.dumps(plain, sort_keys=True, ensure_ascii=True).encode())
    return "chatcmpl-" + digest.hexdigest()[:29]


def respond(policy: ScriptedPolicy, body: dict[str, Any],
            prompt_tokens: int = 0) -> tuple[int, dict[str, Any]]:
    """The simulated answer to one (validated) request body: (status, JSON body)."""
    messages = messages_of(body)
    try:
        outputs = pair_results(
            [c["id"] for m in messages if m.get("role") == "assistant"
             for c in (m.get("tool_calls") or []) if isinstance(c, dict)],
            [(m["tool_call_id"], content_text(m.get("content"))) for m in messages
             if m.get("role") == "tool"], "tool_call_id")
    except RequestInvalid as exc:
        return 400, error_body("invalid_request_error", exc.message, "messages", exc.code)
    outputs, seen = read_results(outputs, _user_texts(messages))
    # what the model reads besides the results: the tools' definitions (a poisoned
    # description is seen like a poisoned result, as the local backend's model sees it)
    seen = "\n".join([json.dumps(body.get("tools") or [], ensure_ascii=False), seen])
    turn = count_runs([m.get("role") == "assistant" for m in messages])
    calls_made = sum(len(m.get("tool_calls") or []) for m in messages
                     if m.get("role") == "assistant")
    model = cast(str, body.get("model"))  # a string: the body is validated
    unknown = RequestInvalid(f"The model `{model}` does not exist or you do not have "
                             "access to it.", status=404, code="model_not_found")
    try:
        action, resolved = openai_play(policy, model, outputs, turn, tool_choice(body),
                                       calls_made, unknown=unknown, where="messages",
                                       seen=seen)
    except RequestInvalid as exc:
        return exc.status, error_body("invalid_request_error", exc.message, exc.param,
                                      exc.code)
    # Call ids number the calls of the conversation (call_number): unique in it.
    n = call_number([(m.get("role") == "assistant", len(m.get("tool_calls") or []))
                     for m in messages])
    message: dict[str, Any] = {"role": "assistant", "content": action.text, "refusal": None,
                               "annotations": []}
    if action.text is not None:
        finish, spent = "stop", tokens_of(action.text)
    else:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function",
             "function": {"name": c.name, "arguments": c.arguments_text()}}
            for i, c in enumerate(action.calls)]
        finish = "tool_calls"
        spent = sum(tokens_of(c["function"]["name"]) + tokens_of(c["function"]["arguments"])
                    for c in message["tool_calls"])
    choices = [{"index": i, "message": message, "logprobs": None, "finish_reason": finish}
               for i in range(body.get("n") or 1)]
    return 200, {"id": completion_id(body), "object": "chat.completion", "created": 0,
                 "model": resolved, "choices": choices, "usage": usage(prompt_tokens, spent),
                 "service_tier": "default", "system_fingerprint": None}


def _user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of the user messages after the model's first turn (where a client that
    keeps its history as text writes the tool results: :func:`read_results`)."""
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"),
                 len(messages))
    return [content_text(m.get("content")) for m in messages[first:]
            if m.get("role") == "user"]


def chunks(answer: dict[str, Any], include_usage: bool = False) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects that stream ``answer`` (a 200 of :func:`respond`).

    Per choice: a first chunk with the role (and, for calls, the first call's id, type
    and name), content or argument deltas (a chunk opening each further call), and a
    last chunk with an empty delta and the ``finish_reason``. With ``include_usage``
    every chunk has ``"usage": null`` and a final chunk with no choices carries the usage.
    """
    base = {"id": answer["id"], "object": "chat.completion.chunk",
            "created": answer["created"], "model": answer["model"],
            "service_tier": answer["service_tier"],
            "system_fingerprint": answer["system_fingerprint"]}
    extra: dict[str, Any] = {"usage": None} if include_usage else {}
    out: list[dict[str, Any]] = []

    def emit(index: int, delta: dict[str, Any], finish: str | None = None) -> None:
        out.append({**base, "choices": [{"index": index, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}], **extra})

    for choice in answer["choices"]:
        i, message = choice["index"], choice["message"]
        calls = message.get("tool_calls")
        if not calls:
            emit(i, {"role": "assistant", "content": "", "refusal": None})
            for piece in text_chunks(message["content"] or ""):
                if piece:
                    emit(i, {"content": piece})
        else:
            for j, call in enumerate(calls):
                opening = {"index": j, "id": call["id"], "type": "function",
                           "function": {"name": call["function"]["name"], "arguments": ""}}
                emit(i, ({"role": "assistant", "content": None, "tool_calls": [opening],
                          "refusal": None} if j == 0 else {"tool_calls": [opening]}))
                for piece in text_chunks(call["function"]["arguments"]):
                    if piece:
                        emit(i, {"tool_calls": [{"index": j, "function": {"arguments": piece}}]})
        emit(i, {}, choice["finish_reason"])
    if include_usage:
        out.append({**base, "choices": [], "usage": answer["usage"]})
    return out


def sse(objects: list[dict[str, Any]]) -> bytes:
    """``data:`` lines of compact JSON, then ``data: [DONE]`` (the API's stream framing)."""
    return b"".join(f"data: {json.dumps(o, separators=(',', ':'))}\n\n".encode()
                    for o in objects) + b"data: [DONE]\n\n"


def unstreamed_body(content: bytes) -> bytes:
    """``content`` without its top-level ``stream`` and ``stream_options`` members, byte for
    byte what the same request sends unstreamed (unchanged when it has neither).

    Each textual occurrence of a member (as compact or spaced JSON) is tried until
    removing it leaves exactly the other members, so a nested look-alike is never the one
    removed. A body laid out otherwise (line breaks, other spacing: no SDK sends one) is
    counted as its other members in compact (ASCII) JSON.
    """
    try:
        body = json.loads(content)
    except ValueError:
        return content
    if not isinstance(body, dict):
        return content
    for key in STREAM_MEMBERS:
        if key not in body:
            continue
        expected = {k: v for k, v in body.items() if k != key}
        try:
            content = drop_member(content, key, body[key], expected)
        except ValueError:
            rest = {k: v for k, v in body.items() if k not in STREAM_MEMBERS}
            return json.dumps(rest, separators=(",", ":")).encode()
        body = expected
    return content


class ChatSimulator(OpenAIErrors, Simulator):
    """The Chat Completions API on the simulator base (:mod:`reactlab.simulate.base`).

    Its own request path (:meth:`handler`): usage counts the body without ``stream`` and
    ``stream_options``, and a stream is ``data:`` lines ending in ``[DONE]``, with the
    usage chunk when the request asks for it.
    """

    name = "openai_chat"
    http: ClassVar[ModuleType] = httpx
    broken_member = "choices"

    def missing(self, path: str) -> RequestInvalid:
        return missing_parameter(path)

    def wrong_type(self, path: str, expected: str, value: Any) -> RequestInvalid:
        return type_error(path, expected, value)

    def handler(self, policy: ScriptedPolicy, store: Any = None) -> Handler:
        """``store`` (the server's response store of the Responses API) is not used:
        Chat Completions keeps no state between requests."""

        def handle(request: httpx.Request) -> httpx.Response:
            try:
                body = self.read(request.content, request.headers.get("content-type"))
            except RequestInvalid as exc:
                refused: httpx.Response = self.refused(exc)
                return refused
            status, payload = self.respond(
                policy, body, tokens_of(unstreamed_body(request.content).decode("utf-8")))
            if status == 200 and body.get("stream") is True:
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                resp = httpx.Response(200, headers={"content-type": "text/event-stream"},
                                      content=sse(chunks(payload, include)))
            else:
                resp = httpx.Response(status, json=payload)
            resp.extensions[ANSWER] = payload
            return resp

        return handle


SIMULATOR = ChatSimulator(validate, step_of, respond, chunks)
handler = SIMULATOR.handler
fault_response = SIMULATOR.fault_response
with_faults = SIMULATOR.with_faults
