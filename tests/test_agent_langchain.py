"""The built-in framework ``langchain`` (LangChain ``create_agent``) through the config and
the runner, on every provider it speaks (docs/agents.md, ``## langchain``).

Each run is in process against the backend's simulator. ``python -m
tests.test_agent_langchain`` prints the table docs/agents.md shows.
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

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("openai_chat", "openai", "anthropic")
SCENARIOS = ("correcto", "bucle", "argumentos_inventados", "fallo_429_recupera",
             "fallo_servidor_persistente", "fallo_respuesta_rota")


def agents_config() -> dict[str, Any]:
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["agents"] = {**raw.get("agents", {}), "lc": {"framework": "langchain"},
                     "lc_capped": {"framework": "langchain", "capped": True}}
    raw["matrix"] += [{"tasks": ["variacion_busi"], "backends": list(PROVIDERS),
                       "scenarios": list(SCENARIOS), "agents": ["lc"]},
                      {"tasks": ["variacion_busi"], "backends": list(PROVIDERS),
                       "scenarios": ["correcto", "bucle"], "agents": ["lc_capped"]}]
    return raw


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return config.parse(agents_config())


def spec_of(cfg: config.Config, provider: str, scenario: str) -> Any:
    return next(r for r in cfg.runs if r.key == f"variacion_busi/{provider}/{scenario}")


def run(cfg: config.Config, toolbox: Any, folder: Path, provider: str,
        scenario: str) -> tracemod.Trace:
    out = folder / provider / f"{scenario}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    run_to_trace(spec_of(cfg, provider, scenario), toolbox, out)
    return tracemod.read(out)


def ending(tr: tracemod.Trace) -> tuple[str, str, int]:
    return tr.end.termination, tr.end.to_json()["ending"], tr.end.steps



@pytest.mark.parametrize("provider", PROVIDERS)
def test_correct_run_answers_and_verifies(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                          provider: str) -> None:
    for scenario in ("correcto__lc", "correcto__lc_capped"):
        tr = run(cfg, toolbox, tmp_path, provider, scenario)
        assert ending(tr) == ("answer", "final_output", 3)
        assert tr.run["agent"] == scenario.split("__")[1]
        assert [c.name for c in tr.tool_calls()] == ["precio", "precio", "calculadora"]
        assert all(c.status == "ok" for c in tr.tool_calls())
        # LangChain serialises the tool's dict itself (json.dumps, no ASCII escapes)
        assert all(json.loads(c.sent or "") == c.result for c in tr.tool_calls())
        findings = verify.verify(tr.header.spec["question"], tr.end.answer, tr.tool_calls(),
                                 tr.header.spec.get("params", {}))
        assert verify.verdict(findings), findings


@pytest.mark.parametrize("provider", PROVIDERS)
def test_loop_shipped_hits_the_hard_stop_and_capped_the_step_limit(
        cfg: config.Config, toolbox: Any, tmp_path: Path, provider: str) -> None:
    # as shipped, create_agent's recursion_limit is 9,999 graph steps: the agent's
    # max_requests (40, the schema's default) stops it first
    shipped = run(cfg, toolbox, tmp_path, provider, "bucle__lc")
    assert ending(shipped) == ("hard_stop", "HardStop", 40)
    capped = run(cfg, toolbox, tmp_path, provider, "bucle__lc_capped")
    max_steps = spec_of(cfg, provider, "bucle__lc_capped").limits.max_steps
    # recursion_limit = 2 * max_steps - 1: max_steps model requests, then GraphRecursionError
    assert ending(capped) == ("framework_limit", "GraphRecursionError", max_steps)
    calls = capped.tool_calls()
    assert len(calls) == max_steps
    assert all(c.status == "ok" for c in calls[:-1])
    # the last turn's call: the graph stopped before its tool node ran it
    assert calls[-1].status == "invalid" and calls[-1].sent is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_arguments_get_langchains_own_error(cfg: config.Config, toolbox: Any,
                                                    tmp_path: Path, provider: str) -> None:
    tr = run(cfg, toolbox, tmp_path, provider, "argumentos_inventados__lc")
    assert ending(tr) == ("answer", "final_output", 4)
    first, *rest = tr.tool_calls()
    # refused by the args_schema (the tool's pydantic model) before the tool ran: what
    # the model reads is the ToolNode's own text, with pydantic's messages in English
    assert first.status == "invalid" and first.sent is not None
    assert first.sent.startswith("Error invoking tool 'precio' with kwargs {'ticker': "
                                 "'BUSMAR', 'fecha': '15/03/2024'} with error:\n")
    assert "String should match pattern" in first.sent
    assert first.sent.endswith(" Please fix the error and try again.")
    assert [(c.name, c.status) for c in rest] == [("precio", "ok"), ("precio", "ok"),
                                                  ("calculadora", "ok")]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_faults_end_bounded(cfg: config.Config, toolbox: Any, tmp_path: Path,
                            provider: str) -> None:
    sdk_error = {"openai_chat": "OpenAIAPIError", "openai": "OpenAIAPIError",
                 "anthropic": "AnthropicAPIError"}[provider]
    # a 429 (retry-after 0.01 s) then the correct run: the SDK's own retry, 1 + 3 requests
    assert ending(run(cfg, toolbox, tmp_path, provider, "fallo_429_recupera__lc")) == (
        "answer", "final_output", 4)
    # 503 on every attempt of the second request: max_retries 2 → 3 attempts, then the
    # SDK's error wrapped by LangChain (a subclass of the SDK's InternalServerError)
    persistent = run(cfg, toolbox, tmp_path, provider, "fallo_servidor_persistente__lc")
    assert ending(persistent) == ("framework_error", sdk_error, 4)
    assert [r.text for r in persistent.requests()][1:] == ["HTTP 503"] * 3
    # a body cut in half: the SDK's JSON decoding fails, no retry
    assert ending(run(cfg, toolbox, tmp_path, provider, "fallo_respuesta_rota__lc")) == (
        "framework_error", "JSONDecodeError", 1)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reruns_are_byte_identical(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                   provider: str) -> None:
    for scenario in ("correcto__lc", "argumentos_inventados__lc", "bucle__lc_capped"):
        a = run(cfg, toolbox, tmp_path / "a", provider, scenario)
        b = run(cfg, toolbox, tmp_path / "b", provider, scenario)
        assert (tmp_path / "a" / provider / f"{scenario}.jsonl").read_bytes() == \
            (tmp_path / "b" / provider / f"{scenario}.jsonl").read_bytes()
        assert a.end == b.end


def test_a_setting_overrides_the_cap(toolbox: Any, tmp_path: Path) -> None:
    raw = agents_config()
    raw["agents"]["lc"]["settings"] = {"recursion_limit": 5, "max_retries": 0}
    cfg = config.parse(raw)
    # 5 graph steps: model, tools, model, tools, model — then GraphRecursionError
    assert ending(run(cfg, toolbox, tmp_path, "openai_chat", "bucle__lc")) == (
        "framework_limit", "GraphRecursionError", 3)
    # no retry: the 503 ends the run at its first attempt
    assert ending(run(cfg, toolbox, tmp_path, "openai_chat",
                      "fallo_servidor_persistente__lc")) == (
        "framework_error", "OpenAIAPIError", 2)


def table(folder: Path) -> str:
    """The docs' table: scenario → termination, ending, requests, tool errors, tokens."""
    from reactlab.data import write
    from reactlab.tools import ToolBox

    raw = agents_config()
    cfg = config.parse(raw)
    toolbox = ToolBox.from_files(*write(folder / "data", int(raw["data"]["seed"])))
    rows = ["| provider | scenario | termination | ending | requests | tool errors | "
            "tokens sent |", "|---|---|---|---|---|---|---|"]
    for provider in PROVIDERS:
        for scenario in [f"{s}__lc" for s in SCENARIOS] + ["bucle__lc_capped"]:
            tr = run(cfg, toolbox, folder, provider, scenario)
            end = tr.end
            rows.append(f"| {provider} | {scenario} | {end.termination} | "
                        f"{end.to_json()['ending']} | {end.steps} | {end.errors} | "
                        f"{end.tokens_sent:,} |")
    return "\n".join(rows)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        sys.stdout.write(table(Path(tmp)) + "\n")
