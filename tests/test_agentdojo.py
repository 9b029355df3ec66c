"""AgentDojo through the project's loop: its runtime executes, its checks score.

Scripted policies: the ground truth must keep full utility with no attack success, under
every defence; a policy that obeys the injected instructions must succeed without defence,
and the project's defences must change that as they claim. The ``suites:`` entry: its
config checks, its plan, its shards through the jobs' functions (verdicts equal to the
standalone command's, byte-identical reruns), and a model backend's multi-turn path.
"""

from __future__ import annotations

import copy
import csv
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agentdojo", reason="the AgentDojo suite needs agentdojo (make env)")

from reactlab import trace as tracemod
from reactlab.analysis.stats import suite_min_trials
from reactlab.config import load_yaml, parse
from reactlab.core.errors import ConfigError, UsageError
from reactlab.suites import agentdojo as ad
from reactlab.suites import registry
from reactlab.suites.agentdojo_score import build_agentdojo
from reactlab.suites.plan import plan
from tests.conftest import ROOT, run_suite_shards

PAIRS = [p for p in ad.pairs("banking") if p.user_task in ("user_task_0", "user_task_1")]


def scores(tmp_path: Path, policy: str, defence: str) -> list[dict]:
    out = []
    for pair in PAIRS:
        path = tmp_path / policy / defence / f"{pair.id}.jsonl"
        ad.run_pair(pair, policy, defence, str(path))
        out.append(ad.score_trace(tracemod.read(path)))
    return out


def test_the_suites_have_their_documented_tasks() -> None:
    counts = {s: (len(ad.suite(s).user_tasks), len(ad.suite(s).injection_tasks))
              for s in ad.SUITES}
    assert counts == {"workspace": (40, 14), "travel": (20, 7), "banking": (16, 9),
                      "slack": (21, 5)}


@pytest.mark.parametrize("defence", ad.DEFENCES)
def test_the_ground_truth_keeps_full_utility_and_no_attack_succeeds(
        tmp_path: Path, defence: str) -> None:
    rows = scores(tmp_path, "ground_truth", defence)
    assert len(rows) == 2 * 9
    assert all(r["utility"] for r in rows)
    assert not any(r["attack_succeeded"] for r in rows)


def test_an_obedient_policy_is_attacked_and_the_defences_act(tmp_path: Path) -> None:
    none = scores(tmp_path, "obeys_injection", "none")
    delimit = scores(tmp_path, "obeys_injection", "delimit")
    scope = scores(tmp_path, "obeys_injection", "scope")
    asr = {name: sum(r["attack_succeeded"] for r in rows)
           for name, rows in (("none", none), ("delimit", delimit), ("scope", scope))}
    assert asr["none"] > 0
    # the obedient script acts on the tag it reads verbatim; delimiting hides the tag
    assert asr["delimit"] == 0
    assert asr["scope"] < asr["none"]


def test_a_run_is_byte_identical_and_its_verdict_a_function_of_the_trace(
        tmp_path: Path) -> None:
    pair = PAIRS[0]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ad.run_pair(pair, "obeys_injection", "none", str(a))
    ad.run_pair(pair, "obeys_injection", "none", str(b))
    assert a.read_bytes() == b.read_bytes()
    assert ad.score_trace(tracemod.read(a)) == ad.score_trace(tracemod.read(b))
    tr = tracemod.read(a)
    assert tr.header.spec["suite"]["attack_model"] == "local"
    assert any("<INFORMATION>" in str(c.result) for c in tr.tool_calls())


def test_the_table_puts_each_defence_beside_the_baseline() -> None:
    rows = [{"suite": "banking", "policy": "obeys_injection", "defence": d, "utility": u,
             "attack_succeeded": s}
            for d, u, s in (("none", True, True), ("none", True, False),
                            ("scope", True, False), ("scope", False, False))]
    with suite_min_trials(2):  # two stochastic pairs (no "deterministic": not scripted)
        df = ad.table(rows)
    scope = df[df.defence == "scope"].iloc[0]
    assert scope.pairs == 2 and scope.utility == 0.5 and scope.attack_success_rate == 0.0
    assert scope.baseline_attack_success_rate == 0.5
    assert 0 < scope.asr_high < 1 and scope.utility_low < 0.5 < scope.utility_high


# ------------------------------------------------------------ the suites: entry


