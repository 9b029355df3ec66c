"""The built-in framework ``inspect_react``: Inspect's ``react()`` agent (``inspect-ai``) as
the system under test (docs/agents.md, section ``inspect_react``).

One conversation is one ``inspect_ai.agent.run(react(...), question)`` with Inspect's own
loop, inside Inspect's own ``eval()`` of a one-sample ``Task`` (react() refuses to run
outside a sample; the eval's log goes to a temporary directory removed with it):

* the model is Inspect's own provider for the backend's wire API — ``openai`` with
  ``responses_api=True`` (``openai``: Responses) or ``False`` (``openai_chat``: Chat
  Completions), ``anthropic`` (Messages) — from ``get_model(..., memoize=False)`` with the
  kit's base URL, key and HTTP client (Inspect's ``http_client`` model argument), so every
  request is the one Inspect's own provider code makes;
* each of the task's tools is an Inspect ``ToolDef`` whose parameters are the lesson's
  JSON schema (``ToolParams``) and whose function takes the fields of the tool's pydantic
  argument model as typed keyword parameters: Inspect validates the model's arguments
  against that schema itself (its "Found N validation errors parsing tool input
  arguments" text) and converts them by the annotations; a valid call runs
  :meth:`~reactlab.frameworks.kit.ToolDef.call` and returns its result as JSON text;
* ``react()`` as shipped: its default prompt and its ``submit()`` tool. It ends only when
  the model calls ``submit()`` (the run's answer: ``kit.answer_tool``) or a limit stops
  it. As shipped it has no step cap, so a loop runs into the simulator's hard stop
  (``max_requests``); capped, ``turn_limit`` (Inspect's limit on model generations) is the
  run's step limit. ``message_limit`` and ``token_limit`` settings add Inspect's other
  limits;
* Inspect retries a failed request forever by default (exponential backoff from 3 s to
  30 min): ``GenerateConfig(max_retries=..., timeout=...)`` bounds it (:data:`DEFAULTS`),
  and the SDK client's own retries (``openai``/``anthropic``, inside each of Inspect's
  attempts) are the ``sdk_max_retries`` setting. Every attempt is a request on the wire
  (the trace's ``request`` records, ``agents.csv``'s attempts);
* nothing phones home and nothing is left in the working folder: no eval log or log
  dir (Inspect's own trace log of actions goes to the user's data folder, as for every
  Inspect run); ``INSPECT_TELEMETRY`` and the hooks are Inspect's (none are installed);
  the bodies hold no per-run id (the call ids are the simulator's).

Endings: a ``submit()`` → ``answer`` (``submit``); a ``LimitExceededError`` (turn,
message or token limit) → ``framework_limit`` named by the limit's type
(``turn_limit`` …); any other ``Exception`` → ``framework_error`` with its class name
(react() returning without a submission: ``no_submit``). The simulator's
:class:`~reactlab.frameworks.kit.HardStop` is a ``BaseException`` and propagates.
"""

from __future__ import annotations

import inspect
import json
import tempfile
import threading
from typing import TYPE_CHECKING, Any, cast

from pydantic import Field

from reactlab.core.errors import UsageError
from reactlab.frameworks.kit import Ending, FrameworkSettings, HardStop

if TYPE_CHECKING:
    from reactlab.frameworks.kit import Kit, ToolDef

__all__ = ["ANSWER_TOOL", "DEFAULTS", "INSPECT_REACT", "NAME", "InspectReact", "Settings",
           "resolve_settings"]

NAME = "inspect_react"

#: react()'s own answer tool: a call to it is the run's answer.
ANSWER_TOOL = "submit"

#: Inspect allows one ``eval()`` at a time in a process ("Multiple concurrent calls to
#: eval_async are not allowed"); the pipeline runs simulated runs as threads of one
#: process, so Inspect's runs take turns.
_EVAL_LOCK = threading.Lock()

