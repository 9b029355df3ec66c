"""The scripted model speaks any agent's protocol (docs/simulators.md, "Any agent's
protocol"): for every agent — the lesson's loop, the four built-in frameworks and a
text-history agent that no framework wrote (examples/plugin/reactlab_example/agent.py:
results as user text, calls never echoed, its own answer tool ``respuesta_final``) —
on the scripted lesson scenarios, every tool execution is a tool call of the trace and
every call the trace says ran is an execution (the wire drops no call that ran).

The runs go in process through the runner (no Snakemake). The fast slice: every agent on
the scenarios that stress the protocol (a parallel step, a validation error, an unknown
tool, broken JSON arguments, a branch on what a tool returned, the loop). Every agent on
every scripted scenario of the default matrix is the ``e2e`` test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from reactlab import config
from reactlab import trace as tracemod
from reactlab.analysis import verify
from reactlab.runner import run_to_trace
from reactlab.tools import ToolBox

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "plugin"

#: every agent, as shipped: the lesson loop and one per framework
AGENTS = ("lesson", "openai_agents", "pydantic_ai", "langchain", "inspect_react", "text")
#: the scripted scenarios of the default matrix by task (model-only and MCP ones aside)
SCENARIOS = {
    "variacion_busi": ("correcto", "herramienta_equivocada", "argumentos_inventados",
                       "bucle", "bucle_sin_limite", "bucle_presupuesto",
                       "cierre_como_porcentaje", "herramienta_desconocida", "json_invalido",
                       "fallo_429_recupera", "fallo_servidor_persistente",
                       "fallo_respuesta_rota"),
    "cierre_acme": ("cierre_inventado", "ticker_inexistente"),
    "noticias_busi": ("titular_fiel", "titular_inventado"),
    "noticias_busi_abril": ("inyeccion_ignora", "inyeccion_ignora_defensas",
                            "inyeccion_obedece", "inyeccion_obedece_delimitada",
                            "inyeccion_obedece_alcance", "inyeccion_obedece_verificador",
                            "inyeccion_obedece_defensas"),
}
FAST = (("variacion_busi", "correcto"), ("variacion_busi", "argumentos_inventados"),
        ("variacion_busi", "herramienta_desconocida"), ("variacion_busi", "json_invalido"),
        ("variacion_busi", "bucle"), ("noticias_busi_abril", "inyeccion_obedece"))


def _register_text_agent() -> Any:
    if str(PLUGIN) not in sys.path:
        sys.path.insert(0, str(PLUGIN))
    from reactlab_example.agent import TEXT_AGENT

    from reactlab.frameworks.registry import register

    return register(TEXT_AGENT)


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    _register_text_agent()
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["agents"] = {**raw.get("agents", {}), "text": {"framework": "text_react"}}
    raw["matrix"] += [{"tasks": [task], "backends": ["openai_chat"],
                       "scenarios": list(scenarios), "agents": list(AGENTS)}
                      for task, scenarios in SCENARIOS.items()]
    return config.parse(raw)


class Logged(ToolBox):
    """The session's tools, logging every execution (the ground truth of what ran)."""

    def __init__(self, base: ToolBox) -> None:
        self.__dict__.update(base.__dict__)
        self.log: list[tuple[str, Any]] = []

    def execute(self, name: str, args: object, allowed: Any = None) -> dict[str, Any]:
        self.log.append((name, args))
        return super().execute(name, args, allowed)


def _canonical(name: str, args: Any) -> tuple[str, str]:
    return name, json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def _spec(cfg: config.Config, key: str) -> Any:
    return next(r for r in cfg.runs if r.key == key)


def run(cfg: config.Config, toolbox: ToolBox, tmp_path: Path, task: str, scenario: str,
        agent: str) -> tuple[tracemod.Trace, list[tuple[str, Any]]]:
    """The trace of one run, and the tool executions it made."""
    run_scenario = scenario if agent == "lesson" else f"{scenario}__{agent}"
    spec = _spec(cfg, f"{task}/openai_chat/{run_scenario}")
    logged = Logged(toolbox)
    out = tmp_path / f"{task}-{run_scenario}.jsonl"
    run_to_trace(spec, logged, out)
    return tracemod.read(out), logged.log


