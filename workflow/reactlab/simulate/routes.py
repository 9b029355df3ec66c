"""The server's routes beyond the APIs' own ``POST`` endpoints, in one place.

* ``POST /v1/messages/count_tokens``, ``POST /v1/responses/input_tokens`` — the
  o200k_base tokens of a request body (with the conversation of a
  ``previous_response_id`` spliced in), the count its ``usage.input_tokens`` reports;
* ``GET /v1/models/{id}`` — one served model name, in the Anthropic shape when the
  request carries ``anthropic-version``; another name gets the API's 404;
* ``GET /v1/responses/{id}`` — a Responses answer the server gave and kept
  (:class:`reactlab.simulate.ResponseStore`; ``store: false`` answers are not kept);
* ``GET /`` — what is served.

Errors are the simulators' own shapes (their ``refusal`` hook and ``respond`` for an
unknown model), so these routes answer as the API routes do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from reactlab.simulate import (
    RequestInvalid,
    ResponseStore,
    ScriptedPolicy,
    read_request,
    tokens_of,
)
from reactlab.simulate import anthropic_messages as sim_anthropic
from reactlab.simulate import openai_responses as sim_openai
from reactlab.simulate.base import openai_error_body

MAX_BODY = 32 * 1024 * 1024  # bytes; larger requests get 413 (as the Messages API does)
_NO_SCRIPTS = ScriptedPolicy({}, {}, "")  # respond() with it gives the API's unknown-model 404


def _json(content: Any, status: int = 200) -> Response:
    """Compact JSON, non-ASCII escaped (a lone surrogate echoed back cannot break it)."""
    return Response(json.dumps(content, allow_nan=False, separators=(",", ":")).encode(),
                    status_code=status, media_type="application/json")


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None when it is (or says it is) larger than ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def extra_routes(models: Mapping[str, Any], store: ResponseStore,
                 listed: Callable[[], Sequence[BaseRoute]]) -> list[Route]:
    """The routes above, for a server serving ``models`` and keeping ``store``;
    ``listed()`` gives every route of the app (for ``GET /``)."""

    async def count(request: Request, anthropic: bool) -> Response:
        sim_module = sim_anthropic if anthropic else sim_openai
        sim = sim_module.SIMULATOR
        raw = await read_body(request, MAX_BODY)
        if raw is None:
            too_large = RequestInvalid(f"Request exceeds the maximum size of {MAX_BODY} "
                                       "bytes", status=413)
            return _json(sim.refusal(too_large), 413)
        try:
            body = read_request(raw, request.headers.get("content-type"),
                                sim.content_type_refusal)
            if anthropic:
                sim_anthropic.validate(body, count_only=True)
            else:
                sim.validate({"model": "", **body})  # the model is optional here
            expanded = sim.expand(body, store)
        except RequestInvalid as exc:
            return _json(sim.refusal(exc), exc.status)
        name = body.get("model")
        if name is not None and name not in models:
            status, payload = sim_module.respond(_NO_SCRIPTS, {**body, "model": name})
            return _json(payload, status)
        text = (raw.decode("utf-8") if expanded is None
                else json.dumps(expanded, ensure_ascii=False))
        if anthropic:
            return _json({"input_tokens": tokens_of(text)})
        return _json({"object": "response.input_tokens", "input_tokens": tokens_of(text)})

    async def count_tokens(request: Request) -> Response:
        return await count(request, anthropic=True)

    async def input_tokens(request: Request) -> Response:
        return await count(request, anthropic=False)

    async def get_model(request: Request) -> Response:
        name = request.path_params["model_id"]
        anthropic = "anthropic-version" in request.headers
        if name not in models:
            if anthropic:
                return _json(sim_anthropic.error_body("not_found_error",
                                                      f"model: {name[:200]}"), 404)
            return _json(openai_error_body("invalid_request_error", f"The model "
                                           f"'{name[:200]}' does not exist", "model",
                                           "model_not_found"), 404)
        if anthropic:
            return _json({"type": "model", "id": name, "display_name": name,
                          "created_at": "1970-01-01T00:00:00Z"})
        return _json({"id": name, "object": "model", "created": 0, "owned_by": "reactlab"})

    async def get_response(request: Request) -> Response:
        rid = request.path_params["response_id"]
        stored = store.get(rid)
        if stored is None:
            return _json(openai_error_body("invalid_request_error",
                                           f"Response with id '{rid[:200]}' not found."), 404)
        return _json(stored[1])

    async def index(request: Request) -> Response:
        return _json({"object": "reactlab.simulator", "models": len(models),
                      "routes": [f"{' '.join(sorted(r.methods or ()))} {r.path}"
                                 for r in listed() if isinstance(r, Route)]})

    return [
        Route("/", index, methods=["GET"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/responses/input_tokens", input_tokens, methods=["POST"]),
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
    ]


__all__ = ["MAX_BODY", "extra_routes", "read_body"]
