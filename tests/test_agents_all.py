"""Every built-in framework on every wire API it speaks and every scripted scenario: the
overlay workflow/configs/agents_all.yaml (docs/agents.md, "Every framework, every
scenario").

* The overlay's matrix is checked against the registry and the default config: each
  framework, as shipped and capped, on every provider of its registry entry, crossed
  with every scripted scenario the default matrix plays on a simulated API.
* A representative slice runs in process (about 25 s at a load average of 4): every
  framework on every API it speaks, ``correcto`` (verified) and ``json_invalido`` (a
  broken call: no 400, no 5xx, bounded), and each framework's ``bucle`` as shipped on one
  API (bounded by its own cap or the simulator's hard stop).
* When the overlay's pipeline run is on disk (``results-agents/``, made by the command in
  the overlay's header), its whole ``agents.csv`` and traces are checked the same way.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactlab import config
from reactlab import trace as tracemod
from reactlab.analysis import verify
from reactlab.runner import run_to_trace

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = ROOT / "workflow" / "configs" / "agents_all.yaml"
RESULTS = ROOT / "results-agents"
#: scenarios that play on a model backend only
MODEL_ONLY = {"react", "plan_execute"}
#: the scenario whose faults are 5xx (every other request of every run is answered)
SERVER_FAULT = "fallo_servidor_persistente"


def overlaid() -> dict[str, Any]:
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["matrix"] = yaml.safe_load(OVERLAY.read_text(encoding="utf-8"))["matrix"]
    return raw


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return config.parse(overlaid())


def test_the_overlay_crosses_every_framework_api_and_scenario(cfg: config.Config) -> None:
    from reactlab.frameworks.registry import FRAMEWORKS

    default = config.load_yaml(ROOT / "config.yaml")
    backends = default["backends"]
    simulated = {(task, s) for block in default["matrix"] for task in block["tasks"]
                 for s in block["scenarios"] if s not in MODEL_ONLY
                 and any(backends[b].get("mode") == "simulated" for b in block["backends"])}
    agents = default["agents"]
    expected = set()
    for name, agent in agents.items():
        entry = FRAMEWORKS[agent["framework"]]
        for provider in entry.providers:
            # a task whose tools come from an MCP server: the frameworks with MCP support
            expected |= {(task, provider, s, name) for task, s in simulated
                         if entry.mcp or "mcp_server" not in default["tasks"][task]}
    got = {(r.task, r.backend, r.scenario.split("__")[0], r.framework.name)
           for r in cfg.runs if r.framework is not None}
    assert got == expected
    # both conditions of every built-in framework
    assert {(a["framework"], bool(a.get("capped"))) for a in agents.values()} == {
        (f, c) for f in FRAMEWORKS if FRAMEWORKS.distribution(f) == "reactlab"
        for c in (False, True)}


def _check(tr: tracemod.Trace, scenario: str, max_requests: int) -> None:
    """No 5xx but the injected ones, no 400 (every request valid, every conversation
    answered), bounded by the hard stop."""
    texts = [r.text for r in tr.requests()]
    bad = [t for t in texts if t.startswith("HTTP 5") or t.startswith("HTTP 4")]
    allowed = {"HTTP 503"} if scenario == SERVER_FAULT else set()
    allowed |= {"HTTP 429"} if scenario.startswith("fallo_429") else set()
    assert set(bad) <= allowed, (tr.run, bad)
    assert tr.end.steps <= max_requests


#: (framework agent, provider) pairs of the in-process slice: every API of each
SLICE = [(a, p) for a, ps in (("openai_agents", ("openai", "openai_chat")),
                              ("pydantic_ai", ("openai", "openai_chat", "anthropic")),
                              ("langchain", ("openai", "openai_chat", "anthropic")),
                              ("inspect_react", ("openai", "openai_chat", "anthropic")))
         for p in ps]


def _run(cfg: config.Config, toolbox: Any, tmp_path: Path, key: str) -> tracemod.Trace:
    spec = next(r for r in cfg.runs if r.key == key)
    out = tmp_path / (key.replace("/", "_") + ".jsonl")
    run_to_trace(spec, toolbox, out)
    return tracemod.read(out)


@pytest.mark.parametrize(("agent", "provider"), SLICE)
def test_a_slice_runs_bounded_and_correcto_verifies(cfg: config.Config, toolbox: Any,
                                                    tmp_path: Path, agent: str,
                                                    provider: str) -> None:
    for scenario in ("correcto", "json_invalido"):
        tr = _run(cfg, toolbox, tmp_path, f"variacion_busi/{provider}/{scenario}__{agent}")
        _check(tr, scenario, 40)
        if scenario == "correcto":
            assert tr.end.termination == "answer", tr.end
            findings = verify.verify(tr.header.spec["question"], tr.end.answer,
                                     tr.tool_calls())
            assert verify.verdict(findings), findings


@pytest.mark.parametrize("agent", ["openai_agents", "pydantic_ai", "langchain",
                                   "inspect_react"])
def test_the_loop_as_shipped_is_bounded(cfg: config.Config, toolbox: Any, tmp_path: Path,
                                        agent: str) -> None:
    tr = _run(cfg, toolbox, tmp_path, f"variacion_busi/openai_chat/bucle__{agent}")
    _check(tr, "bucle", 40)
    assert tr.end.termination in ("framework_limit", "hard_stop")


def test_the_overlay_run_on_disk() -> None:
    """The whole overlay as the pipeline ran it (skipped when its folder is absent)."""
    table = RESULTS / "results" / "tables" / "agents.csv"
    if not table.is_file():
        pytest.skip(f"no {table.relative_to(ROOT)}: run the overlay (its header's command)")
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    cfg = config.parse(overlaid())
    framed = {r.key for r in cfg.runs if r.framework is not None}
    assert {f"{r['task']}/{r['backend']}/{r['scenario']}__{r['agent']}" for r in rows
            if r["agent"] != "lesson"} == framed
    for r in rows:
        tr = tracemod.read(RESULTS / r["trace"])
        _check(tr, r["scenario"], 40)
        if r["scenario"] == "correcto":
            assert r["verified"] == "True", r