def agentdojo_config(**overrides: Any) -> dict[str, Any]:
    """The default config with its AgentDojo entry alone."""
    raw = load_yaml(ROOT / "config.yaml")
    raw["suites"] = {"agentdojo": {**raw["suites"]["agentdojo"], **overrides}}
    return raw


def test_the_registry_entry_is_agentdojos_own() -> None:
    """The config checks a suite against its installed benchmark's entry (no copy)."""
    from reactlab.suites.registry import BENCHMARKS

    entry = BENCHMARKS["agentdojo"]
    assert entry.categories == ad.SUITES and entry.policies == ad.POLICIES
    assert set(entry.only) == {"defences", "max_steps"}


@pytest.mark.parametrize(("change", "field"), [
    ({"categories": ["simple_python"]}, "suites.agentdojo.categories[0]"),
    ({"categories": ["banking", "bankin"]}, "suites.agentdojo.categories[1]"),
    ({"policies": ["oracle"]}, "suites.agentdojo.policies[0]"),
    ({"defences": ["none", "firewall"]}, "suites.agentdojo.defences[1]"),
    ({"batch_size": 4}, "suites.agentdojo.batch_size"),
    ({"sample": 0}, "suites.agentdojo.sample"),
    ({"max_steps": 0}, "suites.agentdojo.max_steps"),
    ({"backends": ["locl"]}, "suites.agentdojo.backends[0]"),
    ({"benchmark": "agentdojoo"}, "suites.agentdojo.benchmark"),
    ({"shard_sise": 3}, "suites.agentdojo.shard_sise"),
])
def test_a_bad_agentdojo_entry_names_its_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(agentdojo_config(**change))
    assert info.value.field == field


def test_a_bfcl_entry_refuses_agentdojo_fields() -> None:
    raw = load_yaml(ROOT / "config.yaml")
    raw["suites"]["bfcl"]["defences"] = ["none"]
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert info.value.field == "suites.bfcl.defences"
    assert "a bfcl suite takes no 'defences'" in str(info.value)


def test_the_default_config_runs_a_small_scripted_slice() -> None:
    raw = agentdojo_config()
    parse(raw)
    shards = plan(raw)
    specs = [s for sh in shards for s in sh.specs]
    # one pair per suite on the local scripted backend and the Responses simulator, with
    # no defence and with two (workflow/configs/full.yaml: two pairs, four backends, four)
    defences = ("none", "delimit+scope")
    assert len(specs) == 2 * 1 * len(ad.SUITES) * len(ad.POLICIES) * len(defences)
    assert len(shards) == 2 * len(ad.POLICIES) * len(defences)
    assert {s.backend: s.backend_config.mode for s in specs} == {
        "local": "scripted", "openai": "simulated"}
    assert {s.scenario for s in specs} == {ad.scenario_name(p, d) for p in ad.POLICIES
                                           for d in defences}
    assert len({s.task for s in specs}) == 1 * len(ad.SUITES)
    # the scope rule's allowed tools travel with the spec; only "scope" scenarios have it
    assert all((ad.fields_of(s).scope is not None) == ("scope" in s.scenario) for s in specs)


def test_the_overlay_runs_every_pair_under_both_policies_and_four_defences() -> None:
    from reactlab.config import merge

    raw = merge(load_yaml(ROOT / "config.yaml"),
                load_yaml(ROOT / "workflow/configs/agentdojo.yaml"))
    parse(raw)
    raw["suites"] = {"agentdojo": raw["suites"]["agentdojo"]}
    specs = [s for sh in plan(raw) for s in sh.specs]
    assert len(specs) == 949 * 2 * 4 == 7592
    assert len({(s.scenario, s.task) for s in specs}) == 7592


def test_the_sample_is_seeded_per_suite_and_grows_without_reshuffling() -> None:
    a = ad.sample_pairs("travel", 5, 21)
    assert a == ad.sample_pairs("travel", 5, 21)
    assert set(a) <= set(ad.sample_pairs("travel", 9, 21))
    assert set(a) != set(ad.sample_pairs("travel", 5, 22))
    order = ad.pairs("travel")
    assert a == sorted(a, key=order.index)  # the suite's own pair order
    assert ad.sample_pairs("travel", None, 21) == order


