"""Benchmark KV-cache prefix reuse on a 4-step agent conversation with the local model.

Runs the lesson's task (BUSI's percentage change) as a 4-step conversation, with and
without cache reuse, alternating in one process, and prints the prefilled tokens and
wall time of every step and the ratios. Tool results are scripted (the lesson's
figures); assistant turns are either what the model generated (``--assistant
generated``, as in a real loop) or the correct Hermes calls (``--assistant scripted``).

    python -m reactlab.dev.local_bench [--model DIR] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactlab.backends.local.hermes import parse_tool_calls, render_tool_calls
from reactlab.backends.local.model import LocalModel, default_cache_dir, ensure_converted
from reactlab.tools import TOOLS, json_schema

SYSTEM = ("Eres un asistente de research de renta variable. Usa las herramientas para obtener "
          "datos; no inventes cifras. Cuando tengas la respuesta, contesta en español en una "
          "o dos frases.")
QUESTION = ("¿Cuánto cambió en porcentaje el cierre de BUSI entre el 2024-03-15 y el "
            "2024-03-22?")
TOOL_NAMES = ("precio", "buscar_noticias", "calculadora")

# (the correct calls of step k, the tool results they get): three tool steps, then the answer.
SCRIPT: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = [
    ([{"name": "precio", "arguments": {"ticker": "BUSI", "fecha": "2024-03-15"}},
      {"name": "precio", "arguments": {"ticker": "BUSI", "fecha": "2024-03-22"}}],
     [{"resultado": {"ticker": "BUSI", "fecha": "2024-03-15", "cierre": 26.19}},
      {"resultado": {"ticker": "BUSI", "fecha": "2024-03-22", "cierre": 27.88}}]),
    ([{"name": "calculadora", "arguments": {"expresion": "(27.88/26.19 - 1)*100"}}],
     [{"resultado": 6.4528}]),
    ([{"name": "buscar_noticias",
       "arguments": {"ticker": "BUSI", "desde": "2024-03-15", "hasta": "2024-03-22"}}],
     [{"resultado": [{"fecha": "2024-03-19", "titular": "Un fondo ofrece comprar Busmar Hogar"}]}]),
]
STEPS = len(SCRIPT) + 1


def tool_schemas() -> list[dict[str, Any]]:
    """The three tools in the chat-template function format (the lesson's ``esquema``)."""
    return [{"type": "function", "function": {"name": n, "description": TOOLS[n].description,
                                              "parameters": json_schema(n)}}
            for n in TOOL_NAMES]


@dataclass(frozen=True)
class Step:
    prompt_tokens: int
    prefill_tokens: int
    new_tokens: int
    seconds: float  # wall time of the generate call
    prefill_seconds: float  # first forward pass, from the reactlab.local timing log
    text: str
    new_ids: tuple[int, ...]


class _Timings(logging.Handler):
    """Collects the ``reactlab_timing`` dicts that :mod:`reactlab.backends.local.model` logs."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[dict[str, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        timing = getattr(record, "reactlab_timing", None)
        if timing is not None:
            self.records.append(timing)


_TIMINGS = _Timings()


def run_conversation(lm: Any, tools: list[dict[str, Any]], *, assistant: str = "generated",
                     max_new_tokens: int = 80) -> list[Step]:
    """The 4-step conversation on ``lm`` (a :class:`~reactlab.backends.local.model.LocalModel`)."""
    lm.reset_cache()
    msgs: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                  {"role": "user", "content": QUESTION}]
    steps: list[Step] = []
    for k in range(STEPS):
        ids = lm.prompt_ids(msgs, tools)
        t0 = time.perf_counter()
        g = lm.generate(ids, max_new_tokens=max_new_tokens)
        seconds = time.perf_counter() - t0
        timing = _TIMINGS.records[-1] if _TIMINGS.records else {}
        steps.append(Step(len(ids), g.prefill_tokens, len(g.new_ids), seconds,
                          float(timing.get("prefill_s", float("nan"))), g.text,
                          tuple(g.new_ids)))
        if k == len(SCRIPT):
            break
        calls, results = SCRIPT[k]
        content = g.text.strip() if assistant == "generated" else render_tool_calls(calls)
        msgs.append({"role": "assistant", "content": content})
        msgs.extend({"role": "tool", "content": json.dumps(r, ensure_ascii=False)}
                    for r in results)
    return steps


def _print_run(label: str, steps: list[Step]) -> None:
    cells = "  ".join(f"{s.prefill_tokens:4d}/{s.prompt_tokens:<4d} {s.prefill_seconds:5.2f}"
                      f"/{s.seconds:5.2f}s" for s in steps)
    total_p = sum(s.prefill_tokens for s in steps)
    total_ps = sum(s.prefill_seconds for s in steps)
    total_s = sum(s.seconds for s in steps)
    print(f"  {label:8s} {cells} | {total_p:5d} tok {total_ps:5.2f}/{total_s:6.2f}s")


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    ap = argparse.ArgumentParser(prog="python -m reactlab.dev.local_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model folder or cached id (default: the converted "
                                    "SmolLM2-135M-Instruct, converted on first use)")
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="where the default model is converted (default: $REACTLAB_MODEL_CACHE "
                         "or ~/.cache/reactlab/models)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=80)
    ap.add_argument("--assistant", choices=("generated", "scripted"), default="generated")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every generation")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    local_log = logging.getLogger("reactlab.backends.local.model")
    local_log.setLevel(logging.INFO)
    local_log.addHandler(_TIMINGS)
    local_log.propagate = args.verbose

    model = args.model or str(ensure_converted(args.cache_dir or default_cache_dir()))
    t0 = time.perf_counter()
    reuse = LocalModel.load(model, threads=args.threads, reuse_cache=True)
    load_s = time.perf_counter() - t0
    fresh = LocalModel(reuse.model, reuse.tokenizer, reuse.name, reuse_cache=False)
    tools = tool_schemas()
    print(f"model {model}: loaded in {load_s:.2f} s; {args.threads} thread(s); "
          f"template renders tools: {reuse.supports_tools()}; assistant turns: {args.assistant}; "
          f"max_new_tokens {args.max_new_tokens}")
    print("  each step: prefilled/prompt tokens, prefill/generate seconds; then run totals")
    runs: dict[str, list[list[Step]]] = {"reuse": [], "no-reuse": []}
    for r in range(args.repeats):
        order = [("reuse", reuse), ("no-reuse", fresh)]
        if r % 2:
            order.reverse()
        print(f"repeat {r + 1}")
        for label, lm in order:
            steps = run_conversation(lm, tools, assistant=args.assistant,
                                     max_new_tokens=args.max_new_tokens)
            runs[label].append(steps)
            _print_run(label, steps)

    same = all(a.text == b.text for ra, rb in zip(runs["reuse"], runs["no-reuse"], strict=True)
               for a, b in zip(ra, rb, strict=True))
    pre = {k: sum(s.prefill_tokens for s in v[0]) for k, v in runs.items()}
    wall = {k: statistics.median(sum(s.seconds for s in run) for run in v)
            for k, v in runs.items()}
    pre_s = {k: statistics.median(sum(s.prefill_seconds for s in run) for run in v)
             for k, v in runs.items()}
    new = sum(s.new_tokens for s in runs["reuse"][0])
    print(f"identical outputs with and without reuse: {'yes' if same else 'NO'}")
    print(f"prefilled tokens: reuse {pre['reuse']} / no-reuse {pre['no-reuse']} = "
          f"{pre['reuse'] / pre['no-reuse']:.3f} ({1 - pre['reuse'] / pre['no-reuse']:.1%} fewer)")
    print(f"median prefill time per conversation: reuse {pre_s['reuse']:.2f} s / no-reuse "
          f"{pre_s['no-reuse']:.2f} s = {pre_s['reuse'] / pre_s['no-reuse']:.3f}")
    print(f"median wall per conversation: reuse {wall['reuse']:.2f} s / no-reuse "
          f"{wall['no-reuse']:.2f} s = {wall['reuse'] / wall['no-reuse']:.3f} "
          f"({new} new tokens per conversation)")
    print("what the model wrote (reuse run 1):")
    for k, s in enumerate(runs["reuse"][0], 1):
        p = parse_tool_calls(s.text)
        print(f"  step {k}: {len(p.calls)} call(s), {len(p.errors)} error(s): {s.text!r}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
