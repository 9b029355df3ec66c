"""Batched first turns for a shard of single-turn cases: one ``generate`` for N prompts.

An outside suite's shard (:mod:`reactlab.suites.run`) calls :func:`first_turns` with its
loaded model and hands each case's turn to its session (:class:`PrecomputedSession`, opened
by the provider registry: ``open_session(spec, first_turn=...)``).

A single-turn case needs exactly one model turn, and every case of a shard asks the
same model. The cases are ordered by prompt length and the prompts of ``batch_size``
consecutive ones are left-padded into one batch (little padding: neighbours have near
widths) and decoded greedily together (``pad_token_id`` = EOS; the attention mask hides
the padding, and the model derives positions from it). Each row keeps its own grammar
under constrained decoding: :class:`BatchProcessor` holds one xgrammar matcher per row
(the cases' tools differ), fills each row of the token bitmask and leaves the rows that
finished unmasked (``generate`` overwrites their tokens with padding anyway).

Each row's new tokens are cut after its first EOS, exactly what a one-sequence
``generate`` returns, and become the same :class:`~reactlab.agent.types.ModelTurn` (text,
calls, token counts, ``decoding`` record) that
:class:`reactlab.backends.local.LocalModelSession` builds one case at a time. A row's
logits are not bit-identical to the same prompt's alone: left padding moves the prompt
against the kernels' blocks and vector lanes, and more rows change the matrix shapes, so
the sums are rounded in another order (measured by :mod:`reactlab.dev.dtype_invariance`:
up to 5e-5 in float32, up to 0.75 in bfloat16 on the first token's logits). In float32 the
greedy tokens came out the same on every layout and kernel measured; in bfloat16 a case's
text may depend on which cases share its batch, on the CPU's kernels and on torch's
version (docs/local-models.md, "What a greedy trace depends on"). What holds everywhere:
a rerun of the same shard with the same kernels is byte-identical (same batches, same
order); :func:`first_turns` reports its batches (``layout``), and the shard's trace
manifest records them with the kernels (:mod:`reactlab.suites.run`). ``forced_scored``
scores every tool name per case first and stays one case at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reactlab.agent.types import ModelTurn
from reactlab.backends.local import LocalModelSession, model_settings
from reactlab.backends.local.grammar import xgrammar_version
from reactlab.backends.local.hermes import calls_from_text, parse_tool_calls
from reactlab.core.errors import InternalError, UsageError

if TYPE_CHECKING:
    from reactlab.backends.local.model import LocalModel
    from reactlab.config import RunSpec

log = logging.getLogger("reactlab.suites")

BATCHED_MODES = ("free", "union", "forced", "structural")


@dataclass(frozen=True)
class Prepared:
    ids: list[int]
    grammar: Any  # GrammarSpec or None
    mode: str


def make_batch_processor(grammars: Sequence[Any]) -> Any:
    """A logits processor for one batched ``generate``: row i masked by ``grammars[i]``
    (None: that row is free)."""
    import torch  # lazy: heavy (torch)
    import transformers  # lazy: heavy (transformers)
    import xgrammar as xgr  # lazy: heavy (xgrammar)

    class BatchProcessor(transformers.LogitsProcessor):
        def __init__(self) -> None:
            self.matchers = [None if g is None else xgr.GrammarMatcher(g.compiled)
                             for g in grammars]
            vocab = next(g.compiled.tokenizer_info.vocab_size for g in grammars
                         if g is not None)
            self.bitmask = xgr.allocate_token_bitmask(len(grammars), vocab)
            self.started = False
            self.accepted = [0] * len(grammars)

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            self.bitmask.fill_(-1)  # every token allowed unless a matcher says otherwise
            for i, m in enumerate(self.matchers):
                if m is None or m.is_terminated():
                    continue
                if self.started:
                    token = int(input_ids[i, -1])
                    if not m.accept_token(token):
                        raise InternalError(f"row {i}: grammar rejected token {token} it "
                                           "had allowed")
                    self.accepted[i] += 1
                if not m.is_terminated():
                    m.fill_next_token_bitmask(self.bitmask, i)
            self.started = True
            xgr.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device))
            return scores

        def finish(self, row: int, new_ids: list[int]) -> bool:
            m = self.matchers[row]
            assert m is not None
            for token in new_ids[self.accepted[row]:]:
                if m.is_terminated():
                    break
                if not m.accept_token(token):
                    raise InternalError(f"row {row}: grammar rejected token {token}")
            return bool(m.is_terminated())

    del torch
    return BatchProcessor()


def generate_batch(model: LocalModel, prompts: Sequence[list[int]], max_new_tokens: int,
                   grammars: Sequence[Any] | None = None) -> tuple[list[list[int]], Any]:
    """Greedy new tokens for each prompt, decoded as one left-padded batch; each row is
    cut after its first EOS. Returns (new ids per row, the processor or None)."""
    import torch  # lazy: heavy (torch)
    from transformers import LogitsProcessorList  # lazy: heavy (transformers)

    eos = model.eos_token_id
    width = max(len(p) for p in prompts)
    x = torch.full((len(prompts), width), eos, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        x[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    extra: dict[str, Any] = {}
    processor = None
    if grammars is not None and any(g is not None for g in grammars):
        processor = make_batch_processor(grammars)
        extra["logits_processor"] = LogitsProcessorList([processor])
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.model.generate(x, attention_mask=mask, max_new_tokens=max_new_tokens,
                                   do_sample=False, pad_token_id=eos, **extra)
    rows = []
    for i in range(len(prompts)):
        new = out[i, width:].tolist()
        if eos in new:
            new = new[:new.index(eos) + 1]
        rows.append(new)
    log.info("batch of %d: prompt width %d, %d new tokens max, %.2f s", len(prompts), width,
             max(len(r) for r in rows), time.perf_counter() - t0)
    return rows, processor


def first_turns(model: LocalModel, specs: Sequence[RunSpec], batch_size: int,
                layout: list[list[str]] | None = None) -> list[ModelTurn | None]:
    """The first model turn of each case, decoded ``batch_size`` cases at a time (None
    for a case whose mode is not batched: its session decodes it alone). ``layout``, when
    given, receives each batch's case ids (``spec.task``) in decoding order: the rows of
    one ``generate``, top to bottom."""
    prepared: list[Prepared | None] = []
    for spec in specs:
        session = LocalModelSession(spec, model)
        mode = session.decoding
        if mode not in BATCHED_MODES:
            prepared.append(None)
        elif session.decoder is None:
            prepared.append(Prepared(model.prompt_ids(session.messages, session.tools or None),
                                     None, mode))
        else:
            prep = session.decoder.prepare(session.messages, required=True)
            prepared.append(Prepared(prep.ids, prep.grammar, mode))
    turns: list[ModelTurn | None] = [None] * len(specs)
    # Batches of similar prompt lengths: the cases are taken in order of prompt length
    # (ties in shard order), so a batch pads each prompt to a near neighbour's width
    # rather than to the longest prompt of a random eight.
    widths = {i: len(p.ids) for i, p in enumerate(prepared) if p is not None}
    todo = sorted(widths, key=widths.__getitem__)
    max_new = {model_settings(s).max_new_tokens for s in specs}
    if len(max_new) != 1:
        raise UsageError("a shard's cases share one backend, and so max_new_tokens")
    for start in range(0, len(todo), batch_size):
        rows = todo[start:start + batch_size]
        if layout is not None:
            layout.append([specs[i].task for i in rows])
        preps = [prepared[i] for i in rows]
        grammars = [p.grammar for p in preps if p is not None]
        new_ids, processor = generate_batch(model, [p.ids for p in preps if p is not None],
                                            next(iter(max_new)),
                                            grammars if any(grammars) else None)
        for j, i in enumerate(rows):
            p = prepared[i]
            assert p is not None
            raw = model.tokenizer.decode(new_ids[j], skip_special_tokens=True)
            text = raw.strip()
            decoding = None
            if p.mode != "free":
                decoding = {"mode": p.mode, "constrained": p.grammar is not None}
                if p.grammar is not None and processor is not None:
                    decoding.update({"grammar_sha256": p.grammar.sha256,
                                     "xgrammar": xgrammar_version(), "prefix": "",
                                     "grammar_complete": processor.finish(j, new_ids[j])})
            parsed = parse_tool_calls(text)
            calls = calls_from_text(parsed, 0)
            turns[i] = ModelTurn(text=parsed.content if calls else text, calls=calls,
                                 tokens_sent=len(p.ids), tokens_out=len(new_ids[j]),
                                 decoding=decoding)
    return turns
