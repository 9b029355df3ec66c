"""One shard job: every case of the shard through the project's loop, one trace each.

How one case runs is its benchmark's (:meth:`reactlab.suites.registry.Benchmark.run_case`:
BFCL's single turn, :mod:`reactlab.suites.bfcl_run`; AgentDojo's runtime,
:mod:`reactlab.suites.agentdojo_run`). What a shard adds: a model backend's model is
loaded once per shard (torch, transformers and the weights are paid once per job, not
once per case) and handed to each case; with the suite's ``batch_size`` above 1 the
shard's first turns are decoded ``batch_size`` cases at a time
(:mod:`reactlab.backends.local.batch`) and each case receives its turn. Both through the
provider registry (:meth:`reactlab.backends.registry.Provider.model_host`): a benchmark
reaches a model only as its provider loads it.

A model's greedy text also depends on what the spec does not hold: which cases shared a
batch, torch's version and the CPU kernels it ran (in bfloat16 these can change a case's
text: docs/local-models.md, "What a greedy trace depends on"). A model shard's process
writes them down (:func:`reproduction_record`) beside its specs, and the job moves that
record into the shard's trace manifest (:func:`reactlab.suites.shards.publish`); the
traces themselves are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from reactlab.agent.types import ModelTurn
from reactlab.backends.registry import LoadedModel, ModelHost, provider
from reactlab.config import RunSpec
from reactlab.config.settings import LiveBackend
from reactlab.core.errors import UsageError
from reactlab.core.io import write_json_atomic
from reactlab.suites.entry import RunCase

__all__ = ["CONTRACT", "RunCase", "reproduction_record", "run_shard"]

log = logging.getLogger("reactlab.suites")


#: What a model shard's reproduction record promises (its ``contract``).
CONTRACT = ("the traces are reproduced byte for byte by the same specs decoded in the same "
            "batches (cases and order: 'batches'; cases in none were decoded one at a "
            "time) with the same torch and transformers versions, CPU capability, "
            "bfloat16 matmul kernel, MKL and threads; in bfloat16 another layout or other "
            "kernels may change a case's text (docs/local-models.md)")


def reproduction_record(host: ModelHost, model: LoadedModel, specs_json: str,
                        batch_size: int, layout: list[list[str]]) -> dict[str, Any]:
    """What a reader needs, beyond the specs, to reproduce a model shard's traces: the
    specs' sha256 (ties the record to them), the contract, the model and its weights'
    dtype, the batch size and the batches as decoded (``layout``: case ids per
    ``generate``, in order), and the runtime, the last two as its provider's ``host``
    says (:class:`reactlab.backends.registry.ModelHost`)."""
    return {"specs_sha256": hashlib.sha256(specs_json.encode("utf-8")).hexdigest(),
            "contract": CONTRACT, **host.describe(model),
            "batch_size": batch_size, "batches": layout, **host.runtime()}


def run_shard(specs_json: str, outputs: Sequence[str], run_case: RunCase,
              record: str | Path | None = None, *,
              recordings: Sequence[str] | None = None, replay: bool = False) -> str:
    """One shard job (the Snakemake rule and ``reactlab suite-shard``): the specs (a JSON
    list, as :meth:`Shard.to_json` writes it) run by ``run_case`` (how one case runs:
    :func:`reactlab.suites.registry.run_case` for any benchmark's), one trace each to
    ``outputs``; the model, for a local model backend, is loaded once. With a model and
    ``record``, its :func:`reproduction_record` is written there (JSON, atomically) after
    the traces. ``recordings``: one path per case, where a live case's HTTP exchanges are
    recorded, or (``replay``) answered from; a live shard has at most its backend's
    ``max_in_flight`` cases waiting for an answer at once (threads: each case its own
    session, client and trace, so the traces do not depend on the order they finish in).
    Returns the job's summary line. The caller hands ``run_case`` in, so that this module
    (and the run rule's code fingerprint) does not import the registry: the rule's
    fingerprint is this module's and the benchmark's run module's (``Benchmark.code``)."""
    specs = [RunSpec.from_dict(d) for d in json.loads(specs_json)]
    if len(specs) != len(outputs):
        raise UsageError(f"{len(specs)} specs but {len(outputs)} outputs")
    if recordings is not None and len(recordings) != len(specs):
        raise UsageError(f"{len(specs)} specs but {len(recordings)} recordings")
    model: LoadedModel | None = None
    t0 = time.perf_counter()
    host: ModelHost | None = None
    if specs and specs[0].backend_config.mode == "model":
        # the model through its provider (the registry's), loaded once for the shard
        host = provider(specs[0].backend_config.provider).model_host()
        model = host.load(specs[0])
    t_load = time.perf_counter() - t0
    turns: list[ModelTurn | None] = [None] * len(specs)
    suite = specs[0].suite if specs else None
    batch = (suite.batch_size or 1) if suite is not None else 1
    layout: list[list[str]] = []
    if host is not None and model is not None and batch > 1:
        turns = host.first_turns(model, specs, batch, layout)

    def one(i: int) -> dict[str, Any]:
        http: dict[str, str] = {}
        if recordings is not None:
            http["replay" if replay else "recording"] = recordings[i]
        return run_case(specs[i], outputs[i], model=model, turn=turns[i], **http)

    settings = specs[0].backend_config if specs else None
    in_flight = settings.max_in_flight if isinstance(settings, LiveBackend) else 1
    ends = _each(one, len(specs), in_flight)
    calls = sum(end["calls"] for end in ends)
    answered = sum(end["termination"] == "answer" for end in ends)
    if host is not None and model is not None and record is not None:
        write_json_atomic(record, reproduction_record(host, model, specs_json, batch, layout))
    total = time.perf_counter() - t0
    log.info("shard of %d cases: load %.2f s, %.2f s per case", len(specs), t_load,
             (total - t_load) / max(len(specs), 1))
    return (f"{len(specs)} cases of {specs[0].base_key.rsplit('/', 1)[0] if specs else '-'}:"
            f" {calls} calls, {answered} answered in text")


#: A shard logs its progress every this many cases (and at its last one).
PROGRESS_EVERY = 50


def _each(one: Callable[[int], dict[str, Any]], n: int,
          in_flight: int) -> list[dict[str, Any]]:
    """``one(i)`` for every case, ``in_flight`` at a time (1: in order, in this thread);
    the results in case order. The first error stops the shard: cases not started yet are
    not run (a started one finishes; its trace is written atomically or not at all)."""
    t0 = time.perf_counter()

    def progress(done: int) -> None:
        if done % PROGRESS_EVERY == 0 or done == n:
            log.info("%d/%d cases, %.1f s", done, n, time.perf_counter() - t0)

    if in_flight <= 1 or n <= 1:
        out = []
        for i in range(n):
            out.append(one(i))
            progress(i + 1)
        return out
    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        done_count = 0
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for f in finished:
                exc = f.exception()
                if exc is not None:
                    for p in pending:
                        p.cancel()
                    raise exc
                done_count += 1
                progress(done_count)
        return [f.result() for f in futures]
