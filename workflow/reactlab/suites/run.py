"""One shard job: every case of the shard through the project's loop, one trace each.

How one case runs is its benchmark's (:meth:`reactlab.suites.registry.Benchmark.run_case`:
BFCL's single turn, :mod:`reactlab.suites.bfcl_run`; AgentDojo's runtime,
:mod:`reactlab.suites.agentdojo_run`). What a shard adds: a model backend's model is
loaded once per shard (torch, transformers and the weights are paid once per job, not
once per case) and handed to each case; with the suite's ``batch_size`` above 1 the
shard's first turns are decoded ``batch_size`` cases at a time
(:mod:`reactlab.backends.local.batch`) and each case receives its turn.

A model's greedy text also depends on what the spec does not hold: which cases shared a
batch, torch's version and the CPU kernels it ran (in bfloat16 these can change a case's
text: docs/local-models.md, "What a greedy trace depends on"). A model shard's process
writes them down (:func:`reproduction_record`) beside its specs, and the job moves that
record into the shard's trace manifest (:func:`reactlab.suites.shards.publish`); the
traces themselves are unchanged.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reactlab.agent.types import ModelTurn
from reactlab.config import RunSpec
from reactlab.core.errors import UsageError

if TYPE_CHECKING:
    from reactlab.backends.local.model import LocalModel


class RunCase(Protocol):
    """How one case runs (:meth:`reactlab.suites.registry.Benchmark.run_case`): the spec,
    its trace path, the shard's model and the case's batched first turn → the end
    record's data."""

    def __call__(self, spec: RunSpec, out: str, *, model: LocalModel | None = None,
                 turn: ModelTurn | None = None) -> dict[str, Any]: ...


__all__ = ["CONTRACT", "RunCase", "reproduction_record", "run_shard"]

log = logging.getLogger("reactlab.suites")


#: What a model shard's reproduction record promises (its ``contract``).
CONTRACT = ("the traces are reproduced byte for byte by the same specs decoded in the same "
            "batches (cases and order: 'batches'; cases in none were decoded one at a "
            "time) with the same torch and transformers versions, CPU capability, "
            "bfloat16 matmul kernel, MKL and threads; in bfloat16 another layout or other "
            "kernels may change a case's text (docs/local-models.md)")


def reproduction_record(model: LocalModel, specs_json: str, batch_size: int,
                        layout: list[list[str]]) -> dict[str, Any]:
    """What a reader needs, beyond the specs, to reproduce a model shard's traces: the
    specs' sha256 (ties the record to them), the contract, the weights' dtype, the batch
    size and the batches as decoded (``layout``: case ids per ``generate``, in order), and
    the runtime (:func:`reactlab.backends.local.kernels.runtime_record`)."""
    import hashlib

    from reactlab.backends.local.kernels import runtime_record

    dtype = str(next(model.model.parameters()).dtype).removeprefix("torch.")
    return {"specs_sha256": hashlib.sha256(specs_json.encode("utf-8")).hexdigest(),
            "contract": CONTRACT, "model": model.name, "dtype": dtype,
            "batch_size": batch_size, "batches": layout, **runtime_record()}


def run_shard(specs_json: str, outputs: Sequence[str], run_case: RunCase,
              record: str | Path | None = None) -> str:
    """One shard job (the Snakemake rule and ``reactlab suite-shard``): the specs (a JSON
    list, as :meth:`Shard.to_json` writes it) run in order by ``run_case`` (how one case
    runs: :func:`reactlab.suites.registry.run_case` for any benchmark's), one trace each
    to ``outputs``; the model, for a model backend, is loaded once. With a model and
    ``record``, its :func:`reproduction_record` is written there (JSON, atomically) after
    the traces. Returns the job's summary line. The caller hands ``run_case`` in, so that
    this module (and the run rule's code fingerprint) does not import the registry: the
    rule's fingerprint is this module's and the benchmark's run module's
    (``Benchmark.code``)."""
    specs = [RunSpec.from_dict(d) for d in json.loads(specs_json)]
    if len(specs) != len(outputs):
        raise UsageError(f"{len(specs)} specs but {len(outputs)} outputs")
    model = None
    t0 = time.perf_counter()
    if specs and specs[0].backend_config.mode == "model":
        from reactlab.backends.local import load_model

        model = load_model(specs[0])
    t_load = time.perf_counter() - t0
    turns: list[ModelTurn | None] = [None] * len(specs)
    suite = specs[0].suite if specs else None
    batch = int(suite.get("batch_size", 1)) if suite is not None else 1
    layout: list[list[str]] = []
    if model is not None and batch > 1:
        from reactlab.backends.local.batch import first_turns

        turns = first_turns(model, specs, batch, layout)
    calls = answered = 0
    for spec, out, turn in zip(specs, outputs, turns, strict=True):
        end = run_case(spec, out, model=model, turn=turn)
        calls += end["calls"]
        answered += end["termination"] == "answer"
    if model is not None and record is not None:
        from reactlab.core.io import write_json_atomic

        write_json_atomic(record, reproduction_record(model, specs_json, batch, layout))
    total = time.perf_counter() - t0
    log.info("shard of %d cases: load %.2f s, %.2f s per case", len(specs), t_load,
             (total - t_load) / max(len(specs), 1))
    return (f"{len(specs)} cases of {specs[0].base_key.rsplit('/', 1)[0] if specs else '-'}:"
            f" {calls} calls, {answered} answered in text")