#: The settings the module gives Inspect unless the agent's ``settings`` say otherwise.
#: ``turn_limit``, ``message_limit`` and ``token_limit``: None is Inspect's default (no
#: limit; capped, ``turn_limit`` is the step limit). The waits are bounded: Inspect's own
#: retries of a request (``max_retries``, its backoff of 3 s doubling, with jitter),
#: ``timeout`` seconds over all of a request's attempts, the SDK client's own retries
#: inside each attempt (``sdk_max_retries``: the SDKs' default 2, which honours
#: ``retry-after``).
DEFAULTS: dict[str, int | None] = {"turn_limit": None, "message_limit": None,
                                   "token_limit": None, "max_retries": 2, "timeout": 30,
                                   "sdk_max_retries": 2}


class Settings(FrameworkSettings):
    """Inspect's settings: its limits (None: none), its retries and timeout."""

    turn_limit: int | None = Field(default=None, ge=1)
    message_limit: int | None = Field(default=None, ge=1)
    token_limit: int | None = Field(default=None, ge=1)
    max_retries: int | None = Field(default=None, ge=0)
    timeout: int | None = Field(default=None, ge=1)
    sdk_max_retries: int | None = Field(default=None, ge=0)


def resolve_settings(kit: Kit) -> dict[str, int | None]:
    """The run's settings: :data:`DEFAULTS`, the condition (capped: ``turn_limit`` is the
    step limit), then the agent's own; each an integer (>= 0 for the retry counts, >= 1
    otherwise) or None for a limit (a UsageError naming it otherwise)."""
    given: dict[str, Any] = {**DEFAULTS}
    if kit.capped:
        given["turn_limit"] = kit.max_steps
    given.update(kit.settings)
    for name, value in given.items():
        least = 0 if name in ("max_retries", "sdk_max_retries") else 1
        limit = name.endswith("_limit")
        if value is None and limit:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise UsageError(f"{NAME}: setting {name!r} is an integer >= {least}"
                             + (" or null" if limit else "") + f", not {value!r}")
    return cast("dict[str, int | None]", given)


def _tool(tool: ToolDef) -> Any:
    """Inspect's own tool for ``tool`` (see the module docstring)."""
    from inspect_ai.tool import ToolDef as InspectToolDef  # lazy: framework (agents extra)
    from inspect_ai.tool import ToolParams  # lazy: framework (agents extra)

    fields = tool.args_model.model_fields
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                annotation=field.annotation)
              for name, field in fields.items()]

    async def execute(**arguments: Any) -> str:
        return json.dumps(tool.call({name: arguments[name] for name in fields
                                     if name in arguments}))

    execute.__name__ = tool.name
    cast("Any", execute).__signature__ = inspect.Signature(params)
    execute.__annotations__ = {**{p.name: p.annotation for p in params}, "return": str}
    # Inspect requires a description of every parameter; the lesson's schema gives each
    # a title only, which becomes its description
    schema = {k: v for k, v in tool.schema.items() if k != "title"}
    schema["properties"] = {
        name: {**{k: v for k, v in prop.items() if k != "title"},
               "description": prop.get("description", prop.get("title", name))}
        for name, prop in schema["properties"].items()}
    return InspectToolDef(execute, name=tool.name, description=tool.description,
                          parameters=ToolParams.model_validate(schema))


def _model(kit: Kit, settings: dict[str, int | None]) -> Any:
    """Inspect's own model for the kit's wire API, on the kit's HTTP client."""
    from inspect_ai.model import GenerateConfig, get_model  # lazy: framework (agents extra)

    config = GenerateConfig(max_retries=settings["max_retries"], timeout=settings["timeout"])
    args: dict[str, Any] = {"http_client": kit.http_client(asynchronous=True),
                            "max_retries": settings["sdk_max_retries"]}
    if kit.provider == "anthropic":
        return get_model(f"anthropic/{kit.model}", config=config, base_url=kit.base_url,
                         api_key=kit.api_key, memoize=False, **args)
    return get_model(f"openai/{kit.model}", config=config, base_url=kit.base_url,
                     api_key=kit.api_key, memoize=False,
                     responses_api=kit.provider == "openai", **args)


