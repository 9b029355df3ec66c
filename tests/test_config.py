"""Tests of reactlab.config: parsing, validation messages, the run matrix and config hashes."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reactlab.config import Config, RunSpec, load, load_yaml, parse
from reactlab.core.errors import ConfigError
from tests.conftest import offline_blocks, overlay_stacks

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config.yaml"

Raw = dict[str, Any]


def _error(raw: Raw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse(raw)
    return info.value


def _mutated(raw: Raw, mutate: Callable[[Raw], None]) -> Raw:
    out = copy.deepcopy(raw)
    mutate(out)
    return out


# --------------------------------------------------------------------------- the shipped file


def test_shipped_config_parses() -> None:
    cfg = load(CONFIG)
    assert isinstance(cfg, Config)
    assert cfg.runs


def test_number_of_runs_is_the_sum_of_the_cross_products(raw_config: Raw) -> None:
    blocks = offline_blocks(raw_config)
    assert len(blocks) < len(raw_config["matrix"])  # the live block is left out by default
    # the cross product of each block's tasks, backends, scenarios and agents (the lesson's
    # loop by default; a framework's run is `{scenario}__{agent}`), trials apart; a run
    # that two blocks name is one run
    expected_keys = {f"{t}/{b}/{s}" + (f"__{a}" if a != "lesson" else "")
                     + (f"/t{i}" if block.get("trials", 1) > 1 else "")
                     for block in blocks
                     for t, b, s, a in itertools.product(block["tasks"], block["backends"],
                                                         block["scenarios"],
                                                         block.get("agents", ["lesson"]))
                     for i in range(1, block.get("trials", 1) + 1)}
    cfg = parse(raw_config)
    assert len(cfg.runs) == len(expected_keys)
    assert {r.key for r in cfg.runs} == expected_keys
    assert len({r.key for r in cfg.runs}) == len(cfg.runs)


def test_duplicate_matrix_entries_are_dropped(raw_config: Raw) -> None:
    n = len(parse(raw_config).runs)
    raw_config["matrix"].append(copy.deepcopy(raw_config["matrix"][0]))
    assert len(parse(raw_config).runs) == n


def test_parse_does_not_modify_its_input(raw_config: Raw) -> None:
    before = copy.deepcopy(raw_config)
    parse(raw_config)
    assert raw_config == before


# --------------------------------------------------------------------------- bad inputs

# (id, mutation, expected field, substrings the message must contain)
BAD: list[tuple[str, Callable[[Raw], None], str, tuple[str, ...]]] = [
    ("unknown_key", lambda r: r["agent"].update(max_step=5), "agent.max_step",
     ("unknown key", "did you mean 'max_steps'")),
    ("max_steps_zero", lambda r: r["agent"].update(max_steps=0), "agent.max_steps",
     ("0", "minimum of 1")),
    ("negative_budget", lambda r: r["agent"].update(token_budget=-5), "agent.token_budget",
     ("-5",)),
    ("number_as_string", lambda r: r["agent"].update(max_steps="6"), "agent.max_steps",
     ("'6'", "integer")),
    ("unknown_backend_in_matrix", lambda r: r["matrix"][0]["backends"].insert(0, "openia"),
     "matrix[0].backends[0]", ("no backend named 'openia'", "did you mean 'openai'")),
    ("unknown_provider", lambda r: r["backends"]["openai"].update(provider="azure"),
     "backends.openai.provider", ("'azure'",)),
    ("unknown_tool_in_task", lambda r: r["tasks"]["cierre_acme"]["tools"].append("cotizacion"),
     "tasks.cierre_acme.tools[3]", ("'cotizacion'",)),
    ("steps_and_extends",
     lambda r: r["scenarios"]["bucle_sin_limite"].update(steps=[{"answer": "x"}]),
     "scenarios.bucle_sin_limite", ("`steps`", "`extends`")),
    ("extends_missing", lambda r: r["scenarios"]["bucle_sin_limite"].update(extends="nada"),
     "scenarios.bucle_sin_limite.extends", ("no scenario named 'nada'",)),
    ("extends_chain",
     lambda r: r["scenarios"]["bucle_presupuesto"].update(extends="bucle_sin_limite"),
     "scenarios.bucle_presupuesto.extends", ("'bucle_sin_limite'",)),
    ("calls_and_answer",
     lambda r: r["scenarios"]["correcto"]["steps"][2].update(
         calls=[{"name": "precio", "arguments": {}}]),
     "scenarios.correcto.steps[2]", ("exactly one of `calls` or `answer`",)),
    ("arguments_and_raw",
     lambda r: r["scenarios"]["correcto"]["steps"][0]["calls"][0].update(raw_arguments="{"),
     "scenarios.correcto.steps[0].calls[0]", ("`arguments` or `raw_arguments`, not both",)),
    ("malformed_template",
     lambda r: r["scenarios"]["correcto"]["steps"].__setitem__(2, {"answer": "{ok[0"}),
     "scenarios.correcto.steps", ("malformed template", "{ok[0")),
    ("figure_not_in_matrix", lambda r: r["figure"].update(loop="titular_fiel"),
     "figure.loop", ("variacion_busi/anthropic/titular_fiel", "not in the matrix")),
    ("empty_matrix", lambda r: r.update(matrix=[]), "matrix", ("non-empty",)),
]


@pytest.mark.parametrize(("mutate", "field", "needles"),
                         [pytest.param(m, f, n, id=i) for i, m, f, n in BAD])
def test_bad_input_names_the_culprit(raw_config: Raw, mutate: Callable[[Raw], None],
                                     field: str, needles: tuple[str, ...]) -> None:
    err = _error(_mutated(raw_config, mutate))
    assert err.field == field
    for needle in needles:
        assert needle in err.message, (needle, err.message)
    assert str(err).startswith(f"config: {field}: ")


def test_template_with_a_param_the_task_lacks(raw_config: Raw) -> None:
    # cierre_acme defines {ticker, fecha}; the scenario now also needs {desde}.
    raw_config["scenarios"]["cierre_inventado"]["steps"][1] = {"answer": "{ticker} {desde}"}
    err = _error(raw_config)
    block = next(i for i, b in enumerate(raw_config["matrix"])
                 if "cierre_inventado" in b["scenarios"])
    assert err.field == f"matrix[{block}]"
    assert "'cierre_inventado'" in err.message
    assert "'cierre_acme'" in err.message
    assert "{desde}" in err.message
    assert "{ticker}" not in err.message


def test_root_names_need_no_param(raw_config: Raw) -> None:
    raw_config["scenarios"]["cierre_inventado"]["steps"][1] = {
        "answer": "{question} {results[0]} {ok[0]}"}
    runs = [r for r in parse(raw_config).runs if r.scenario == "cierre_inventado"]
    assert runs  # no ConfigError: the scenario's runs are planned, the template kept
    assert all(r.script.steps[1] == {"answer": "{question} {results[0]} {ok[0]}"}
               for r in runs)


DUPLICATE_YAML = """\
data: {seed: 6, prices: p.parquet, news: n.parquet}
agent:
  max_steps: 6
  max_steps: 7
