"""More kinds of real clients against the simulator server, and the table of what works.

Over loopback, the clients a researcher would point at ``reactlab serve``:

* an evaluation framework — inspect-ai: its ``openai`` provider in Responses mode
  (``responses_api=True``) and in Chat Completions mode, its ``anthropic`` provider,
  each plain and streamed (``streaming=False/True``), one ``eval`` per mode running the
  five scenarios as five models;
* an application framework — LangChain's ``ChatOpenAI`` (``use_responses_api=True`` /
  ``False``) and ``ChatAnthropic``, ``invoke`` and ``stream``, in the tool loop its docs
  show (tool errors and invalid calls sent back as ``ToolMessage``);
* the SDKs' own helpers: the anthropic SDK's ``beta.messages.tool_runner``, the openai
  SDK's ``responses.parse`` and ``responses.stream``;

on the scenarios correcto, bucle, json_invalido, fallo_429_recupera and
herramienta_desconocida. Every case is classified from what happened — the client's
final answer against the answer the lesson's loop computes in process, the client's own
limit stopping ``bucle``, and the statuses and event streams the server logged — and
must be the outcome the scenario calls for.

The last test renders the outcomes as the table under "Clients" in docs/simulators.md
and checks the page holds it (``REACTLAB_WRITE_CLIENTS_TABLE=1`` writes it instead):
the table is the test results, never written by hand. inspect-ai's first ``eval`` in a
process costs ≈ 12 s (its imports and set-up), so the module is marked ``slow``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reactlab import trace
from reactlab.config import RunSpec, load
from reactlab.runner import run_to_trace
from reactlab.simulate.server import ServerThread

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = load(ROOT / "config.yaml")
TASK = "variacion_busi"
QUESTION = SHIPPED.raw["tasks"][TASK]["question"]
TIMEOUT = 10.0
LIMIT = 6  # model requests a client may make (bucle must be stopped by the client)
SCENARIOS = ["correcto", "bucle", "json_invalido", "fallo_429_recupera",
             "herramienta_desconocida"]
APIS = ["responses", "chat", "messages"]
MODES = ["plain", "stream"]
PATHS = {"responses": "/v1/responses", "chat": "/v1/chat/completions",
         "messages": "/v1/messages"}
DOC = ROOT / "docs" / "simulators.md"
START, END = "<!-- clients-table:start -->", "<!-- clients-table:end -->"


# --- what the server saw --------------------------------------------------------------


@dataclass
class Exchange:
    path: str
    status: int
    model: str | None
    stream: bool


class Wire(logging.Handler):
    """The server's request log (one INFO line per request), parsed."""

    def __init__(self, seen: list[Exchange] | None = None) -> None:
        super().__init__(logging.INFO)
        self.seen: list[Exchange] = [] if seen is None else seen

    def emit(self, record: logging.LogRecord) -> None:
        m = re.match(r"(\S+) (\S+) -> (\d+)(.*)", record.getMessage())
        if m is None:
            return
        model = re.search(r'model="([^"]*)"', m.group(4))
        self.seen.append(Exchange(m.group(2), int(m.group(3)),
                                  model.group(1) if model else None,
                                  "stream=true" in m.group(4)))

    def of(self, scenario: str, path: str) -> list[Exchange]:
        return [e for e in self.seen if e.model == scenario and e.path == path]

    def settle(self, srv: ServerThread) -> None:
        """Wait until every request so far is logged: the server logs a request after
        sending its answer, so a marker request's line comes after theirs."""
        import httpx

        before = len(self.seen)
        httpx.get(srv.url + "/healthz", timeout=TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while not any(e.path == "/healthz" for e in self.seen[before:]):
            if time.monotonic() > deadline:
                raise AssertionError("the server did not log the marker request")
            time.sleep(0.01)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[ServerThread, Wire]]:
    wire = Wire()
    logger = logging.getLogger("reactlab.simulate.server")
    level = logger.level
    logger.addHandler(wire)
    logger.setLevel(logging.INFO)
    srv = ServerThread(SHIPPED, task=TASK)
    try:
        srv.start()
        yield srv, wire
    finally:
        srv.stop()
        logger.removeHandler(wire)
        logger.setLevel(level)


@pytest.fixture(scope="module")
def lesson_answer(tmp_path_factory: pytest.TempPathFactory, toolbox: Any) -> str:
    """The answer the lesson's loop computes in process for correcto (the expectation)."""
    spec: RunSpec = SHIPPED.run(TASK, "openai", "correcto")
    path = tmp_path_factory.mktemp("lesson") / "correcto.jsonl"
    run_to_trace(spec, toolbox, path)
    answer = trace.read(path).end.answer
    assert answer is not None and "6.45 %" in answer
    return answer