def check_calls(tr: tracemod.Trace, executed: list[tuple[str, Any]], agent: str) -> None:
    """Every execution is a call of the trace, with unique ids. On a framework the calls
    the trace says ran (status ok or error: the tool's own result) are exactly the
    executions, and a call it says did not run (invalid, unknown) never reached the
    tools. The lesson's loop answers some calls itself (arguments that are not JSON, a
    call it has answered already): its executions are a subsequence of its calls."""
    calls = tr.tool_calls()
    traced = [_canonical(c.name, c.arguments) for c in calls]
    ran = [_canonical(n, a) for n, a in executed]
    assert tr.end.calls == len(calls)
    assert len({c.id for c in calls}) == len(calls), "call ids repeat in the run"
    if agent == "lesson":
        left = iter(traced)
        assert all(call in left for call in ran), (tr.run, ran, traced)
        return
    # as multisets: a framework may run one turn's calls concurrently (LangChain does)
    assert sorted(_canonical(c.name, c.arguments) for c in calls
                  if c.status in ("ok", "error")) == sorted(ran), tr.run


def _cases(pairs: Any) -> list[Any]:
    return [pytest.param(task, scenario, agent, id=f"{scenario}-{agent}")
            for task, scenario in pairs for agent in AGENTS]


@pytest.mark.parametrize(("task", "scenario", "agent"), _cases(FAST))
def test_every_execution_is_a_traced_call(cfg: config.Config, toolbox: ToolBox,
                                          tmp_path: Path, task: str, scenario: str,
                                          agent: str) -> None:
    tr, executed = run(cfg, toolbox, tmp_path, task, scenario, agent)
    check_calls(tr, executed, agent)


@pytest.mark.e2e
@pytest.mark.parametrize(("task", "scenario", "agent"), _cases(
    (t, s) for t, ss in SCENARIOS.items() for s in ss if (t, s) not in FAST))
def test_every_execution_is_a_traced_call_everywhere(
        cfg: config.Config, toolbox: ToolBox, tmp_path: Path, task: str, scenario: str,
        agent: str) -> None:
    tr, executed = run(cfg, toolbox, tmp_path, task, scenario, agent)
    check_calls(tr, executed, agent)


def test_a_text_history_agent_answers_through_its_own_tool(
        cfg: config.Config, toolbox: ToolBox, tmp_path: Path) -> None:
    tr, executed = run(cfg, toolbox, tmp_path, "variacion_busi", "correcto", "text")
    assert (tr.end.termination, tr.end.to_json()["ending"]) == ("answer", "respuesta_final")
    assert tr.end.answer == "El cierre de BUSI varió un 6.45 % entre 2024-03-15 y 2024-03-22."
    # the calls of its three turns, each with its own id (its history holds no call item)
    calls = tr.tool_calls()
    assert [(c.name, c.id, c.status) for c in calls] == [
        ("precio", "call_0_0", "ok"), ("precio", "call_0_1", "ok"),
        ("calculadora", "call_1_0", "ok")]
    assert len(executed) == 3
    findings = verify.verify(tr.header.spec["question"], tr.end.answer, calls)
    assert verify.verdict(findings), findings
    # what the model read: results in user text, the model's turns as assistant text
    body = json.loads(_last_body(cfg, toolbox))
    roles = [m["role"] for m in body["messages"]]
    assert "tool" not in roles and not any(m.get("tool_calls") for m in body["messages"])


