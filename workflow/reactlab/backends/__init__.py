"""Backend adapters: one module per provider, imported lazily.

An adapter only translates between the loop's neutral values (:mod:`reactlab.types`) and
its provider's wire shape, keeping the provider-shaped conversation itself so that every
request carries exactly what the official SDK would send. Provider quirks live in the
adapter's file and nowhere else. ``import reactlab.backends`` imports no SDK.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from reactlab.errors import BackendError
from reactlab.types import BudgetExceeded, RequestMeter

if TYPE_CHECKING:
    from reactlab.config import RunSpec
    from reactlab.types import Session

PROVIDERS = ("openai", "anthropic", "local")


def open_session(spec: RunSpec, *, sleep: Callable[[float], None] | None = None) -> Session:
    """A new conversation for ``spec`` on its backend (imports only that backend's SDK).

    ``sleep`` is what the API adapters call to wait between attempts (default
    :func:`reactlab.retry.default_sleep`); tests pass a recorder instead.
    """
    provider = spec.backend_config["provider"]
    if provider == "openai":
        from reactlab.backends.openai_responses import OpenAIResponsesSession

        return OpenAIResponsesSession(spec, sleep=sleep)
    if provider == "anthropic":
        from reactlab.backends.anthropic_messages import AnthropicMessagesSession

        return AnthropicMessagesSession(spec, sleep=sleep)
    if provider == "local":
        from reactlab.backends import local

        if spec.backend_config["mode"] == "model":
            return local.LocalModelSession(spec, local.load_model(spec))
        return local.LocalScriptedSession(spec)
    raise ValueError(f"unknown provider {provider!r}")  # config validation prevents this


def metering_hook(meter: RequestMeter) -> Callable[[Any], None]:
    """An httpx/httpx2 request event hook: count the body's tokens, enforce the budget."""
    from reactlab.tokens import count

    def hook(request: Any) -> None:
        n = count(request.content.decode("utf-8"))
        if meter.limit is not None and n > meter.limit:
            meter.refused = n
            raise BudgetExceeded(n, meter.limit)
        meter.counts.append(n)

    return hook


def protocol_error(exc: BaseException | None, detail: str | None = None) -> BackendError:
    """BackendError("protocol"): a 2xx whose body is not a valid answer of the API."""
    if detail is None:
        if isinstance(exc, json.JSONDecodeError):
            detail = f"the response body is not valid JSON ({exc})"
        else:
            detail = f"unexpected response: {exc!r}"
    return BackendError("protocol", detail)


def tool_definitions(spec: RunSpec) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, JSON schema) of the task's tools, in the task's order."""
    from reactlab.tools import TOOLS, json_schema

    return [(n, TOOLS[n].description, json_schema(n)) for n in spec.tools]


def parse_arguments(text: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, raw): a JSON object, or None and the raw text when it is not one."""
    if isinstance(text, dict):
        return text, None
    if isinstance(text, str):
        try:
            value = json.loads(text)
        except ValueError:
            return None, text
        if isinstance(value, dict):
            return value, None
        return None, text
    return None, json.dumps(text)