def _tool(toolbox: Any, name: str, **args: Any) -> str:
    """A tool as the lesson runs it: errors come back as data, JSON as the APIs get it."""
    return json.dumps(toolbox.execute(name, args))


# --- outcomes and the table -------------------------------------------------------------

#: (client, api, mode, scenario) -> outcome, filled by the tests, rendered by the last one.
OUTCOMES: dict[tuple[str, str, str, str], str] = {}


def classify(scenario: str, answer: str | None, limited: bool, lesson: str,
             exchanges: list[Exchange], streamed: bool, ended: str | None = None) -> str:
    """The outcome of one run, from what happened (not from what was expected).

    ``ended``: how the client ended without an answer or a limit, when it says so (an
    exception it raised, a stop reason it does not go on from).
    """
    statuses = [e.status for e in exchanges]  # a client's probes count (inspect-ai's do)
    if not exchanges:
        return "no request reached the server"
    if any(s >= 500 for s in statuses):
        return f"server error {statuses}"
    oks = [e for e in exchanges if e.status == 200]
    n_streamed = sum(e.stream for e in oks)
    if streamed and not (oks and oks[-1].stream):
        return "not streamed"
    if not streamed and n_streamed:
        return "streamed although plain was asked"
    requests = f"{len(oks)} request{'' if len(oks) == 1 else 's'}" + (
        f", {n_streamed} streamed" if streamed and n_streamed != len(oks) else "")
    n429 = statuses.count(429)
    retried = f" after {n429} × 429 retried" if n429 else ""
    if answer == lesson and set(statuses) - {429} == {200} and statuses[-1] == 200:
        return f"works: the lesson's answer{retried} ({requests})"
    if limited and answer in (None, "") and set(statuses) == {200}:
        return f"works: the client's limit stops the loop ({requests})"
    if ended is not None and set(statuses) == {200}:
        return f"ends: {ended} ({requests})"
    return f"fails: answer {str(answer)[:60]!r}, statuses {statuses}"


#: What each scenario calls for (the request count, shown in the table, is the client's).
EXPECTED = {"correcto": "works: the lesson's answer (",
            "bucle": "works: the client's limit stops the loop (",
            "json_invalido": "works: the lesson's answer (",
            "fallo_429_recupera": "works: the lesson's answer after ",
            "herramienta_desconocida": "works: the lesson's answer ("}


#: Where a client does what the real API's shape makes it do instead (client, scenario):
#: the anthropic tool runner stops on a stop_reason other than tool_use, so the call cut
#: off at max_tokens ends its run; the openai parse / stream helpers parse a strict
#: (pydantic) tool's arguments and raise on text that is not JSON.
KNOWN = {("anthropic SDK 2.14 beta.messages.tool_runner", "json_invalido"):
         "ends: stop_reason max_tokens: the runner does not run the cut-off call (",
         ("openai SDK 3.57 responses.parse", "json_invalido"):
         "ends: the client raises ValidationError on the invalid arguments (",
         ("openai SDK 3.57 responses.stream", "json_invalido"):
         "ends: the client raises ValidationError on the invalid arguments ("}


def check(key: tuple[str, str, str, str], outcome: str) -> None:
    OUTCOMES[key] = outcome
    expected = KNOWN.get((key[0], key[3]), EXPECTED[key[3]])
    assert outcome.startswith(expected), outcome


# --- inspect-ai -------------------------------------------------------------------------


def _inspect_tools(toolbox: Any) -> list[Any]:
    from inspect_ai.tool import tool

    @tool
    def precio() -> Any:
        async def execute(ticker: str, fecha: str) -> str:
            """Precio de cierre de un ticker en una fecha (AAAA-MM-DD).

            Args:
                ticker: el ticker.
                fecha: la fecha, AAAA-MM-DD.
            """
            return _tool(toolbox, "precio", ticker=ticker, fecha=fecha)

        return execute

    @tool
    def calculadora() -> Any:
        async def execute(expresion: str) -> str:
            """Evalúa una expresión aritmética.

            Args:
                expresion: la expresión.
            """
            return _tool(toolbox, "calculadora", expresion=expresion)

        return execute

    return [precio(), calculadora()]


