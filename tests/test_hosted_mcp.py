"""Hosted MCP on the simulators' wire (docs/simulators.md, "Hosted MCP").

The project's own MCP server runs over Streamable HTTP on a free loopback port and the
simulators' server on another; the official SDKs ask for hosted MCP as they would ask
OpenAI (a Responses ``mcp`` tool) or Anthropic (``mcp_servers`` with an
``mcp_toolset``, beta ``mcp-client-2025-11-20``), and the simulator connects to the MCP
server itself, lists its tools and runs the scripted model's calls to them. Checked: the
SDKs' typed items and blocks, each result equal to what the project's tools return in
process, a second request that carries the answer back, a tool error, an unreachable
server (the APIs' own refusals), streaming, and the same bytes twice.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from anthropic.types.beta import BetaMCPToolResultBlock, BetaMCPToolUseBlock, BetaTextBlock
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from openai.types.responses.mcp_tool_call_error import McpToolExecutionError
from openai.types.responses.response_output_item import McpCall, McpListTools

from reactlab.config import load
from reactlab.mcp.server import tool_result
from reactlab.simulate.hosted_mcp import ANTHROPIC_BETA, ANTHROPIC_BETA_2025_04
from reactlab.simulate.server import ServerThread
from reactlab.tools import TOOLS, ToolBox
from tests.conftest import interrupt

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 30.0
SHIPPED = load(ROOT / "config.yaml")
QUESTION = SHIPPED.raw["tasks"]["variacion_busi"]["question"]
BUSI = [{"ticker": "BUSI", "fecha": "2024-03-15"}, {"ticker": "BUSI", "fecha": "2024-03-22"}]


@pytest.fixture(scope="module")
def mcp_url(data_files: tuple[Path, Path]) -> Iterator[str]:
    """``reactlab mcp --transport http --port 0`` (the lesson's four tools): its URL, read
    from its log; stopped with SIGINT by its PID, killed if it does not stop."""
    prices, news = data_files
    proc = subprocess.Popen([sys.executable, "-m", "reactlab", "mcp", "--prices", str(prices),
                             "--news", str(news), "--transport", "http", "--port", "0"],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            m = re.search(r"Streamable HTTP on (http://\S+)", line)
            if m and not found:
                found.append(m.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(60) and found, "the MCP server did not start"
        yield found[0]
    finally:
        interrupt(proc)


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    srv = ServerThread(SHIPPED)
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def oa(sim: ServerThread, loopback: None) -> Iterator[openai.OpenAI]:
    with httpx.Client(timeout=TIMEOUT) as http:
        yield openai.OpenAI(api_key="sk-test", base_url=sim.url + "/v1", http_client=http,
                            max_retries=0)


@pytest.fixture
def an(sim: ServerThread, loopback: None) -> Iterator[anthropic.Anthropic]:
    with httpx2.Client(timeout=TIMEOUT) as http:
        yield anthropic.Anthropic(api_key="sk-test", base_url=sim.url, http_client=http,
                                  max_retries=0)


def in_process(toolbox: ToolBox, name: str, args: dict[str, Any]) -> tuple[str, bool]:
    """(text, is_error) of the project's tool called in process, as its server gives it."""
    result = tool_result(toolbox, name, args, tuple(TOOLS))
    return result.content[0].text, bool(result.is_error)  # type: ignore[union-attr]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mcp_tool(url: str, **more: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "reactlab", "server_url": url,
            "require_approval": "never", "headers": {"x-prueba": "1"}, **more}


# --- Responses ----------------------------------------------------------------------------


