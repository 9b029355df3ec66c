"""The OpenAI Agents SDK as the system under test (reactlab.frameworks.openai_agents).

The config crosses the built-in framework ``openai_agents`` (as shipped and capped) with the
lesson's scenarios on both wire APIs its client speaks (Responses, Chat Completions); the
runner runs each spec in process, and the trace — built from the exchanges the simulator
saw — is read and verified as any other. :func:`table` prints what docs/agents.md shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reactlab import config
from reactlab import trace as tracemod
from reactlab.analysis import verify
from reactlab.core.errors import ConfigError
from reactlab.runner import run_to_trace

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("openai", "openai_chat")
SCENARIOS = ("correcto", "bucle", "argumentos_inventados", "herramienta_desconocida",
             "fallo_429_recupera", "fallo_servidor_persistente", "fallo_respuesta_rota")
#: What the model reads when the SDK's own validation refuses a call (its fixed text).
SDK_TOOL_ERROR = "An error occurred while running the tool. Please try again."


def agents_config() -> dict[str, Any]:
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["agents"] = {
        **raw.get("agents", {}),
        "oa": {"framework": "openai_agents"},
        "oa_capped": {"framework": "openai_agents", "capped": True},
        "oa_stopped": {"framework": "openai_agents", "max_requests": 3},
        "oa_lenient": {"framework": "openai_agents",
                       "settings": {"tool_not_found_behavior": "return_error_to_model",
                                    "strict_json_schema": True}},
    }
    raw["matrix"].append({"tasks": ["variacion_busi"], "backends": list(PROVIDERS),
                          "scenarios": list(SCENARIOS),
                          "agents": ["oa", "oa_capped", "oa_stopped", "oa_lenient"]})
    return raw


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return config.parse(agents_config())


def spec_of(cfg: config.Config, provider: str, scenario: str) -> config.RunSpec:
    return next(r for r in cfg.runs if r.key == f"variacion_busi/{provider}/{scenario}")


def run(cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str,
        scenario: str) -> tracemod.Trace:
    out = tmp_path / provider / f"{scenario}.jsonl"
    run_to_trace(spec_of(cfg, provider, scenario), toolbox, out)
    return tracemod.read(out)


def ending(tr: tracemod.Trace) -> tuple[str, str]:
    return tr.end.termination, tr.end.to_json()["ending"]



def test_an_unknown_setting_names_its_field() -> None:
    raw = agents_config()
    raw["agents"]["oa"]["settings"] = {"max_turn": 3}
    with pytest.raises(ConfigError) as info:
        config.parse(raw)
    assert info.value.field == "agents.oa.settings.max_turn"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_correcto_answers_and_is_verified(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                          provider: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, "correcto__oa")
    assert ending(tr) == ("answer", "final_output")
    calls = tr.tool_calls()
    assert [c.name for c in calls] == ["precio", "precio", "calculadora"]
    assert all(c.status == "ok" for c in calls)
    # what the model read: the tool's result as JSON text (json.dumps defaults)
    assert all(c.sent == json.dumps(c.result) for c in calls)
    findings = verify.verify(tr.header.spec["question"], tr.end.answer, calls,
                             tr.header.spec.get("params", {}))
    assert verify.verdict(findings), findings
    assert len(tr.requests()) == 3 == tr.end.steps
    assert tr.requests()[-1].cumulative_tokens == tr.end.tokens_sent


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bucle_ends_by_the_sdks_cap(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                    provider: str) -> None:
    shipped = run(cfg, toolbox, tmp_path, provider, "bucle__oa")
    # as shipped: the SDK's DEFAULT_MAX_TURNS (10) model calls, then MaxTurnsExceeded
    assert ending(shipped) == ("framework_limit", "MaxTurnsExceeded")
    assert shipped.end.steps == 10 and len(shipped.tool_calls()) == 10
    capped = run(cfg, toolbox, tmp_path, provider, "bucle__oa_capped")
    assert ending(capped) == ("framework_limit", "MaxTurnsExceeded")
    assert capped.end.steps == spec_of(cfg, provider, "bucle__oa_capped").limits.max_steps
    # the simulator's hard stop goes through the SDK (a BaseException) to the runner
    stopped = run(cfg, toolbox, tmp_path, provider, "bucle__oa_stopped")
    assert ending(stopped) == ("hard_stop", "HardStop") and stopped.end.steps == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_arguments_are_refused_by_the_sdks_own_validation(
        cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, "argumentos_inventados__oa")
    assert ending(tr) == ("answer", "final_output")
    first, *rest = tr.tool_calls()
    # never executed: the SDK's argument model refused it; the model read the SDK's text
    assert (first.name, first.status, first.arguments) == (
        "precio", "invalid", {"ticker": "BUSMAR", "fecha": "15/03/2024"})
    assert first.sent == SDK_TOOL_ERROR and first.result == {"error": SDK_TOOL_ERROR}
    assert [c.status for c in rest] == ["ok", "ok", "ok"]
    assert tr.end.errors == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unknown_tool_crashes_as_shipped_and_not_when_set(
        cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str) -> None:
    shipped = run(cfg, toolbox, tmp_path, provider, "herramienta_desconocida__oa")
    assert ending(shipped) == ("framework_error", "ModelBehaviorError")
    assert shipped.end.steps == 1
    lenient = run(cfg, toolbox, tmp_path, provider, "herramienta_desconocida__oa_lenient")
    assert ending(lenient) == ("answer", "final_output")
    unknown = lenient.tool_calls()[0]
    assert (unknown.name, unknown.status) == ("cotizacion", "unknown")
    assert unknown.sent and "cotizacion" in unknown.sent


@pytest.mark.parametrize("provider", PROVIDERS)
def test_faults_end_bounded(cfg: config.Config, toolbox: Any, tmp_path: Path,
                            provider: str) -> None:
    # 429 (retry-after 0.01 s) on the first request: the client's own retry, then the run
    recovered = run(cfg, toolbox, tmp_path, provider, "fallo_429_recupera__oa")
    assert ending(recovered) == ("answer", "final_output")
    assert [r.text for r in recovered.requests()][:1] == ["HTTP 429"]
    assert recovered.end.steps == 4  # 1 refused + the 3 of correcto
    # 503 on every attempt of the second request: 1 + max_retries (2) attempts, then out
    down = run(cfg, toolbox, tmp_path, provider, "fallo_servidor_persistente__oa")
    assert ending(down) == ("framework_error", "InternalServerError")
    assert [r.text for r in down.requests()][1:] == ["HTTP 503"] * 3
    # a 200 whose JSON is cut: no retry, the SDK's client raises on the body
    broken = run(cfg, toolbox, tmp_path, provider, "fallo_respuesta_rota__oa")
    assert ending(broken) == ("framework_error", "JSONDecodeError")
    assert broken.end.steps == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reruns_are_byte_identical(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                   provider: str) -> None:
    for scenario in ("correcto__oa", "argumentos_inventados__oa", "bucle__oa_capped",
                     "fallo_429_recupera__oa"):
        run(cfg, toolbox, tmp_path / "a", provider, scenario)
        run(cfg, toolbox, tmp_path / "b", provider, scenario)
        a = (tmp_path / "a" / provider / f"{scenario}.jsonl").read_bytes()
        assert a == (tmp_path / "b" / provider / f"{scenario}.jsonl").read_bytes(), scenario


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_bodies_carry_no_per_run_key(cfg: config.Config, toolbox: Any,
                                         provider: str) -> None:
    """The lesson's tool schema as it is (``strict: false``) or, with the setting, the
    SDK's strict form; no ``prompt_cache_key`` (the SDK adds one for the official
    endpoint only; its value would be derived from the spec's key)."""
    from reactlab.frameworks.kit import Kit, Wire
    from reactlab.frameworks.registry import framework
    from reactlab.frameworks.wire import _tools
    from reactlab.tools import json_schema

    bodies = {}
    for agent in ("oa", "oa_lenient"):
        spec = spec_of(cfg, provider, f"correcto__{agent}")
        wire = Wire(spec, 40)
        executed: list[Any] = []
        assert framework("openai_agents").run(
            Kit(spec, wire, _tools(spec, toolbox, executed), executed)).termination == "answer"
        bodies[agent] = [json.loads(ex.body) for ex in wire.exchanges]
    for agent, sent in bodies.items():
        for body in sent:
            assert "prompt_cache_key" not in body and "metadata" not in body
            tools = [t.get("function", t) for t in body["tools"]]
            for t in tools:
                strict = agent == "oa_lenient"
                assert t["strict"] is strict
                want = json_schema(t["name"])
                if strict:
                    want = {**want, "additionalProperties": False}
                assert t["parameters"] == want


def table(tmp: Path) -> str:
    """The table of docs/agents.md: every scenario as shipped (and bucle capped) on each
    provider, from traces run as these tests run them."""
    from reactlab import data
    from reactlab.tools import ToolBox

    cfg = config.parse(agents_config())
    toolbox = ToolBox.from_files(*data.write(tmp / "data", int(cfg.data["seed"])))
    lines = ["| provider | scenario | termination | ending | requests | tool errors | "
             "tokens sent |", "|---|---|---|---|---|---|---|"]
    for provider in PROVIDERS:
        for scenario in (*(f"{s}__oa" for s in SCENARIOS), "bucle__oa_capped"):
            tr = run(cfg, toolbox, tmp, provider, scenario)
            term, end = ending(tr)
            lines.append(f"| {provider} | {scenario} | {term} | {end} | {tr.end.steps} | "
                         f"{tr.end.errors} | {tr.end.tokens_sent} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(table(Path(tmp)))
