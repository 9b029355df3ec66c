"""Constrained decoding: what the grammar costs, and what it changes.

``bench`` (the default) measures, in one process and on the same tokens:

* grammar compilation: every grammar the modes use, each compiled ``--repeats`` times by a
  fresh compiler (no cache), median milliseconds;
* per-token overhead: for each constrained mode, the model generates once under the
  grammar (greedy, the lesson's question and tools); that token sequence is then replayed
  ``--repeats`` times through the model one token at a time (KV cache, greedy argmax),
  alternately *without* and *with* the grammar's processor masking the logits before the
  argmax. Both sides run the same forward passes on the same tokens, so the difference is
  the processor's cost; the masked side must pick exactly the replayed tokens.

``table`` summarises finished model runs per backend and scenario (a backend is one
decoding mode; the scenario is react or plan_execute): runs, tool
calls, invalid calls (arguments not a JSON object), repeated calls, unknown tools, calls
the tool refused (validation or error), successful calls, runs that answered, verified
answers (the verifier of ``reactlab.analysis.verify``).

    python -m reactlab.dev.decoding_bench [bench] [--model DIR] [--repeats 5] [--threads 1]
    python -m reactlab.dev.decoding_bench table results/traces [--backends smollm2 ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from reactlab.analysis.verify import verification_record
from reactlab.backends.local.grammar import (
    Decoder,
    GrammarFactory,
    generate_with,
    make_processor,
    xgrammar_version,
)
from reactlab.backends.local.model import LocalModel, default_cache_dir, ensure_converted
from reactlab.config.settings import ModelBackend
from reactlab.core.errors import InternalError
from reactlab.dev.local_bench import QUESTION, SYSTEM, tool_schemas
from reactlab.tools import json_schema
from reactlab.trace import read

MODES_BENCHED = ("forced", "union", "structural", "forced_scored")


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.3f}"


def compile_times(lm: Any, repeats: int) -> list[tuple[str, list[float], int]]:
    """(grammar, compile seconds per repeat, EBNF length) for every grammar the modes use."""
    tools = tool_schemas()
    kinds: list[tuple[str, Any]] = [
        ("call (forced)", lambda f: f.call(tools)),
        ("union", lambda f: f.union(tools)),
        ("structural", lambda f: f.structural(tools)),
        *[(f"arguments of {t['function']['name']} (forced_scored)",
           lambda f, t=t: f.arguments_tail(t["function"]["parameters"])) for t in tools],
        ("variacion object (plan_execute)", lambda f: f.json_object(json_schema("variacion"))),
    ]
    vocab = int(lm.model.config.vocab_size)
    out = []
    for label, build in kinds:
        times, size = [], 0
        for _ in range(repeats):
            factory = GrammarFactory(lm.tokenizer, vocab)
            factory.compiler()  # the tokenizer info is built once per model, not per grammar
            spec = build(factory)
            times.append(factory.compile_s[-1])
            size = len(spec.text)
        out.append((label, times, size))
    return out


def replay(lm: Any, prompt: list[int], tokens: list[int], grammar: Any) -> tuple[float, float]:
    """(decode-step forward seconds, processor seconds) of feeding ``tokens`` after
    ``prompt`` one by one, choosing each by argmax of the (masked, when ``grammar``)
    logits. The prefill of the prompt is not counted."""
    import torch  # lazy: heavy (torch)
    from transformers import DynamicCache  # lazy: heavy (transformers)

    proc = make_processor(grammar) if grammar is not None else None
    cache = DynamicCache(config=lm.model.config)
    fwd = mask = 0.0
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([prompt]), cache=cache,
                          use_cache=True).logits[:, -1, :]
        seen = list(prompt)
        for tok in tokens:
            if proc is not None:
                ids = torch.tensor([seen])
                t0 = time.perf_counter()
                logits = proc(ids, logits)
                mask += time.perf_counter() - t0
            choice = int(torch.argmax(logits, dim=-1))
            if proc is not None and choice != tok:
                raise InternalError(f"masked replay chose {choice}, the generation chose {tok}")
            seen.append(tok)
            if tok == lm.eos_token_id:
                break
            t0 = time.perf_counter()
            logits = lm.model(input_ids=torch.tensor([[tok]]), cache=cache,
                              use_cache=True).logits[:, -1, :]
            fwd += time.perf_counter() - t0
    return fwd, mask


def bench(args: argparse.Namespace) -> int:
    model = args.model or str(ensure_converted(args.cache_dir or default_cache_dir()))
    lm = LocalModel.load(model, threads=args.threads, reuse_cache=False)
    tools = tool_schemas()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    print(f"model {model}; xgrammar {xgrammar_version()}; {args.threads} thread(s); "
          f"{args.repeats} repeats; max_new_tokens {args.max_new_tokens}")
    print("\ngrammar compilation (fresh compiler each time), median ms:")
    for label, times, size in compile_times(lm, args.repeats):
        print(f"  {label:42s} {_ms(times):>9s} ms   (EBNF {size} chars)")
    print("\nper-token cost on the same tokens, unconstrained vs masked, median over repeats:")
    print(f"  {'mode':14s} {'tokens':>6s} {'forward ms/tok':>15s} {'+mask ms/tok':>13s} "
          f"{'mask ms/tok':>12s} {'overhead':>9s}  complete")
    for mode in args.modes:
        prep = Decoder(mode, lm, tools).prepare(messages, required=True)
        gen, record = generate_with(lm, prep.ids, args.max_new_tokens, mode, prep.grammar,
                                    prep.prefix)
        new_ids = list(gen.new_ids)
        free_fwd, masked_fwd, masks = [], [], []
        for r in range(args.repeats):
            order = [False, True] if r % 2 == 0 else [True, False]
            for masked in order:
                fwd, mask = replay(lm, prep.ids, new_ids, prep.grammar if masked else None)
                n = len(new_ids)
                if masked:
                    masked_fwd.append(fwd / n)
                    masks.append(mask / n)
                else:
                    free_fwd.append(fwd / n)
        ratio = statistics.median(masks) / statistics.median(free_fwd) * 100
        print(f"  {mode:14s} {len(new_ids):6d} {_ms(free_fwd):>15s} {_ms(masked_fwd):>13s} "
              f"{_ms(masks):>12s} {ratio:8.2f}%  {record['grammar_complete']}")
    print("\n  forward = one decode step of the model; mask = the processor (accept the last "
          "token,\n  fill the bitmask, apply it); overhead = mask / forward of the "
          "unconstrained replay")
    return 0


def table(args: argparse.Namespace) -> int:
    rows: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    modes: dict[tuple[str, str], str] = {}
    paths = sorted(Path(args.traces).glob("*/*/*.jsonl"))
    for path in paths:
        tr = read(path)
        backend = tr.run["backend"]
        cfg = tr.header.run_spec.backend_config
        if not isinstance(cfg, ModelBackend) or (args.backends
                                                 and backend not in args.backends):
            continue
        key = (backend, tr.run["scenario"])
        modes[key] = cfg.decoding
        row = rows[key]
        row["runs"] += 1
        for c in tr.tool_calls():
            row["tool calls"] += 1
            row["invalid"] += c.status == "invalid"
            row["repeated"] += c.status == "repeated"
            row["unknown tool"] += c.status == "unknown"
            row["tool error"] += c.status == "error"
            row["ok results"] += c.status == "ok"
        row["answered"] += tr.end.termination == "answer"
        row["verified"] += bool(verification_record(tr, str(path))["verified"])
    cols = ["runs", "tool calls", "invalid", "repeated", "unknown tool", "tool error",
            "ok results",
            "answered", "verified"]
    print("| backend | scenario | decoding | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---:|" * len(cols))
    for key in sorted(rows):
        print(f"| {key[0]} | {key[1]} | {modes[key]} | "
              + " | ".join(str(rows[key][c]) for c in cols) + " |")
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ap = argparse.ArgumentParser(prog="python -m reactlab.dev.decoding_bench",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command")
    b = sub.add_parser("bench", help="grammar compilation and per-token overhead (default)")
    t = sub.add_parser("table", help="tool calls and verdicts per backend from traces")
    t.add_argument("traces", help="the traces folder (results/traces)")
    t.add_argument("--backends", nargs="*", default=None)
    for p in (ap, b):
        p.add_argument("--model", default=None, help="model folder (default: the converted "
                                                     "SmolLM2-135M-Instruct)")
        p.add_argument("--cache-dir", type=Path, default=None)
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--repeats", type=int, default=5)
        p.add_argument("--max-new-tokens", type=int, default=80)
        p.add_argument("--modes", nargs="+", choices=MODES_BENCHED, default=list(MODES_BENCHED))
    args = ap.parse_args(argv)
    if args.command == "table":
        return table(args)
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