def test_responses_runs_the_script_on_the_hosted_server(oa: openai.OpenAI, mcp_url: str,
                                                        toolbox: ToolBox) -> None:
    """``correcto`` with every tool hosted: one answer holds the listing, the three calls
    (two turns of the script) and the answer computed from their results."""
    r = oa.responses.create(model="correcto", input=QUESTION, tools=[mcp_tool(mcp_url)])
    kinds = [type(o) for o in r.output]
    assert kinds == [McpListTools, McpCall, McpCall, McpCall, ResponseOutputMessage]
    listing = r.output[0]
    assert isinstance(listing, McpListTools)
    assert listing.server_label == "reactlab" and listing.error is None
    assert [t.name for t in listing.tools] == list(TOOLS)
    assert listing.tools[0].description == TOOLS["precio"].description
    assert isinstance(listing.tools[0].input_schema, dict)
    calls = [o for o in r.output if isinstance(o, McpCall)]
    assert [c.id for c in calls] == ["mcp_0_0", "mcp_0_1", "mcp_2_0"]
    assert [c.name for c in calls] == ["precio", "precio", "calculadora"]
    for c in calls:
        assert c.server_label == "reactlab" and c.error is None
        assert c.approval_request_id is None and c.status == "completed"
        assert (c.output, False) == in_process(toolbox, c.name, json.loads(c.arguments))
    assert [json.loads(c.arguments) for c in calls[:2]] == BUSI
    closes = [json.loads(c.output or "")["resultado"]["cierre"] for c in calls[:2]]
    assert json.loads(calls[2].arguments) == {
        "expresion": f"({closes[1]}/{closes[0]} - 1)*100"}
    pct = json.loads(calls[2].output or "")["resultado"]
    assert r.output_text == (f"El cierre de BUSI varió un {pct:.2f} % entre 2024-03-15 y "
                             "2024-03-22.")
    assert r.usage is not None and r.usage.output_tokens > 0
    assert r.tools[0].type == "mcp" and r.tools[0].headers is None  # no secrets echoed
    again = oa.responses.create(model="correcto", input=QUESTION, tools=[mcp_tool(mcp_url)])
    assert again.model_dump() == r.model_dump()  # deterministic, no clock


def test_responses_mixes_hosted_and_function_tools(oa: openai.OpenAI, mcp_url: str,
                                                   toolbox: ToolBox) -> None:
    """``allowed_tools: [precio]`` and the calculator as a function tool: the hosted calls,
    then the function call ends the answer; the client sends back every item (the
    listing included: no second listing) and its output, and the script answers."""
    tools: list[Any] = [
        mcp_tool(mcp_url, allowed_tools=["precio"]),
        {"type": "function", "name": "calculadora", "description": "calcula",
         "parameters": {"type": "object", "properties": {"expresion": {"type": "string"}}}}]
    r = oa.responses.create(model="correcto", input=QUESTION, tools=tools)
    assert [type(o) for o in r.output] == [McpListTools, McpCall, McpCall,
                                           ResponseFunctionToolCall]
    assert [t.name for t in r.output[0].tools] == ["precio"]  # type: ignore[union-attr]
    fc = r.output[3]
    assert isinstance(fc, ResponseFunctionToolCall) and fc.call_id == "call_2_0"
    text, _ = in_process(toolbox, "calculadora", json.loads(fc.arguments))
    history: list[Any] = [{"role": "user", "content": QUESTION}]
    history += [o.model_dump(exclude_none=True) for o in r.output]
    history.append({"type": "function_call_output", "call_id": fc.call_id, "output": text})
    r2 = oa.responses.create(model="correcto", input=history, tools=tools)
    assert [type(o) for o in r2.output] == [ResponseOutputMessage]
    pct = json.loads(text)["resultado"]
    assert r2.output_text.startswith(f"El cierre de BUSI varió un {pct:.2f} %")


def test_responses_tool_error_is_mcp_call_error(oa: openai.OpenAI, mcp_url: str,
                                                toolbox: ToolBox) -> None:
    """An unknown ticker: the server's ``isError`` result is the call's
    ``mcp_tool_execution_error`` with its content; the script reads it and answers."""
    r = oa.responses.create(model="cierre_acme/ticker_inexistente", input="¿ACME?",
                            tools=[mcp_tool(mcp_url)])
    call = r.output[1]
    assert isinstance(call, McpCall) and call.status == "failed" and call.output is None
    assert isinstance(call.error, McpToolExecutionError)
    text, is_error = in_process(toolbox, "precio", json.loads(call.arguments))
    assert is_error and call.error.content == [{"type": "text", "text": text}]
    assert r.output_text == "No hay datos de ACME: la herramienta indica que el ticker no existe."


def test_responses_unreachable_server_is_424(oa: openai.OpenAI) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(openai.APIStatusError) as e:
        oa.responses.create(model="correcto", input=QUESTION, tools=[mcp_tool(url)])
    assert e.value.status_code == 424
    assert e.value.body == {  # the API's documented refusal (OpenAI's 424)
        "message": "Error retrieving tool list from MCP server: 'reactlab'. Http status "
                   "code: 424 (Failed Dependency)", "type": "external_connector_error",
        "param": "tools", "code": "http_error"}


def test_responses_refuses_approvals(oa: openai.OpenAI, mcp_url: str) -> None:
    tool = mcp_tool(mcp_url)
    del tool["require_approval"]  # the API's default: always
    with pytest.raises(openai.BadRequestError) as e:
        oa.responses.create(model="correcto", input=QUESTION, tools=[tool])
    assert e.value.param == "tools[0].require_approval"


