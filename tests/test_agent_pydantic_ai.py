"""The built-in framework ``pydantic_ai`` (reactlab.frameworks.pydantic_ai) on every wire
API it speaks, through the config and the runner as tests/test_agents.py runs the toy.

Each run is in process: the framework's own loop, tools and SDK client against the
simulator, the trace built from the wire. ``python -m tests.test_agent_pydantic_ai``
prints the table of docs/agents.md (section ``pydantic_ai``) from the same runs.
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
from reactlab.core.errors import ConfigError
from reactlab.runner import run_to_trace

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("openai", "openai_chat", "anthropic")  # the shipped backends of these names
FAULTS = ("fallo_429_recupera", "fallo_servidor_persistente", "fallo_respuesta_rota")
#: the runs of the docs' table: scenario and agent
TABLE = (("correcto", "pyd"), ("bucle", "pyd"), ("bucle", "pyd_60"), ("bucle", "pyd_capped"),
         ("argumentos_inventados", "pyd"), ("argumentos_inventados", "pyd_no_retry"),
         *((f, "pyd") for f in FAULTS))


def agents_config() -> dict[str, Any]:
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["agents"] = {**raw.get("agents", {}), "pyd": {"framework": "pydantic_ai"},
                     "pyd_capped": {"framework": "pydantic_ai", "capped": True},
                     # past the framework's own request_limit (50): its cap, not the stop
                     "pyd_60": {"framework": "pydantic_ai", "max_requests": 60},
                     "pyd_no_retry": {"framework": "pydantic_ai",
                                      "settings": {"tool_retries": 0}}}
    block = {"tasks": ["variacion_busi"], "backends": list(PROVIDERS)}
    raw["matrix"] += [
        {**block, "scenarios": ["correcto", "bucle", "argumentos_inventados", *FAULTS],
         "agents": ["pyd", "pyd_capped"]},
        {**block, "scenarios": ["bucle"], "agents": ["pyd_60"]},
        {**block, "scenarios": ["argumentos_inventados"], "agents": ["pyd_no_retry"]}]
    return raw


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return config.parse(agents_config())


def run(cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str, scenario: str,
        agent: str = "pyd") -> tracemod.Trace:
    key = f"variacion_busi/{provider}/{scenario}__{agent}"
    spec = next(r for r in cfg.runs if r.key == key)
    out = tmp_path / f"{provider}_{scenario}__{agent}.jsonl"
    run_to_trace(spec, toolbox, out)
    return tracemod.read(out)



@pytest.mark.parametrize("provider", PROVIDERS)
def test_correcto_answers_and_verifies(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                       provider: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, "correcto")
    assert (tr.end.termination, tr.end.to_json()["ending"], tr.end.steps) == (
        "answer", "final_output", 3)
    assert [c.name for c in tr.tool_calls()] == ["precio", "precio", "calculadora"]
    assert all(c.status == "ok" for c in tr.tool_calls())
    findings = verify.verify(tr.header.spec["question"], tr.end.answer, tr.tool_calls(),
                             tr.header.spec.get("params", {}))
    assert verify.verdict(findings), findings


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_loop_ends_by_the_hard_stop_the_frameworks_cap_or_the_step_limit(
        cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str) -> None:
    # as shipped, request_limit=50 is past the agent's default max_requests (40)
    shipped = run(cfg, toolbox, tmp_path, provider, "bucle")
    assert (shipped.end.termination, shipped.end.steps) == ("hard_stop", 40)
    own = run(cfg, toolbox, tmp_path, provider, "bucle", "pyd_60")
    assert (own.end.termination, own.end.to_json()["ending"], own.end.steps) == (
        "framework_limit", "UsageLimitExceeded", 50)
    capped = run(cfg, toolbox, tmp_path, provider, "bucle", "pyd_capped")
    spec = next(r for r in cfg.runs if r.key.endswith(f"{provider}/bucle__pyd_capped"))
    assert (capped.end.termination, capped.end.to_json()["ending"]) == (
        "framework_limit", "UsageLimitExceeded")
    assert capped.end.steps == spec.limits.max_steps == 6


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_arguments_get_the_frameworks_own_validation_errors(
        cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, "argumentos_inventados")
    assert tr.end.termination == "answer" and tr.end.steps == 4
    first, *rest = tr.tool_calls()
    # refused by the framework's validation (the args model): the tool never ran
    assert first.status == "invalid" and all(c.status == "ok" for c in rest)
    # what the model reads: pydantic's errors as JSON, in English, no retry sentence;
    # the OpenAI APIs wrap them in {"error": ...}, Messages sends the list (is_error)
    sent = json.loads(first.sent or "")
    errors = sent if provider == "anthropic" else sent["error"]
    assert [(e["type"], e["loc"], e["input"]) for e in errors] == [
        ("string_pattern_mismatch", ["ticker"], "BUSMAR"),
        ("string_pattern_mismatch", ["fecha"], "15/03/2024")]
    assert errors[0]["msg"] == "String should match pattern '^[A-Z]{4}$'"
    # with no tool retry left, the first invalid call ends the run
    strict = run(cfg, toolbox, tmp_path, provider, "argumentos_inventados", "pyd_no_retry")
    assert (strict.end.termination, strict.end.to_json()["ending"], strict.end.steps) == (
        "framework_error", "UnexpectedModelBehavior", 1)


#: what each fault scenario ends as: termination, ending per provider, requests on the wire
FAULT_ENDINGS = {
    "fallo_429_recupera": ("answer", dict.fromkeys(PROVIDERS, "final_output"), 4),
    "fallo_servidor_persistente": ("framework_error", {
        "openai": "ModelOverloadedError", "openai_chat": "ModelOverloadedError",
        "anthropic": "ModelUnavailableError"}, 4),
    "fallo_respuesta_rota": ("framework_error", dict.fromkeys(PROVIDERS, "ModelAPIError"),
                             1),
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("scenario", FAULTS)
def test_faults_end_bounded(cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str,
                            scenario: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, scenario)
    termination, endings, requests = FAULT_ENDINGS[scenario]
    assert (tr.end.termination, tr.end.to_json()["ending"], tr.end.steps) == (
        termination, endings[provider], requests)
    texts = [r.text for r in tr.requests()]
    if scenario == "fallo_429_recupera":  # one 429, retried by the SDK after retry-after
        assert texts[0] == "HTTP 429"
    elif scenario == "fallo_servidor_persistente":  # 1 + max_retries (2) attempts
        assert texts[1:] == ["HTTP 503"] * 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reruns_are_byte_identical(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                   provider: str) -> None:
    for scenario in ("correcto", "argumentos_inventados", "fallo_429_recupera"):
        a = run(cfg, toolbox, tmp_path / "a", provider, scenario)
        b = run(cfg, toolbox, tmp_path / "b", provider, scenario)
        name = f"{provider}_{scenario}__pyd.jsonl"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
        assert a.end == b.end


def test_settings_are_checked(cfg: config.Config, toolbox: Any, tmp_path: Path) -> None:
    raw = agents_config()
    raw["agents"]["pyd"]["settings"] = {"request_limits": 3}
    with pytest.raises(ConfigError) as info:
        config.parse(raw)
    assert info.value.field == "agents.pyd.settings.request_limits"
    raw["agents"]["pyd"]["settings"] = {"timeout": "10"}  # its own model: a number
    with pytest.raises(ConfigError) as info:
        config.parse(raw)
    assert info.value.field == "agents.pyd.settings.timeout"


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
