"""The built-in framework ``pydantic_ai``: Pydantic AI (``pydantic-ai-slim``) as the system
under test (docs/agents.md, section ``pydantic_ai``).

One conversation is one ``Agent(...).run_sync(question)`` with the framework's own loop:

* the model is the framework's own model class for the backend's wire API —
  ``OpenAIResponsesModel`` (``openai``), ``OpenAIChatModel`` (``openai_chat``),
  ``AnthropicModel`` (``anthropic``) — through its own provider, built on an SDK client
  (``AsyncOpenAI`` / ``AsyncAnthropic``) whose HTTP client is the kit's, on the simulator;
* each of the task's tools is a framework ``Tool`` built from a function whose one
  argument is the tool's pydantic argument model (the validating path, not
  ``Tool.from_schema``): the framework builds the schema the model reads from that model,
  validates the model's arguments with it, and sends its own retry text back on a
  validation error; a valid call runs :meth:`~reactlab.frameworks.kit.ToolDef.call`, whose
  result (``{"resultado": ...}`` or ``{"error": ...}``) goes back as the tool's return
  value. The functions are ``async`` and never await, so the framework's parallel tool
  calls run one after the other in the order the model asked for them;
* as shipped, the run has the framework's default usage limits (``request_limit=50``) and
  tool retries (1); capped, ``request_limit`` is the run's step limit
  (``kit.max_steps``). The agent's ``settings`` override: ``request_limit``,
  ``tool_retries``, ``max_retries`` (the SDK's retries per request), ``timeout`` (the
  SDK's per-attempt timeout, seconds) and ``request_timeout`` (the framework's deadline
  over all the attempts of one request, seconds). The last three have small defaults
  (:data:`DEFAULTS`) so that no wait is unbounded;
* nothing phones home: instrumentation stays off (``agent.instrument = False``), and the run's
  ``run_id`` and ``conversation_id`` are fixed (:data:`RUN_ID`).

Endings: a final output is ``answer``; ``UsageLimitExceeded`` (the framework's own cap) is
``framework_limit``; any other ``Exception`` is ``framework_error`` named by the first
public class of its type's MRO (the framework raises private subclasses such as
``_HTTPModelServerError`` of public ones such as ``ModelServerError``), and this includes
``UnexpectedModelBehavior`` when a tool's retries run out: the framework gives up on the
model, which is an error of the run, not a step budget spent. The simulator's
:class:`~reactlab.frameworks.kit.HardStop` is a ``BaseException`` and propagates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from reactlab.core.errors import UsageError
from reactlab.frameworks.kit import Ending, FrameworkSettings

if TYPE_CHECKING:
    from reactlab.frameworks.kit import Kit, ToolDef

__all__ = ["DEFAULTS", "NAME", "PYDANTIC_AI", "RUN_ID", "PydanticAI", "Settings"]

NAME = "pydantic_ai"

#: The settings this module gives the framework unless the agent's ``settings`` say
#: otherwise: the framework's own defaults for the loop (``request_limit`` 50, one retry
#: per tool), and small bounds on every wait (the SDK's 2 retries per request, a 10 s
#: timeout per attempt, 30 s for one request with all its attempts).
DEFAULTS: dict[str, int | float] = {"request_limit": 50, "tool_retries": 1,
                                    "max_retries": 2, "timeout": 10.0,
                                    "request_timeout": 30.0}



class Settings(FrameworkSettings):
    """pydantic-ai's settings (the module docstring says what each does)."""

    request_limit: int | None = Field(default=None, ge=1)
    tool_retries: int | None = Field(default=None, ge=0)
    max_retries: int | None = Field(default=None, ge=0)
    timeout: float | int | None = Field(default=None, gt=0)
    request_timeout: float | int | None = Field(default=None, gt=0)


#: The run id and conversation id every run is given (the framework draws a UUIDv7 from
#: the clock otherwise).
RUN_ID = "reactlab-run"


def _setting(given: dict[str, Any], name: str) -> float:
    """The setting ``name`` checked: an integer for an integer default, else a number;
    positive, or zero for the retry counts (a UsageError naming it otherwise)."""
    value = given[name]
    integer = isinstance(DEFAULTS[name], int)
    kind = (int,) if integer else (int, float)
    least = 0 if name in ("tool_retries", "max_retries") else 1e-9
    if isinstance(value, bool) or not isinstance(value, kind) or value < least:
        what = "an integer" if integer else "a number"
        raise UsageError(f"{NAME}: setting {name!r} is {what} >= {least:g}, not {value!r}")
    return float(value)


def _public_name(exc: BaseException) -> str:
    """The first class of ``exc``'s MRO whose name is public."""
    return next(c.__name__ for c in type(exc).__mro__ if not c.__name__.startswith("_"))