@pytest.fixture(scope="module")
def inspect_runs(server: tuple[ServerThread, Wire], toolbox: Any,
                 tmp_path_factory: pytest.TempPathFactory,
                 lesson_answer: str) -> dict[tuple[str, str], dict[str, str]]:
    """{(api, mode): {scenario: outcome}}: one ``eval`` per API and mode, the five
    scenarios as five models (generate() with the tools loops until the model answers;
    ``message_limit`` is the client's limit)."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools

    srv, wire = server
    env = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-test",
           "INSPECT_DISPLAY": "none"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    log_dir = tmp_path_factory.mktemp("inspect")
    out: dict[tuple[str, str], dict[str, str]] = {}
    try:
        for api in APIS:
            for mode in MODES:
                task = Task(dataset=[Sample(input=QUESTION, target="6.45")],
                            solver=[use_tools(*_inspect_tools(toolbox)), generate()],
                            scorer=includes(), message_limit=2 * LIMIT + 2)
                args: dict[str, Any] = {"streaming": mode == "stream"}
                if api == "messages":
                    models, base = [f"anthropic/{s}" for s in SCENARIOS], srv.url
                else:
                    models, base = [f"openai/{s}" for s in SCENARIOS], srv.url + "/v1"
                    args["responses_api"] = api == "responses"
                start = len(wire.seen)
                logs = inspect_eval(task, model=models, model_base_url=base, model_args=args,
                                    max_tokens=500, display="none", log_dir=str(log_dir),
                                    max_retries=3, timeout=int(TIMEOUT))
                wire.settle(srv)
                exchanges = Wire(seen=wire.seen[start:])
                out[(api, mode)] = {}
                for log in logs:
                    scenario = log.eval.model.split("/", 1)[1]
                    sample = log.samples[0] if log.samples else None
                    if sample is None or log.status != "success":
                        outcome = f"fails: {log.status} {log.error!r:.120}"
                    else:
                        answer = sample.output.completion if sample.limit is None else None
                        outcome = classify(scenario, answer, sample.limit is not None,
                                           lesson_answer,
                                           exchanges.of(scenario, PATHS[api]),
                                           mode == "stream")
                    out[(api, mode)][scenario] = outcome
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
def test_inspect_ai(server: tuple[ServerThread, Wire], inspect_runs: dict[Any, Any],
                    loopback: None, api: str, mode: str, scenario: str) -> None:
    key = ("inspect-ai 0.3.285", api, mode, scenario)
    check(key, inspect_runs[(api, mode)][scenario])


# --- LangChain --------------------------------------------------------------------------


def _langchain_run(srv: ServerThread, toolbox: Any, api: str, scenario: str,
                   streamed: bool) -> tuple[str | None, bool]:
    """(final answer, stopped by the limit) of the tool loop LangChain's docs show."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def precio(ticker: str, fecha: str) -> str:
        """Precio de cierre de un ticker en una fecha (AAAA-MM-DD)."""
        return _tool(toolbox, "precio", ticker=ticker, fecha=fecha)

    @tool
    def calculadora(expresion: str) -> str:
        """Evalúa una expresión aritmética."""
        return _tool(toolbox, "calculadora", expresion=expresion)

    tools = {"precio": precio, "calculadora": calculadora}
    llm: Any
    if api == "messages":
        from langchain_anthropic import ChatAnthropic

        llm = ChatAnthropic(model=scenario, base_url=srv.url, api_key="sk-test",
                            max_tokens=500, timeout=TIMEOUT, max_retries=2)
    else:
        from langchain_openai import ChatOpenAI

        llm = ChatOpenAI(model=scenario, base_url=srv.url + "/v1", api_key="sk-test",
                         use_responses_api=api == "responses", timeout=TIMEOUT,
                         max_retries=2)
    bound = llm.bind_tools(list(tools.values()))
    messages: list[Any] = [HumanMessage(QUESTION)]
    for _ in range(LIMIT):
        if streamed:
            ai: Any = None
            for chunk in bound.stream(messages):
                ai = chunk if ai is None else ai + chunk
        else:
            ai = bound.invoke(messages)
        messages.append(ai)
        if not ai.tool_calls and not ai.invalid_tool_calls:
            return ai.text, False
        for call in ai.tool_calls:
            if call["name"] not in tools:
                content = json.dumps({"error": f"herramienta desconocida: {call['name']}"})
            else:
                try:
                    content = tools[call["name"]].invoke(call["args"])
                except Exception as exc:  # a validation error goes back to the model
                    content = f"Error: {exc}"
            messages.append(ToolMessage(content, tool_call_id=call["id"]))
        for bad in ai.invalid_tool_calls:
            messages.append(ToolMessage(f"Error: {bad.get('error')}",
                                        tool_call_id=bad["id"], status="error"))
    return None, True


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
def test_langchain(server: tuple[ServerThread, Wire], toolbox: Any, lesson_answer: str,
                   loopback: None, api: str, mode: str, scenario: str) -> None:
    srv, wire = server
    client = "LangChain ChatAnthropic 1.7.10" if api == "messages" else (
        "LangChain ChatOpenAI 1.7.4")
    key = (client, api, mode, scenario)
    start = len(wire.seen)
    answer, limited = _langchain_run(srv, toolbox, api, scenario, mode == "stream")
    wire.settle(srv)
    exchanges = Wire(seen=wire.seen[start:]).of(scenario, PATHS[api])
    check(key, classify(scenario, answer, limited, lesson_answer, exchanges,
                        mode == "stream"))


