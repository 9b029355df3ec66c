"""The local model's llama.cpp engine (``engine: llama_cpp``, docs/local-models.md).

The config and trace-header tests need nothing installed. The ones marked ``full`` run
llama-cpp-python on the converted SmolLM2 (``make env-llama``; skipped without it): the
prompt ids llama.cpp is fed are its own tokenisation of the rendered text, and two greedy
runs of a lesson scenario at a fixed thread count write byte-identical traces.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reactlab.backends.local import load_model
from reactlab.backends.local.llama import LLAMA_CPP_VERSION
from reactlab.config.settings import backend_settings
from reactlab.core.errors import ClientError, ConfigError
from reactlab.runner import header
from tests.conftest import ROOT

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
needs_llama = pytest.mark.skipif(
    not HAS_LLAMA, reason="llama-cpp-python is not installed (make env-llama)")

BASE = {"provider": "local", "mode": "model", "model": "data/models/SmolLM2-135M-Instruct"}


def test_the_engine_is_typed_and_transformers_by_default() -> None:
    assert backend_settings(BASE).engine == "transformers"
    assert "engine" not in backend_settings(BASE).to_dict()  # old specs keep their hash
    llama = backend_settings({**BASE, "engine": "llama_cpp"})
    assert llama.engine == "llama_cpp" and llama.packages == ("llama-cpp-python",)
    with pytest.raises(ConfigError, match=r"backend_config\.engine"):
        backend_settings({**BASE, "engine": "vllm"})


@pytest.mark.parametrize(("extra", "message"), [
    # forced_scored scores whole tool names with transformers (other modes: test_llama_grammar)
    ({"decoding": "forced_scored"}, r"forced_scored runs on engine transformers only"),
    ({"dtype": "bfloat16"}, r"dtype is a transformers option"),
])
def test_transformers_options_are_refused_on_llama_cpp(extra: dict[str, Any],
                                                       message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        backend_settings({**BASE, "engine": "llama_cpp", **extra})


def test_the_schema_refuses_an_engine_outside_model_mode() -> None:
    from reactlab.config.schema import validate_schema

    raw = {"backends": {"x": {"provider": "local", "mode": "scripted", "engine": "llama_cpp"}}}
    with pytest.raises(ConfigError):
        validate_schema(raw)


def test_a_missing_llama_cpp_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp fails
    spec = _spec("model-folder-never-read")
    with pytest.raises(ClientError, match=r"llama-cpp-python.*make env-llama") as err:
        load_model(spec)
    assert "\n" not in str(err.value)


def test_the_trace_header_records_the_engine_package() -> None:
    tf = header(_spec("m", engine="transformers"))
    ll = header(_spec("m"))
    assert "llama-cpp-python" not in tf.versions and "llama-cpp-python" in ll.versions
    assert ll.spec["backend_config"]["engine"] == "llama_cpp"
    assert {k: v for k, v in ll.versions.items() if k != "llama-cpp-python"} == tf.versions


def test_the_pin_is_the_extras() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["llama"] == [f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}",
                               "starlette-context==0.3.6"]  # the server extra's one more


def _spec(model: str, engine: str = "llama_cpp", threads: int = 1) -> Any:
    from reactlab.dev.engine_bench import lesson_config

    cfg, names = lesson_config(str(ROOT / "config.yaml"), model, threads)
    spec = cfg.run("variacion_busi", names["transformers"], "react")
    settings = spec.backend_config.replace(engine=engine)
    return replace(spec, backend_config=settings)


# ------------------------------------------------------------------ with llama-cpp-python


@pytest.fixture(scope="module")
def converted() -> Path:
    from tests.conftest import converted_model

    return converted_model()


@pytest.mark.full
@needs_llama
def test_llama_cpp_is_fed_the_same_token_ids(converted: Path) -> None:
    from reactlab.backends.local.llama import LlamaCppModel
    from reactlab.dev.local_bench import QUESTION, SYSTEM, tool_schemas

    lm = LlamaCppModel.open(converted)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION},
                {"role": "tool", "content": '{"titular": "<tool_call> ñ é €"}'}]
    text = lm.prompt_text(messages, tool_schemas())
    ids = lm.prompt_ids(messages, tool_schemas())
    assert list(lm.llm.tokenize(text.encode(), add_bos=False, special=True)) == ids


@pytest.mark.full
@needs_llama
def test_two_greedy_runs_write_identical_traces(converted: Path, tmp_path: Path) -> None:
    from reactlab import data
    from reactlab.runner import run_to_trace
    from reactlab.tools import ToolBox

    spec = _spec(str(converted), threads=1)
    toolbox = ToolBox.from_files(*data.write(tmp_path / "data", 0))
    spec = replace(spec, backend_config=spec.backend_config.replace(max_new_tokens=24))
    paths = [tmp_path / f"{i}.jsonl" for i in range(2)]
    for path in paths:  # each run loads its own model
        run_to_trace(spec, toolbox, path)
    first, second = (p.read_bytes() for p in paths)
    assert first == second
    assert b'"llama-cpp-python": "' + LLAMA_CPP_VERSION.encode() in first


@pytest.mark.full
@needs_llama
def test_seeded_sampling_on_llama_cpp_is_reproducible(converted: Path) -> None:
    from reactlab.backends.local.llama import LlamaCppModel

    lm = LlamaCppModel.open(converted, reuse_cache=False)
    ids = lm.prompt_ids([{"role": "user", "content": "Escribe una frase sobre el mar."}])
    draws = []
    for seed in (1, 1, 2):
        lm.set_sampling(1.0, 1.0, seed)
        draws.append([lm.generate(ids, 16).new_ids for _ in range(2)])
    assert draws[0] == draws[1]  # the same seed: the same draws, call by call
    assert draws[0][0] != draws[0][1] and draws[0] != draws[2]


# --------------------------------------------------------- the prefix block, without llama


class _FakeLlama:
    """What LlamaCppModel uses of ``llama_cpp.Llama``, recording for each cached position
    the batch that computed it (its start and tokens): llama.cpp's numbers depend on it."""

    def __init__(self) -> None:
        self.input_ids: list[int] = []
        self.n_tokens = 0
        self.made_by: list[tuple[int, tuple[int, ...]]] = []

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens: list[int]) -> None:
        start = self.n_tokens
        del self.input_ids[start:], self.made_by[start:]
        self.input_ids += tokens
        self.made_by += [(start, tuple(tokens))] * len(tokens)
        self.n_tokens += len(tokens)

    def generate(self, tokens: list[int], **_: Any) -> Any:
        # llama-cpp-python 0.3's prefix match: the cached tokens, the last one re-evaluated
        if self.n_tokens:
            self.n_tokens = next((i for i, (a, b) in enumerate(
                zip(self.input_ids[:self.n_tokens], tokens[:-1], strict=False)) if a != b),
                min(self.n_tokens, len(tokens) - 1))
        self.eval(tokens[self.n_tokens:])
        while True:
            self.eval([7])
            yield 7


