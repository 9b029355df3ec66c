"""Tests of the backend adapters through their simulated transports.

The central property is cross-backend parity: the same scripted scenario played through
the official openai SDK (Responses API), the official anthropic SDK (Messages API) and
the local text path (Hermes ``<tool_call>`` text written and parsed back) gives the same
calls, arguments, statuses, results, answers and termination; only call ids and token
counts may differ, and for a call whose JSON is broken, the name and raw text (the text
format cannot recover a name from a broken block).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import reactlab.simulate.anthropic_messages as sim_anthropic
import reactlab.simulate.openai_responses as sim_openai
from reactlab import trace
from reactlab.agent.loop import run_agent
from reactlab.backends import open_session
from reactlab.config import RunSpec, load, parse
from reactlab.config.scripts import Script
from reactlab.simulate import ScriptedPolicy
from reactlab.trace.records import RECORD_CLASSES, record_from_json
from tests.conftest import offline_blocks, run_specs

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("openai", "anthropic")
SCRIPTED = ("openai", "anthropic", "openai_chat", "local")  # every backend that plays scripts

# Fields that legitimately differ between providers.
_DROP: dict[str, set[str]] = {
    "request": {"tokens_sent", "cumulative_tokens", "tokens_out"},
    "tool_call": {"id"},
    "guardrail": {"id", "tokens_refused", "tokens_left"},
    "error": {"message", "history"},
    "end": {"tokens_sent", "sha256"},
}


def normalised(tr: trace.Trace) -> list[dict[str, Any]]:
    out = []
    for rec in [r.to_json() for r in [*tr.records, tr.end]]:
        drop = set(_DROP.get(rec["type"], set()))
        if rec["type"] == "tool_call" and rec["status"] == "invalid":
            drop |= {"name", "raw"}
        out.append({k: v for k, v in rec.items() if k not in drop})
    return out


@pytest.fixture(scope="module")
def shipped_traces(toolbox: Any, tmp_path_factory: pytest.TempPathFactory
                   ) -> dict[tuple[str, str], dict[str, trace.Trace]]:
    """Every scripted run of the shipped matrix, written and read back, by (task, scenario)."""
    cfg = load(ROOT / "config.yaml")
    # a real model is not a script: no parity to expect; a task whose tools come from an
    # MCP server runs on that server (tests/test_mcp.py), not on the project's tools
    scripted = [s for s in cfg.runs if s.backend_config.mode != "model"
                and s.framework is None and s.mcp is None]
    by_pair: dict[tuple[str, str], dict[str, trace.Trace]] = defaultdict(dict)
    for ran in run_specs(scripted, toolbox, tmp_path_factory.mktemp("traces")):
        tr = trace.read(ran.trace)
        assert tr.end.to_json() == {"type": "end", **ran.end, "records": tr.end.records,
                                    "sha256": tr.end.sha256}
        by_pair[(ran.spec.task, ran.spec.scenario)][ran.spec.backend] = tr
    return dict(by_pair)


@pytest.fixture
def bodies(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The JSON body of every request that reaches a simulator."""
    seen: list[dict[str, Any]] = []
    for mod in (sim_openai, sim_anthropic):
        original = mod.handler

        def wrapped(policy: Any, original: Any = original) -> Any:
            inner = original(policy)

            def handle(request: Any) -> Any:
                seen.append(json.loads(request.content))
                return inner(request)

            return handle

        monkeypatch.setattr(mod, "handler", wrapped)
    return seen