# --- the SDKs' helpers ------------------------------------------------------------------


def _anthropic_tool_runner(srv: ServerThread, toolbox: Any, scenario: str,
                           streamed: bool) -> tuple[str | None, bool, str | None]:
    import anthropic
    import httpx2
    from anthropic import beta_tool

    @beta_tool
    def precio(ticker: str, fecha: str) -> str:
        """Precio de cierre de un ticker en una fecha (AAAA-MM-DD).

        Args:
            ticker: el ticker.
            fecha: la fecha, AAAA-MM-DD.
        """
        return _tool(toolbox, "precio", ticker=ticker, fecha=fecha)

    @beta_tool
    def calculadora(expresion: str) -> str:
        """Evalúa una expresión aritmética.

        Args:
            expresion: la expresión.
        """
        return _tool(toolbox, "calculadora", expresion=expresion)

    with httpx2.Client(timeout=TIMEOUT) as http:
        client = anthropic.Anthropic(base_url=srv.url, api_key="sk-test", http_client=http,
                                     max_retries=2)
        runner = client.beta.messages.tool_runner(
            model=scenario, max_tokens=500, tools=[precio, calculadora],
            messages=[{"role": "user", "content": QUESTION}], max_iterations=LIMIT,
            stream=streamed)
        last: Any = None
        for item in runner:
            last = item.get_final_message() if streamed else item
    text = "".join(b.text for b in last.content if b.type == "text")
    limited = last.stop_reason == "tool_use"
    return (None if limited else text), limited, (
        f"stop_reason {last.stop_reason}: the runner does not run the cut-off call"
        if last.stop_reason == "max_tokens" else None)


def _openai_helpers(srv: ServerThread, toolbox: Any, scenario: str,
                    helper: str) -> tuple[str | None, bool, str | None]:
    """A tool loop with ``responses.parse`` (tools as pydantic models, arguments parsed
    by the SDK) or ``responses.stream`` (the SDK's stream helper)."""
    import httpx
    import openai
    from pydantic import BaseModel, ValidationError

    class precio(BaseModel):  # the tool is named after the class
        """Precio de cierre de un ticker en una fecha (AAAA-MM-DD)."""

        ticker: str
        fecha: str

    class calculadora(BaseModel):
        """Evalúa una expresión aritmética."""

        expresion: str

    tools = [openai.pydantic_function_tool(precio), openai.pydantic_function_tool(calculadora)]
    history: list[Any] = [{"role": "user", "content": QUESTION}]
    with httpx.Client(timeout=TIMEOUT) as http:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="sk-test", http_client=http,
                               max_retries=2)
        for _ in range(LIMIT):
            try:
                if helper == "parse":
                    r = client.responses.parse(model=scenario, input=history, tools=tools)
                else:
                    with client.responses.stream(model=scenario, input=history,
                                                 tools=tools) as stream:
                        for _event in stream:
                            pass
                        r = stream.get_final_response()
            except ValidationError as exc:
                return None, False, (f"the client raises {type(exc).__name__} on the "
                                     "invalid arguments")
            calls = [o for o in r.output if o.type == "function_call"]
            if not calls:
                return r.output_text, False, None
            history += [o.model_dump(exclude_none=True, exclude={"parsed_arguments"})
                        for o in r.output]
            for c in calls:
                try:
                    args = json.loads(c.arguments)
                except ValueError as exc:
                    out = f"Error: {exc}"
                else:
                    out = _tool(toolbox, c.name, **args)
                history.append({"type": "function_call_output", "call_id": c.call_id,
                                "output": out})
    return None, True, None


