"""A provider is one registered object: the toy provider of tests/toy_provider.py (a
made-up wire API, its simulator and its adapter, registered in that one module) runs
scripted scenarios through the pipeline's run job, the HTTP server over loopback and the
streamed path, with nothing else in the project naming it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

import tests.toy_provider as toy
from reactlab import trace
from reactlab.backends.registry import provider, providers, slot_resources
from reactlab.config import Config, RunSpec, parse
from reactlab.core import joblog
from reactlab.core.errors import ConfigError
from reactlab.runner import run_job, run_to_trace
from reactlab.simulate.server import ServerThread
from tests.conftest import ROOT

SCENARIOS = ["correcto", "argumentos_inventados", "json_invalido", "fallo_429_recupera"]


def toy_config(raw: dict[str, Any], base_url: str = "http://127.0.0.1:9") -> Config:
    """The shipped config plus a simulated and a live toy backend (the live one pointed
    at ``base_url``), and a matrix block for each."""
    raw["live"] = {"enabled": True}
    raw["backends"]["toy"] = {"provider": "toy", "mode": "simulated"}
    raw["backends"]["toy_live"] = {"provider": "toy", "mode": "live", "model": "correcto",
                                   "api_key_env": "TOY_API_KEY", "base_url": base_url}
    raw["matrix"] += [
        {"tasks": ["variacion_busi"], "backends": ["openai", "toy"], "scenarios": SCENARIOS},
        {"tasks": ["variacion_busi"], "backends": ["toy_live"], "scenarios": ["react"]}]
    return parse(raw)


def records(path: Path, *, ids: bool = True) -> list[dict[str, Any]]:
    """The trace's records and end, without what depends on the wire format (token
    counts, and with ``ids=False`` call ids) or on the header (the end's checksum)."""
    tr = trace.read(path)
    out = []
    for rec in [r.to_json() for r in [*tr.records, tr.end]]:
        drop = {"sha256"} | ({"tokens_sent", "cumulative_tokens", "tokens_out"}
                             if not ids else set())
        if not ids and rec["type"] == "tool_call":
            drop.add("id")
        if rec["type"] == "error":
            drop |= {"message", "history"}
        out.append({k: v for k, v in rec.items() if k not in drop})
    return out


def test_the_toy_provider_is_named_nowhere_in_the_package() -> None:
    named = [p for p in (ROOT / "workflow").rglob("*") if p.is_file()
             and p.suffix in (".py", ".smk", ".yaml")
             and re.search(r"\btoy(_turns)?\b", p.read_text(encoding="utf-8"))]
    assert named == []


def test_registering_is_all_it_takes(raw_config: dict[str, Any]) -> None:
    assert provider("toy") is toy.TOY and "toy" in providers()
    assert toy.TOY.http and toy.TOY.modes == ("simulated", "live")
    assert "toy_slots" in slot_resources(lambda wildcards: "toy")
    assert slot_resources(lambda wildcards: "toy")["toy_slots"](None) == 1
    assert "toyapi" in joblog.LOGGERS
    cfg = toy_config(raw_config)
    spec = cfg.run("variacion_busi", "toy", "fallo_429_recupera")  # HTTP faults accepted
    assert spec.backend_config.provider == "toy"
    raw_config["backends"]["toy"] = {"provider": "toy", "mode": "scripted"}
    with pytest.raises(ConfigError) as info:  # the modes of a provider with an HTTP layer
        parse(raw_config)
    assert info.value.field == "backends.toy.mode"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_scripted_scenario_through_the_run_job(raw_config: dict[str, Any],
                                                 data_files: tuple[Path, Path],
                                                 tmp_path: Path, scenario: str) -> None:
    """The pipeline's job: the same calls, results and answer as the openai backend."""
    cfg = toy_config(raw_config)
    paths = {}
    for backend in ("openai", "toy"):
        spec = cfg.run("variacion_busi", backend, scenario)
        paths[backend] = tmp_path / f"{backend}.jsonl"
        line = run_job(spec.to_json(), *data_files, paths[backend])
        assert line.startswith(f"variacion_busi/{backend}/{scenario}: ")
    assert records(paths["toy"], ids=False) == records(paths["openai"], ids=False)
    header = trace.read(paths["toy"]).header
    assert header.spec["backend_config"] == {"provider": "toy", "mode": "simulated"}
    assert "httpx" in header.versions and "openai" not in header.versions


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_streamed_path_gives_the_same_trace(raw_config: dict[str, Any], toolbox: Any,
                                                tmp_path: Path, scenario: str) -> None:
    spec = toy_config(raw_config).run("variacion_busi", "toy", scenario)
    streamed = dataclasses.replace(spec, backend_config=spec.backend_config.replace(
        stream=True))
    run_to_trace(spec, toolbox, tmp_path / "plain.jsonl")
    run_to_trace(streamed, toolbox, tmp_path / "streamed.jsonl")
    assert records(tmp_path / "streamed.jsonl") == records(tmp_path / "plain.jsonl")


def test_through_the_http_server(raw_config: dict[str, Any], toolbox: Any, tmp_path: Path,
                                 loopback: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server serves the toy route; a live toy backend pointed at it writes the
    simulated run's trace, and the route answers in the toy API's shapes."""
    monkeypatch.setenv("TOY_API_KEY", "toy-key")
    fresh = json.dumps(raw_config)
    simulated = toy_config(json.loads(fresh)).run("variacion_busi", "toy", "correcto")
    run_to_trace(simulated, toolbox, tmp_path / "simulated.jsonl")
    with ServerThread(toy_config(json.loads(fresh))) as server:
        live = toy_config(json.loads(fresh), server.url).run(
            "variacion_busi", "toy_live", "react")
        assert isinstance(live, RunSpec)
        run_to_trace(live, toolbox, tmp_path / "live.jsonl")
        bad = httpx.post(server.url + toy.ROUTE, json={"model": "correcto", "turns": []})
        wrong_method = httpx.get(server.url + toy.ROUTE)
        lost = httpx.post(server.url + toy.ROUTE + "/x", json={})
    assert records(tmp_path / "live.jsonl") == records(tmp_path / "simulated.jsonl")
    assert (bad.status_code, bad.json()) == (
        400, {"oops": {"status": 400, "why": "turns: a non-empty list, please"}})
    assert wrong_method.status_code == 405 and "oops" in wrong_method.json()
    assert lost.json() == {"oops": {"status": 404,
                                    "why": f"toy: nothing at POST {toy.ROUTE}/x"}}
