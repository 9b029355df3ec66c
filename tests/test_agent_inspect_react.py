"""The built-in framework ``inspect_react`` (Inspect's ``react()`` agent) through the config
and the runner, on every wire API it speaks (docs/agents.md, ``## inspect_react``).

Each run is in process: Inspect's own ``eval()`` of one sample whose solver runs
``react()`` with Inspect's own typed tools and model provider, against the simulator; the
trace built from the wire. Inspect's first ``eval`` in a process costs a few seconds of
set-up, the runs after it a fraction of a second (``fallo_servidor_persistente`` waits
Inspect's own backoff, 3 to 6 s, once). ``python -m tests.test_agent_inspect_react``
prints the table of docs/agents.md from the same runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from reactlab import config
from reactlab import trace as tracemod
from reactlab.analysis import verify
from reactlab.core.errors import ConfigError
from reactlab.runner import run_to_trace

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("openai_chat", "openai", "anthropic")
FAULTS = ("fallo_429_recupera", "fallo_servidor_persistente", "fallo_respuesta_rota")
SCENARIOS = ("correcto", "bucle", "argumentos_inventados", "herramienta_desconocida", *FAULTS)
#: the runs of the docs' table: scenario and agent
TABLE = (*((s, "ir") for s in SCENARIOS), ("bucle", "ir_capped"))


def agents_config() -> dict[str, Any]:
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["agents"] = {**raw.get("agents", {}), "ir": {"framework": "inspect_react"},
                     "ir_capped": {"framework": "inspect_react", "capped": True},
                     # no retries of the SDK's inside Inspect's own: Inspect's alone
                     "ir_no_sdk_retry": {"framework": "inspect_react",
                                         "settings": {"sdk_max_retries": 0,
                                                      "max_retries": 4}}}
    block = {"tasks": ["variacion_busi"], "backends": list(PROVIDERS)}
    raw["matrix"] += [{**block, "scenarios": list(SCENARIOS), "agents": ["ir"]},
                      {**block, "scenarios": ["correcto", "bucle"], "agents": ["ir_capped"]},
                      {"tasks": ["variacion_busi"], "backends": ["openai_chat"],
                       "scenarios": ["fallo_429_recupera"], "agents": ["ir_no_sdk_retry"]}]
    return raw


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return config.parse(agents_config())


def run(cfg: config.Config, toolbox: Any, folder: Path, provider: str, scenario: str,
        agent: str = "ir") -> tracemod.Trace:
    key = f"variacion_busi/{provider}/{scenario}__{agent}"
    spec = next(r for r in cfg.runs if r.key == key)
    out = folder / provider / f"{scenario}__{agent}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    run_to_trace(spec, toolbox, out)
    return tracemod.read(out)


def ending(tr: tracemod.Trace) -> tuple[str, str, int]:
    return tr.end.termination, tr.end.to_json()["ending"], tr.end.steps


#: Inspect's openai provider takes a model name it does not know (the scenario's) for a
#: frontier reasoning model, and on the Responses API first sends its reasoning-summary
#: probe ("Please say 'hello, world'"): one request more there.
PROBE = {"openai_chat": 0, "openai": 1, "anthropic": 0}


def test_the_scripted_model_answers_through_an_offered_submit_tool(
        cfg: config.Config) -> None:
    from reactlab.simulate import ScriptedPolicy, ToolChoice

    spec = cfg.run("variacion_busi", "openai_chat", "correcto")
    policy = ScriptedPolicy({"correcto": spec.script_obj()}, spec.params, spec.question,
                            tools=frozenset(spec.tools))
    results = [{"resultado": {"cierre": 26.19}}, {"resultado": {"cierre": 27.88}},
               {"resultado": 6.4528}]
    answer = "El cierre de BUSI varió un 6.45 % entre 2024-03-15 y 2024-03-22."
    # the request's tools with a required text property (the API modules read them
    # from the schemas): calculadora is the task's, so submit is the answer tool
    fields = (("calculadora", "expresion"), ("submit", "answer"))
    offered = ToolChoice(offered=("precio", "calculadora", "submit"), answer_fields=fields)
    act = policy.act("correcto", 2, results, choice=offered)
    assert act.text is None and [(c.name, c.arguments) for c in act.calls] == [
        ("submit", {"answer": answer})]
    # no submit tool, or no calls allowed: the answer is text, as before
    for choice in (ToolChoice(offered=("precio", "calculadora")),
                   ToolChoice(mode="none", offered=("precio", "submit"),
                              answer_fields=fields)):
        assert policy.act("correcto", 2, results, choice=choice).text == answer
    # a calls step stays calls
    assert [c.name for c in policy.act("correcto", 0, [], choice=offered).calls] == [
        "precio", "precio"]



@pytest.mark.parametrize("provider", PROVIDERS)
def test_correcto_submits_and_verifies(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                       provider: str) -> None:
    for agent in ("ir", "ir_capped"):
        tr = run(cfg, toolbox, tmp_path, provider, "correcto", agent)
        # the answer is react()'s submit() call: the third turn, after which react ends
        assert ending(tr) == ("answer", "submit", 3 + PROBE[provider])
        assert tr.run["agent"] == agent
        assert [c.name for c in tr.tool_calls()] == ["precio", "precio", "calculadora"]
        assert all(c.status == "ok" for c in tr.tool_calls())
        assert tr.end.answer == ("El cierre de BUSI varió un 6.45 % entre 2024-03-15 y "
                                 "2024-03-22.")
        findings = verify.verify(tr.header.spec["question"], tr.end.answer, tr.tool_calls())
        assert verify.verdict(findings), findings
        # react()'s own prompt and its submit tool went to the model with the task's tools
        first = tr.requests()[PROBE[provider]]
        assert first.n_calls == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_loop_runs_to_the_hard_stop_as_shipped_and_to_the_turn_limit_capped(
        cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str) -> None:
    shipped = run(cfg, toolbox, tmp_path, provider, "bucle")
    # no step cap of its own: the simulator's hard stop (max_requests 40) ends it
    assert ending(shipped) == ("hard_stop", "HardStop", 40)
    capped = run(cfg, toolbox, tmp_path, provider, "bucle", "ir_capped")
    spec = next(r for r in cfg.runs if r.key.endswith(f"{provider}/bucle__ir_capped"))
    assert spec.limits.max_steps == 6
    # turn_limit(6) raises after the generation that exceeds it: 7 model requests
    assert ending(capped) == ("framework_limit", "turn_limit", 7 + PROBE[provider])
    # the 7th turn's call was never run
    assert [c.status for c in capped.tool_calls()] == ["ok"] * 6 + ["invalid"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_arguments_get_inspects_own_validation_text(
        cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, "argumentos_inventados")
    assert ending(tr) == ("answer", "submit", 4 + PROBE[provider])
    first, *rest = tr.tool_calls()
    assert first.status == "invalid" and all(c.status == "ok" for c in rest)
    # Inspect validates against the tool's JSON schema (jsonschema), in English; on Chat
    # Completions its tool message carries "Error: " before the text
    text = ("Found 2 validation errors parsing tool input arguments:\n"
            "- 'BUSMAR' does not match '^[A-Z]{4}$'\n"
            "- '15/03/2024' does not match '^\\\\d{4}-\\\\d{2}-\\\\d{2}$'")
    prefix = "Error: " if provider == "openai_chat" else ""
    assert first.sent == prefix + text
    unknown = run(cfg, toolbox, tmp_path, provider, "herramienta_desconocida")
    assert ending(unknown) == ("answer", "submit", 4 + PROBE[provider])
    call = unknown.tool_calls()[0]
    assert (call.status, call.sent) == ("unknown", f"{prefix}Tool cotizacion not found")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_429_is_retried_by_the_sdk_then_by_inspect(cfg: config.Config, toolbox: Any,
                                                      tmp_path: Path, provider: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, "fallo_429_recupera")
    assert ending(tr) == ("answer", "submit", 4 + PROBE[provider])
    # the SDK's own retry (it honours the 429's retry-after of 0.01 s) is answered: with
    # calls, or on the Responses API (the retried request is Inspect's tool-less probe)
    # with text
    first, retried = tr.requests()[:2]
    assert first.text == "HTTP 429" and not retried.text.startswith("HTTP")
    assert (retried.n_calls == 0) == (PROBE[provider] == 1)


def test_without_the_sdks_retries_inspects_own_retry_runs(
        cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    # sdk_max_retries 0: the 429 reaches Inspect, which retries after its own backoff
    # (3 s and up to 3 s of jitter; it does not read retry-after)
    tr = run(cfg, toolbox, tmp_path, "openai_chat", "fallo_429_recupera", "ir_no_sdk_retry")
    assert ending(tr) == ("answer", "submit", 4)
    assert [r.text for r in tr.requests()][:2] == ["HTTP 429", ""]


def test_a_persistent_503_outlasts_the_sdks_retries_not_inspects(
        cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    tr = run(cfg, toolbox, tmp_path, "openai_chat", "fallo_servidor_persistente")
    # 3 attempts by the SDK (1 + its 2 retries), all 503; Inspect's own retry is the 4th
    # attempt, past the fault's 3: the run recovers and answers
    assert ending(tr) == ("answer", "submit", 6)
    assert [r.text for r in tr.requests()][1:5] == ["HTTP 503"] * 3 + [""]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_broken_body(cfg: config.Config, toolbox: Any, tmp_path: Path,
                       provider: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, "fallo_respuesta_rota")
    if provider == "openai":
        # the cut body answers Inspect's probe, which gives up on it; the run goes on
        assert ending(tr) == ("answer", "submit", 4)
        assert tr.requests()[0].text == "HTTP 200"
    else:  # the SDK fails on it (Chat: JSON; Messages: its stream accumulator)
        assert ending(tr) == ("framework_error", {"openai_chat": "JSONDecodeError",
                                                  "anthropic": "AssertionError"}[provider], 1)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reruns_are_byte_identical_and_write_nothing_here(
        cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for scenario in ("correcto", "argumentos_inventados"):
        run(cfg, toolbox, tmp_path / "a", provider, scenario)
        run(cfg, toolbox, tmp_path / "b", provider, scenario)
        name = Path(provider) / f"{scenario}__ir.jsonl"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert list(cwd.iterdir()) == []  # no eval log, no log dir in the working folder


def test_settings_are_checked(toolbox: Any, tmp_path: Path) -> None:
    raw = agents_config()
    raw["agents"]["ir"]["settings"] = {"max_turns": 3}
    with pytest.raises(ConfigError) as info:
        config.parse(raw)
    assert info.value.field == "agents.ir.settings.max_turns"
    raw["agents"]["ir"]["settings"] = {"timeout": 0}  # its own model: an integer >= 1
    with pytest.raises(ConfigError) as info:
        config.parse(raw)
    assert info.value.field == "agents.ir.settings.timeout"


def table(toolbox: Any, tmp_path: Path) -> str:
    """The docs' table: one line per provider and run of :data:`TABLE`."""
    from tests.conftest import framework_docs_table

    cfg = config.parse(agents_config())
    return framework_docs_table(PROVIDERS, TABLE, lambda provider, scenario, agent: run(
        cfg, toolbox, tmp_path, provider, scenario, agent))


if __name__ == "__main__":
    import tempfile

    from reactlab import data
    from reactlab.tools import ToolBox

    with tempfile.TemporaryDirectory() as tmp:
        seed = int(config.load(ROOT / "config.yaml").data["seed"])
        box = ToolBox.from_files(*data.write(Path(tmp), seed))
        sys.stdout.write(table(box, Path(tmp)) + "\n")