def _last_body(cfg: config.Config, toolbox: ToolBox) -> str:
    """The last request body of the text agent's ``correcto`` run, off the wire."""
    from reactlab.frameworks.kit import Kit, Wire
    from reactlab.frameworks.wire import _tools

    spec = _spec(cfg, "variacion_busi/openai_chat/correcto__text")
    wire = Wire(spec, 40)
    executed: list[Any] = []
    _register_text_agent().run(Kit(spec, wire, _tools(spec, toolbox, executed), executed))
    return wire.exchanges[-1].body.decode("utf-8")


#: how the guardrail scenarios end for the built-in frameworks as shipped (their traces):
#: the loop bounded by a cap, the recoverable mistakes and faults answered as the lesson's
#: loop answers, a server that keeps failing or a broken body a framework error
LOOPS = ("bucle", "bucle_presupuesto")
ANSWERED = ("herramienta_desconocida", "argumentos_inventados", "json_invalido",
            "fallo_429_recupera")
FAILED = {"fallo_servidor_persistente": "InternalServerError",
          "fallo_respuesta_rota": "JSONDecodeError"}


@pytest.mark.parametrize("scenario", [*LOOPS, *ANSWERED, *FAILED])
def test_the_guardrail_scenarios_end_as_for_the_other_agents(
        cfg: config.Config, toolbox: ToolBox, tmp_path: Path, scenario: str) -> None:
    text, executed = run(cfg, toolbox, tmp_path, "variacion_busi", scenario, "text")
    check_calls(text, executed, "text")
    ending = (text.end.termination, text.end.to_json()["ending"])
    if scenario in LOOPS:
        # its own cap (as shipped: 10 turns), as openai_agents' MaxTurnsExceeded
        assert ending == ("framework_limit", "TurnLimit") and text.end.steps == 10
    elif scenario in FAILED:
        # the SDK's error, as openai_agents' (the same SDK) and the others' own
        assert ending == ("framework_error", FAILED[scenario])
    else:
        lesson, _ = run(cfg, toolbox, tmp_path, "variacion_busi", scenario, "lesson")
        assert ending == ("answer", "respuesta_final")
        assert text.end.answer == lesson.end.answer
        assert [(c.name, c.status) for c in text.tool_calls()] == [
            (c.name, c.status) for c in lesson.tool_calls()]


def test_the_wire_drops_only_calls_that_never_ran() -> None:
    """The kit's executions are the ground truth of frameworks/wire.py: an answer whose
    call ids a later answer repeats is dropped (Inspect's probe, whose answer it
    discards) only when none of its calls ran."""
    from reactlab.backends import parsed_call
    from reactlab.frameworks.wire import _drop_discarded

    def answer(*calls: tuple[str, str, dict[str, Any]]) -> Any:
        return ([parsed_call(i, n, a) for i, n, a in calls], "", None)

    a, b = {"ticker": "BUSI", "fecha": "2024-03-15"}, {"ticker": "BUSI", "fecha": "2024-03-22"}
    x = {"expresion": "1+1"}
    ran = [("precio", a, {"resultado": 1}), ("precio", b, {"resultado": 2}),
           ("calculadora", x, {"resultado": 3})]
    # a history of text with the ids numbered as before (call_0_0 every turn): all ran
    text = [answer(("call_0_0", "precio", a), ("call_0_1", "precio", b)),
            answer(("call_0_0", "calculadora", x)), ([], "respuesta", None)]
    kept, executions = _drop_discarded(text, [{}, {}, {}], ran)
    assert [len(k[0]) for k in kept] == [2, 1, 0]
    assert executions == {(0, 0): 0, (0, 1): 1, (1, 0): 2}
    # a probe's answer, discarded by the framework: the same calls again, one execution each
    probe = [answer(("call_0_0", "precio", a), ("call_0_1", "precio", b)),
             answer(("call_0_0", "precio", a), ("call_0_1", "precio", b)),
             answer(("call_2_0", "calculadora", x))]
    sent = [{}, {}, {"call_0_0": "1", "call_0_1": "2"}]
    kept, executions = _drop_discarded(probe, sent, ran)
    assert [len(k[0]) for k in kept] == [0, 2, 1]
    assert executions == {(1, 0): 0, (1, 1): 1, (2, 0): 2}