def _model(kit: Kit) -> Any:
    """The framework's own model for the kit's wire API, on the kit's HTTP client."""
    if kit.provider == "anthropic":
        from anthropic import AsyncAnthropic  # lazy: SDK (anthropic)
        from pydantic_ai.models.anthropic import AnthropicModel  # lazy: framework (agents extra)
        from pydantic_ai.providers.anthropic import (  # lazy: framework (agents extra)
            AnthropicProvider,
        )

        anthropic_client = AsyncAnthropic(base_url=kit.base_url, api_key=kit.api_key,
                                          http_client=kit.http_client())
        return AnthropicModel(kit.model,
                              provider=AnthropicProvider(anthropic_client=anthropic_client))
    from openai import AsyncOpenAI  # lazy: SDK (openai)
    from pydantic_ai.models.openai import (  # lazy: framework (agents extra)
        OpenAIChatModel,
        OpenAIResponsesModel,
    )
    from pydantic_ai.providers.openai import OpenAIProvider  # lazy: framework (agents extra)

    openai_client = AsyncOpenAI(base_url=kit.base_url, api_key=kit.api_key,
                                http_client=kit.http_client())
    provider = OpenAIProvider(openai_client=openai_client)
    if kit.provider == "openai_chat":
        return OpenAIChatModel(kit.model, provider=provider)
    return OpenAIResponsesModel(kit.model, provider=provider)


def _tool(tool: ToolDef, max_retries: int) -> Any:
    """The framework's own tool for ``tool``: a function of its pydantic argument model."""
    from pydantic_ai import Tool  # lazy: framework (agents extra)

    async def function(args: BaseModel) -> dict[str, Any]:
        return tool.call(args.model_dump())

    # the framework reads the argument model from the annotation
    function.__annotations__ = {"args": tool.args_model, "return": dict[str, Any]}
    return Tool(function, takes_ctx=False, name=tool.name, description=tool.description,
                max_retries=max_retries)


def _tools(kit: Kit, tool_retries: int, timeout: float) -> dict[str, Any]:
    """The agent's tools: the framework's own ``Tool`` s, or, for a task whose tools come
    from an MCP server, the framework's own MCP toolset on it (``MCPToolset`` over a stdio
    transport, FastMCP's client: the server started for the run and stopped after it, not
    kept alive; its tool list read once and filtered to the task's tools; a tool error
    sent back as a retry, as the framework does by default)."""
    if kit.mcp is None:
        return {"tools": [_tool(t, tool_retries) for t in kit.tools]}
    from fastmcp.client.transports import StdioTransport  # lazy: framework (agents extra)
    from pydantic_ai.mcp import MCPToolset  # lazy: framework (agents extra)

    transport = StdioTransport(kit.mcp.command, kit.mcp.args, env=kit.mcp.env,
                               keep_alive=False)
    offered = frozenset(kit.spec.tools)
    toolset = MCPToolset(transport, id="reactlab", max_retries=tool_retries,
                         init_timeout=timeout, read_timeout=timeout)
    return {"toolsets": [toolset.filtered(lambda ctx, tool: tool.name in offered)]}


class PydanticAI:
    """The registry entry (see the module docstring)."""

    name = NAME
    providers = ("openai", "openai_chat", "anthropic")
    settings = Settings
    packages = ("pydantic-ai-slim", "openai", "anthropic")
    mcp = True

    def run(self, kit: Kit) -> Ending:
        from pydantic_ai import Agent, UsageLimits  # lazy: framework (agents extra)
        from pydantic_ai.exceptions import UsageLimitExceeded  # lazy: framework (agents extra)
        from pydantic_ai.settings import ModelSettings  # lazy: framework (agents extra)

        given = {**DEFAULTS, **kit.settings}
        request_limit = kit.max_steps if kit.capped else int(_setting(given, "request_limit"))
        tool_retries = int(_setting(given, "tool_retries"))
        model_settings = ModelSettings(max_retries=int(_setting(given, "max_retries")),
                                       timeout=_setting(given, "timeout"),
                                       request_timeout=_setting(given, "request_timeout"))
        agent: Any = Agent(_model(kit), instructions=kit.system_prompt,
                           **_tools(kit, tool_retries, _setting(given, "timeout")),
                           retries=tool_retries, model_settings=model_settings, name=NAME)
        agent.instrument = False  # no spans, whatever Agent.instrument_all() was given
        try:
            result = agent.run_sync(kit.question,
                                    usage_limits=UsageLimits(request_limit=request_limit),
                                    run_id=RUN_ID, conversation_id=RUN_ID)
        except UsageLimitExceeded as exc:
            return Ending("framework_limit", _public_name(exc))
        except Exception as exc:  # the framework's own failure, recorded by its class
            return Ending("framework_error", _public_name(exc))
        return Ending("answer", "final_output", str(result.output))


PYDANTIC_AI = PydanticAI()
