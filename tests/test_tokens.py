"""Tests of reactlab.core.tokens: offline provisioning of o200k_base and token counting."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from reactlab.core import tokens
from reactlab.core.errors import TokenizerError

# Stated independently of the module: tiktoken's cache file name is the sha1 of this URL,
# and this is the sha256 tiktoken pins for o200k_base.
URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CACHE_NAME = hashlib.sha1(URL.encode()).hexdigest()


def test_constants() -> None:
    assert tokens.SOURCE_URL == URL
    assert tokens.EXPECTED_SHA256 == SHA256
    assert tokens.ENCODING == "o200k_base"


def test_provision_into_a_directory(tmp_path: Path) -> None:
    target_dir = tmp_path / "a" / "b"  # does not exist yet
    path = tokens.provision(target_dir)
    assert path == target_dir / CACHE_NAME
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256
    assert [p.name for p in target_dir.iterdir()] == [CACHE_NAME]  # no temp file left
    # a second call keeps the verified file as it is
    mtime = path.stat().st_mtime_ns
    assert tokens.provision(target_dir) == path
    assert path.stat().st_mtime_ns == mtime


def test_provision_uses_the_env_directory(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokens.cache_dir() == tmp_path
    assert tokens.provision() == tmp_path / CACHE_NAME
    assert (tmp_path / CACHE_NAME).is_file()


def test_default_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tokens.cache_dir() == tmp_path / "reactlab" / "tiktoken"


def test_corrupted_cache_file_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / CACHE_NAME
    target.write_bytes(b"not a vocabulary\n")
    path = tokens.provision(tmp_path)
    assert path == target
    assert hashlib.sha256(target.read_bytes()).hexdigest() == SHA256
    assert [p.name for p in tmp_path.iterdir()] == [CACHE_NAME]


def test_check_sha256_names_both_hashes() -> None:
    data = b"otra cosa"
    with pytest.raises(TokenizerError) as info:
        tokens.check_sha256(data, "origen/x.tiktoken")
    msg = str(info.value)
    assert hashlib.sha256(data).hexdigest() in msg
    assert SHA256 in msg
    assert "origen/x.tiktoken" in msg


def test_check_sha256_returns_good_data(tmp_path: Path) -> None:
    data = tokens.provision(tmp_path).read_bytes()
    assert tokens.check_sha256(data, "x") is data


def test_bundled_bytes_are_the_verified_file() -> None:
    assert hashlib.sha256(tokens.bundled_bytes()).hexdigest() == SHA256


def test_encoding_is_real_tiktoken() -> None:
    import tiktoken

    enc = tokens.encoding()
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.name == "o200k_base"
    assert enc.n_vocab > 200_000
    assert enc.decode(enc.encode("¿Cuál fue el cierre?")) == "¿Cuál fue el cierre?"


def test_count() -> None:
    n = tokens.count("hola")
    assert type(n) is int
    assert 1 <= n <= 3
    assert tokens.count("") == 0
    assert tokens.count("hola " * 100) > 50
    # special tokens in the text are counted as text, never refused
    assert tokens.count("<|endoftext|>") > 1
