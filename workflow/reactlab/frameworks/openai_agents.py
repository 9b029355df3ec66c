"""The OpenAI Agents SDK (``openai-agents``) as the system under test (docs/agents.md).

One conversation is one ``Runner.run`` of an ``Agent`` with the SDK's own pieces:

* the model: ``OpenAIResponsesModel`` (provider ``openai``) or
  ``OpenAIChatCompletionsModel`` (provider ``openai_chat``) on an ``AsyncOpenAI`` client
  whose HTTP client is the kit's (the simulator plays the scenario's script);
* the tools: one ``function_tool`` per task tool, built from the fields of the tool's
  pydantic argument model (each field's type and constraints as an annotated parameter),
  so that the SDK's own argument model validates the call before the lesson's tool runs;
  an invalid call never reaches the tool, and the model reads the SDK's fixed error text.
  The schema the model reads is the lesson's (``ToolDef.schema``, not strict: see
  ``strict_json_schema`` below);
* the loop and its cap: ``max_turns`` (as shipped the SDK's ``DEFAULT_MAX_TURNS``, 10;
  capped: the run's step limit), past which the SDK raises ``MaxTurnsExceeded``.

Settings (an agent's ``settings:``; each overrides what the condition set):

* ``max_turns`` — the SDK's turn cap (as shipped 10, capped ``kit.max_steps``);
* ``max_retries`` — the ``openai`` client's retries per request (2, the client's own
  default);
* ``timeout`` — the ``openai`` client's timeout per request in seconds (10.0; the client
  ships 600);
* ``tool_not_found_behavior`` — ``raise_error`` (as shipped: a call to an unknown tool
  ends the run with ``ModelBehaviorError``) or ``return_error_to_model``;
* ``strict_json_schema`` — False (the lesson's schema as it is, ``"strict": false`` on the
  wire) or True (the SDK's default for its decorator: the schema made strict by the SDK,
  ``additionalProperties: false``, ``"strict": true``).

Determinism: tracing is off (``RunConfig(tracing_disabled=True)`` and
``set_tracing_disabled``: nothing is exported); the run's trace ``group_id`` is derived
from the spec's key, so that a ``prompt_cache_key`` the runner adds (only for the official
endpoint: against the simulator's base URL it adds none) is a hash of it, never a random
id; the SDK's runner-managed retries are off (its default), and the client's retries sleep
for the server's ``retry-after`` or the client's short backoff. Tool results go back in the
order of the calls (the SDK orders them). ``HardStop`` is a ``BaseException`` and
propagates to the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import Field

from reactlab.core.errors import UsageError
from reactlab.frameworks.kit import Ending, FrameworkSettings

if TYPE_CHECKING:
    from reactlab.frameworks.kit import Kit, ToolDef

__all__ = ["NAME", "OPENAI_AGENTS", "SHIPPED", "OpenAIAgents", "Settings"]

NAME = "openai_agents"

#: The settings and their values when the agent gives none (``max_turns``: the SDK's own
#: ``DEFAULT_MAX_TURNS``; the condition ``capped`` replaces it by the run's step limit).
SHIPPED: dict[str, Any] = {
    "max_turns": 10,
    "max_retries": 2,
    "timeout": 10.0,
    "tool_not_found_behavior": "raise_error",
    "strict_json_schema": False,
}

_TYPES: dict[str, tuple[type, ...]] = {
    "max_turns": (int,), "max_retries": (int,), "timeout": (int, float),
    "tool_not_found_behavior": (str,), "strict_json_schema": (bool,),
}


class Settings(FrameworkSettings):
    """The Agents SDK's settings (the module docstring says what each does)."""

    max_turns: int | None = Field(default=None, ge=1)
    max_retries: int | None = Field(default=None, ge=0)
    timeout: float | int | None = Field(default=None, gt=0)
    tool_not_found_behavior: Literal["raise_error", "return_error_to_model"] | None = None
    strict_json_schema: bool | None = None


def resolve_settings(kit: Kit) -> dict[str, Any]:
    """The settings of this run: as shipped, the condition's cap, then the agent's own."""
    out = dict(SHIPPED)
    if kit.capped:
        out["max_turns"] = kit.max_steps
    for key, value in kit.settings.items():
        kinds = _TYPES.get(key)
        if kinds is None:
            raise UsageError(f"{NAME} takes no setting {key!r} (it takes: {', '.join(SHIPPED)})")
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            raise UsageError(f"{NAME} setting {key!r} must be "
                             f"{' or '.join(k.__name__ for k in kinds)}, not {value!r}")
        out[key] = value
    if out["tool_not_found_behavior"] not in ("raise_error", "return_error_to_model"):
        raise UsageError(f"{NAME} setting 'tool_not_found_behavior' is raise_error or "
                         f"return_error_to_model, not {out['tool_not_found_behavior']!r}")
    for key in ("max_turns", "max_retries"):
        if out[key] < (1 if key == "max_turns" else 0):
            raise UsageError(f"{NAME} setting {key!r} is too small: {out[key]}")
    if not out["timeout"] > 0:
        raise UsageError(f"{NAME} setting 'timeout' must be positive, not {out['timeout']}")
    return out