HELPERS = [("anthropic SDK 2.14 beta.messages.tool_runner", "messages", "plain"),
           ("anthropic SDK 2.14 beta.messages.tool_runner", "messages", "stream"),
           ("openai SDK 3.57 responses.parse", "responses", "plain"),
           ("openai SDK 3.57 responses.stream", "responses", "stream")]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize(("client", "api", "mode"), HELPERS, ids=lambda v: str(v))
def test_sdk_helpers(server: tuple[ServerThread, Wire], toolbox: Any, lesson_answer: str,
                     loopback: None, client: str, api: str, mode: str,
                     scenario: str) -> None:
    srv, wire = server
    start = len(wire.seen)
    if "tool_runner" in client:
        answer, limited, ended = _anthropic_tool_runner(srv, toolbox, scenario,
                                                        mode == "stream")
    else:
        answer, limited, ended = _openai_helpers(srv, toolbox, scenario,
                                                 client.rsplit(".", 1)[1])
    wire.settle(srv)
    exchanges = Wire(seen=wire.seen[start:]).of(scenario, PATHS[api])
    check((client, api, mode, scenario), classify(scenario, answer, limited, lesson_answer,
                                                  exchanges, mode == "stream", ended))


# --- the table --------------------------------------------------------------------------


def cell(outcome: str) -> str:
    """An outcome, shortened for the table (the legend above it in the docs says how)."""
    m = re.match(r"works: the lesson's answer(?: after (\d+) × 429 retried)? \((.*)\)$",
                 outcome)
    if m:
        return f"answer{f' after {m.group(1)}×429' if m.group(1) else ''} ({m.group(2)})"
    m = re.match(r"works: the client's limit stops the loop \((.*)\)$", outcome)
    if m:
        return f"limit ({m.group(1)})"
    return outcome.removeprefix("ends: ")


def render_table(outcomes: dict[tuple[str, str, str, str], str]) -> str:
    """The markdown table of the outcomes: a row per client × API × mode, a column per
    scenario."""
    api_names = {"responses": "Responses", "chat": "Chat Completions",
                 "messages": "Messages"}
    rows = sorted({k[:3] for k in outcomes},
                  key=lambda r: (r[0], APIS.index(r[1]), MODES.index(r[2])))
    lines = ["| client | API | mode | " + " | ".join(SCENARIOS) + " |",
             "|---|---|---|" + "---|" * len(SCENARIOS)]
    for client, api, mode in rows:
        cells = [cell(outcomes[(client, api, mode, s)]) if (client, api, mode, s) in outcomes
                 else "" for s in SCENARIOS]
        lines.append(f"| {client} | {api_names[api]} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def expected_cases() -> int:
    inspect_cases = len(APIS) * len(MODES) * len(SCENARIOS)
    return 2 * inspect_cases + len(HELPERS) * len(SCENARIOS)


def test_the_clients_table_in_the_docs_is_these_results() -> None:
    if len(OUTCOMES) != expected_cases():
        pytest.skip(f"{len(OUTCOMES)} of {expected_cases()} cases ran in this session")
    table = render_table(OUTCOMES)
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    if os.environ.get("REACTLAB_WRITE_CLIENTS_TABLE") == "1":
        from reactlab.core.io import write_text_atomic

        if START in text:
            head, rest = text.split(START, 1)
            text = head + START + "\n" + table + END + rest.split(END, 1)[1]
        else:
            text += f"\n{START}\n{table}{END}\n"
        DOC.parent.mkdir(exist_ok=True)
        write_text_atomic(DOC, text)
    assert START in text and END in text, f"{DOC} has no clients table markers"
    assert text.split(START, 1)[1].split(END, 1)[0].strip() == table.strip(), (
        "docs/simulators.md's clients table differs from these results; rerun with "
        "REACTLAB_WRITE_CLIENTS_TABLE=1 and review the diff")


def test_classify_is_not_vacuous() -> None:
    lesson = "El cierre de BUSI varió un 6.45 % entre 2024-03-15 y 2024-03-22."
    ok = [Exchange("/v1/messages", 200, "correcto", False)] * 3
    assert classify("correcto", lesson, False, lesson, ok, False) == (
        "works: the lesson's answer (3 requests)")
    assert classify("correcto", "otra", False, lesson, ok, False).startswith("fails")
    assert classify("correcto", lesson, False, lesson, ok, True) == "not streamed"
    assert classify("bucle", None, False, lesson, ok, False).startswith("fails")
    assert classify("correcto", lesson, False, lesson,
                    [Exchange("/v1/messages", 500, "correcto", False)], False).startswith(
        "server error")
