"""LangChain as the system under test: ``create_agent`` (``langchain.agents``, a LangGraph
graph underneath) with its own chat model on the simulator (docs/agents.md, ``## langchain``).

* **Model.** ``ChatOpenAI`` (langchain-openai) on ``openai_chat`` (Chat Completions, its
  default) and on ``openai`` (``use_responses_api=True``); ``ChatAnthropic``
  (langchain-anthropic) on ``anthropic``. ``ChatOpenAI`` takes the kit's clients as its
  ``http_client``/``http_async_client``. ``ChatAnthropic`` has no such field: it builds
  its ``anthropic.Client`` in the cached property ``_client`` from its own
  ``_client_params`` (key, base URL, retries, timeout, headers); the module fills that
  property with the same client built on the kit's ``httpx2`` client, so every request is
  still the one LangChain's own payload code makes.
* **Tools.** Each task tool is a ``StructuredTool`` whose ``args_schema`` is the tool's
  pydantic argument model, so argument validation is LangChain's own: a call its model
  refuses never reaches the tool, and the ``ToolNode`` of ``create_agent`` sends its own
  error text back (``status="error"`` ``ToolMessage``). A call that passes runs
  ``ToolDef.call`` and returns its dict, which LangChain serialises itself. The
  ``ToolNode`` sends the results back in the order of the model's calls.
* **Cap.** LangGraph's ``recursion_limit`` (``GraphRecursionError``): as shipped,
  ``create_agent`` sets 9,999 graph steps; capped, one model turn and its tool node are two
  steps, so ``max_steps`` model requests are ``2 * max_steps - 1`` steps (the last turn is
  the answer, with no tool node after it). A ``recursion_limit`` setting overrides both.
* **Bounded.** ``max_retries`` (setting, default :data:`MAX_RETRIES`) and ``timeout``
  (seconds, default :data:`TIMEOUT`) go to the chat model, hence to the SDK's own retries.
* **Reruns.** LangSmith tracing is off for the run (``langsmith``'s ``tracing_context``, a
  context variable: no environment change); the bodies carry no random id or per-run key
  (tests/test_agent_langchain.py reruns and compares the trace bytes).
* **Endings.** A last ``AIMessage`` without tool calls → ``answer`` (``final_output``);
  ``GraphRecursionError`` → ``framework_limit``; any other ``Exception`` →
  ``framework_error`` with its class name. The simulator's ``HardStop`` (a
  ``BaseException``) propagates.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr

from reactlab.frameworks.kit import Ending, FrameworkSettings, Kit, ToolDef

__all__ = ["LANGCHAIN", "MAX_RETRIES", "NAME", "TIMEOUT", "LangChain", "Settings",
           "recursion_limit"]

NAME = "langchain"
#: The SDK retries per request the chat model is given unless ``settings.max_retries``.
MAX_RETRIES = 2
#: The chat model's request timeout in seconds unless ``settings.timeout``.
TIMEOUT = 30.0
#: ``create_agent``'s own recursion limit (``langchain.agents.factory``), as shipped.
SHIPPED_RECURSION_LIMIT = 9_999


class Settings(FrameworkSettings):
    """LangChain's settings: the graph's ``recursion_limit``, the chat model's
    ``max_retries`` and ``timeout`` (seconds)."""

    recursion_limit: int | None = Field(default=None, ge=1)
    max_retries: int | None = Field(default=None, ge=0)
    timeout: float | int | None = Field(default=None, gt=0)


def recursion_limit(kit: Kit) -> int:
    """The graph's step cap: the ``recursion_limit`` setting, else, capped,
    ``2 * max_steps - 1`` (a model turn and its tool node per step, the last turn alone),
    else ``create_agent``'s own 9,999."""
    settings = kit.settings
    if "recursion_limit" in settings:
        return int(settings["recursion_limit"])
    if kit.capped:
        return 2 * kit.max_steps - 1
    return SHIPPED_RECURSION_LIMIT


