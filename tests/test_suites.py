"""Outside task suites: BFCL's cases through the project's loop, scored by BFCL's checker.

The scripted policies validate the harness against the outside checker: the oracle must
score 100 % on every case of every category, and each faulty policy must be scored as
BFCL's matching error type. Tool names with dots and English text cross the Hermes
parser and the call grammar unchanged.
"""

from __future__ import annotations

import copy
import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("bfcl_eval", reason="the BFCL suite needs bfcl-eval (make env)")

from reactlab import trace as tracemod
from reactlab.config import load_yaml, parse
from reactlab.core.errors import ConfigError
from reactlab.suites import bfcl
from reactlab.suites.bfcl_tables import PUBLISHED_SOURCE, build_bfcl
from reactlab.suites.plan import plan
from reactlab.suites.registry import suite_record
from reactlab.suites.types import sample_cases
from tests.conftest import ROOT, converted_model, run_suite_shards

ALL_CASES = [c for cat in bfcl.CATEGORIES for c in bfcl.load_cases(cat)]


def test_the_package_ships_the_documented_case_counts() -> None:
    counts = {cat: len(bfcl.load_cases(cat)) for cat in bfcl.CATEGORIES}
    assert counts == {"simple_python": 400, "multiple": 200, "parallel": 200,
                      "parallel_multiple": 200, "irrelevance": 240}


def test_the_oracle_scores_every_case_by_bfcls_checker() -> None:
    failed = [c.id for c in ALL_CASES if not bfcl.score(c, bfcl.policy_calls(c, "oracle"))["valid"]]
    assert failed == []


@pytest.mark.parametrize("policy", sorted(bfcl.EXPECTED_ERROR))
def test_each_faulty_policy_gets_bfcls_matching_error_type(policy: str) -> None:
    wrong: dict[str, list[str]] = {}
    for case in ALL_CASES:
        r = bfcl.score(case, bfcl.policy_calls(case, policy))
        assert not r["valid"], case.id
        if case.category == "irrelevance":
            ok = r["error_type"] == "irrelevance_error:decoder_success"
        elif "parallel" in case.category:
            ok = (r["error_type"] == "parallel_function_checker_no_order:cannot_find_match"
                  and bfcl.EXPECTED_ERROR[policy] in r["sub_error_types"])
        else:
            ok = r["error_type"] == bfcl.EXPECTED_ERROR[policy]
        if not ok:
            wrong.setdefault(str(r["error_type"]), []).append(case.id)
    assert wrong == {}


def test_a_turn_without_a_decodable_call_is_a_decoder_failure_or_a_correct_refusal() -> None:
    simple = bfcl.load_cases("simple_python")[0]
    irrelevant = bfcl.load_cases("irrelevance")[0]
    assert bfcl.score(simple, [])["error_type"] == "ast_decoder:decoder_failed"
    bad = [{"name": simple.functions[0]["name"], "arguments": None}]
    assert bfcl.score(simple, bad)["error_type"] == "ast_decoder:decoder_failed"
    assert bfcl.score(irrelevant, [])["valid"]
    assert bfcl.score(irrelevant, [{"name": None, "arguments": None}])["valid"]
    call = [{"name": irrelevant.functions[0]["name"], "arguments": {}}]
    assert bfcl.score(irrelevant, call)["error_type"] == "irrelevance_error:decoder_success"


def test_function_documents_become_valid_json_schema() -> None:
    import jsonschema
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    targets = set(GORILLA_TO_OPENAPI.values())
    seen: set[str] = set()

    def types_of(schema: Any) -> None:
        if isinstance(schema, dict):
            if "type" in schema:
                assert schema["type"] in targets, schema
                seen.add(schema["type"])
            for v in schema.get("properties", {}).values():
                types_of(v)
            types_of(schema.get("items"))

    for case in ALL_CASES:
        for tool in bfcl.tool_definitions(case.functions):
            jsonschema.Draft202012Validator.check_schema(tool["parameters"])
            assert tool["parameters"]["type"] == "object"
            types_of(tool["parameters"])
    assert {"object", "number", "integer", "string", "array", "boolean"} <= seen
    math = bfcl.load_cases("simple_python")[1]
    assert bfcl.tool_definitions(math.functions)[0]["name"] == "math.factorial"