class _Tok:
    eos_token_id = 2

    def decode(self, ids: list[int], **_: Any) -> str:
        return ""


def _fake_model(reuse: bool = True) -> Any:
    from reactlab.backends.local.llama import LlamaCppModel

    return LlamaCppModel(_FakeLlama(), _Tok(), "fake", reuse_cache=reuse)


def _made_by(lm: Any, prompt: list[int], others: list[list[int]]) -> list[Any]:
    """How each position of ``prompt`` was computed, after ``others`` ran in the same
    model (each a conversation of its own, as a shard's cases)."""
    for ids in others:
        lm.generate(ids, 3)
        lm.reset_cache()
    lm.generate(prompt, 3)
    return list(lm.llm.made_by[:len(prompt)])


def test_a_prompt_is_prefilled_the_same_whatever_ran_before() -> None:
    from reactlab.backends.local.llama import PREFIX_BLOCK

    opening = list(range(100, 100 + PREFIX_BLOCK + 4))  # a shared system prompt
    case = [*opening, *range(500, 620)]
    other = [*opening, *range(700, 760)]
    short = list(range(100, 100 + PREFIX_BLOCK - 10))
    parted = [*opening[:20], *range(900, 1000)]  # shares less than the block
    alone = _made_by(_fake_model(), case, [])
    # its first PREFIX_BLOCK tokens alone, then the rest in one batch
    assert alone[0] == (0, tuple(case[:PREFIX_BLOCK])) and alone[-1][0] == PREFIX_BLOCK
    for before in ([other], [short, other], [other, short], [case], [other, parted],
                   [parted]):
        assert _made_by(_fake_model(), case, before) == alone, before
    # the block was kept across the conversation: not prefilled again
    lm = _fake_model()
    lm.generate(other, 3)
    lm.reset_cache()
    assert lm.generate(case, 3).prefill_tokens == len(case) - PREFIX_BLOCK
    # without reuse_cache, every prompt is prefilled whole, in one batch
    assert set(_made_by(_fake_model(False), case, [other])) == {(0, tuple(case))}


@pytest.mark.full
@needs_llama
def test_the_floor_times_every_weight_type_and_divides_the_counts() -> None:
    """``engine_bench --floor``: llama.cpp's own quantiser writes each weight type from
    the shipped Q4_1 file, each is timed at 1 thread, at the thread count asked in one
    process and as that many one-thread processes together, and a row's least time is
    the counts divided by the faster layout's rates, phase by phase."""
    from reactlab.dev.engine_bench import FLOOR_TYPES, floor_run

    run = floor_run(10_000, 1_000, threads=2, prompt=16, rounds=1)
    assert [r["weights"].split()[0] for r in run["rows"]] == ["Q4_1", *FLOOR_TYPES]
    for r in run["rows"]:
        rates = [r[f"{phase}_{layout}"] for phase in ("prefill", "decode")
                 for layout in ("1t", "2t", "2j")]
        assert min(rates) > 0
        prefill, decode = max(r["prefill_2t"], r["prefill_2j"]), max(r["decode_2t"], r["decode_2j"])
        assert r["floor_s"] == round(10_000 / prefill + 1_000 / decode)
    sizes = {r["weights"].split()[0]: r["mb"] for r in run["rows"]}
    assert sizes["F32"] > sizes["F16"] > sizes["Q8_0"] > sizes["Q4_1"] > sizes["Q4_0"]


@pytest.mark.full
@needs_llama
def test_a_floor_job_that_cannot_load_its_file_stops_the_floor_at_once(tmp_path: Path) -> None:
    """A one-thread job of ``--floor`` that dies (llama.cpp refuses the file) ends the
    measurement with its exit code, not after the queue's ten-minute wait."""
    from reactlab.dev.engine_bench import _parallel_rates

    bad = tmp_path / "bad.gguf"
    bad.write_text("not a gguf file\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"bad\.gguf: a one-thread job exited with 1"):
        _parallel_rates(bad, 2, 16, 1)