def _tool(tool: ToolDef) -> Any:
    from langchain_core.tools import StructuredTool  # lazy: framework (agents extra)

    def run(**arguments: Any) -> dict[str, Any]:
        return tool.call(arguments)

    return StructuredTool.from_function(func=run, name=tool.name,
                                        description=tool.description,
                                        args_schema=tool.args_model)


def _model(kit: Kit) -> Any:
    settings = kit.settings
    retries = int(settings.get("max_retries", MAX_RETRIES))
    timeout = float(settings.get("timeout", TIMEOUT))
    if kit.provider == "anthropic":
        import anthropic  # lazy: SDK (anthropic)
        from langchain_anthropic import ChatAnthropic  # lazy: framework (agents extra)

        # the backend's max_tokens (config.yaml), else ChatAnthropic's own default
        max_tokens = kit.spec.backend_config.max_output_tokens
        extra: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
        chat = ChatAnthropic(model_name=kit.model, base_url=kit.base_url,
                             api_key=SecretStr(kit.api_key), max_retries=retries,
                             timeout=timeout, stop=None, **extra)
        # ChatAnthropic's own client, from its own parameters, on the kit's transport
        # (it takes no http_client: see the module docstring).
        chat.__dict__["_client"] = anthropic.Client(
            **chat._client_params, http_client=kit.http_client(asynchronous=False))
        chat.__dict__["_async_client"] = anthropic.AsyncClient(
            **chat._client_params, http_client=kit.http_client(asynchronous=True))
        return chat
    from langchain_openai import ChatOpenAI  # lazy: framework (agents extra)

    return ChatOpenAI(model=kit.model, base_url=kit.base_url, api_key=SecretStr(kit.api_key),
                      max_retries=retries, timeout=timeout,
                      use_responses_api=kit.provider == "openai",
                      http_client=kit.http_client(asynchronous=False),
                      http_async_client=kit.http_client(asynchronous=True))


class LangChain:
    """The registry entry (:class:`reactlab.frameworks.registry.Framework`)."""

    name = NAME
    providers = ("openai_chat", "openai", "anthropic")
    settings = Settings
    packages = ("langchain", "langchain-core", "langgraph", "langchain-openai",
                "langchain-anthropic")
    # LangChain's MCP support cannot live beside the project's mcp 2.3.0 (docs/mcp.md):
    # langchain-mcp-adapters 0.3.2, its newest release, requires mcp < 2 (pip takes mcp
    # back to 1.30.0), and 0.3.1 imports mcp.shared.context.RequestContext, gone in 2.x.
    mcp = False

    def run(self, kit: Kit) -> Ending:
        from langchain.agents import create_agent  # lazy: framework (agents extra)
        from langchain_core.messages import (  # lazy: framework (agents extra)
            AIMessage,
            HumanMessage,
        )
        from langchain_core.runnables import RunnableConfig  # lazy: framework (agents extra)
        from langgraph.errors import GraphRecursionError  # lazy: framework (agents extra)
        from langsmith.run_helpers import tracing_context  # lazy: framework (agents extra)

        agent = create_agent(_model(kit), [_tool(t) for t in kit.tools],
                             system_prompt=kit.system_prompt)
        # as shipped, no config: create_agent's own recursion_limit applies
        config = (RunnableConfig(recursion_limit=recursion_limit(kit))
                  if kit.capped or "recursion_limit" in kit.settings else None)
        question = HumanMessage(kit.question)
        try:
            with tracing_context(enabled=False):
                state = agent.invoke({"messages": [question]}, config=config)
        except GraphRecursionError:
            return Ending("framework_limit", "GraphRecursionError")
        except Exception as exc:  # the framework's (or its SDK's) own failure, by name
            return Ending("framework_error", type(exc).__name__)
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and not last.tool_calls:
            return Ending("answer", "final_output", last.text)
        return Ending("framework_error", type(last).__name__)


#: The entry point ``reactlab.agents: langchain`` (reactlab's pyproject.toml).
LANGCHAIN = LangChain()
