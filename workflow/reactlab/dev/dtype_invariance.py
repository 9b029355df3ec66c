"""What a greedy trace of the local model depends on: batch layout, padding, CPU kernels, threads.

``python -m reactlab.dev.dtype_invariance`` decodes the first turn of a handful of BFCL
cases greedily (the case's Hermes prompt from its planned spec, as tests/test_suites.py
renders it, and ``max_new_tokens`` new tokens), in float32 and in bfloat16, and compares
each case under each condition with the same case decoded alone (one row, no padding):

* batch composition: the case beside a copy of itself (no padding, twice the rows),
  beside each other case (the shorter row is left-padded), and in the shard layouts of
  :mod:`reactlab.backends.local.batch` (by prompt length: batches of 2, one batch of all);
* padding alone: one row, left-padded by 1 and by 32 masked tokens;
* ``LocalModel.generate`` (the one-at-a-time path of a shard) against a batch of one.

CPU kernels and threads are fixed when torch starts, so each configuration runs in a
child process of its own: ``ATEN_CPU_CAPABILITY`` (ATen's vectorised kernels: attention,
norms, activations), ``ONEDNN_MAX_CPU_ISA`` (oneDNN's bfloat16 matmul: ``AVX512_CORE`` is
a CPU without AVX512-BF16, ``AVX2`` one for which oneDNN has no bfloat16 kernel, so ATen
does it), ``MKL_ENABLE_INSTRUCTIONS`` (float32 products) and 2 torch threads instead of
one. Each configuration's batch conditions are compared within it, and its alone tokens
and first-token logits with the native configuration's.

Per dtype, configuration and condition it prints the cases whose new tokens equal the
alone ones, the cases whose first-token logits are bit-identical to the alone ones, the
largest first-token logit difference, and where tokens first differ; ``--json`` writes
everything. docs/local-models.md ("What a greedy trace depends on") quotes its output.
Nothing here reaches a trace or a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from reactlab.backends.local import LocalModelSession
from reactlab.backends.local.kernels import runtime_record
from reactlab.backends.local.model import LocalModel
from reactlab.config import load_yaml
from reactlab.config.settings import Dtype
from reactlab.core.errors import UsageError
from reactlab.suites.plan import plan

#: The test's two cases (tests/test_suites.py: simple_python_63 is the one that differed on
#: an AMX CPU) and three of the default slice's, 277-440 prompt tokens.
DEFAULT_CASES = ("simple_python_63", "parallel_6", "irrelevance_20", "simple_python_316",
                 "multiple_42")
DTYPES: tuple[Dtype, ...] = ("float32", "bfloat16")
#: name -> (environment, torch threads). "native" is the reference of the kernel rows.
CONFIGS: dict[str, tuple[dict[str, str], int]] = {
    "native": ({}, 1),
    "threads2": ({"OMP_WAIT_POLICY": "PASSIVE"}, 2),  # no spinning on a shared machine
    "aten_avx2": ({"ATEN_CPU_CAPABILITY": "avx2"}, 1),
    "aten_default": ({"ATEN_CPU_CAPABILITY": "default"}, 1),
    "onednn_avx512_core": ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, 1),
    "onednn_avx2": ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, 1),
    "avx2_host": ({"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                   "MKL_ENABLE_INSTRUCTIONS": "AVX2"}, 1),
    "mkl_sse42": ({"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}, 1),
}
PADS = (1, 32)


# ------------------------------------------------------------------- one configuration


def prompts(cases: Sequence[str], model: str, config: str) -> dict[str, list[int]]:
    """The first-turn prompt ids of each case, as a suite shard renders them."""
    raw = load_yaml(config)
    raw["backends"]["invariance_model"] = {"provider": "local", "mode": "model",
                                           "model": model, "threads": 1}
    suite = {k: v for k, v in raw["suites"]["bfcl"].items() if k != "policies"}
    suite.update(sample=None, backends=["invariance_model"], shard_size=10**6,
                 categories=sorted({c.rsplit("_", 1)[0] for c in cases}))
    raw["suites"] = {"bfcl": suite}
    specs = {s.task: s for shard in plan(raw) for s in shard.specs}
    missing = [c for c in cases if c not in specs]
    if missing:
        raise UsageError(f"no BFCL case {', '.join(missing)}")
    lm = LocalModel.load(model)
    out = {}
    for case in cases:
        session = LocalModelSession(specs[case], lm)
        out[case] = lm.prompt_ids(session.messages, session.tools or None)
    return out


def greedy_rows(lm: Any, rows: Sequence[list[int]], max_new: int,
                width: int | None = None) -> list[tuple[list[int], Any]]:
    """(new ids cut after EOS, first-token float32 logits) per row of one left-padded
    greedy ``generate``, built as :func:`reactlab.backends.local.batch.generate_batch` builds it;
    ``width`` pads every row further."""
    import torch  # lazy: heavy (torch)

    eos = lm.eos_token_id
    width = max(width or 0, *(len(p) for p in rows))
    x = torch.full((len(rows), width), eos, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, p in enumerate(rows):
        x[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    with torch.inference_mode():
        out = lm.model.generate(x, attention_mask=mask, max_new_tokens=max_new,
                                do_sample=False, pad_token_id=eos, output_scores=True,
                                return_dict_in_generate=True)
    result = []
    for i in range(len(rows)):
        new = out.sequences[i, width:].tolist()
        if eos in new:
            new = new[:new.index(eos) + 1]
        result.append((new, out.scores[0][i].float().clone()))
    return result


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The index of the first new token where ``a`` and ``b`` differ (None: equal)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def measure(cases: Sequence[str], max_new: int, model: str, threads: int,
            config: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """This process's configuration: per dtype, every condition against alone; and the
    alone first-token logits (dtype -> case -> tensor)."""
    import torch  # lazy: heavy (torch)

    ids = prompts(cases, model, config)
    order = sorted(cases, key=lambda c: len(ids[c]))  # backends/local/batch.py's order
    out: dict[str, Any] = {"prompt_tokens": {c: len(ids[c]) for c in cases}, "dtypes": {}}
    first_logits: dict[str, dict[str, Any]] = {}
    for dtype in DTYPES:
        t0 = time.perf_counter()
        lm = LocalModel.load(model, threads=threads, dtype=dtype)
        alone = {c: greedy_rows(lm, [ids[c]], max_new)[0] for c in cases}
        found: dict[str, dict[str, Any]] = {}

        def note(condition: str, case: str, new: list[int], logits: Any, partner: str = "",
                 found: dict[str, dict[str, Any]] = found,
                 alone: dict[str, Any] = alone) -> None:
            ref_ids, ref_logits = alone[case]
            key = f"{case} with {partner}" if partner else case
            found.setdefault(condition, {})[key] = {
                "same_tokens": new == ref_ids, "first_difference": first_difference(new, ref_ids),
                "same_logits": bool(torch.equal(logits, ref_logits)),
                "max_logit_diff": float((logits - ref_logits).abs().max())}

        for c in cases:
            lm.reset_cache()
            gen = lm.generate(ids[c], max_new_tokens=max_new)
            note("LocalModel.generate", c, gen.new_ids, alone[c][1])
            for pad in PADS:
                new, logits = greedy_rows(lm, [ids[c]], max_new, len(ids[c]) + pad)[0]
                note(f"padded by {pad}", c, new, logits)
            new, logits = greedy_rows(lm, [ids[c], ids[c]], max_new)[0]
            note("beside itself", c, new, logits)
        for a, b in combinations(order, 2):  # a is the shorter (or as long)
            (na, la), (nb, lb) = greedy_rows(lm, [ids[a], ids[b]], max_new)
            note("beside a longer case (padded)", a, na, la, b)
            note("beside a shorter case (not padded)", b, nb, lb, a)
        for size, name in ((2, "layout: batches of 2"), (len(order), "layout: one batch")):
            for start in range(0, len(order), size):
                chunk = order[start:start + size]
                for c, (new, logits) in zip(
                        chunk, greedy_rows(lm, [ids[c] for c in chunk], max_new), strict=True):
                    note(name, c, new, logits)
        out["dtypes"][dtype] = {
            "seconds": round(time.perf_counter() - t0, 1),
            "alone": {c: {"ids": alone[c][0],
                          "logits_sha256": hashlib.sha256(
                              alone[c][1].numpy().tobytes()).hexdigest()} for c in cases},
            "conditions": found}
        first_logits[dtype] = {c: alone[c][1] for c in cases}
    out["runtime"] = runtime_record()
    return out, first_logits


# ------------------------------------------------------------------------- the report


def summarise(cases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rows = list(cases.values())
    firsts = sorted(r["first_difference"] for r in rows if r["first_difference"] is not None)
    return {"cases": len(rows), "same_tokens": sum(r["same_tokens"] for r in rows),
            "same_logits": sum(r["same_logits"] for r in rows),
            "max_logit_diff": max(r["max_logit_diff"] for r in rows),
            "first_difference": firsts[0] if firsts else None,
            "differing": sorted(c for c, r in cases.items() if not r["same_tokens"])}


def compare_configs(results: dict[str, dict[str, Any]], logits: dict[str, Any],
                    dtype: str) -> dict[str, Any]:
    """Each configuration's alone tokens and first-token logits against native's
    (``logits``: configuration -> dtype -> case -> tensor)."""
    base = results["native"]["dtypes"][dtype]
    out = {}
    for name, res in results.items():
        mine = res["dtypes"][dtype]
        per = {}
        for c, ref in base["alone"].items():
            diff = float((logits[name][dtype][c] - logits["native"][dtype][c]).abs().max())
            per[c] = {"same_tokens": mine["alone"][c]["ids"] == ref["ids"],
                      "first_difference": first_difference(mine["alone"][c]["ids"], ref["ids"]),
                      "same_logits": mine["alone"][c]["logits_sha256"] == ref["logits_sha256"],
                      "max_logit_diff": diff}
        out[name] = summarise(per)
    return out


def cell(s: dict[str, Any]) -> str:
    text = (f"{s['same_tokens']}/{s['cases']} tokens, {s['same_logits']}/{s['cases']} "
            f"logits, max Δ {s['max_logit_diff']:.2g}")
    if s["differing"]:
        text += f" (differ: {', '.join(s['differing'])} from token {s['first_difference']})"
    return text


def overall(results: dict[str, dict[str, Any]], dtype: str) -> dict[str, dict[str, Any]]:
    """Per condition, every configuration's rows together."""
    rows: dict[str, dict[str, Any]] = {}
    for name, res in results.items():
        for cond, cases in res["dtypes"][dtype]["conditions"].items():
            rows.setdefault(cond, {}).update({f"{name}: {k}": v for k, v in cases.items()})
    return {cond: summarise(cases) for cond, cases in rows.items()}


