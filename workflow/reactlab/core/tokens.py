"""Offline provisioning of tiktoken's ``o200k_base`` encoding.

tiktoken downloads ``o200k_base.tiktoken`` on first use; this machine (and CI) cannot.
The registry package ``bpe-openai`` ships the identical file gzipped. We gunzip it,
check its sha256 against the hash tiktoken itself expects, and place it in tiktoken's
cache under the name tiktoken looks for, so that the *unmodified* ``tiktoken`` library
loads it (and checks the hash once more) without any network access.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from reactlab.core.errors import TokenizerError
from reactlab.core.io import write_bytes_atomic

if TYPE_CHECKING:
    import tiktoken

ENCODING = "o200k_base"
#: The URL tiktoken loads o200k_base from; its sha1 names the cache file.
SOURCE_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
#: The sha256 tiktoken expects for that file (tiktoken_ext/openai_public.py).
EXPECTED_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def cache_dir() -> Path:
    """tiktoken's cache directory: ``$TIKTOKEN_CACHE_DIR`` or ``~/.cache/reactlab/tiktoken``."""
    env = os.environ.get("TIKTOKEN_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "reactlab" / "tiktoken"


def bundled_bytes() -> bytes:
    """The gunzipped o200k_base file shipped by ``bpe-openai``, hash-checked."""
    try:
        ref = resources.files("bpe_openai").joinpath("data/o200k_base.tiktoken.gz")
        raw = gzip.decompress(ref.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise TokenizerError(
            "cannot provision o200k_base offline: the package 'bpe-openai' (which ships "
            "bpe_openai/data/o200k_base.tiktoken.gz) is not installed; run `make env`"
        ) from exc
    return check_sha256(raw, "bpe_openai/data/o200k_base.tiktoken.gz")


def check_sha256(data: bytes, origin: str) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    if digest != EXPECTED_SHA256:
        raise TokenizerError(
            f"{origin}: sha256 is {digest}, expected {EXPECTED_SHA256} (the hash tiktoken "
            "expects for o200k_base); refusing to count tokens with a different vocabulary"
        )
    return data


def provision(directory: Path | None = None) -> Path:
    """Make sure tiktoken's cache holds a verified o200k_base file; return its path."""
    directory = directory or cache_dir()
    target = directory / hashlib.sha1(SOURCE_URL.encode()).hexdigest()
    if target.exists():
        try:
            check_sha256(target.read_bytes(), str(target))
            return target
        except TokenizerError:
            target.unlink()  # a damaged cache entry is replaced from the bundled copy
    data = bundled_bytes()
    return write_bytes_atomic(target, data)


_LOADING = threading.Lock()


@cache
def _encoding() -> tiktoken.Encoding:
    directory = cache_dir()
    provision(directory)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
    import tiktoken  # lazy: heavy (tiktoken), loaded on the first count

    return tiktoken.get_encoding(ENCODING)


def encoding() -> tiktoken.Encoding:
    """The real tiktoken ``o200k_base`` encoding, loaded without network access.

    Loaded once per process; the lock makes jobs that run as threads of one process
    (docs/workflow.md) share that single load instead of racing to provision it."""
    with _LOADING:
        return _encoding()


def count(text: str) -> int:
    """Number of o200k_base tokens in ``text`` (special tokens are counted as text)."""
    return len(encoding().encode(text, disallowed_special=()))