class InspectReact:
    """The registry entry (:class:`reactlab.frameworks.registry.Framework`)."""

    name = NAME
    providers = ("openai", "openai_chat", "anthropic")
    settings = Settings
    packages = ("inspect-ai", "openai", "anthropic")
    mcp = True

    def run(self, kit: Kit) -> Ending:
        from inspect_ai import Task  # lazy: framework (agents extra)
        from inspect_ai import eval as inspect_eval  # lazy: framework (agents extra)
        from inspect_ai.dataset import Sample  # lazy: framework (agents extra)

        settings = resolve_settings(kit)
        kit.answer_tool = ANSWER_TOOL
        ending: list[Ending] = []
        stopped: list[HardStop] = []
        task = Task(dataset=[Sample(input=kit.question, id="reactlab")],
                    solver=_solver(kit, settings, ending, stopped), name=NAME)
        # eval() writes its log: into a temporary directory, removed with it
        with _EVAL_LOCK, tempfile.TemporaryDirectory(prefix="reactlab-inspect-") as logs:
            inspect_eval(task, model=_model(kit, settings), log_dir=logs, display="none",
                         score=False, log_samples=False, log_realtime=False,
                         fail_on_error=True)
        if stopped:
            raise stopped[0]
        assert ending, f"{kit.spec.key}: Inspect's eval ran no sample"
        return ending[0]


def _tools(kit: Kit) -> list[Any]:
    """The agent's tools: Inspect's own typed tools, or, for a task whose tools come from
    an MCP server, Inspect's own MCP support on it (``mcp_server_stdio``, the task's tools
    chosen by name with ``mcp_tools``; Inspect starts the server in the sample and stops
    it after)."""
    if kit.mcp is None:
        return [_tool(t) for t in kit.tools]
    from inspect_ai.tool import mcp_server_stdio, mcp_tools  # lazy: framework (agents extra)

    server = mcp_server_stdio(name="reactlab", command=kit.mcp.command, args=kit.mcp.args,
                              env=kit.mcp.env)
    return [mcp_tools(server, tools=list(kit.spec.tools))]


def _solver(kit: Kit, settings: dict[str, int | None], ending: list[Ending],
            stopped: list[HardStop]) -> Any:
    """The eval's one solver: runs ``react()`` in the sample with the limits of the
    settings, and keeps how it ended in ``ending`` (the simulator's hard stop in
    ``stopped``: eval() would record it as the sample's error)."""
    from inspect_ai.agent import AgentPrompt, react  # lazy: framework (agents extra)
    from inspect_ai.agent import run as run_agent  # lazy: framework (agents extra)
    from inspect_ai.solver import Generate, TaskState, solver  # lazy: framework (agents extra)
    from inspect_ai.util import (  # lazy: framework (agents extra)
        LimitExceededError,
        message_limit,
        token_limit,
        turn_limit,
    )

    limits: list[Any] = []
    if settings["turn_limit"] is not None:
        limits.append(turn_limit(settings["turn_limit"]))
    if settings["message_limit"] is not None:
        limits.append(message_limit(settings["message_limit"]))
    if settings["token_limit"] is not None:
        limits.append(token_limit(settings["token_limit"]))

    @solver(name="reactlab_react")
    def agent_solver() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            prompt = (AgentPrompt() if kit.system_prompt is None
                      else AgentPrompt(instructions=kit.system_prompt))
            agent = react(prompt=prompt, tools=_tools(kit))
            try:
                done, exceeded = await run_agent(agent, kit.question, limits)
            except HardStop as exc:
                stopped.append(exc)
                return state
            except LimitExceededError as exc:  # a limit outside run()'s own
                ending.append(Ending("framework_limit", f"{exc.type}_limit"))
                return state
            except Exception as exc:  # Inspect's (or its SDK's) own failure, by name
                ending.append(Ending("framework_error", type(exc).__name__))
                return state
            if exceeded is not None:
                ending.append(Ending("framework_limit", f"{exceeded.type}_limit"))
                return state
            # react() ends without a limit only after a submit() (or on the model's own
            # length or content-filter stop); its answer is then the output's completion
            calls = done.output.message.tool_calls or []
            ending.append(Ending("answer", ANSWER_TOOL, done.output.completion)
                          if any(c.function == ANSWER_TOOL for c in calls)
                          else Ending("framework_error",
                                      f"no_submit:{done.output.stop_reason}"))
            return state

        return solve

    return agent_solver()


#: The entry point ``reactlab.agents: inspect_react`` (reactlab's pyproject.toml).
INSPECT_REACT = InspectReact()