def report(results: dict[str, dict[str, Any]], logits: dict[str, Any]) -> str:
    lines = []
    for dtype in DTYPES:
        lines += [f"\n## {dtype}\n", "| condition | every configuration, against alone |",
                  "|---|---|"]
        for cond, s in overall(results, dtype).items():
            lines.append(f"| {cond} | {s['same_tokens']}/{s['cases']} tokens, "
                         f"{s['same_logits']}/{s['cases']} logits, max Δ "
                         f"{s['max_logit_diff']:.2g} |")
        lines += ["", "| configuration | condition | against alone |", "|---|---|---|"]
        for name, res in results.items():
            for cond, cases in res["dtypes"][dtype]["conditions"].items():
                lines.append(f"| {name} | {cond} | {cell(summarise(cases))} |")
        lines += ["", "| configuration | kernels | alone, against native |", "|---|---|---|"]
        for name, s in compare_configs(results, logits, dtype).items():
            rt = results[name]["runtime"]
            kernels = (f"ATen {rt['cpu_capability']}, bf16 matmul {rt['bf16_matmul']}, "
                       f"{rt['threads']} thread(s)")
            lines.append(f"| {name} | {kernels} | {cell(s)} |")
    return "\n".join(lines)


def run(cases: Sequence[str], configs: Sequence[str], max_new: int, model: str,
        config: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every configuration in a child process of its own: their results by name, and
    their alone first-token logits (name -> dtype -> case -> tensor)."""
    import torch  # lazy: heavy (torch)

    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or "native" not in configs:
        raise UsageError(f"configurations: {', '.join(CONFIGS)} (native among them); "
                         f"unknown: {', '.join(unknown) or '-'}")
    results: dict[str, dict[str, Any]] = {}
    logits: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in configs:
            env_extra, threads = CONFIGS[name]
            env = {k: v for k, v in os.environ.items()
                   if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                "MKL_ENABLE_INSTRUCTIONS")}
            env.update(env_extra)
            path = Path(tmp, f"{name}.json")
            cmd = [sys.executable, "-m", "reactlab.dev.dtype_invariance", "--worker", str(path),
                   "--threads", str(threads), "--max-new-tokens", str(max_new),
                   "--model", model, "--config", config, "--cases", *cases]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise UsageError(f"configuration {name} failed:\n{proc.stderr[-3000:]}")
            results[name] = json.loads(path.read_text(encoding="utf-8"))
            logits[name] = torch.load(path.with_suffix(".pt"))
            print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return results, logits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactlab.dev.dtype_invariance",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES))
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS))
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--model", default="data/models/SmolLM2-135M-Instruct")
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--json", help="write every result here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # one configuration, this process
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        import torch  # lazy: heavy (torch)

        res, logits = measure(args.cases, args.max_new_tokens, args.model, args.threads,
                              args.config)
        torch.save(logits, Path(args.worker).with_suffix(".pt"))
        Path(args.worker).write_text(json.dumps(res), encoding="utf-8")
        return 0
    results, logits = run(args.cases, args.configs, args.max_new_tokens, args.model,
                          args.config)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(report(results, logits))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
