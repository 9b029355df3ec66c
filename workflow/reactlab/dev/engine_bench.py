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
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from reactlab import data, trace
from reactlab.analysis.verify import Verification
from reactlab.backends.local import load_model
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
    args = parser.parse_args(argv)
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