def test_the_checker_is_imported_without_provider_sdks_or_eval_runner() -> None:
    code = ("import sys; from reactlab.suites import bfcl\n"
            "c = bfcl.load_cases('parallel')[0]\n"
            "assert bfcl.score(c, bfcl.policy_calls(c, 'oracle'))['valid']\n"
            "bad = {'openai', 'anthropic', 'numpy', 'pandas', 'requests', 'filelock'}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in bad "
            "or 'eval_runner' in m or 'model_handler' in m))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ------------------------------------------------------------------ config and plan


def suite_config(**overrides: Any) -> dict[str, Any]:
    """The default config with its BFCL entry alone (AgentDojo: tests/test_agentdojo.py)."""
    raw = load_yaml(ROOT / "config.yaml")
    raw["suites"] = {"bfcl": {**raw["suites"]["bfcl"], **overrides}}
    return raw


def test_the_default_config_runs_a_small_scripted_slice() -> None:
    """The default pipeline: 1 case per category, every policy, on the local scripted
    backend (BFCL's prompt mode) and the Responses simulator (its FC mode);
    workflow/configs/full.yaml runs 2 cases on the three simulated APIs too."""
    raw = load_yaml(ROOT / "config.yaml")
    parse(raw)
    raw["suites"] = {"bfcl": raw["suites"]["bfcl"]}
    shards = plan(raw)
    specs = [s for sh in shards for s in sh.specs]
    assert {s.backend: s.backend_config.mode for s in specs} == {
        "local": "scripted", "openai": "simulated"}
    assert {s.scenario for s in specs} == set(bfcl.POLICIES)
    assert len(specs) == 2 * 1 * len(bfcl.CATEGORIES) * len(bfcl.POLICIES)
    modes = {s.backend: s.suite.case.get("mode", "prompt") for s in specs
             if s.suite is not None}
    assert modes == {"local": "prompt", "openai": "fc"}


def test_the_overlay_runs_every_case() -> None:
    from reactlab.config import merge

    raw = merge(load_yaml(ROOT / "config.yaml"), load_yaml(ROOT / "workflow/configs/bfcl.yaml"))
    parse(raw)
    assert raw["suites"]["bfcl"]["sample"] is None
    models = [b for b in raw["suites"]["bfcl"]["backends"]
              if raw["backends"][b]["mode"] == "model"]
    assert {raw["backends"][b].get("decoding", "free") for b in models} == {
        "free", "union", "forced", "forced_scored"}


def test_the_bfloat16_overlay_runs_every_case_once_in_bfloat16() -> None:
    """workflow/configs/bfcl_bf16.yaml: the 1,240 cases, one model backend, bfloat16."""
    from reactlab.config import merge

    raw = load_yaml(ROOT / "config.yaml")
    for name in ("bfcl.yaml", "bfcl_bf16.yaml"):
        raw = merge(raw, load_yaml(ROOT / "workflow/configs" / name))
    parse(raw)
    raw["suites"] = {"bfcl": raw["suites"]["bfcl"]}
    specs = [s for sh in plan(raw) for s in sh.specs]
    assert len(specs) == sum(len(bfcl.load_cases(c)) for c in bfcl.CATEGORIES) == 1240
    assert {(s.backend_config.mode, s.backend_config.dtype, s.backend_config.decoding)
            for s in specs} == {("model", "bfloat16", "free")}


def test_the_sample_is_seeded_and_grows_without_reshuffling() -> None:
    cases = bfcl.load_cases("multiple")
    a = sample_cases(cases, 5, 21)
    assert [c.id for c in a] == [c.id for c in sample_cases(cases, 5, 21)]
    assert {c.id for c in a} <= {c.id for c in sample_cases(cases, 9, 21)}
    assert {c.id for c in a} != {c.id for c in sample_cases(cases, 5, 22)}
    assert len(sample_cases(cases, None, 21)) == 200


@pytest.mark.parametrize(("change", "field"), [
    ({"backends": ["nadie"]}, "suites.bfcl.backends[0]"),
    ({"categories": ["simple_java"]}, "suites.bfcl.categories[0]"),
    ({"sample": 0}, "suites.bfcl.sample"),
    ({"policies": ["telepathy"]}, "suites.bfcl.policies[0]"),
    ({"batch_size": 0}, "suites.bfcl.batch_size"),
])
def test_a_bad_suite_entry_names_its_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(suite_config(**change))
    assert info.value.field == field


# --------------------------------------------------------------------- through the loop


def test_policies_through_the_loop_parser_and_checker(tmp_path: Path) -> None:
    raw = suite_config(sample=4)
    pairs = run_suite_shards(raw, tmp_path / "r")
    seen: dict[str, set[bool]] = {}
    for trace_path, verified_path in pairs:
        tr = tracemod.read(trace_path)
        rec = json.loads(Path(verified_path).read_text())
        assert rec == suite_record(tr, trace_path)
        seen.setdefault(tr.run["scenario"], set()).add(rec["verified"])
        calls = tr.tool_calls()
        # all parsed back (a faulty policy can make two parallel calls identical)
        assert all(c.status in ("ok", "unknown", "repeated") for c in calls), calls
        assert all(c.result == {"not_executed": "single-turn case: the call is recorded, "
                                                "not run"} for c in calls if c.status != "repeated")
        if rec["category"] != "irrelevance" and tr.run["scenario"] != "wrong_name":
            # the names as the model was offered them: BFCL's own on the local backend
            # (prompt mode), dots made underscores on an API (FC mode)
            offered = {t["name"] for t in tr.header.spec["suite"]["tools"]}
            assert {c.name for c in calls} <= offered
            fc = tr.header.spec["backend_config"]["mode"] == "simulated"
            assert any("." in n for n in offered) != fc or not any(
                "." in f["name"] for f in tr.header.spec["suite"]["functions"])
    assert seen == {"oracle": {True}, "wrong_type": {False}, "wrong_name": {False},
                    "missing_argument": {False}}
    out = build_bfcl(pairs, tmp_path / "tables")
    rows = list(csv.DictReader(out["bfcl"].open()))
    oracle = [r for r in rows if r["scenario"] == "oracle" and r["source"] == "measured"]
    assert {r["category"]: r["accuracy"] for r in oracle} == {
        **dict.fromkeys(bfcl.CATEGORIES, "1.0"), "non_live_ast": "1.0", "all": "1.0"}
    published = [r for r in rows if r["source"] == PUBLISHED_SOURCE]
    assert {r["category"]: r["accuracy"] for r in published}["non_live_ast"] == "0.5319"
    assert "not like-for-like" in PUBLISHED_SOURCE
    wrong_type = [r for r in rows if r["scenario"] == "wrong_type" and r["category"] == "multiple"]
    assert wrong_type[0]["error_types"] == "type_error:simple: 4"
    # simulated backends repeat one outcome: a rate over their cases gets no interval
    assert wrong_type[0]["ci_low"] == wrong_type[0]["ci_high"] == ""


def test_a_shard_rerun_is_byte_identical(tmp_path: Path) -> None:
    raw = suite_config(sample=1, policies=["oracle"])
    first = run_suite_shards(raw, tmp_path / "a")
    second = run_suite_shards(copy.deepcopy(raw), tmp_path / "b")
    for (ta, va), (tb, vb) in zip(first, second, strict=True):
        assert Path(ta).read_bytes() == Path(tb).read_bytes()
        assert Path(va).read_text().replace(str(tmp_path / "a"), "") == \
            Path(vb).read_text().replace(str(tmp_path / "b"), "")


def test_an_edited_verification_is_refused(tmp_path: Path) -> None:
    from reactlab.core.errors import TraceError

    pairs = run_suite_shards(suite_config(sample=1, policies=["wrong_name"],
                                 categories=["simple_python"]), tmp_path)
    _, verified_path = pairs[0]
    rec = json.loads(Path(verified_path).read_text())
    rec["verified"] = True
    Path(verified_path).write_text(json.dumps(rec))
    with pytest.raises(TraceError, match="differs from verifying"):
        build_bfcl(pairs, tmp_path / "tables")


# ------------------------------------------------------------- parser and grammar


def oracle_text(case: bfcl.Case) -> str:
    return "\n".join(f'<tool_call>\n{{"name": {json.dumps(c["name"])}, "arguments": '
                     f'{json.dumps(c["arguments"], ensure_ascii=False)}}}\n</tool_call>'
                     for c in bfcl.policy_calls(case, "oracle"))


def test_dotted_names_and_english_pass_the_hermes_parser() -> None:
    from reactlab.backends.local.hermes import parse_tool_calls

    dotted = [c for c in ALL_CASES if any("." in f["name"] for f in c.functions)
              and c.possible_answer]
    assert len(dotted) > 100
    for case in dotted:
        parsed = parse_tool_calls(oracle_text(case))
        assert [(p.name, p.arguments) for p in parsed.calls] == [
            (c["name"], c["arguments"]) for c in bfcl.policy_calls(case, "oracle")]


def test_dotted_names_and_english_pass_the_call_grammar() -> None:
    pytest.importorskip("xgrammar", reason="constrained decoding needs xgrammar")
    import xgrammar as xgr
    from transformers import AutoConfig, AutoTokenizer

    from reactlab.backends.local.grammar import GrammarFactory

    folder = converted_model()
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    vocab = int(AutoConfig.from_pretrained(folder, local_files_only=True).vocab_size)
    factory = GrammarFactory(tok, vocab)
    cases = [c for c in ALL_CASES if c.category in ("simple_python", "multiple")
             and any("." in f["name"] for f in c.functions)][:12]
    assert cases
    for case in cases:
        tools = [{"type": "function", "function": t}
                 for t in bfcl.tool_definitions(case.functions)]
        matcher = xgr.GrammarMatcher(factory.call(tools).compiled)
        text = oracle_text(case)
        assert matcher.accept_string(text), (case.id, text)
        assert matcher.is_terminated() or matcher.accept_token(tok.eos_token_id), case.id


# -------------------------------------------------------------- through Snakemake


@pytest.fixture(scope="module")
def suite_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import yaml

    from reactlab.dev.bench import copy_workflow

    work = tmp_path_factory.mktemp("suites")
    copy_workflow(work)
    cfg = work / "config.yaml"
    raw = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    raw["suites"]["bfcl"]["policies"] = ["oracle", "wrong_type"]
    raw["suites"]["bfcl"]["backends"] = ["local"]  # the APIs' shards: test_suite_apis.py
    raw["suites"]["bfcl"]["sample"] = 2  # two cases per category
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2",
                           "results/tables/bfcl.csv"], cwd=work, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work


