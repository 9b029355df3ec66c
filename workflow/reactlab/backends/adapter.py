"""The shared base of the HTTP API adapters (one subclass per wire API).

An adapter turns the loop's neutral values into one provider's requests and back, and
keeps the provider-shaped conversation itself, so that every request carries exactly
what the official SDK would send. What every HTTP adapter does the same way lives here:

* the transport: ``simulated`` (the wire API's simulator behind the HTTP library's
  ``MockTransport``, with the scenario's fault plan), ``live`` (a real transport; the
  model id is the backend's ``model``, the key comes from the environment variable its
  ``api_key_env`` names, the URL is its ``base_url`` or the SDK's default) or a replay;
  every attempt goes through :mod:`reactlab.backends.recording` when asked;
* metering: the tokens of each request body, once per step (without ``"stream": true``
  when streaming), and the token budget;
* the bounded retries of :mod:`reactlab.backends.retry` (the SDK client keeps
  ``max_retries=0``); ``ModelTurn.attempts`` is how many HTTP attempts a step took and
  ``last_attempts`` the per-attempt log of the last step;
* the request options: tools (if ``send_tools``), the system prompt (if
  ``send_system_prompt``), a live backend's ``temperature`` and ``top_p``;
* what it declares for the trace header (:class:`reactlab.agent.types.SessionFacts`):
  ``system_prompt_sent`` (what ``send_system_prompt`` made it do) and
  ``tool_results_ascii`` (tool results go back with ASCII escapes, :func:`api_result_text`);
* translating the SDK's errors into the :class:`~reactlab.core.errors.BackendError` kinds.

A subclass names its wire API (:mod:`reactlab.simulate.apis`), its SDK module, and
implements the hooks below: building the client, one tool definition, one request,
reading an answer (and a streamed one), remembering the answer and adding tool results.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from reactlab.agent.types import BudgetExceeded, ModelTurn, RequestMeter, ToolCall, ToolOutcome
from reactlab.backends import (
    API_RESULTS_ASCII,
    api_key_hint,
    http_transport,
    metering_hook,
    protocol_error,
    retry,
    simulated_transport,
    streaming,
    tool_definitions,
)
from reactlab.config.faults import FaultPlan
from reactlab.config.settings import LiveBackend, SimulatedBackend
from reactlab.core.errors import BackendError, ClientError, NetworkError, RequestTimeoutError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from reactlab.backends.recording import Recorder, Replay
    from reactlab.config import RunSpec
    from reactlab.simulate.apis import WireApi

#: (calls, text, provider-shaped items to keep in the history) of one answer.
Answer = tuple[list[ToolCall], str, list[dict[str, Any]]]


def answer_items(r: Any, cls: type, kind: str, field: str) -> list[Any]:
    """The ``field`` list of an SDK answer object; ProtocolError if ``r`` is not a ``cls``
    (``kind`` names it: "a Messages API object") or has no ``field`` list (an HTML page,
    JSON without it ...)."""
    if not isinstance(r, cls):
        raise protocol_error(None, f"expected {kind}, got {type(r).__name__} {str(r)[:80]!r}")
    items = getattr(r, field, None)
    if not isinstance(items, list):
        raise protocol_error(None, f"the response has no `{field}` list")
    return items


def content_text(content: Any) -> str:
    """A message content as the text it holds: a string as it is, a list of parts (text
    blocks, ``input_text`` / ``output_text`` items) joined, anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [str(p.get("text", "")) for p in content if isinstance(p, dict)
                 and isinstance(p.get("text"), str)]
        if len(parts) == len(content):
            return "".join(parts)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def translate_sdk_error(exc: Exception, sdk: ModuleType, *,
                        api_key_hint: str = retry.API_KEY_HINT) -> Exception:
    """An error of an official SDK (openai, anthropic: the same error classes) or of its
    transport → BudgetExceeded or a BackendError with its kind. ``api_key_hint`` is what a
    401 tells the user to check."""
    if isinstance(exc, sdk.APIStatusError):
        return retry.status_error(exc.status_code, str(exc), api_key_hint=api_key_hint)
    if isinstance(exc, sdk.APITimeoutError):
        return RequestTimeoutError(f"{exc} ({exc.__cause__!r})")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, BudgetExceeded | BackendError):  # budget; replay divergence
            return cause
        return NetworkError(f"{exc} ({cause!r})")
    return protocol_error(exc)


