"""Typed run settings (reactlab.config.settings): one source for each default, bound and
enumeration, and a run's JSON exactly the config slice it was built from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from reactlab.config import RunSpec, load, parse
from reactlab.config import faults as faults_mod
from reactlab.config.settings import (
    Decoding,
    LiveBackend,
    Mode,
    ModelBackend,
    ScenarioStrategy,
    ScriptedBackend,
    SimulatedBackend,
    StrategyName,
    backend_settings,
)
from reactlab.core.errors import ConfigError
from tests.conftest import ROOT

SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
BACKEND = SCHEMA["properties"]["backends"]["additionalProperties"]["properties"]
MODELS = (SimulatedBackend, ScriptedBackend, ModelBackend, LiveBackend)
_BOUND_KEYS = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt"}


def test_the_literals_are_the_schema_enums() -> None:
    assert list(get_args(Mode)) == BACKEND["mode"]["enum"]
    assert list(get_args(Decoding)) == BACKEND["decoding"]["enum"]
    strategy = SCHEMA["properties"]["scenarios"]["additionalProperties"]["properties"]
    assert list(get_args(ScenarioStrategy)) == strategy["strategy"]["enum"]
    assert set(get_args(StrategyName)) == {*get_args(ScenarioStrategy), "single_turn"}
    assert sorted(m.model_fields["mode"].annotation.__args__[0] for m in MODELS) == sorted(
        BACKEND["mode"]["enum"])


def test_each_backend_field_is_a_schema_property_with_its_default_and_bounds() -> None:
    covered: set[str] = set()
    for model in MODELS:
        for name, info in model.model_fields.items():
            assert name in BACKEND, f"{model.__name__}.{name} is not in the schema"
            covered.add(name)
            prop = BACKEND[name]
            if not info.is_required():
                # the default is the schema's (None: "left out", when it states none)
                assert info.default == prop.get("default"), (model.__name__, name)
            bounds = {k: getattr(m, k) for m in info.metadata
                      for k in ("ge", "le", "gt") if getattr(m, k, None) is not None}
            assert bounds == {_BOUND_KEYS[k]: v for k, v in prop.items() if k in _BOUND_KEYS}, (
                model.__name__, name)
    assert covered == set(BACKEND)  # and every schema property is some model's field


def test_the_fault_bounds_are_the_schema_bounds() -> None:
    fault = SCHEMA["$defs"]["fault"]["properties"]
    assert tuple(fault) == faults_mod.KEYS
    assert tuple(fault["body"]["enum"]) == faults_mod.BODIES
    bases = {"attempt": {"status": 500}, "step": {"status": 500},
             "times": {"step": 1, "status": 500}, "status": {"step": 1}}
    for key, base in bases.items():
        lo, hi = fault[key]["minimum"], fault[key]["maximum"]
        assert faults_mod.parse_fault({**base, key: hi})
        with pytest.raises(ConfigError, match=f"between {lo} and {hi}"):
            faults_mod.parse_fault({**base, key: hi + 1})


@pytest.mark.parametrize("overlays", [(), ("workflow/configs/live.yaml",)])
def test_a_run_spec_json_is_the_config_slice(overlays: tuple[str, ...]) -> None:
    """Built from the typed settings, a spec's JSON holds the backend entry exactly as
    written (no default added, no int turned float) and reads back to an equal spec."""
    cfg = load(ROOT / "config.yaml", [ROOT / o for o in overlays])
    assert cfg.runs
    for spec in cfg.runs:
        written = json.loads(spec.to_json())
        assert json.dumps(written["backend_config"], sort_keys=True) == json.dumps(
            cfg.raw["backends"][spec.backend], sort_keys=True)
        again = RunSpec.from_json(spec.to_json())
        assert again == spec and again.to_json() == spec.to_json()
        assert again.config_hash == spec.config_hash


def test_defaults_are_read_but_not_written() -> None:
    cfg = backend_settings({"provider": "local", "mode": "model", "model": "m"})
    assert isinstance(cfg, ModelBackend)
    assert (cfg.decoding, cfg.max_new_tokens, cfg.threads, cfg.reuse_cache, cfg.dtype) == (
        BACKEND["decoding"]["default"], BACKEND["max_new_tokens"]["default"],
        BACKEND["threads"]["default"], BACKEND["reuse_cache"]["default"], "float32")
    assert cfg.to_dict() == {"provider": "local", "mode": "model", "model": "m"}
    api = backend_settings({"provider": "openai", "mode": "simulated", "max_wait": 2})
    assert api.to_dict()["max_wait"] == 2 and isinstance(api.to_dict()["max_wait"], int)
    assert api.replace(stream=True).to_dict() == {"provider": "openai", "mode": "simulated",
                                                  "max_wait": 2, "stream": True}


@pytest.mark.parametrize(("entry", "cap"), [
    ({"provider": "anthropic", "mode": "simulated", "max_tokens": 300}, 300),
    ({"provider": "openai", "mode": "simulated"}, None),  # none given: none stated
    ({"provider": "openai_chat", "mode": "live", "model": "m", "api_key_env": "K",
      "max_tokens": 80}, 80),
    ({"provider": "local", "mode": "scripted"}, None),
    ({"provider": "local", "mode": "model", "model": "m", "max_new_tokens": 40}, 40),
    # a local model's cap is max_new_tokens, given or not (max_tokens is not read there)
    ({"provider": "local", "mode": "model", "model": "m", "max_tokens": 7},
     BACKEND["max_new_tokens"]["default"]),
])
def test_one_output_token_cap_for_every_backend_kind(entry: dict[str, Any],
                                                     cap: int | None) -> None:
    assert backend_settings(entry).max_output_tokens == cap


@pytest.mark.parametrize(("entry", "field"), [
    ({"provider": "openai", "mode": "simulated", "stream": "yes"}, "backend_config.stream"),
    ({"provider": "openai", "mode": "simulated", "threads": 2}, "backend_config.threads"),
    ({"provider": "local", "mode": "model", "model": "m", "decoding": "greedy"},
     "backend_config.decoding"),
    ({"provider": "local", "mode": "model", "model": "m", "threads": 65},
     "backend_config.threads"),
    ({"provider": "local", "mode": "model", "model": "m", "dtype": "float16"},
     "backend_config.dtype"),
    ({"provider": "local", "mode": "scripted", "dtype": "bfloat16"}, "backend_config"),
    ({"provider": "openai", "mode": "live", "model": "x"}, "backend_config.api_key_env"),
    ({"provider": "openai", "mode": "batch"}, "backend_config"),
])
def test_a_spec_from_json_is_validated(raw_config: dict[str, Any], entry: dict[str, Any],
                                       field: str) -> None:
    """A job's spec JSON is checked again when it is read (the field is named)."""
    spec = json.loads(parse(raw_config).run("variacion_busi", "openai", "correcto").to_json())
    spec["backend_config"] = entry
    with pytest.raises(ConfigError) as info:
        RunSpec.from_json(json.dumps(spec))
    assert info.value.field.startswith(field), info.value.field


def test_no_string_reads_of_settings_outside_config() -> None:
    """The package reads the typed settings' attributes (config/ builds them)."""
    import re

    pattern = re.compile(r"backend_config\[|backend_config\.get\(|\.agent\[|\.limits\[|"
                         r"\.script\[|\.script\.get\(|\.agent\.get\(")
    untyped: set[str] = set()  # a suite case's script is typed too (PolicyScript)
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted(Path(ROOT / "workflow").rglob("*"))
             if p.suffix in (".py", ".smk") and "config" not in p.relative_to(
                 ROOT / "workflow").parts[:2]
             and not (p.parent.name == "suites" and p.name in untyped)
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert found == []