SUITE_JOBS = {"suite_run": 2}  # one shard per policy (oracle, wrong_type)
SUITE_VERIFY = {"suite_verify": 2}


def planned_shards(work: Path, target: str, *, damaged: str = "") -> dict[str, set[str]]:
    """{rule: shard ids} that a dry run plans now. With ``damaged`` (a shard id), results
    were damaged: the dry run alone must report the shard and remove nothing (it then
    plans no shard), and the plan is read after `reactlab recover`, the step a real run
    takes first."""
    from tests.test_profiles import planned_jobs as parse_jobs

    if damaged:
        before = {p: p.read_bytes() for p in (work / "results").rglob("*") if p.is_file()}
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2",
                               target], cwd=work, capture_output=True, text=True,
                              timeout=600, check=False)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert "reactlab: dry run, nothing removed: " in proc.stderr
        assert f"shard {damaged}" in proc.stderr, proc.stderr[-3000:]
        assert {p: p.read_bytes() for p in (work / "results").rglob("*")
                if p.is_file()} == before
        proc = subprocess.run([sys.executable, "-m", "reactlab", "recover"], cwd=work,
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0 and "removed" in proc.stderr, proc.stderr[-3000:]
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", target],
                          cwd=work, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out: dict[str, set[str]] = {}
    for job in parse_jobs(proc.stdout + proc.stderr):
        out.setdefault(job.rule, set()).add(job.wildcards.get("shard", ""))
    return out


@pytest.mark.e2e
def test_the_pipeline_tables_the_slice_and_reruns_only_what_changed(suite_project: Path) -> None:
    from reactlab.dev.bench import after_edit, planned_jobs

    rows = list(csv.DictReader((suite_project / "results/tables/bfcl.csv").open()))
    oracle = {r["category"]: r["accuracy"] for r in rows
              if r["scenario"] == "oracle" and r["source"] == "measured"}
    assert set(oracle.values()) == {"1.0"}
    traces = sorted((suite_project / "results/suites/bfcl/traces").rglob("*.jsonl"))
    assert len(traces) == 2 * 2 * len(bfcl.CATEGORIES)  # one trace per case and policy
    target = "results/tables/bfcl.csv"

    def jobs() -> dict[str, int]:
        return planned_jobs(suite_project, target)

    assert jobs() == {}
    assert after_edit(suite_project, "workflow/reactlab/suites/bfcl_tables.py", jobs) == {
        "suite_tables_bfcl": 1}
    assert after_edit(suite_project, "workflow/reactlab/suites/score.py", jobs) == {
        **SUITE_VERIFY, "suite_tables_bfcl": 1}
    assert after_edit(suite_project, "workflow/reactlab/suites/run.py", jobs) == {
        **SUITE_JOBS, **SUITE_VERIFY, "suite_tables_bfcl": 1}
    # a new policy plans its own shard only; the shards already built stay
    cfg = suite_project / "config.yaml"
    text = cfg.read_text(encoding="utf-8")
    cfg.write_text(text.replace("- wrong_type\n", "- wrong_type\n    - wrong_name\n", 1),
                   encoding="utf-8")
    try:
        new = "bfcl__local__wrong_name__0000"
        assert planned_shards(suite_project, target) == {
            "suite_run": {new}, "suite_verify": {new}, "suite_tables_bfcl": {""}}
    finally:
        cfg.write_text(text, encoding="utf-8")
    # a deleted trace reruns its shard only (the recovery step removes its manifests)
    original = traces[0].read_bytes()
    traces[0].unlink()
    shard = f"bfcl__local__{traces[0].parent.name}__0000"
    assert planned_shards(suite_project, target, damaged=shard) == {
        "suite_run": {shard}, "suite_verify": {shard}, "suite_tables_bfcl": {""}}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", target],
                          cwd=suite_project, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert traces[0].read_bytes() == original  # regenerated, byte-identical
    assert jobs() == {}
    # an edited trace (same size) reruns its shard only; an edited verification its
    # verify job only
    other = traces[-1]
    text = other.read_bytes()
    other.write_bytes(text.replace(b'"', b"'", 1))
    shard = f"bfcl__local__{other.parent.name}__0000"
    assert planned_shards(suite_project, target, damaged=shard) == {
        "suite_run": {shard}, "suite_verify": {shard}, "suite_tables_bfcl": {""}}
    other.write_bytes(text)  # put back: its manifests are gone, so the shard still reruns
    verified = sorted((suite_project / "results/suites/bfcl/verified").rglob("*.json"))
    verified[0].write_text(verified[0].read_text() + " ")
    first = f"bfcl__local__{verified[0].parent.name}__0000"
    planned = planned_shards(suite_project, target, damaged=first)
    assert planned["suite_verify"] >= {first} and planned["suite_tables_bfcl"] == {""}
    assert planned.get("suite_run", set()) == {shard}


# ------------------------------------------------------------- the model, batched


def model_shard(decoding: str = "free", dtype: str | None = None) -> Any:
    """The batched tests' shard: SmolLM2 on the seeded simple_python and parallel cases,
    simple_python_63 and parallel_6 (one batch of 2 in which simple_python_63's shorter
    prompt is left-padded by 32 tokens), 24 new tokens."""
    folder = converted_model()
    raw = suite_config(sample=1, categories=["simple_python", "parallel"],
                       backends=["smollm2"], batch_size=2)
    raw["suites"]["bfcl"].pop("policies")
    raw["backends"]["smollm2"] = {**raw["backends"]["smollm2"], "model": str(folder),
                                  "max_new_tokens": 24,
                                  **({"decoding": decoding} if decoding != "free" else {}),
                                  **({"dtype": dtype} if dtype else {})}
    (shard,) = plan(raw)
    return shard


def greedy_gaps(lm: Any, spec: Any, max_new: int) -> list[float]:
    """Per new token of the case decoded alone: its logit minus the runner-up's."""
    import torch

    from reactlab.backends.local import LocalModelSession

    session = LocalModelSession(spec, lm)
    x = torch.tensor([lm.prompt_ids(session.messages, session.tools or None)])
    with torch.inference_mode():
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new,
                                do_sample=False, pad_token_id=lm.eos_token_id,
                                output_scores=True, return_dict_in_generate=True)
    top = [s[0].float().topk(2).values for s in out.scores]
    return [float(t[0] - t[1]) for t in top]