class ApiSession:
    """A conversation on an HTTP API (see the module docstring)."""

    #: The wire API: its simulator serves the ``simulated`` mode.
    api: ClassVar[WireApi]
    #: The official SDK module whose errors :meth:`translate_error` reads.
    sdk: ClassVar[ModuleType]
    #: The base URL the SDK is given in ``simulated`` mode (never contacted).
    simulated_base_url: ClassVar[str]
    #: The request field that carries the system prompt (see :meth:`add_system_prompt`).
    system_field: ClassVar[str]
    #: What a broken answer can raise inside the SDK or while reading the parsed object.
    catch: ClassVar[tuple[type[Exception], ...]]
    #: The SDK's answer type (what :meth:`read` reads; :meth:`read_payload` builds one).
    answer_type: ClassVar[type[BaseModel]]
    #: Tool results go back as :func:`reactlab.backends.api_result_text` writes them.
    tool_results_ascii: ClassVar[bool] = API_RESULTS_ASCII

    def __init__(self, spec: RunSpec, *, sleep: Callable[[float], None] | None = None,
                 recorder: Recorder | None = None, replay: Replay | None = None) -> None:
        settings = spec.backend_config
        self.meter = RequestMeter()
        if not isinstance(settings, SimulatedBackend | LiveBackend):
            raise ClientError(f"unsupported mode {settings.mode!r}")
        self.retry_policy = retry.RetryPolicy.from_settings(settings)
        self.sleep = sleep
        self.last_attempts: list[dict[str, Any]] = []
        self.faults = FaultPlan()
        self.hint = api_key_hint(spec)
        lib = self.api.http()

        def simulated() -> Any:
            transport, self.faults = simulated_transport(spec, self.api.sim(), lib)
            return transport

        transport, key = http_transport(spec, lib, simulated, recorder=recorder, replay=replay)
        self.stream = settings.stream
        meter_hook = (streaming.metering_hook if self.stream else metering_hook)(self.meter)
        http = lib.Client(transport=transport, event_hooks={"request": [meter_hook]})
        live = settings if isinstance(settings, LiveBackend) else None
        self.client = self.make_client(key, live.base_url if live is not None else
                                       self.simulated_base_url, http)
        self.model = live.model if live is not None else spec.script.model
        self.history: list[Any] = [self.user_message(spec.question)]
        self.extra: dict[str, Any] = {}
        if spec.agent.send_tools:
            self.extra["tools"] = [self.tool_definition(n, d, s)
                                   for n, d, s in tool_definitions(spec)]
        #: Whether the agent's system prompt went to the model (the trace header records it).
        self.system_prompt_sent = spec.agent.send_system_prompt
        if self.system_prompt_sent:
            self.add_system_prompt(spec.agent.system_prompt)
        # Sampling settings of a live backend (the schema allows them nowhere else). The
        # APIs take no seed, so a live trial's seed is recorded in its trace only.
        if live is not None:
            for name, value in (("temperature", live.temperature),
                                ("top_p", live.top_p)):
                if value is not None:
                    self.extra[name] = value

    # --- the hooks of a wire API ---------------------------------------------------------

    def user_message(self, text: str) -> Any:
        """The conversation's first item: the question (a chat API's user message)."""
        return {"role": "user", "content": text}

    def add_system_prompt(self, text: str) -> None:
        """Send ``text`` as the system prompt: in the request field ``system_field`` (an
        API that takes it as a message overrides this and puts it in ``history``)."""
        self.extra[self.system_field] = text

    def make_client(self, key: str, base_url: str | None, http: Any) -> Any:
        """The SDK client on ``http`` (``max_retries=0``: the retries are ours)."""
        raise NotImplementedError

    def tool_definition(self, name: str, description: str,
                        schema: dict[str, Any]) -> dict[str, Any]:
        """One tool as the API's ``tools`` list has it."""
        raise NotImplementedError

    def create(self, stream: bool) -> Any:
        """Send the conversation: the parsed answer, or with ``stream`` the SDK's raw
        response (``with_raw_response``) for :meth:`read_stream`."""
        raise NotImplementedError

    @staticmethod
    def read_stream(client: Any, raw: Any) -> Any:
        """The answer object of a streamed request, as the non-streamed request gives it."""
        raise NotImplementedError

    @staticmethod
    def read(answer: Any, /) -> Answer:
        """(calls, text, items to keep); ProtocolError if ``answer`` is not the API's."""
        raise NotImplementedError

    def _remember(self, items: list[dict[str, Any]]) -> None:
        """Append the kept items of an answer to the history (as they are: an API whose
        history holds them otherwise overrides this)."""
        self.history += items

    # --- reading another client's exchange (a framework's run, reactlab.frameworks) -----

    @classmethod
    def read_payload(cls, payload: dict[str, Any]) -> Answer:
        """(calls, text, items) of an answer's JSON body, as :meth:`read` reads the SDK's
        object of it (validated into :attr:`answer_type`)."""
        return cls.read(cls.answer_type.model_validate(payload))

    @staticmethod
    def sent_results(body: dict[str, Any]) -> dict[str, str]:
        """The tool results a request body carries back to the model, by call id, as the
        text the model reads (a client's own error text included)."""
        raise NotImplementedError

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        raise NotImplementedError

    # --- shared --------------------------------------------------------------------------

    def translate_error(self, exc: Exception) -> Exception:
        """SDK and transport errors → BudgetExceeded or BackendError (with a kind)."""
        return translate_sdk_error(exc, self.sdk, api_key_hint=self.hint)

    def _attempt(self) -> Answer:
        if not self.stream:
            return self.read(self.create(stream=False))
        return self.read(self.read_stream(self.client, self.create(stream=True)))

    def request(self, budget_left: int | None) -> ModelTurn:
        self.meter.limit = budget_left
        self.meter.take()
        self.last_attempts = []
        try:
            (calls, text, items), self.last_attempts = retry.call(
                self._attempt, self.translate_error, self.retry_policy, catch=self.catch,
                sleep=self.sleep)
        except BackendError as exc:
            self.last_attempts = exc.history
            raise
        finally:
            counts = self.meter.take()
        self._remember(items)
        return ModelTurn(text=text, calls=tuple(calls), tokens_sent=counts[-1],
                         attempts=len(self.last_attempts))
