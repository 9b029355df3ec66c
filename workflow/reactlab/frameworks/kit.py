r"""What a framework runs with: the :class:`Kit` (the task's tools as :class:`ToolDef`\ s,
an HTTP client on the simulator, the model name and limits), the :class:`Wire` transport
that keeps every exchange and enforces the hard stop (:class:`HardStop`), and the
:class:`Ending` a framework returns (:mod:`reactlab.frameworks.registry`; the trace is
built from the wire by :mod:`reactlab.frameworks.wire`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from reactlab.backends import registry
from reactlab.config.faults import FaultPlan
from reactlab.simulate import ScriptedPolicy
from reactlab.simulate.base import ANSWER

if TYPE_CHECKING:
    from pydantic import BaseModel

    from reactlab.config import RunSpec

__all__ = ["SIMULATED_KEY", "Ending", "Exchange", "FrameworkSettings", "HardStop", "Kit",
           "StdioCommand", "ToolDef", "Wire"]



class FrameworkSettings(BaseModel):
    """The base of a framework's typed settings (an agent's ``settings:``): every field
    optional (None: the framework's own default), no other key, no coercion (``true`` is
    not an integer). The config validates an agent's settings with its framework's model
    before any job (:func:`reactlab.config.agents.check_agents`)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


@dataclass(frozen=True)
class Ending:
    """How a framework's run ended, in its own terms: ``answer`` (a final output, its
    text), ``framework_limit`` (the framework's own cap stopped it) or
    ``framework_error`` (it raised anything else); ``ending`` names the framework's own
    ending (``final_output``, or the exception's class name)."""

    termination: Literal["answer", "framework_limit", "framework_error"]
    ending: str
    answer: str | None = None


#: The API key a framework's client is given (the simulator reads none).
SIMULATED_KEY = "sk-simulado"


class HardStop(BaseException):
    """The simulator's hard stop: a request past the agent's ``max_requests``. A
    ``BaseException``, so that no framework's ``except Exception`` retries or swallows it."""


@dataclass(frozen=True)
class Exchange:
    """One request the simulator received and what it answered (``payload``: the answer's
    JSON, None when it answered an error or a fault)."""

    body: bytes
    status: int
    payload: dict[str, Any] | None


class Wire:
    """The transport handler of a framework's run (see the module docstring)."""

    def __init__(self, spec: RunSpec, max_requests: int) -> None:
        api = registry.provider(spec.backend_config.provider).api
        assert api is not None, f"{spec.key}: a framework runs on an HTTP API's simulator"
        self.lib = api.http()
        sim = api.sim()
        policy = ScriptedPolicy.of_run(spec)
        plan = FaultPlan.from_script(spec.script)
        handle = sim.handler(policy)
        self.handle: Callable[[Any], Any] = sim.with_faults(handle, plan) if plan else handle
        self.max_requests = max_requests
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()

    def __call__(self, request: Any) -> Any:
        with self.lock:
            if len(self.exchanges) >= self.max_requests:
                raise HardStop(f"request {len(self.exchanges) + 1} refused: the agent's "
                               f"max_requests is {self.max_requests}")
            body = request.read()
            try:
                response = self.handle(request)
            except BaseException:
                self.exchanges.append(Exchange(body, 0, None))
                raise
            payload = response.extensions.get(ANSWER)
            ok = response.status_code == 200 and isinstance(payload, dict)
            self.exchanges.append(Exchange(body, response.status_code,
                                           dict(payload) if ok else None))
            return response

    def transport(self) -> Any:
        return self.lib.MockTransport(self)


@dataclass(frozen=True)
class StdioCommand:
    """A stdio MCP server's command line and its whole environment (a framework's MCP
    client passes it as it is: the SDKs' own default environments leave out
    ``PYTHONPATH`` and the rest)."""

    command: str
    args: list[str]
    env: dict[str, str]


@dataclass(frozen=True)
class ToolDef:
    """One of the task's tools as a framework builds its own from it: the name,
    description and JSON schema the model reads (the lesson's), the pydantic model of its
    arguments, and :meth:`call`, which executes it (errors come back as data)."""

    name: str
    description: str
    schema: dict[str, Any]
    args_model: type[BaseModel]
    call: Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Kit:
    """What a framework runs with (:meth:`reactlab.frameworks.registry.Framework.run`)."""

    spec: RunSpec
    wire: Wire
    tools: list[ToolDef]
    #: every execution of a tool, in order: (name, arguments, result)
    executed: list[tuple[str, Any, dict[str, Any]]] = field(default_factory=list)
    #: the framework's own answer tool, set by a framework whose model answers through a
    #: tool call (Inspect's ``submit``): a call to it is the run's answer, not a tool call
    answer_tool: str | None = None
    #: When the task's tools come from an MCP server: how to start it over stdio (behind
    #: the relay that logs its tool calls, :mod:`reactlab.mcp.relay`). The framework then
    #: takes the tools through its own MCP client instead of :attr:`tools`, and starts
    #: and stops the server itself.
    mcp: StdioCommand | None = None

    @property
    def question(self) -> str:
        return self.spec.question

    @property
    def system_prompt(self) -> str | None:
        """The agent's system prompt, when the config sends it (None: none is sent)."""
        agent = self.spec.agent
        return agent.system_prompt if agent.send_system_prompt else None

    @property
    def model(self) -> str:
        """The model name the framework asks for: the scenario's script."""
        return self.spec.script.model

    @property
    def provider(self) -> str:
        return self.spec.backend_config.provider

    @property
    def base_url(self) -> str:
        """The base URL the framework's SDK client is given (never contacted: the kit's
        HTTP client answers from the simulator)."""
        return registry.provider(self.provider).adapter().simulated_base_url

    @property
    def api_key(self) -> str:
        return SIMULATED_KEY

    @property
    def max_steps(self) -> int:
        """The run's step limit (the scenario's, else ``agent.max_steps``)."""
        return self.spec.limits.max_steps

    @property
    def capped(self) -> bool:
        """Whether the step limit goes into the framework's own setting."""
        assert self.spec.framework is not None
        return self.spec.framework.capped

    @property
    def settings(self) -> dict[str, Any]:
        """The agent's own ``settings:`` for its framework."""
        assert self.spec.framework is not None
        return dict(self.spec.framework.settings)

    def http_client(self, *, asynchronous: bool = True) -> Any:
        """A client of the wire API's HTTP library (``httpx``, ``httpx2``) on the wire."""
        lib = self.wire.lib
        cls = lib.AsyncClient if asynchronous else lib.Client
        return cls(transport=self.wire.transport())