@pytest.mark.parametrize("decoding", ["free", "forced"])
def test_batched_first_turns_give_the_one_at_a_time_traces(
        tmp_path: Path, decoding: str) -> None:
    """In float32 (the default), batched and one-at-a-time decoding give the same trace
    bytes. Not because the logits are bit-identical (padding and batch shapes move them by
    up to 5e-5: reactlab.dev.dtype_invariance, docs/local-models.md) but because every
    greedy choice of these cases wins by far more: checked, so that the equality holds on
    any CPU's kernels, not by luck. bfloat16 promises less (see the next test)."""
    pytest.importorskip("torch", reason="the local model needs torch")
    if decoding != "free":
        pytest.importorskip("xgrammar", reason="constrained decoding needs xgrammar")
    from reactlab.backends.local import load_model
    from reactlab.backends.local.batch import first_turns
    from reactlab.suites.bfcl_run import run_case

    specs = list(model_shard(decoding).specs)
    lm = load_model(specs[0])
    assert str(next(lm.model.parameters()).dtype) == "torch.float32"
    layout: list[list[str]] = []
    turns = first_turns(lm, specs, 2, layout)
    assert layout == [[s.task for s in specs]]  # one batch: the shorter prompt is padded
    for spec, turn in zip(specs, turns, strict=True):
        if decoding == "free":  # float32 layouts and kernels moved logits by < 1e-4
            assert min(greedy_gaps(lm, spec, 24)) > 1e-3, f"{spec.task}: a near tie"
        one, many = tmp_path / f"{spec.task}.one.jsonl", tmp_path / f"{spec.task}.many.jsonl"
        run_case(spec, one, model=lm)
        run_case(spec, many, model=lm, turn=turn)
        assert one.read_bytes() == many.read_bytes(), spec.task
        tr = tracemod.read(many)
        if decoding == "forced":
            (request,) = tr.requests()
            assert request.decoding is not None and request.decoding["constrained"]
            assert request.n_calls == 1  # a forced turn is one well-formed call