def test_a_text_history_is_read_on_every_api(cfg: config.Config) -> None:
    """The three simulated APIs read tool results from user text when the conversation
    carries no result items, number each turn's calls apart, answer through an offered
    answer tool, and play one call per turn from the results read."""
    from reactlab.simulate import ScriptedPolicy, anthropic_messages, openai_chat, openai_responses

    spec = _spec(cfg, "variacion_busi/openai_chat/correcto")
    policy = ScriptedPolicy.of_run(spec)
    schema = {"type": "object", "properties": {"respuesta": {"type": "string"}},
              "required": ["respuesta"]}
    task = [{"type": "object", "properties": {"expresion": {"type": "string"}},
             "required": ["expresion"]}]
    said = ["Acción: precio(BUSI, 2024-03-15)", "Acción: precio(BUSI, 2024-03-22)"]
    seen = ['Observación: {"resultado": {"cierre": 26.19}}',
            'Observación: {"resultado": {"cierre": 27.88}}',
            'Resultado de calculadora: {"resultado": 6.4528}']
    history = [("user", spec.question), ("assistant", said[0]), ("user", seen[0]),
               ("assistant", said[1]), ("user", seen[1])]

    def chat(turns: Any, **extra: Any) -> Any:
        body = {"model": "correcto", "messages": [{"role": r, "content": c} for r, c in turns],
                "tools": [{"type": "function", "function": {"name": "calculadora",
                                                            "parameters": task[0]}},
                          {"type": "function", "function": {"name": "respuesta_final",
                                                            "parameters": schema}}], **extra}
        return openai_chat.respond(policy, body)[1]["choices"][0]["message"]["tool_calls"]

    # one call per turn: the second price after one result read, numbered apart
    calls = chat(history[:3], parallel_tool_calls=False)
    assert [(c["id"], json.loads(c["function"]["arguments"])["fecha"]) for c in calls] == [
        ("call_1_0", "2024-03-22")]
    calls = chat(history, parallel_tool_calls=False)
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("call_2_0", "calculadora")]
    assert json.loads(calls[0]["function"]["arguments"]) == {
        "expresion": "(27.88/26.19 - 1)*100"}
    # the answer, through the offered tool that is not the task's
    done = [*history, ("assistant", "Acción: calculadora"), ("user", seen[2])]
    answer = {"respuesta": "El cierre de BUSI varió un 6.45 % entre 2024-03-15 y "
                           "2024-03-22."}
    calls = chat(done)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in calls] == [("respuesta_final", answer)]
    # the same conversation on the Responses and Messages APIs
    _, r = openai_responses.respond(policy, {
        "model": "correcto", "input": [{"role": r, "content": c} for r, c in done],
        "tools": [{"type": "function", "name": "respuesta_final", "parameters": schema}]})
    assert [(o["name"], json.loads(o["arguments"])) for o in r["output"]] == [
        ("respuesta_final", answer)]
    _, m = anthropic_messages.respond(policy, {
        "model": "correcto", "max_tokens": 100,
        "messages": [{"role": r, "content": [{"type": "text", "text": c}]} for r, c in done],
        "tools": [{"name": "respuesta_final", "input_schema": schema}]})
    assert [(b["name"], b["input"]) for b in m["content"]] == [("respuesta_final", answer)]
    # ids: each turn's calls apart, though the history holds no call item
    _, m = anthropic_messages.respond(policy, {
        "model": "correcto", "max_tokens": 100, "tools": [{"name": "calculadora",
                                                           "input_schema": task[0]}],
        "messages": [{"role": "user", "content": spec.question},
                     {"role": "assistant", "content": said[0]},
                     {"role": "user", "content": seen[0] + "\n" + seen[1]}]})
    assert [(b["id"], b["name"]) for b in m["content"]] == [("toolu_1_0", "calculadora")]


