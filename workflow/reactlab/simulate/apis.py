"""The wire APIs the simulators speak: one registered :class:`WireApi` per API.

A wire API is what the HTTP side knows about a provider's protocol: its routes, the
simulator module that validates requests and answers them (``validate``, ``respond``,
``handler``, ``step_of``, ``with_faults``; SSE events included), the HTTP library whose
``MockTransport`` and ``Request`` the simulator speaks (``httpx`` or ``httpx2``, as the
provider's SDK), the API's error shape, and how it lists models. The server
(:mod:`reactlab.simulate.server`) serves every registered API; the provider registry
(:mod:`reactlab.backends.registry`, one stage up) names the wire API of each HTTP
provider, so an adapter's simulated transport and the server run the same simulator.

Registering an API imports nothing: the simulator module is named by its dotted path
and imported on first use (it imports its HTTP library at module top).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from reactlab.core.errors import UsageError
from reactlab.simulate.base import anthropic_error_body, anthropic_error_type, openai_error_body

#: ``error(status, message, param=, code=, kind=)`` → the API's JSON error body. ``kind``
#: overrides the error type the API would give ``status``; an API whose shape has no
#: ``param`` or ``code`` ignores them.
ErrorShape = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class WireApi:
    """One wire API: routes, simulator, HTTP library, error shape, model listing."""

    name: str
    #: POST paths the server answers with this API (the first one is the canonical path).
    routes: tuple[str, ...]
    #: Dotted path of the simulator module (imported on first use).
    simulator: str
    #: The HTTP library the simulator and the SDK speak: "httpx" or "httpx2".
    http_library: str
    #: The JSON error body of a status and message (see :data:`ErrorShape`).
    error: ErrorShape
    #: The message of a 404 for an unknown path, from "METHOD /path".
    not_found: Callable[[str], str]
    #: ``GET /v1/models`` in this API's shape (names in listing order), and the request
    #: header that selects it (the SDK sends it with every request); None: this API's
    #: listing is the default one.
    models_list: Callable[[Sequence[str]], dict[str, Any]] | None = None
    models_header: str | None = None

    def sim(self) -> ModuleType:
        """The simulator module (imports its HTTP library)."""
        return importlib.import_module(self.simulator)

    def http(self) -> ModuleType:
        """The HTTP library module (``httpx`` or ``httpx2``)."""
        return importlib.import_module(self.http_library)

    def serves(self, path: str) -> bool:
        return any(path.startswith(route) for route in self.routes)


_APIS: dict[str, WireApi] = {}


def register_api(api: WireApi) -> WireApi:
    """Add ``api`` (ValueError if its name or one of its routes is taken)."""
    if api.name in _APIS and _APIS[api.name] != api:
        raise UsageError(f"a wire API named {api.name!r} is already registered")
    for other in _APIS.values():
        taken = set(other.routes) & set(api.routes)
        if other.name != api.name and taken:
            raise UsageError(f"route {sorted(taken)[0]} is already served by {other.name!r}")
    _APIS[api.name] = api
    return api


def apis() -> Mapping[str, WireApi]:
    """Every registered wire API, in registration order (read-only view)."""
    return dict(_APIS)


def api(name: str) -> WireApi:
    try:
        return _APIS[name]
    except KeyError:
        raise UsageError(f"unknown wire API {name!r} (known: {', '.join(_APIS)})") from None


def api_for_path(path: str) -> WireApi:
    """The API serving ``path``; the first registered one for any other path (its shape
    is the one an unknown path's error takes)."""
    return next((a for a in _APIS.values() if a.serves(path)), next(iter(_APIS.values())))


# --- the built-in APIs ---------------------------------------------------------------------


def _openai_error(status: int, message: str, *, param: str | None = None,
                  code: str | None = None, kind: str | None = None) -> dict[str, Any]:
    return openai_error_body(kind or ("server_error" if status >= 500 else "invalid_request_error"),
                      message, param, code)


def _openai_models(names: Sequence[str]) -> dict[str, Any]:
    return {"object": "list", "data": [
        {"id": n, "object": "model", "created": 0, "owned_by": "reactlab"} for n in names]}


def _anthropic_error(status: int, message: str, *, param: str | None = None,
                     code: str | None = None, kind: str | None = None) -> dict[str, Any]:
    return anthropic_error_body(kind or anthropic_error_type(status), message)


def _anthropic_models(names: Sequence[str]) -> dict[str, Any]:
    return {"data": [{"type": "model", "id": n, "display_name": n,
                      "created_at": "1970-01-01T00:00:00Z"} for n in names],
            "has_more": False, "first_id": names[0] if names else None,
            "last_id": names[-1] if names else None}


OPENAI_RESPONSES = register_api(WireApi(
    name="openai_responses", routes=("/v1/responses",),
    simulator="reactlab.simulate.openai_responses", http_library="httpx",
    error=_openai_error, not_found=lambda where: f"Invalid URL ({where})",
    models_list=_openai_models))
ANTHROPIC_MESSAGES = register_api(WireApi(
    name="anthropic_messages", routes=("/v1/messages",),
    simulator="reactlab.simulate.anthropic_messages", http_library="httpx2",
    error=_anthropic_error, not_found=lambda where: f"Not found: {where}",
    models_list=_anthropic_models, models_header="anthropic-version"))
OPENAI_CHAT = register_api(WireApi(
    name="openai_chat", routes=("/v1/chat/completions",),
    simulator="reactlab.simulate.openai_chat", http_library="httpx",
    error=_openai_error, not_found=lambda where: f"Invalid URL ({where})",
    models_list=_openai_models))