def test_a_bfloat16_shard_reruns_byte_identical_and_its_manifest_says_how(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bfloat16 promises what holds on every CPU: the same shard (the same batches) on the
    same kernels gives the same bytes, and its trace manifest records the batches and the
    kernels. It does not promise the one-at-a-time text: its logits are rounded to steps
    of 1/16 or more, these cases' greedy choices include exact ties, and padding moves
    the logits by up to 0.75, so a padded row's text depends on the CPU's kernels
    (docs/local-models.md, "What a greedy trace depends on")."""
    torch = pytest.importorskip("torch", reason="the local model needs torch")
    from reactlab.suites.registry import run_case
    from reactlab.suites.run import CONTRACT, run_shard
    from reactlab.suites.shards import listed, publish, reproduction, reproduction_file

    shard = model_shard(dtype="bfloat16")
    monkeypatch.chdir(tmp_path)
    specs_json = shard.to_json()
    runs = []
    for name in ("a", "b"):
        spec_file = Path(name, "shards", f"{shard.id}.json")
        spec_file.parent.mkdir(parents=True)
        spec_file.write_text(specs_json, encoding="utf-8")
        traces = shard.traces(name)
        run_shard(specs_json, traces, run_case, reproduction_file(spec_file))
        manifest = spec_file.with_name(f"{shard.id}.traces.json")
        publish(manifest, traces, cache_root=tmp_path / "cache")
        assert not reproduction_file(spec_file).exists()  # moved into the manifest
        assert listed(manifest) == sorted(traces)
        runs.append((traces, reproduction(manifest)))
    (first, rec), (second, rec_b) = runs
    for a, b in zip(first, second, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes(), a
    assert rec is not None and rec == rec_b
    assert rec["dtype"] == "bfloat16" and rec["contract"] == CONTRACT
    assert rec["batch_size"] == 2 and rec["batches"] == [[s.task for s in shard.specs]]
    assert rec["torch"] == torch.__version__ and rec["threads"] == 1
    assert rec["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert rec["bf16_matmul"].startswith(("oneDNN ", "ATen"))
    assert set(rec) >= {"transformers", "onednn_isa", "mkl", "cpu", "env", "specs_sha256"}


def test_a_manifest_takes_only_the_record_of_its_own_specs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reproduction record left for other specs (a changed shard) is dropped, and a
    manifest without one has write_manifest's bytes (scripted shards, the golden runs)."""
    from reactlab.suites.shards import publish, reproduction, reproduction_file
    from reactlab.trace.integrity import write_manifest

    monkeypatch.chdir(tmp_path)
    Path("t.jsonl").write_text("{}\n", encoding="utf-8")
    spec = Path("s.json")
    spec.write_text("[]", encoding="utf-8")
    reproduction_file(spec).write_text(json.dumps({"specs_sha256": "0" * 64}),
                                       encoding="utf-8")
    publish("s.traces.json", ["t.jsonl"], cache_root="cache")
    assert reproduction("s.traces.json") is None
    assert not reproduction_file(spec).exists()
    write_manifest("w.traces.json", ["t.jsonl"], base=".")
    assert Path("s.traces.json").read_bytes() == Path("w.traces.json").read_bytes()


def test_a_case_field_its_benchmark_does_not_declare_is_a_clear_error(tmp_path: Path) -> None:
    """A suite case's own fields are typed by its benchmark's model (``case_fields``):
    the spec keeps them as one flat object (the trace header's bytes), and a field the
    benchmark does not declare is a ConfigError naming it, when planned, run or scored."""
    from reactlab.config import RunSpec
    from reactlab.config.settings import SuiteCase, suite_settings
    from reactlab.suites.bfcl_run import BfclCase
    from reactlab.suites.registry import case_fields, run_case

    raw = load_yaml(ROOT / "config.yaml")
    raw["suites"] = {"bfcl": {**raw["suites"]["bfcl"], "categories": ["simple_python"],
                              "backends": ["openai"], "policies": ["oracle"]}}
    spec = plan(raw)[0].specs[0]
    assert spec.suite is not None and isinstance(spec.suite, SuiteCase)
    fields = case_fields(spec)
    assert isinstance(fields, BfclCase) and fields.category == "simple_python"
    assert fields.mode == "fc"
    assert spec.suite.batch_size == suite_settings(raw["suites"]["bfcl"]).batch_size
    wire = spec.to_dict()["suite"]  # flat, in the order BFCL's traces have
    assert list(wire) == ["name", "benchmark", "category", "language", "functions",
                          "possible_answer", "tools", "batch_size", "mode"]
    assert RunSpec.from_dict(spec.to_dict()) == spec
    assert list(RunSpec.from_json(spec.to_json()).to_dict()["suite"]) == sorted(wire)
    odd = RunSpec.from_dict({**spec.to_dict(), "suite": {**wire, "colour": "blue"}})
    assert odd.suite is not None and odd.suite.case["colour"] == "blue"  # kept as given
    with pytest.raises(ConfigError, match=r"suite \(bfcl case\)\.colour: Extra inputs"):
        case_fields(odd)
    with pytest.raises(ConfigError, match=r"colour"):
        run_case(odd, tmp_path / "t.jsonl")
    assert not (tmp_path / "t.jsonl").exists()


def test_no_settings_model_takes_fields_it_does_not_declare() -> None:
    """Every settings model forbids unknown fields: a suite case's own fields are its
    ``case`` member, typed by its benchmark's model, not free extra keys."""
    package = ROOT / "workflow" / "reactlab"
    found = [str(p.relative_to(package)) for p in package.rglob("*.py")
             if 'extra="allow"' in p.read_text(encoding="utf-8")]
    assert found == []