def test_a_tool_less_request_gets_no_calls_unless_the_config_withholds_the_tools(
        cfg: config.Config, loopback: None) -> None:
    """A request that offers no tools is answered in text on every API, in process and
    over the served simulator, as a real API answers it; only a config that withholds the
    definitions from the wire (``agent.send_tools: false``, the lesson's overlay) gets the
    script's calls all the same."""
    import httpx

    from reactlab.simulate import ScriptedPolicy, anthropic_messages, openai_chat, openai_responses
    from reactlab.simulate.server import ServerThread

    question = [{"role": "user", "content": "¿Cuánto cambió BUSI?"}]

    def kinds(policy: ScriptedPolicy) -> list[str]:
        _, r = openai_responses.respond(policy, {"model": "correcto", "input": question})
        _, c = openai_chat.respond(policy, {"model": "correcto", "messages": question})
        _, m = anthropic_messages.respond(policy, {"model": "correcto", "max_tokens": 9,
                                                   "messages": question})
        return [r["output"][0]["type"], c["choices"][0]["finish_reason"], m["stop_reason"]]

    sent = _spec(cfg, "variacion_busi/openai/correcto")
    assert kinds(ScriptedPolicy.of_run(sent)) == ["message", "stop", "end_turn"]
    withheld = config.load(ROOT / "config.yaml", [ROOT / "workflow/configs/lesson.yaml"])
    spec = withheld.run("variacion_busi", "openai", "correcto")
    assert kinds(ScriptedPolicy.of_run(spec)) == ["function_call", "tool_calls", "tool_use"]
    for conf, expected in ((cfg, "message"), (withheld, "function_call")):
        with ServerThread(conf) as server:
            got = httpx.post(server.url + "/v1/responses",
                             json={"model": "correcto", "input": question}).json()
            assert got["output"][0]["type"] == expected
            if conf is cfg:  # docs/simulators.md's example, as written, on this server
                doc = (ROOT / "docs" / "simulators.md").read_text(encoding="utf-8")
                code = doc.split("```python\n", 1)[1].split("```", 1)[0]
                scope: dict[str, Any] = {}
                exec(code.replace("http://127.0.0.1:8000", server.url), scope)
                assert [o.name for o in scope["r"].output] == ["calculadora"]


#: the table of docs/agents.md ("An agent need not speak the tool-message protocol"):
#: how each guardrail scenario ends for every agent, generated from their traces here
DOCS_MARK = "<!-- generated: tests/test_agent_protocols.py guardrail_table -->"
GUARDRAILS = ("correcto", *LOOPS, *ANSWERED, *FAILED)


def guardrail_table(cfg: config.Config, toolbox: ToolBox, tmp_path: Path) -> str:
    """One row per scenario of :data:`GUARDRAILS`, one column per agent: how its run
    ended (termination, ending) and whether the verifier passed it."""
    lines = ["| scenario | " + " | ".join(AGENTS) + " |",
             "|---|" + "---|" * len(AGENTS)]
    for scenario in GUARDRAILS:
        cells = []
        for agent in AGENTS:
            tr, _ = run(cfg, toolbox, tmp_path, "variacion_busi", scenario, agent)
            end = tr.end.to_json()
            ok = verify.verdict(verify.verify(tr.header.question, tr.end.answer,
                                              tr.tool_calls(), tr.end.termination))
            cells.append(f"{end['termination']} ({end.get('ending') or '-'})"
                         + (" ✓" if ok else ""))
        lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def docs_table() -> str:
    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    after = text.split(DOCS_MARK, 1)[1].lstrip("\n")
    return after.split("\n\n", 1)[0].rstrip("\n")


@pytest.mark.e2e
def test_the_docs_table_of_guardrail_endings_is_what_the_agents_do(
        cfg: config.Config, toolbox: ToolBox, tmp_path: Path) -> None:
    assert guardrail_table(cfg, toolbox, tmp_path) == docs_table()
