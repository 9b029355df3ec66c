"""The agent axis: a framework as the system under test, traced from the wire.

tests/toy_agent.py registers a toy framework in one module (as tests/toy_provider.py does
for providers); here the config crosses it with the lesson's scenarios on the simulated
Chat Completions API, the runner runs it, and the trace — built from the exchanges the
simulator saw — goes through the project's reader and verifier unchanged.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import tests.toy_agent
from reactlab import config
from reactlab import trace as tracemod
from reactlab.analysis import verify
from reactlab.core.errors import ConfigError
from reactlab.core.tokens import count
from reactlab.runner import run_to_trace

ROOT = Path(__file__).resolve().parents[1]


def agents_config(**agent_overrides: Any) -> dict[str, Any]:
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["agents"] = {**raw.get("agents", {}), "toy": {"framework": "toy_loop"},
                     "toy_capped": {"framework": "toy_loop", "capped": True},
                     "toy_stopped": {"framework": "toy_loop", "max_requests": 3,
                                     **agent_overrides}}
    raw["matrix"].append({"tasks": ["variacion_busi"], "backends": ["openai_chat"],
                          "scenarios": ["correcto", "bucle", "argumentos_inventados"],
                          "agents": ["lesson", "toy", "toy_capped", "toy_stopped"]})
    return raw


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return config.parse(agents_config())


def test_the_matrix_gains_an_agent_factor(cfg: config.Config) -> None:
    keys = {r.key for r in cfg.runs}
    assert "variacion_busi/openai_chat/correcto__toy" in keys
    assert "variacion_busi/openai_chat/bucle__toy_capped" in keys
    lesson = cfg.run("variacion_busi", "openai_chat", "correcto")
    assert lesson.framework is None and "framework" not in lesson.to_dict()
    # the lesson's runs keep their specs (and so their traces' bytes)
    plain = config.parse(config.load_yaml(ROOT / "config.yaml"))
    assert plain.run("variacion_busi", "openai_chat", "correcto").to_json() == lesson.to_json()
    toy = next(r for r in cfg.runs if r.key.endswith("correcto__toy_capped"))
    assert toy.framework is not None and toy.framework.capped
    assert toy.framework.max_requests == 40  # the schema's default


def run(cfg: config.Config, toolbox: Any, tmp_path: Path, scenario: str) -> tracemod.Trace:
    spec = next(r for r in cfg.runs if r.key == f"variacion_busi/openai_chat/{scenario}")
    out = tmp_path / f"{scenario}.jsonl"
    run_to_trace(spec, toolbox, out)
    return tracemod.read(out)


def test_a_framework_answers_and_the_verifier_reads_its_trace(
        cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    tr = run(cfg, toolbox, tmp_path, "correcto__toy")
    assert tr.end.termination == "answer" and tr.end.to_json()["ending"] == "final_output"
    assert tr.run["agent"] == "toy" and tr.run["scenario"] == "correcto__toy"
    assert [c.name for c in tr.tool_calls()] == ["precio", "precio", "calculadora"]
    assert all(c.status == "ok" for c in tr.tool_calls())
    # the result as the framework sent it back: its own json.dumps of the tool's result
    assert all(json.loads(c.sent or "") == c.result for c in tr.tool_calls())
    findings = verify.verify(tr.header.spec["question"], tr.end.answer, tr.tool_calls(),
                             tr.header.spec.get("params", {}))
    assert verify.verdict(findings), findings
    requests = tr.requests()
    assert len(requests) == 3 and requests[-1].cumulative_tokens == tr.end.tokens_sent
    assert all(r.tokens_sent > 0 for r in requests)


def test_a_loop_ends_by_the_frameworks_own_cap_or_the_hard_stop(
        cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    shipped = run(cfg, toolbox, tmp_path, "bucle__toy")
    assert (shipped.end.termination, shipped.end.to_json()["ending"]) == (
        "framework_limit", "TurnLimit")
    assert shipped.end.steps == 10  # as shipped: the toy's own 10 turns
    capped = run(cfg, toolbox, tmp_path, "bucle__toy_capped")
    spec = next(r for r in cfg.runs if r.key.endswith("bucle__toy_capped"))
    assert capped.end.steps == spec.limits.max_steps  # the lesson's limit, in its setting
    stopped = run(cfg, toolbox, tmp_path, "bucle__toy_stopped")
    assert (stopped.end.termination, stopped.end.steps) == ("hard_stop", 3)
    # the loop's repeated calls are all on the wire, each answered by the framework
    assert len(shipped.tool_calls()) == 10 - 1 + 1


def test_tokens_are_counted_on_the_exact_bodies(
        cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    from reactlab.frameworks.kit import Kit, Wire
    from reactlab.frameworks.wire import _tools

    spec = next(r for r in cfg.runs if r.key.endswith("correcto__toy"))
    wire = Wire(spec, 40)
    executed: list[Any] = []
    ending = tests.toy_agent.TOY.run(Kit(spec, wire, _tools(spec, toolbox, executed),
                                         executed))
    assert ending.termination == "answer"
    tr = run(cfg, toolbox, tmp_path, "correcto__toy")
    assert [r.tokens_sent for r in tr.requests()] == [
        count(ex.body.decode()) for ex in wire.exchanges]


def test_invalid_arguments_go_back_as_data(cfg: config.Config, toolbox: Any,
                                           tmp_path: Path) -> None:
    tr = run(cfg, toolbox, tmp_path, "argumentos_inventados__toy")
    errors = [c for c in tr.tool_calls() if c.status == "error"]
    # the toy sends the tool's own error (json.dumps defaults: ASCII escapes)
    assert errors and all("argumentos no válidos" in json.loads(c.sent or "")["error"]
                          for c in errors)


def test_reruns_are_byte_identical(cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    for scenario in ("correcto__toy", "bucle__toy_stopped"):
        a = run(cfg, toolbox, tmp_path / "a", scenario)
        b = run(cfg, toolbox, tmp_path / "b", scenario)
        assert (tmp_path / "a" / f"{scenario}.jsonl").read_bytes() == \
            (tmp_path / "b" / f"{scenario}.jsonl").read_bytes()
        assert a.end == b.end


@pytest.mark.parametrize(("change", "field"), [
    (lambda raw: raw["agents"]["toy"].update(framework="toy_lop"), "agents.toy.framework"),
    (lambda raw: raw["agents"]["toy"].update(settings={"max_turn": 3}),
     "agents.toy.settings.max_turn"),
    (lambda raw: raw["matrix"][-1]["agents"].append("toi"), "matrix[-1].agents[4]"),
    (lambda raw: raw["matrix"][-1].update(backends=["openai"]), "matrix[-1].agents[1]"),
    (lambda raw: raw["matrix"][-1].update(backends=["local"]), "matrix[-1].agents[1]"),
    (lambda raw: raw["agents"].update(lesson={"framework": "toy_loop"}), "agents"),
])
def test_a_bad_agent_names_its_field(change: Any, field: str) -> None:
    raw = agents_config()
    change(raw)
    with pytest.raises(ConfigError) as info:
        config.parse(copy.deepcopy(raw))
    where = field.replace("[-1]", f"[{len(raw['matrix']) - 1}]")
    assert info.value.field.startswith(where), (info.value.field, str(info.value))


def test_agents_table_puts_each_framework_beside_the_lesson_loop(
        cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    import csv

    from reactlab.analysis import tables
    from tests.conftest import run_specs

    specs = [r for r in cfg.runs if r.backend == "openai_chat"
             and r.scenario in ("correcto", "bucle") and r.task == "variacion_busi"
             and (r.framework is None or r.framework.framework == "toy_loop")]
    done = run_specs(specs, toolbox, tmp_path, verified=True)
    written = tables.build([(str(d.trace), str(d.verified)) for d in done], cfg.figure,
                           tmp_path / "tables")
    rows = list(csv.DictReader(written["agents"].open(encoding="utf-8")))
    assert {(r["scenario"], r["agent"]) for r in rows} == {
        (s, a) for s in ("bucle", "correcto")
        for a in ("lesson", "toy", "toy_capped", "toy_stopped")}
    by = {(r["scenario"], r["agent"]): r for r in rows}
    assert by[("correcto", "toy")]["verified"] == "True"
    assert by[("correcto", "lesson")]["verified"] == "True"
    assert (by[("bucle", "toy")]["termination"], by[("bucle", "toy")]["ending"],
            by[("bucle", "toy")]["condition"]) == ("framework_limit", "TurnLimit", "as_shipped")
    assert by[("bucle", "toy_stopped")]["termination"] == "hard_stop"
    assert by[("bucle", "lesson")]["termination"] == "step_limit"  # the lesson loop's own
    assert by[("bucle", "toy_capped")]["condition"] == "capped"
    # the lesson's own tables hold the framework runs under their run scenario
    runs = list(csv.DictReader(written["runs"].open(encoding="utf-8")))
    assert "correcto__toy" in {r["scenario"] for r in runs}


def test_the_loop_figure_draws_one_line_per_agent(cfg: config.Config, toolbox: Any,
                                                  tmp_path: Path) -> None:
    import csv

    from reactlab.analysis import outputs, tables
    from tests.conftest import run_specs

    specs = [r for r in cfg.runs if r.backend == "openai_chat" and r.scenario == "bucle"
             and r.task == "variacion_busi"
             and (r.framework is None or r.framework.framework == "toy_loop")]
    done = run_specs(specs, toolbox, tmp_path, verified=True)
    written = tables.build([(str(d.trace), str(d.verified)) for d in done], cfg.figure,
                           tmp_path / "tables")
    steps = [r for r in csv.DictReader(written["steps"].open(encoding="utf-8"))
             if r["scenario"].startswith("bucle")]
    assert {r["scenario"] for r in steps} == {
        "bucle", "bucle__toy", "bucle__toy_capped", "bucle__toy_stopped"}
    png = outputs.draw("agents_tokens", written["steps"], tmp_path / "agents_tokens.png",
                       {**cfg.figure, "task": "variacion_busi"})
    assert png.stat().st_size > 0 and png.with_suffix(".svg").is_file()
    svg = png.with_suffix(".svg").read_text(encoding="utf-8")
    # the lesson loop as its own panel (and as the frameworks' reference), each agent a line
    assert all(f"{a} (openai_chat)" in svg for a in ("lesson loop", "toy", "toy_capped"))


def test_a_refused_call_never_takes_a_later_calls_execution() -> None:
    # a framework that refuses a call by its own validation never runs it: the call must
    # not be matched (by name) with the execution of a later call that it did run
    from reactlab.frameworks.wire import _match_executions as _match

    busi = ("precio", {"ticker": "BUSI", "fecha": "2024-03-15"})
    later = ("precio", {"ticker": "BUSI", "fecha": "2024-03-22"})
    found: list[list[tuple[str | None, Any]]] = [
        [("precio", {"ticker": "BUSMAR", "fecha": "15/03/2024"})], [busi, later]]
    executed = [(*busi, {"resultado": 1}), (*later, {"resultado": 2})]
    assert _match(found, executed) == {(1, 0): 0, (1, 1): 1}
    # a call the framework ran with arguments it changed still finds its execution
    assert _match([[("calculadora", {"expresion": 1})]],
                  [("calculadora", {"expresion": "1"}, {"resultado": 1})]) == {(0, 0): 0}


def test_a_framework_runs_inside_a_running_event_loop(toolbox: Any, tmp_path: Path) -> None:
    """A Snakemake job's run block runs in a thread with a running event loop; a
    framework that starts its own (the Agents SDK and pydantic-ai call asyncio.run)
    must still run there (seen failing in the pipeline before runs got their own
    thread)."""
    import asyncio

    raw = config.load_yaml(ROOT / "config.yaml")
    cfg = config.parse(raw)
    spec = next(r for r in cfg.runs
                if r.key == "variacion_busi/openai_chat/correcto__pydantic_ai")

    async def inside() -> dict[str, Any]:
        return run_to_trace(spec, toolbox, tmp_path / "t.jsonl")

    assert asyncio.run(inside())["termination"] == "answer"


def test_results_sent_back_as_plain_text_degrade_instead_of_a_400() -> None:
    """A client that keeps the model's calls and their results as plain text (no
    tool-call items, no tool messages) sends a valid request: the scripted model answers
    what it can, a field the results it got cannot fill written ``?``, with a 200 (a 400
    is for invalid requests only). Seen on 8ec626b: 400 ``script 'correcto', step 2:
    {ok[1][cierre]}: no item 1 in []``."""
    import httpx

    import reactlab.simulate.openai_chat as sim
    from reactlab.simulate import ScriptedPolicy

    cfg = config.parse(config.load_yaml(ROOT / "config.yaml"))
    spec = cfg.run("variacion_busi", "openai_chat", "correcto")
    policy = ScriptedPolicy({"correcto": spec.script_obj()}, spec.params, spec.question)
    body = {"model": "correcto", "messages": [
        {"role": "user", "content": spec.question},
        {"role": "assistant", "content": "precio(BUSI, 2024-03-15); precio(BUSI, 2024-03-22)"},
        {"role": "user", "content": "Resultados: 191.5 y 203.9"}]}
    response = sim.handler(policy)(httpx.Request(
        "POST", "https://sim/v1/chat/completions", json=body))
    assert response.status_code == 200, response.text
    call = response.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "calculadora" and "?" in json.loads(call["arguments"])["expresion"]


def test_the_exports_name_the_agent(cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    """Inspect's sample metadata and OTel's ``gen_ai.agent.name`` carry the agent: a
    framework's (with its ending in Inspect's metadata), the lesson loop's default name."""
    pytest.importorskip("inspect_ai")
    pytest.importorskip("opentelemetry.sdk")
    from reactlab.export import load_runs
    from reactlab.export.inspect_log import build_sample
    from reactlab.export.otel import spans_json
    from tests.conftest import run_specs

    specs = [cfg.run("variacion_busi", "openai_chat", "correcto"),
             next(r for r in cfg.runs if r.key.endswith("openai_chat/correcto__toy_capped"))]
    done = run_specs(specs, toolbox, tmp_path, verified=True)
    runs = load_runs([(d.trace, d.verified) for d in done])
    by = {r.trace.run["scenario"]: r for r in runs}
    toy, lesson = by["correcto__toy_capped"], by["correcto"]
    sample = build_sample(toy, "eval")
    assert (sample.metadata["agent"], sample.metadata["ending"]) == ("toy_capped",
                                                                      "final_output")
    assert "agent" not in build_sample(lesson, "eval").metadata

    def agent_names(run: Any) -> set[str]:
        names = set()
        for line in spans_json(run).splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        for a in span["attributes"]:
                            if a["key"] == "gen_ai.agent.name":
                                names.add(a["value"]["stringValue"])
        return names

    assert agent_names(toy) == {"toy_capped"}
    assert agent_names(lesson) == {"reactlab"}


@pytest.mark.parametrize("option", ["recording", "replay", "allowed"])
def test_a_framework_run_refuses_what_it_cannot_honour(
        cfg: config.Config, toolbox: Any, tmp_path: Path, option: str) -> None:
    """``run_to_trace`` is one path for the loop's runs and a framework's: an option the
    framework's run cannot honour (an HTTP recording or replay, a narrowed tool list) is
    a UsageError naming it before anything runs, not silently dropped (before: the run
    went ahead and wrote no recording)."""
    from reactlab.core.errors import UsageError

    spec = next(r for r in cfg.runs if r.key == "variacion_busi/openai_chat/correcto__toy")
    value: Any = ["precio"] if option == "allowed" else tmp_path / "r.jsonl"
    if option == "replay":
        value.write_text("", encoding="utf-8")
    out = tmp_path / "t.jsonl"
    with pytest.raises(UsageError, match=rf"correcto__toy: a framework's run takes no "
                                         rf"{option}: "):
        run_to_trace(spec, toolbox, out, **{option: value})
    assert not out.exists() and not (option == "recording" and value.exists())
    run_to_trace(spec, toolbox, out)  # without it, the run runs
    assert tracemod.read(out).end.termination == "answer"