def test_responses_streamed_equals_plain(oa: openai.OpenAI, mcp_url: str) -> None:
    plain = oa.responses.create(model="correcto", input=QUESTION, tools=[mcp_tool(mcp_url)])
    with oa.responses.stream(model="correcto", input=QUESTION,
                             tools=[mcp_tool(mcp_url)]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    # the helper's parsed message carries its own extra members: compare the rest
    assert [o.model_dump() for o in final.output[:-1]] == [
        o.model_dump() for o in plain.output[:-1]]
    assert final.output_text == plain.output_text and final.id == plain.id
    assert kinds.count("response.mcp_call.completed") == 3
    assert "response.mcp_list_tools.completed" in kinds


def test_responses_max_tool_calls_ends_the_loop(oa: openai.OpenAI, mcp_url: str) -> None:
    """``bucle`` calls forever: past ``max_tool_calls`` the model answers (empty text)."""
    r = oa.responses.create(model="bucle", input=QUESTION, tools=[mcp_tool(mcp_url)],
                            max_tool_calls=3)
    assert [o.type for o in r.output] == ["mcp_list_tools", *["mcp_call"] * 3, "message"]


# --- Messages -----------------------------------------------------------------------------


def mcp_servers(url: str) -> list[Any]:
    return [{"type": "url", "url": url, "name": "reactlab", "authorization_token": "tok"}]


def test_messages_runs_the_script_on_the_hosted_server(an: anthropic.Anthropic, mcp_url: str,
                                                       toolbox: ToolBox) -> None:
    m = an.beta.messages.create(
        model="correcto", max_tokens=512, messages=[{"role": "user", "content": QUESTION}],
        mcp_servers=mcp_servers(mcp_url),
        tools=[{"type": "mcp_toolset", "mcp_server_name": "reactlab"}], betas=[ANTHROPIC_BETA])
    kinds = [type(b) for b in m.content]
    assert kinds == [BetaMCPToolUseBlock, BetaMCPToolResultBlock] * 3 + [BetaTextBlock]
    uses = [b for b in m.content if isinstance(b, BetaMCPToolUseBlock)]
    results = [b for b in m.content if isinstance(b, BetaMCPToolResultBlock)]
    assert [u.id for u in uses] == ["mcptoolu_0_0", "mcptoolu_0_1", "mcptoolu_2_0"]
    assert [u.input for u in uses[:2]] == BUSI
    for u, res in zip(uses, results, strict=True):
        assert u.server_name == "reactlab" and res.tool_use_id == u.id
        text, is_error = in_process(toolbox, u.name, u.input)
        assert res.is_error is is_error is False
        assert [b.text for b in res.content] == [text]  # type: ignore[union-attr]
    assert m.stop_reason == "end_turn"
    pct = json.loads(results[2].content[0].text)["resultado"]  # type: ignore[union-attr]
    assert m.content[-1].text.startswith(  # type: ignore[union-attr]
        f"El cierre de BUSI varió un {pct:.2f} %")
    again = an.beta.messages.create(
        model="correcto", max_tokens=512, messages=[{"role": "user", "content": QUESTION}],
        mcp_servers=mcp_servers(mcp_url),
        tools=[{"type": "mcp_toolset", "mcp_server_name": "reactlab"}], betas=[ANTHROPIC_BETA])
    assert again.model_dump() == m.model_dump()


def test_messages_tool_error_and_the_next_turn(an: anthropic.Anthropic, mcp_url: str,
                                               toolbox: ToolBox) -> None:
    """A tool error is ``is_error: true``; the assistant message sent back as it came
    (its hosted blocks included) continues the script past them."""
    kwargs: dict[str, Any] = {
        "model": "cierre_acme/ticker_inexistente", "max_tokens": 256,
        "mcp_servers": mcp_servers(mcp_url), "betas": [ANTHROPIC_BETA],
        "tools": [{"type": "mcp_toolset", "mcp_server_name": "reactlab"}]}
    m = an.beta.messages.create(messages=[{"role": "user", "content": "¿ACME?"}], **kwargs)
    use, res, answer = m.content
    assert isinstance(use, BetaMCPToolUseBlock) and isinstance(res, BetaMCPToolResultBlock)
    text, is_error = in_process(toolbox, "precio", use.input)
    assert res.is_error is is_error is True
    assert [b.text for b in res.content] == [text]  # type: ignore[union-attr]
    assert isinstance(answer, BetaTextBlock) and answer.text.startswith("No hay datos de ACME")
    history: list[Any] = [{"role": "user", "content": "¿ACME?"},
                          {"role": "assistant", "content": [
                              b.model_dump(exclude_none=True) for b in m.content]},
                          {"role": "user", "content": "¿Seguro?"}]
    m2 = an.beta.messages.create(messages=history, **kwargs)
    assert [b.type for b in m2.content] == ["text"]  # past the end: the answer again


def test_messages_unreachable_server_and_missing_beta(an: anthropic.Anthropic,
                                                      mcp_url: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    toolset = [{"type": "mcp_toolset", "mcp_server_name": "reactlab"}]
    with pytest.raises(anthropic.BadRequestError) as e:
        an.beta.messages.create(model="correcto", max_tokens=64, betas=[ANTHROPIC_BETA],
                                messages=[{"role": "user", "content": QUESTION}],
                                mcp_servers=mcp_servers(url), tools=toolset)  # type: ignore[arg-type]
    assert e.value.body == {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "Connection error while communicating with MCP server."}}
    with pytest.raises(anthropic.BadRequestError) as e2:
        an.beta.messages.create(model="correcto", max_tokens=64,
                                messages=[{"role": "user", "content": QUESTION}],
                                mcp_servers=mcp_servers(mcp_url), tools=toolset)  # type: ignore[arg-type]
    assert ANTHROPIC_BETA in str(e2.value)
    # the connector's first version has no toolsets (its servers carry their own
    # tool_configuration), the current one configures every server with one
    with pytest.raises(anthropic.BadRequestError) as e3:
        an.beta.messages.create(model="correcto", max_tokens=64, betas=[ANTHROPIC_BETA_2025_04],
                                messages=[{"role": "user", "content": QUESTION}],
                                mcp_servers=mcp_servers(mcp_url), tools=toolset)  # type: ignore[arg-type]
    assert "mcp_toolset needs the beta header" in str(e3.value)
    with pytest.raises(anthropic.BadRequestError) as e4:
        an.beta.messages.create(model="correcto", max_tokens=64, betas=[ANTHROPIC_BETA],
                                messages=[{"role": "user", "content": QUESTION}],
                                mcp_servers=mcp_servers(mcp_url))  # type: ignore[arg-type]
    assert "is not referenced by any mcp_toolset" in str(e4.value)


def test_messages_first_connector_version_honours_tool_configuration(
        an: anthropic.Anthropic, mcp_url: str) -> None:
    """Beta ``mcp-client-2025-04-04``: ``tool_configuration.allowed_tools: [precio]`` lets
    the model use ``precio`` only: the two closes are hosted calls, and the script's call
    to the calculator is left to the client (a ``tool_use`` block ends the answer), as
    for any tool the hosted server does not serve."""
    servers = [{**mcp_servers(mcp_url)[0],
                "tool_configuration": {"enabled": True, "allowed_tools": ["precio"]}}]
    r = an.beta.messages.create(model="correcto", max_tokens=512,
                                betas=[ANTHROPIC_BETA_2025_04],
                                messages=[{"role": "user", "content": QUESTION}],
                                mcp_servers=servers)  # type: ignore[arg-type]
    used = [b for b in r.content if isinstance(b, BetaMCPToolUseBlock)]
    assert [b.name for b in used] == ["precio", "precio"]
    assert [(b.type, getattr(b, "name", None)) for b in r.content][-1] == \
        ("tool_use", "calculadora") and r.stop_reason == "tool_use"


def test_messages_streamed_equals_plain(an: anthropic.Anthropic, mcp_url: str) -> None:
    kwargs: dict[str, Any] = {
        "model": "correcto", "max_tokens": 512, "betas": [ANTHROPIC_BETA],
        "messages": [{"role": "user", "content": QUESTION}],
        "mcp_servers": mcp_servers(mcp_url),
        "tools": [{"type": "mcp_toolset", "mcp_server_name": "reactlab"}]}
    plain = an.beta.messages.create(**kwargs)
    with an.beta.messages.stream(**kwargs) as stream:
        final = stream.get_final_message()
    assert final.model_dump(exclude={"container", "context_management"}) == plain.model_dump(
        exclude={"container", "context_management"})


# --- a client's own hosted-MCP path -----------------------------------------------------


def test_the_agents_sdk_hosted_mcp_tool_runs_offline(sim: ServerThread, mcp_url: str,
                                                     toolbox: ToolBox, loopback: None) -> None:
    """What the simulator is for: a client's hosted-MCP path tested offline. The OpenAI
    Agents SDK's own ``HostedMCPTool`` on its Responses model, pointed at the simulator:
    the SDK parses the listing and the calls into its own run items and ends with the
    script's answer, every result the project's tool's in process."""
    import asyncio

    from agents import (
        Agent,
        HostedMCPTool,
        MCPListToolsItem,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
        ToolCallItem,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    async def run() -> Any:
        client = AsyncOpenAI(base_url=sim.url + "/v1", api_key="sk-test", max_retries=0)
        try:
            agent = Agent(name="reactlab", model=OpenAIResponsesModel(
                model="correcto", openai_client=client),
                tools=[HostedMCPTool(tool_config=mcp_tool(mcp_url))])
            return await Runner.run(agent, QUESTION, max_turns=3,
                                    run_config=RunConfig(tracing_disabled=True))
        finally:
            await client.close()

    result = asyncio.run(run())
    listings = [i for i in result.new_items if isinstance(i, MCPListToolsItem)]
    calls = [i.raw_item for i in result.new_items
             if isinstance(i, ToolCallItem) and isinstance(i.raw_item, McpCall)]
    assert len(listings) == 1 and [t.name for t in listings[0].raw_item.tools] == list(TOOLS)
    assert [c.name for c in calls] == ["precio", "precio", "calculadora"]
    for c in calls:
        assert (c.output, False) == in_process(toolbox, c.name, json.loads(c.arguments))
    pct = json.loads(calls[2].output or "")["resultado"]
    assert result.final_output == (f"El cierre de BUSI varió un {pct:.2f} % entre "
                                   "2024-03-15 y 2024-03-22.")


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_pydantic_ais_native_mcp_runs_offline(api: str, sim: ServerThread, mcp_url: str,
                                               toolbox: ToolBox, loopback: None) -> None:
    """pydantic-ai's native MCP (``MCP(url=..., native=True, local=False)``: the provider
    runs the server) on its Responses and Anthropic models, pointed at the simulator. On
    Messages it sends the connector's first version (beta ``mcp-client-2025-04-04``, no
    ``mcp_toolset``), which the simulator serves as the API does; the run ends with the
    script's answer, computed from the hosted calls' results."""
    import asyncio

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import MCP
    from pydantic_ai.messages import NativeToolCallPart, NativeToolReturnPart

    async def run() -> Any:
        if api == "responses":
            from openai import AsyncOpenAI
            from pydantic_ai.models.openai import OpenAIResponsesModel
            from pydantic_ai.providers.openai import OpenAIProvider

            oa_client = AsyncOpenAI(base_url=sim.url + "/v1", api_key="sk-test", max_retries=0)
            model: Any = OpenAIResponsesModel(
                "correcto", provider=OpenAIProvider(openai_client=oa_client))
            client: Any = oa_client
        else:
            from anthropic import AsyncAnthropic
            from pydantic_ai.models.anthropic import AnthropicModel
            from pydantic_ai.providers.anthropic import AnthropicProvider

            an_client = AsyncAnthropic(base_url=sim.url, api_key="sk-test", max_retries=0)
            model = AnthropicModel("correcto",
                                   provider=AnthropicProvider(anthropic_client=an_client))
            client = an_client
        try:
            agent = Agent(model, capabilities=[MCP(url=mcp_url, id="reactlab", native=True,
                                                   local=False)])
            return await agent.run(QUESTION)
        finally:
            await client.close()

    result = asyncio.run(run())
    parts = [p for m in result.all_messages() for p in m.parts]
    calls = [p for p in parts if isinstance(p, NativeToolCallPart)]
    returns = [p for p in parts if isinstance(p, NativeToolReturnPart)]
    called = [(c.args["tool_name"], c.args["tool_args"]) for c in calls
              if isinstance(c.args, dict) and c.args.get("action") == "call_tool"]
    assert [name for name, _ in called] == ["precio", "precio", "calculadora"], parts
    assert [args for _, args in called[:2]] == BUSI
    assert len(returns) == len(calls) and all(r.tool_name == "mcp_server:reactlab"
                                              for r in returns), parts
    # the answer from the project's own tools, called in process with the same arguments
    pct = json.loads(in_process(toolbox, *called[2])[0])["resultado"]
    assert result.output == (f"El cierre de BUSI varió un {pct:.2f} % entre 2024-03-15 y "
                             "2024-03-22.")