def function_tool_of(tool: ToolDef, *, strict: bool) -> Any:
    """The SDK's own function tool for ``tool``: a function whose keyword parameters are
    the fields of the tool's argument model (annotation and ``FieldInfo``), wrapped by
    ``agents.function_tool``, so the SDK builds its argument model from the same fields and
    validates with it; the body runs the lesson's tool (``ToolDef.call``) and returns its
    result as JSON text (``json.dumps``, its defaults: ASCII escapes), which the SDK sends
    back as it is (a dict would go back as its Python ``str()``, which no JSON reader
    reads)."""
    from agents import function_tool  # lazy: framework (agents extra)
    from agents.strict_schema import ensure_strict_json_schema  # lazy: framework (agents extra)

    fields = tool.args_model.model_fields
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                annotation=Annotated[field.annotation, field])
              for name, field in fields.items()]

    def body(**arguments: Any) -> str:
        return json.dumps(tool.call({name: arguments[name] for name in fields
                                     if name in arguments}))

    body.__name__ = tool.name
    cast("Any", body).__signature__ = inspect.Signature(params)
    body.__annotations__ = {p.name: p.annotation for p in params}
    made = function_tool(body, name_override=tool.name, description_override=tool.description,
                         use_docstring_info=False, strict_mode=strict)
    # What the model reads is the lesson's schema (the SDK's own one differs in its title,
    # ``<name>_args``); in strict mode, the SDK's strict form of it.
    made.params_json_schema = (ensure_strict_json_schema(dict(tool.schema)) if strict
                               else dict(tool.schema))
    return made


async def _tools(kit: Kit, settings: dict[str, Any],
                 stack: contextlib.AsyncExitStack) -> dict[str, Any]:
    """The agent's tools: the SDK's function tools, or, for a task whose tools come from
    an MCP server, the SDK's own stdio MCP client on it (``MCPServerStdio``, its tool list
    read once per run and filtered to the task's tools; a call's wait bounded by the
    ``timeout`` setting; a tool error goes back to the model as the server's text). The
    server stops with the stack."""
    if kit.mcp is None:
        return {"tools": [function_tool_of(t, strict=settings["strict_json_schema"])
                          for t in kit.tools]}
    from agents.mcp import (  # lazy: framework (agents extra)
        MCPServerStdio,
        create_static_tool_filter,
    )

    server = MCPServerStdio(params={"command": kit.mcp.command, "args": kit.mcp.args,
                                    "env": kit.mcp.env},
                            cache_tools_list=True, name="reactlab",
                            tool_filter=create_static_tool_filter(
                                allowed_tool_names=list(kit.spec.tools)),
                            client_session_timeout_seconds=float(settings["timeout"]))
    await stack.enter_async_context(server)
    return {"mcp_servers": [server],
            "mcp_config": {"convert_schemas_to_strict": settings["strict_json_schema"]}}


class OpenAIAgents:
    """The registry entry (:class:`reactlab.frameworks.registry.Framework`)."""

    name = NAME
    providers = ("openai", "openai_chat")
    settings = Settings
    packages = ("openai-agents", "openai")
    mcp = True

    def run(self, kit: Kit) -> Ending:
        return asyncio.run(self._run(kit))

    async def _run(self, kit: Kit) -> Ending:
        from agents import (  # lazy: framework (agents extra)
            Agent,
            MaxTurnsExceeded,
            OpenAIChatCompletionsModel,
            OpenAIResponsesModel,
            RunConfig,
            Runner,
            set_tracing_disabled,
        )
        from openai import AsyncOpenAI  # lazy: SDK (openai)

        settings = resolve_settings(kit)
        set_tracing_disabled(True)
        client = AsyncOpenAI(base_url=kit.base_url, api_key=kit.api_key,
                             max_retries=settings["max_retries"],
                             timeout=float(settings["timeout"]),
                             http_client=kit.http_client(asynchronous=True))
        model: Any
        if kit.provider == "openai":
            model = OpenAIResponsesModel(model=kit.model, openai_client=client)
        else:
            model = OpenAIChatCompletionsModel(model=kit.model, openai_client=client)
        config = RunConfig(tracing_disabled=True, group_id=f"reactlab:{kit.spec.key}",
                           tool_not_found_behavior=settings["tool_not_found_behavior"])
        try:
            async with contextlib.AsyncExitStack() as stack:
                agent: Any = Agent(name="reactlab", instructions=kit.system_prompt,
                                   model=model, **await _tools(kit, settings, stack))
                result = await Runner.run(agent, kit.question,
                                          max_turns=settings["max_turns"], run_config=config)
        except MaxTurnsExceeded as exc:
            return Ending("framework_limit", type(exc).__name__)
        except Exception as exc:  # the framework's own ending: HardStop is no Exception
            return Ending("framework_error", type(exc).__name__)
        finally:
            await client.close()
        output = result.final_output
        return Ending("answer", "final_output", output if isinstance(output, str)
                      else str(output))


#: The entry point ``reactlab.agents: openai_agents`` (reactlab's pyproject.toml).
OPENAI_AGENTS = OpenAIAgents()