def _run(spec: RunSpec, toolbox: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    end = run_agent(open_session(spec), toolbox, spec.tools, spec.limits.max_steps,
                    spec.limits.token_budget, lambda r: records.append(r.to_json()))
    return end.to_json(), records


# --------------------------------------------------------------------------- parity


def test_every_matrix_run_has_both_providers(shipped_traces: dict, raw_config: dict) -> None:
    backends = raw_config["backends"]
    blocks = offline_blocks(raw_config)
    expected = {(t, s) for b in blocks for t in b["tasks"] for s in b["scenarios"]
                if any(backends[x]["mode"] != "model" for x in b["backends"])
                and "mcp_server" not in raw_config["tasks"][t]}
    assert len(expected) >= 13
    assert set(shipped_traces) == expected
    wanted: dict[tuple[str, str], set[str]] = defaultdict(set)
    for b in blocks:
        for t in b["tasks"]:
            for s in b["scenarios"]:
                wanted[(t, s)] |= {x for x in b["backends"] if backends[x]["mode"] != "model"}
    for pair, by_provider in shipped_traces.items():
        assert set(by_provider) == wanted[pair], pair
        assert {"openai", "anthropic"} <= set(by_provider), pair


def test_every_record_round_trips_byte_identically(shipped_traces: dict) -> None:
    """from_json -> to_json gives back every line of every shipped scripted trace."""
    kinds: set[str] = set()
    for by_provider in shipped_traces.values():
        for tr in by_provider.values():
            lines = tr.path.read_bytes().split(b"\n")[:-1]
            for line in lines:
                rec = record_from_json(json.loads(line))
                kinds.add(rec.type)
                assert trace.dumps(rec.to_json()).encode() == line
            assert [tr.header, *tr.records, tr.end] == [
                record_from_json(json.loads(line)) for line in lines]
    assert kinds == set(RECORD_CLASSES)  # every record type was exercised


def test_cross_backend_parity(shipped_traces: dict) -> None:
    mismatches = []
    for pair, by_provider in sorted(shipped_traces.items()):
        if by_provider["openai"].header.spec["limits"]["token_budget"] is not None:
            continue  # where a budget stops a run depends on each backend's token counts
        first, *others = (normalised(by_provider[p]) for p in SCRIPTED if p in by_provider)
        if any(other != first for other in others):
            mismatches.append(pair)
    assert mismatches == []


def test_parity_is_not_vacuous(shipped_traces: dict) -> None:
    # the normalisation keeps what matters: scenarios differ from each other
    correcto = normalised(shipped_traces[("variacion_busi", "correcto")]["openai"])
    bucle = normalised(shipped_traces[("variacion_busi", "bucle")]["openai"])
    assert correcto != bucle
    assert correcto[-1]["termination"] == "answer"
    assert bucle[-1]["termination"] == "step_limit"
    # and ids and tokens really did differ before normalisation
    tr_o, tr_a = (shipped_traces[("variacion_busi", "correcto")][p] for p in PROVIDERS)
    assert {c.id for c in tr_o.tool_calls()}.isdisjoint({c.id for c in tr_a.tool_calls()})


def test_json_invalido_keeps_the_raw_text(shipped_traces: dict, raw_config: dict) -> None:
    """The Responses API carries the invalid argument text itself; the Messages API always
    sends an object, so there the call is cut off at max_tokens and the trace keeps what
    arrived: the members complete before the cut, as text without its closing brace."""
    params = raw_config["tasks"]["variacion_busi"]["params"]
    raw_text = {"openai": f'{{"ticker": "{params["ticker"]}", "fecha": ',
                "anthropic": f'{{"ticker":"{params["ticker"]}"'}
    for provider in PROVIDERS:
        tr = shipped_traces[("variacion_busi", "json_invalido")][provider]
        first = tr.tool_calls()[0]
        assert first.status == "invalid", provider
        assert first.name == "precio"
        assert first.arguments is None
        assert first.raw == raw_text[provider]
        assert first.result == {"error": "llamada con JSON no válido"}
        assert [c.status for c in tr.tool_calls()[1:]] == ["ok", "ok", "ok"]
        assert tr.end.termination == "answer"


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unknown_model_is_a_client_error(raw_config: dict, toolbox: Any, provider: str) -> None:
    spec = parse(raw_config).run("variacion_busi", provider, "correcto")
    session = open_session(spec)
    session.model = "modelo_inexistente"  # type: ignore[attr-defined]
    records: list[dict[str, Any]] = []
    end = run_agent(session, toolbox, spec.tools, 6, None,
                    lambda r: records.append(r.to_json())).to_json()
    assert end["termination"] == "backend_error"
    assert end["steps"] == 1 and end["calls"] == 0
    err = records[-1]
    assert (err["type"], err["kind"], err["status"]) == ("error", "client", 404)
    assert "modelo_inexistente" in err["message"]


@pytest.mark.parametrize("module", [sim_openai, sim_anthropic])
def test_simulators_answer_404_for_unknown_models(module: Any) -> None:
    policy = ScriptedPolicy({"a": Script("a", ({"answer": "hola"},))}, {}, "¿?")
    status, _ = module.respond(policy, {"model": "a", "input": "x", "messages": []})
    assert status == 200
    status, payload = module.respond(policy, {"model": "b", "input": "x", "messages": []})
    assert status == 404
    assert "b" in json.dumps(payload)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unrenderable_script_is_a_backend_error(raw_config: dict, toolbox: Any,
                                                provider: str) -> None:
    raw_config["scenarios"]["roto"] = {"steps": [
        {"calls": [{"name": "precio", "arguments": {"ticker": "{ticker}", "fecha": "{desde}"}}]},
        {"answer": "{ok[5][cierre]}"},
    ]}
    raw_config["matrix"][0]["scenarios"].append("roto")
    spec = parse(raw_config).run("variacion_busi", provider, "roto")
    end, records = _run(spec, toolbox)
    assert end["termination"] == "backend_error"
    assert end["steps"] == 2 and end["calls"] == 1
    err = records[-1]
    assert (err["type"], err["kind"], err["status"]) == ("error", "client", 400)
    assert "script 'roto'" in err["message"]
    assert "ok[5]" in err["message"]


# --------------------------------------------------------------------------- request bodies


def _tool_spec(raw_config: dict, send_tools: bool, send_system_prompt: bool,
               provider: str) -> RunSpec:
    raw_config["agent"]["send_tools"] = send_tools
    raw_config["agent"]["send_system_prompt"] = send_system_prompt
    if not send_tools:  # constrained decoding needs the tools: the lesson's own matrix
        from reactlab.config import load_yaml

        lesson = load_yaml(ROOT / "workflow" / "configs" / "lesson.yaml")
        raw_config["matrix"] = [*lesson["matrix"], {"tasks": ["variacion_busi"],
                                                    "backends": [provider],
                                                    "scenarios": ["correcto"]}]
    return parse(raw_config).run("variacion_busi", provider, "correcto")


def test_openai_body_shape(raw_config: dict, toolbox: Any, bodies: list) -> None:
    spec = _tool_spec(raw_config, True, True, "openai")
    end, _ = _run(spec, toolbox)
    assert end["termination"] == "answer"
    assert len(bodies) == end["steps"] == 3
    for body in bodies:
        assert body["model"] == "correcto"
        assert body["instructions"] == raw_config["agent"]["system_prompt"]
        assert "system" not in body
        tools = body["tools"]
        assert [t["name"] for t in tools] == list(raw_config["tasks"]["variacion_busi"]["tools"])
        for t in tools:
            assert set(t) == {"type", "name", "description", "parameters"}
            assert t["type"] == "function"
            assert t["parameters"]["type"] == "object"
        assert set(tools[0]["parameters"]["properties"]) == {"ticker", "fecha"}
    assert bodies[0]["input"] == [{"role": "user", "content": spec.question}]


def test_anthropic_body_shape(raw_config: dict, toolbox: Any, bodies: list) -> None:
    spec = _tool_spec(raw_config, True, True, "anthropic")
    end, _ = _run(spec, toolbox)
    assert end["termination"] == "answer"
    assert len(bodies) == end["steps"] == 3
    for body in bodies:
        assert body["model"] == "correcto"
        assert body["max_tokens"] == raw_config["backends"]["anthropic"]["max_tokens"]
        assert body["system"] == raw_config["agent"]["system_prompt"]
        assert "instructions" not in body
        tools = body["tools"]
        assert [t["name"] for t in tools] == list(raw_config["tasks"]["variacion_busi"]["tools"])
        for t in tools:
            assert set(t) == {"name", "description", "input_schema"}
            assert t["input_schema"]["type"] == "object"
        assert set(tools[0]["input_schema"]["properties"]) == {"ticker", "fecha"}
    assert bodies[0]["messages"] == [{"role": "user", "content": spec.question}]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_nothing_extra_when_disabled(raw_config: dict, toolbox: Any, bodies: list,
                                     provider: str) -> None:
    spec = _tool_spec(raw_config, False, False, provider)
    end, _ = _run(spec, toolbox)
    assert end["termination"] == "answer"  # the scripted model does not need the definitions
    assert bodies
    for body in bodies:
        assert not {"tools", "system", "instructions"} & set(body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_results_travel_back(raw_config: dict, toolbox: Any, bodies: list,
                                  provider: str) -> None:
    spec = parse(raw_config).run("variacion_busi", provider, "correcto")
    _, records = _run(spec, toolbox)
    results = [json.dumps(r["result"]) for r in records if r["type"] == "tool_call"]
    last = bodies[-1]
    if provider == "openai":
        sent = [x["output"] for x in last["input"] if x.get("type") == "function_call_output"]
    else:
        sent = [b["content"] for m in last["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_result"]
    assert sent == results


def test_duplicate_keys_in_arguments_are_refused_not_last_one_wins() -> None:
    from reactlab.backends import parse_arguments
    from reactlab.backends.local.hermes import parse_tool_calls

    dup = '{"ticker": "BUSI", "fecha": "2024-03-15", "fecha": "2024-03-22"}'
    assert parse_arguments(dup) == (None, dup)
    assert parse_arguments('{"ticker": "BUSI", "fecha": "2024-03-15"}') == (
        {"ticker": "BUSI", "fecha": "2024-03-15"}, None)
    assert parse_arguments('{"x": NaN}') == (None, '{"x": NaN}')
    parsed = parse_tool_calls(f'<tool_call>{{"name": "precio", "arguments": {dup}}}</tool_call>')
    assert len(parsed.calls) == 1 and not parsed.calls[0].valid


# --------------------------------------------------------------------------- registry

def test_the_config_schema_takes_the_installed_providers() -> None:
    """The built-in providers are reactlab's own entry points (pyproject.toml), and the
    schema's provider enums are filled from the installed ones: no list is copied."""
    import tomllib

    from reactlab.backends.registry import PROVIDERS
    from reactlab.config.schema import extended_schema

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "entry-points"]["reactlab.providers"]
    assert set(declared) <= set(PROVIDERS) and len(declared) == 4
    schema = extended_schema()
    assert schema["$defs"]["http_provider"]["enum"] == [n for n, p in PROVIDERS.items() if p.http]
    assert schema["$defs"]["inprocess_provider"]["enum"] == [
        n for n, p in PROVIDERS.items() if not p.http]


def test_registry_entries_load_and_unknown_names_are_refused() -> None:
    from reactlab.backends.registry import PROVIDERS, provider

    for name, entry in PROVIDERS.items():
        assert provider(name) is entry and callable(entry.load()), name
    with pytest.raises(ValueError, match=r"no provider 'azure' is installed \("
                                         r"reactlab.providers: anthropic, local, openai"):
        provider("azure")


@pytest.mark.parametrize("name", ["openai", "anthropic", "local"])
def test_faults_only_reach_providers_with_an_http_layer(raw_config: dict, name: str) -> None:
    """The config refuses HTTP faults exactly for the providers the registry marks as
    having no HTTP layer."""
    from reactlab.backends.registry import PROVIDERS
    from reactlab.core.errors import ConfigError

    backend = next(b for b, c in raw_config["backends"].items()
                   if c["provider"] == name and c["mode"] in ("simulated", "scripted"))
    raw_config["matrix"].append({"tasks": ["variacion_busi"], "backends": [backend],
                                 "scenarios": ["fallo_429_recupera"]})
    if PROVIDERS[name].http:
        assert parse(raw_config).run("variacion_busi", backend, "fallo_429_recupera")
    else:
        with pytest.raises(ConfigError, match="no HTTP layer"):
            parse(raw_config)


def test_a_provider_without_http_refuses_recording(raw_config: dict) -> None:
    from reactlab.backends.recording import Recorder, RecordingError

    spec = parse(raw_config).run("variacion_busi", "local", "correcto")
    with pytest.raises(RecordingError, match="recordings are for the anthropic and openai and "):
        open_session(spec, recorder=Recorder())
    with pytest.raises(ValueError, match="records or replays"):
        open_session(parse(raw_config).run("variacion_busi", "openai", "correcto"),
                     recorder=Recorder(), replay=object())  # type: ignore[arg-type]


# ------------------------------------------------- what a session sent, in the trace header

def _strings(value: Any) -> list[str]:
    """Every string inside a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize("send_system_prompt", [False, True])
@pytest.mark.parametrize("backend", ["openai", "anthropic", "openai_chat"])
def test_the_header_records_what_an_http_session_sent(backend: str, send_system_prompt: bool,
                                                      toolbox: Any, tmp_path: Path) -> None:
    """The header's ``system_prompt_sent`` / ``tool_results_ascii`` are what went over the
    wire: read back from the recorded request bodies."""
    from dataclasses import replace

    from reactlab.backends import recording
    from reactlab.runner import run_to_trace

    # its headlines are Spanish text: ASCII escapes or not makes a difference
    spec = load("config.yaml").run("noticias_busi_abril", backend, "inyeccion_ignora")
    spec = replace(spec, agent=spec.agent.replace(send_system_prompt=send_system_prompt))
    run_to_trace(spec, toolbox, tmp_path / "t.jsonl", recording=tmp_path / "r.jsonl")
    tr = trace.read(tmp_path / "t.jsonl")
    assert tr.header.system_prompt_sent is send_system_prompt
    assert tr.header.tool_results_ascii is True
    sent = _strings(recording.read(tmp_path / "r.jsonl")[-1]["request"]["body"])
    assert (spec.agent.system_prompt in sent) is send_system_prompt
    results = [c.result for c in tr.tool_calls()]
    assert any(not json.dumps(r, ensure_ascii=False).isascii() for r in results)  # it matters
    for r in results:
        assert json.dumps(r, ensure_ascii=True) in sent
        assert json.dumps(r, ensure_ascii=False) not in sent or json.dumps(r).isascii()


@pytest.mark.parametrize("send_system_prompt", [False, True])
def test_the_header_records_what_the_local_session_sent(send_system_prompt: bool,
                                                        toolbox: Any, tmp_path: Path) -> None:
    """The local ChatML session always sends the system prompt and keeps tool results'
    UTF-8 text; its header says so, and its prompt shows it."""
    from dataclasses import replace

    from reactlab.agent.types import ToolCall, ToolOutcome
    from reactlab.runner import header, run_to_trace

    spec = load("config.yaml").run("noticias_busi", "local", "titular_fiel")
    spec = replace(spec, agent=spec.agent.replace(send_system_prompt=send_system_prompt))
    run_to_trace(spec, toolbox, tmp_path / "t.jsonl")
    tr = trace.read(tmp_path / "t.jsonl")
    assert (tr.header.system_prompt_sent, tr.header.tool_results_ascii) == (True, False)
    session = open_session(spec)
    result = {"resultado": {"titular": "Señal de compra en BUSI"}}
    session.add_results([ToolOutcome(ToolCall("c", "buscar_noticias", {}), result, "ok")])
    prompt = session.prompt()  # type: ignore[attr-defined]
    assert spec.agent.system_prompt in prompt
    assert json.dumps(result, ensure_ascii=False) in prompt
    # a session that states nothing (a test's fake, a suite's policy): nothing recorded
    bare = header(spec, object())
    assert (bare.system_prompt_sent, bare.tool_results_ascii) == (None, None)
    assert "system_prompt_sent" not in bare.to_json()
