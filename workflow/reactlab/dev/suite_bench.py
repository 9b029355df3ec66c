"""Benchmark of the BFCL suite on the local model: one shard, one at a time vs batched.

``python -m reactlab.dev.suite_bench --per-category 8 --batch 8 --decoding free`` takes a
seeded slice of the suite (``per-category`` cases of each category of config.yaml's
``suites.bfcl``), runs it as one shard twice in this process — one case at a time, then
in left-padded batches — and prints one JSON object: the model load time, seconds per
case each way, the speed-up, how many cases gave the same trace bytes both ways, and the
extrapolation to the full 1,240 cases. Timings are wall-clock on a shared machine: run
it alone for numbers to quote. Nothing here reaches a trace or a table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from reactlab.backends.local import load_model
from reactlab.backends.local.batch import first_turns
from reactlab.config import load_yaml
from reactlab.suites.bfcl_run import run_case
from reactlab.suites.plan import plan

FULL_CASES = 1240


def run(per_category: int, batch: int, decoding: str, model: str, threads: int,
        config: str = "config.yaml") -> dict[str, Any]:
    raw = load_yaml(config)
    backend = {"provider": "local", "mode": "model", "model": model, "max_new_tokens": 80,
               "threads": threads, **({"decoding": decoding} if decoding != "free" else {})}
    raw["backends"]["bench_model"] = backend
    suite = dict(raw["suites"]["bfcl"])
    suite.update(sample=per_category, backends=["bench_model"], shard_size=10**6,
                 batch_size=batch)
    raw["suites"] = {"bfcl": suite}
    (shard,) = plan(raw)
    specs = list(shard.specs)
    t0 = time.perf_counter()
    lm = load_model(specs[0])
    load_s = time.perf_counter() - t0
    out: dict[str, Any] = {"cases": len(specs), "decoding": decoding, "batch": batch,
                           "threads": threads, "load_s": round(load_s, 2)}
    with tempfile.TemporaryDirectory() as tmp:
        one = [Path(tmp, "one", f"{s.task}.jsonl") for s in specs]
        t0, c0 = time.perf_counter(), time.process_time()
        for spec, path in zip(specs, one, strict=True):
            run_case(spec, path, model=lm)
        seq, seq_cpu = time.perf_counter() - t0, time.process_time() - c0

        many = [Path(tmp, "batch", f"{s.task}.jsonl") for s in specs]
        t0, c0 = time.perf_counter(), time.process_time()
        turns = first_turns(lm, specs, batch)
        for spec, path, turn in zip(specs, many, turns, strict=True):
            run_case(spec, path, model=lm, turn=turn)
        bat, bat_cpu = time.perf_counter() - t0, time.process_time() - c0
        same = sum(a.read_bytes() == b.read_bytes() for a, b in zip(one, many, strict=True))
        calls = sum(json.loads(line).get("type") == "tool_call"
                    for p in many for line in p.read_text().splitlines())
    out.update(one_at_a_time_s_per_case=round(seq / len(specs), 3),
               batched_s_per_case=round(bat / len(specs), 3),
               speedup=round(seq / bat, 2) if bat else None,
               # CPU seconds of this process: less sensitive to other load on the machine
               one_at_a_time_cpu_s_per_case=round(seq_cpu / len(specs), 3),
               batched_cpu_s_per_case=round(bat_cpu / len(specs), 3),
               cpu_speedup=round(seq_cpu / bat_cpu, 2) if bat_cpu else None,
               identical_traces=f"{same}/{len(specs)}", tool_calls_batched=calls,
               full_suite_minutes_batched=round((load_s + bat / len(specs) * FULL_CASES) / 60,
                                                1),
               full_suite_cpu_minutes_batched=round(bat_cpu / len(specs) * FULL_CASES / 60, 1),
               full_suite_minutes_one_at_a_time=round(
                   (load_s + seq / len(specs) * FULL_CASES) / 60, 1))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactlab.dev.suite_bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-category", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--decoding", default="free",
                        choices=["free", "union", "forced", "structural"])
    parser.add_argument("--model", default="data/models/SmolLM2-135M-Instruct")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--config", default="config.yaml")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.per_category, args.batch, args.decoding, args.model,
                         args.threads, args.config), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