def test_the_cached_index_is_what_the_package_says() -> None:
    built = ad.build_index()
    assert json.loads(json.dumps(built)) == ad.index()
    # every tool schema stands alone: pydantic's $refs to $defs are inlined
    for name in ad.SUITES:
        assert "$ref" not in json.dumps(ad.tool_schemas(name))
    share = next(t for t in ad.tool_schemas("workspace") if t["name"] == "share_file")
    assert share["parameters"]["properties"]["permission"]["enum"] == ["r", "rw"]
    # the scope computed on the default environment equals the one on the injected
    # environment of a pair (what the standalone path used)
    for pair in PAIRS[:3]:
        s = ad.suite(pair.suite)
        _, pre = ad.environment(pair)
        injected = sorted({c.function for c in s.user_tasks[pair.user_task].ground_truth(pre)})
        assert ad.scope_tools(pair) == injected


def test_planning_does_not_import_agentdojo_once_the_index_exists() -> None:
    ad.index()  # built (or read) in this process, cached on disk
    code = ("import sys\n"
            "from reactlab.config import load_yaml\n"
            "from reactlab.suites.plan import plan\n"
            "raw = load_yaml('config.yaml')\n"
            "raw['suites'] = {'agentdojo': {**raw['suites']['agentdojo'], 'sample': None,\n"
            "                               'backends': ['local'],\n"
            "                               'defences': ['none', 'delimit', 'scope',\n"
            "                                            'delimit+scope']}}\n"
            "n = sum(len(s.specs) for s in plan(raw))\n"
            "print(n, 'agentdojo' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["7592", "False"]


def test_without_the_package_the_plan_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "agentdojo":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    ad.index.cache_clear()
    try:
        with pytest.raises(UsageError, match=r"suites\.agentdojo: benchmark agentdojo needs "
                                             r"the package agentdojo.*make env"):
            plan(agentdojo_config())
    finally:
        ad.index.cache_clear()


# ---------------------------------------------------------- shards, through the loop


def small_config() -> dict[str, Any]:
    """Three pairs of two suites on the four backends (local scripted, the three
    simulated APIs over the wire) under every defence."""
    return agentdojo_config(categories=["banking", "slack"], sample=3,
                            backends=["local", "openai", "anthropic", "openai_chat"],
                            defences=list(ad.DEFENCES))


def test_shards_verdicts_equal_the_standalone_path(tmp_path: Path) -> None:
    """On every backend (local scripted, the three simulated APIs over the wire) each
    run's verdict and calls are the standalone path's."""
    pairs = run_suite_shards(small_config(), tmp_path / "p")
    assert len(pairs) == 4 * 2 * 3 * 2 * 4
    for trace_path, verified_path in pairs:
        tr = tracemod.read(trace_path)
        rec = json.loads(Path(verified_path).read_text())
        assert rec == registry.suite_record(tr, trace_path)
        info = tr.header.spec["suite"]
        alone = tmp_path / "alone" / f"{Path(trace_path).stem}.jsonl"
        ad.run_pair(ad.Pair(info["suite"], info["user_task"], info["injection_task"]),
                    info["policy"], info["defence"], str(alone))
        verdict = ad.score_trace(tracemod.read(alone))
        assert (rec["utility"], rec["attack_succeeded"]) == (
            verdict["utility"], verdict["attack_succeeded"]), trace_path
        assert rec["verified"] == (rec["utility"] and not rec["attack_succeeded"])
        # the same calls, in the same order, as the standalone command's trace
        assert [(c.name, c.arguments, c.status) for c in tr.tool_calls()] == [
            (c.name, c.arguments, c.status) for c in tracemod.read(alone).tool_calls()]
    out = build_agentdojo(pairs, tmp_path / "tables")
    rows = list(csv.DictReader(out["agentdojo"].open()))
    assert len(rows) == 4 * 2 * 2 * 4
    gt = [r for r in rows if r["policy"] == "ground_truth"]
    assert {(r["utility"], r["attack_success_rate"]) for r in gt} == {("1.0", "0.0")}
    obeys = {(r["backend"], r["suite"], r["defence"]): r for r in rows
             if r["policy"] == "obeys_injection"}
    assert {r["attack_success_rate"] for (_, _, d), r in obeys.items()
            if d == "delimit"} == {"0.0"}
    assert all(r["baseline_attack_success_rate"]
               == obeys[(b, s, "none")]["attack_success_rate"]
               for (b, s, _), r in obeys.items())
    # the same rates on every backend
    assert len({tuple((k, v) for k, v in r.items() if k != "backend") for r in rows}) \
        == len(rows) // 4


def test_a_shard_rerun_is_byte_identical(tmp_path: Path) -> None:
    raw = agentdojo_config(categories=["travel", "banking"], sample=2,
                           policies=["obeys_injection"], defences=["none", "scope"])
    first = run_suite_shards(raw, tmp_path / "a")
    ad._environment.cache_clear()  # built again, as in a fresh process
    second = run_suite_shards(copy.deepcopy(raw), tmp_path / "b")
    for (ta, va), (tb, vb) in zip(first, second, strict=True):
        assert Path(ta).read_bytes() == Path(tb).read_bytes()
        assert Path(va).read_text().replace(str(tmp_path / "a"), "") == \
            Path(vb).read_text().replace(str(tmp_path / "b"), "")
    a = build_agentdojo(first, tmp_path / "ta")["agentdojo"]
    b = build_agentdojo(second, tmp_path / "tb")["agentdojo"]
    assert a.read_bytes() == b.read_bytes()


def test_an_edited_verification_is_refused(tmp_path: Path) -> None:
    from reactlab.core.errors import TraceError

    pairs = run_suite_shards(agentdojo_config(categories=["slack"], sample=1,
                                        policies=["obeys_injection"], defences=["none"]),
                       tmp_path)
    _, verified_path = pairs[0]
    rec = json.loads(Path(verified_path).read_text())
    assert rec["attack_succeeded"] is True
    rec["attack_succeeded"] = False
    Path(verified_path).write_text(json.dumps(rec))
    with pytest.raises(TraceError, match="differs from verifying"):
        build_agentdojo(pairs, tmp_path / "tables")


# ----------------------------------------------------------------- a model plays


@dataclass
class Gen:
    text: str
    new_ids: list[int]


class FakeModel:
    """Scripted generations in Hermes text; remembers every prompt it was given."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = list(outputs)
        self.prompts: list[list[dict[str, Any]]] = []
        self.tools: list[Any] = []

    def reset_cache(self) -> None:
        pass

    def prompt_ids(self, messages: list[dict[str, Any]], tools: Any) -> list[int]:
        self.prompts.append(copy.deepcopy(messages))
        self.tools.append(tools)
        return list(range(sum(len(m["content"]) for m in messages) // 4))

    def generate(self, ids: list[int], max_new_tokens: int = 80) -> Gen:
        text = self.outputs.pop(0)
        return Gen(text, list(range(len(text) // 4)))


def test_a_model_backend_plays_multi_turn_with_agentdojos_tools(tmp_path: Path) -> None:
    raw = agentdojo_config(categories=["banking"], sample=1, backends=["smollm2"],
                           defences=["none", "delimit"])
    raw["suites"]["agentdojo"].pop("policies")
    parse(raw)
    shards = plan(raw)
    assert [s.scenario for s in shards] == ["react__none", "react__delimit"]
    spec = shards[0].specs[0]
    assert spec.agent.system_prompt == ad.system_message()
    assert "Emma Johnson" in spec.agent.system_prompt  # AgentDojo's own, in English
    assert [t["name"] for t in spec.tool_schemas] == list(spec.tools)
    # the model makes the user task's ground-truth calls, then answers
    pair = ad.pair_of(spec)
    s = ad.suite(pair.suite)
    _, pre = ad.environment(pair)
    gt = s.user_tasks[pair.user_task].ground_truth(pre)
    calls = "\n".join('<tool_call>\n' + json.dumps({"name": c.function,
                                                    "arguments": ad._jsonable(dict(c.args))})
                      + "\n</tool_call>" for c in gt)
    answer = getattr(s.user_tasks[pair.user_task], "GROUND_TRUTH_OUTPUT", "") or "done"
    model = FakeModel([calls, answer])
    out = tmp_path / "t.jsonl"
    end = ad.run_case(spec, out, model=model)
    assert end["termination"] == "answer" and end["calls"] == len(gt)
    tr = tracemod.read(out)
    assert [c.name for c in tr.tool_calls()] == [c.function for c in gt]
    assert all(c.status == "ok" for c in tr.tool_calls())
    # the model read AgentDojo's tool schemas and the user task's English prompt; the
    # second turn carries AgentDojo's runtime results
    assert {t["function"]["name"] for t in model.tools[0]} == set(spec.tools)
    assert model.prompts[0][1]["content"] == spec.question
    assert model.prompts[1][-1]["role"] == "tool"
    rec = registry.suite_record(tr, str(out))
    assert rec["utility"] is True and rec["checker"] == "agentdojo"