"""


def test_duplicate_yaml_keys_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATE_YAML, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert "duplicate key 'max_steps'" in info.value.message
    assert "line 4" in info.value.message


def test_duplicate_yaml_key_field_is_its_path(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATE_YAML, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert info.value.field == "agent.max_steps"


def test_duplicate_yaml_key_message_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATE_YAML, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["config.yaml", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "workflow" / "configs").glob("*.yaml"))])
def test_fast_loader_reads_what_the_python_loader_reads(name: str) -> None:
    """load_yaml reads through libyaml when it can; the shipped files come out the same as
    with PyYAML's pure-Python loader (and syntax errors are re-read by that one)."""
    import yaml

    text = (ROOT / name).read_text(encoding="utf-8")
    assert load_yaml(ROOT / name) == yaml.safe_load(text)


def test_unreadable_and_non_mapping_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_yaml(tmp_path / "missing.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_yaml(path)


def test_integral_float_max_steps_is_refused_or_normalised(raw_config: Raw) -> None:
    raw_config["agent"]["max_steps"] = 6.0
    try:
        cfg = parse(raw_config)
    except ConfigError as exc:
        assert exc.field == "agent.max_steps"
        return
    max_steps = cfg.run("variacion_busi", "openai", "bucle").limits.max_steps
    assert type(max_steps) is int


# --------------------------------------------------------------------------- RunSpec


def test_runspec_json_round_trip(raw_config: Raw) -> None:
    cfg = parse(raw_config)
    for spec in cfg.runs:
        back = RunSpec.from_json(spec.to_json())
        assert back == spec
        assert back.tools == spec.tools and isinstance(back.tools, tuple)
        assert back.to_json() == spec.to_json()
        assert back.config_hash == spec.config_hash


def test_config_hash_is_stable_across_parses(raw_config: Raw) -> None:
    a = {r.key: r.config_hash for r in parse(copy.deepcopy(raw_config)).runs}
    b = {r.key: r.config_hash for r in parse(copy.deepcopy(raw_config)).runs}
    assert a == b
    assert all(len(h) == 64 for h in a.values())
    assert len(set(a.values())) == len(a)  # every run depends on a different slice


def test_config_hash_follows_its_own_scenario_only(raw_config: Raw) -> None:
    key = ("variacion_busi", "openai", "bucle")
    base = parse(raw_config).run(*key).config_hash

    changed = copy.deepcopy(raw_config)
    changed["scenarios"]["bucle"]["steps"][0]["calls"][0]["arguments"]["fecha"] = "{hasta}"
    assert parse(changed).run(*key).config_hash != base
    # a scenario that extends bucle follows its base's steps too
    ext = ("variacion_busi", "openai", "bucle_sin_limite")
    assert parse(changed).run(*ext).config_hash != parse(raw_config).run(*ext).config_hash

    unrelated = copy.deepcopy(raw_config)
    unrelated["scenarios"]["correcto"]["steps"][2]["answer"] = "otra respuesta"
    assert parse(unrelated).run(*key).config_hash == base
    assert (parse(unrelated).run("variacion_busi", "openai", "correcto").config_hash
            != parse(raw_config).run("variacion_busi", "openai", "correcto").config_hash)


def test_scenario_limits_override_agent_defaults(raw_config: Raw) -> None:
    agent = raw_config["agent"]
    cfg = parse(raw_config)
    plain = cfg.run("variacion_busi", "anthropic", "bucle")
    assert plain.limits.to_dict() == {"max_steps": agent["max_steps"],
                            "token_budget": agent["token_budget"]}
    sin = raw_config["scenarios"]["bucle_sin_limite"]["limits"]
    assert cfg.run("variacion_busi", "anthropic", "bucle_sin_limite").limits.to_dict() == {
        "max_steps": sin["max_steps"], "token_budget": agent["token_budget"]}
    pres = raw_config["scenarios"]["bucle_presupuesto"]["limits"]
    assert cfg.run("variacion_busi", "anthropic", "bucle_presupuesto").limits.to_dict() == {
        "max_steps": pres["max_steps"], "token_budget": pres["token_budget"]}
    # a non-default agent value reaches scenarios without limits of their own
    raw_config["agent"]["max_steps"] = 9
    assert parse(raw_config).run("variacion_busi", "anthropic", "bucle").limits.max_steps == 9


def test_extends_uses_the_base_script_and_model(raw_config: Raw) -> None:
    cfg = parse(raw_config)
    base = cfg.run("variacion_busi", "openai", "bucle")
    ext = cfg.run("variacion_busi", "openai", "bucle_sin_limite")
    assert raw_config["scenarios"]["bucle_sin_limite"]["extends"] == "bucle"
    assert ext.script.model == "bucle"
    assert ext.script.steps == raw_config["scenarios"]["bucle"]["steps"]
    assert ext.script.repeat_last is True
    assert base.script == ext.script
    assert cfg.run("variacion_busi", "openai", "correcto").script.model == "correcto"


def test_runspec_carries_task_backend_and_agent(raw_config: Raw) -> None:
    spec = parse(raw_config).run("cierre_acme", "anthropic", "ticker_inexistente")
    task = raw_config["tasks"]["cierre_acme"]
    assert spec.key == "cierre_acme/anthropic/ticker_inexistente"
    assert spec.question == task["question"]
    assert spec.tools == tuple(task["tools"])
    assert dict(spec.params) == task["params"]
    assert spec.backend_config.to_dict() == raw_config["backends"]["anthropic"]
    assert spec.agent.to_dict() == {k: raw_config["agent"][k] for k in
                                ("send_tools", "send_system_prompt", "system_prompt",
                                 "defences")}


def test_scenario_defences_override_the_agent_defaults(raw_config: Raw) -> None:
    raw_config["agent"]["defences"]["scope_rule"] = True
    cfg = parse(raw_config)
    base = cfg.run("noticias_busi_abril", "openai", "inyeccion_obedece").agent.defences
    assert base.to_dict() == {"delimit_tool_output": False, "scope_rule": True,
                              "verifier_gate": False}
    own = cfg.run("noticias_busi_abril", "openai",
                  "inyeccion_obedece_delimitada").agent.defences
    assert own.to_dict() == {"delimit_tool_output": True, "scope_rule": True,
                             "verifier_gate": False}


def test_fault_scenarios_are_refused_for_the_local_backend(raw_config: Raw) -> None:
    raw_config["matrix"][-1]["backends"] = ["local"]
    raw_config["matrix"][-1]["scenarios"] = ["fallo_429_recupera"]
    raw_config["matrix"][-1]["tasks"] = ["variacion_busi"]
    with pytest.raises(ConfigError) as info:
        parse(raw_config)
    assert "injects HTTP faults" in info.value.message


def test_overlapping_faults_name_the_field(raw_config: Raw) -> None:
    raw_config["scenarios"]["fallo_429_recupera"]["faults"] = [
        {"attempt": 1, "status": 429}, {"attempt": 1, "status": 500}]
    with pytest.raises(ConfigError) as info:
        parse(raw_config)
    assert info.value.field.startswith("scenarios.fallo_429_recupera.faults")


def test_run_outside_the_matrix_is_a_keyerror(raw_config: Raw) -> None:
    with pytest.raises(KeyError, match="cierre_acme/openai/correcto"):
        parse(raw_config).run("cierre_acme", "openai", "correcto")


def test_live_blocks_join_the_matrix_only_when_enabled(raw_config: Raw) -> None:
    default = {r.key for r in parse(raw_config).runs}
    raw_config["live"] = {"enabled": True}
    live = {r.key for r in parse(raw_config).runs}
    added = live - default
    assert default < live
    assert added and all(k.split("/")[1] in ("openai_live", "anthropic_live",
                                             "openai_chat_live") for k in added)


def test_live_backend_needs_model_and_key_variable(raw_config: Raw) -> None:
    del raw_config["backends"]["openai_live"]["api_key_env"]
    with pytest.raises(ConfigError) as info:
        parse(raw_config)
    assert info.value.field.startswith("backends.openai_live")


def test_constrained_decoding_without_tools_sent_is_refused_at_check(raw_config: Raw) -> None:
    """Issue 27, item 3: a constrained-decoding backend in the matrix with
    `agent.send_tools: false` is a config error naming the field (it used to pass
    `reactlab check` and fail in the run's job)."""
    raw = copy.deepcopy(raw_config)
    raw["agent"]["send_tools"] = False
    with pytest.raises(ConfigError, match=r"smollm2_forced.*decoding 'forced'") as err:
        parse(raw)
    assert err.value.field == "agent.send_tools"
    # the same backends with free decoding run without tools
    raw["backends"]["smollm2_forced"]["decoding"] = "free"
    parse(raw)


@pytest.mark.parametrize("stack", overlay_stacks(), ids=lambda s: s[-1].name)
def test_every_shipped_overlay_passes_check(stack: list[Path]) -> None:
    """Each overlay, on top of those it documents, is a valid config (as `reactlab
    check` and the Snakefile read it), which plans runs and holds every value the
    overlay sets (merged on top, not lost under config.yaml)."""
    merged = load(Path(__file__).resolve().parents[1] / "config.yaml", stack)
    assert merged.runs

    def within(over: Any, base: Any) -> bool:
        if isinstance(over, dict):
            return isinstance(base, dict) and all(
                k in base and within(v, base[k]) for k, v in over.items())
        return bool(over == base)

    assert within(load_yaml(stack[-1]), merged.raw), stack[-1].name


def test_the_full_overlay_holds_the_tour_and_the_breadth() -> None:
    """Issue 38: the default config is the tour, workflow/configs/full.yaml the breadth
    (the default matrix of earlier releases): every default run is in it, and its header
    gives its number of runs."""
    import re

    from reactlab import config

    overlay = ROOT / "workflow" / "configs" / "full.yaml"
    tour = {spec.key for spec in config.load(ROOT / "config.yaml").runs}
    breadth = {spec.key for spec in config.load(ROOT / "config.yaml", [overlay]).runs}
    assert tour < breadth
    said = re.search(r"\((\d+) runs:", overlay.read_text(encoding="utf-8"))
    assert said is not None and int(said.group(1)) == len(breadth), len(breadth)
