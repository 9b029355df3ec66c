"""Constrained decoding on the llama.cpp engine (``grammar_backend``, docs/local-models.md).

The config tests and the mask tests need no model: xgrammar's mask, adapted to llama.cpp's
numpy logits, on a vocabulary of six tokens and a fake ``llama_cpp.Llama``. The test
marked ``full`` runs the converted SmolLM2 in llama.cpp (skipped without llama-cpp-python):
a forced turn writes a call that parses, under both grammar backends (the same tokens on a
rerun), where free decoding writes none, and two greedy runs of a forced scenario with
llama.cpp's grammar write byte-identical traces.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reactlab.config.engines import LLAMA_CPP_DECODINGS
from reactlab.config.settings import backend_settings
from reactlab.core.errors import ConfigError
from tests.test_llama_engine import BASE, _spec, needs_llama

LLAMA = {**BASE, "engine": "llama_cpp"}


# ------------------------------------------------------------------------------ config


def test_the_grammar_backend_is_typed_and_left_out_by_default() -> None:
    forced = backend_settings({**LLAMA, "decoding": "forced"})
    assert forced.grammar_backend == "xgrammar" and "grammar_backend" not in forced.to_dict()
    native = backend_settings({**LLAMA, "decoding": "union", "grammar_backend": "llama_cpp"})
    assert native.to_dict()["grammar_backend"] == "llama_cpp"  # the header records it
    with pytest.raises(ConfigError, match=r"backend_config\.grammar_backend"):
        backend_settings({**LLAMA, "decoding": "forced", "grammar_backend": "xgramar"})


@pytest.mark.parametrize(("extra", "message"), [
    ({"decoding": "forced_scored"}, r"decoding 'forced_scored' does not run on engine "
                                    r"llama_cpp with grammar_backend 'xgrammar'"),
    ({"decoding": "structural", "grammar_backend": "llama_cpp"},
     r"decoding 'structural' does not run .*structural with grammar_backend xgrammar only"),
])
def test_modes_the_grammar_backend_cannot_run_are_refused(extra: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        backend_settings({**LLAMA, **extra})


def test_every_listed_mode_is_accepted_and_transformers_has_no_grammar_backend() -> None:
    for backend, modes in LLAMA_CPP_DECODINGS.items():
        for mode in modes:
            backend_settings({**LLAMA, "decoding": mode, "grammar_backend": backend})
    with pytest.raises(ConfigError, match="grammar_backend is an option of engine llama_cpp"):
        backend_settings({**BASE, "decoding": "forced", "grammar_backend": "xgrammar"})


# ------------------------------------------------------------ the mask on numpy logits

VOCAB = ["<eos>", "a", "b", "ab", "c", "ba"]


def _spec_ab() -> Any:
    """xgrammar's grammar ``"a" "b"`` over :data:`VOCAB` (EOS: token 0)."""
    xgr = pytest.importorskip("xgrammar")
    from reactlab.backends.local.grammar import GrammarSpec

    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[0])
    grammar = xgr.Grammar.from_ebnf('root ::= "a" "b"')
    compiled = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(
        grammar)
    return GrammarSpec(compiled, str(grammar))


def test_the_mask_on_llama_logits_allows_only_the_grammar() -> None:
    import numpy as np

    from reactlab.backends.local.grammar import make_processor
    from reactlab.backends.local.llama import numpy_processor

    processor = make_processor(_spec_ab())
    (apply,) = numpy_processor(processor)
    ids = [4, 4]  # the prompt
    favour_c = np.array([0.0, 1.0, 2.0, 0.5, 9.0, 3.0], dtype=np.float32)
    chosen = []
    for _ in range(3):  # the grammar's two tokens, then EOS
        masked = apply(np.array(ids, dtype=np.intc), favour_c.copy())
        token = int(np.argmax(masked))
        assert masked.dtype == np.float32 and np.isneginf(masked[4])  # "c" never allowed
        chosen.append(token)
        ids.append(token)
    assert chosen == [1, 2, 0]  # "a" over "ab", then "b" (not "ba"), then only EOS
    assert processor.finish(chosen)


class _GreedyLlama:
    """What LlamaCppModel.generate uses of ``llama_cpp.Llama``: fixed logits, the
    ``logits_processor`` list applied as llama-cpp-python applies it, greedy."""

    def __init__(self, logits: Any) -> None:
        self.logits = logits
        self.input_ids: list[int] = []
        self.n_tokens = 0
        self.grammar: Any = None

    def reset(self) -> None:
        self.n_tokens = 0

    def n_vocab(self) -> int:
        return len(self.logits)

    def generate(self, tokens: list[int], logits_processor: Any = None, grammar: Any = None,
                 **_: Any) -> Any:
        import numpy as np

        self.grammar = grammar
        ids = list(tokens)
        while True:
            scores = self.logits.copy()
            for f in logits_processor or []:
                scores = f(np.array(ids, dtype=np.intc), scores)
            ids.append(int(np.argmax(scores)))
            yield ids[-1]


class _Tok:
    eos_token_id = 0

    def decode(self, ids: list[int], **_: Any) -> str:
        return "".join(VOCAB[i] for i in ids if i)


def test_generate_with_masks_llama_cpp_and_hands_a_native_grammar_over() -> None:
    import numpy as np

    from reactlab.backends.local.grammar import GrammarSpec, generate_with
    from reactlab.backends.local.llama import LlamaCppModel

    logits = np.array([0.0, 1.0, 2.0, 0.5, 9.0, 3.0], dtype=np.float32)
    lm = LlamaCppModel(_GreedyLlama(logits), _Tok(), "fake", reuse_cache=False)
    assert lm.vocab_size == len(VOCAB)
    assert lm.generate([4], max_new_tokens=3).new_ids == [4, 4, 4]  # free: "c" wins
    gen, record = generate_with(lm, [4], 5, "forced", _spec_ab())
    assert gen.text == "ab" and gen.new_ids[-1] == 0
    assert record["constrained"] and record["grammar_complete"] and "xgrammar" in record
    # a native grammar goes to llama.cpp's sampler as it is (the fake ignores it)
    native = GrammarSpec(object(), 'root ::= "a"', native=True)
    _, record = generate_with(lm, [4], 3, "forced", native)
    assert lm.llm.grammar is native.compiled
    assert record["grammar_backend"] == "llama_cpp" and not record["grammar_complete"]


@pytest.mark.full  # llama-cpp-python: `make test-full` installs it first (make env-llama)
def test_the_native_call_grammar_is_gbnf_of_the_call_schema() -> None:
    pytest.importorskip("llama_cpp")
    from reactlab.backends.local.grammar import call_schema, gbnf_call
    from reactlab.dev.local_bench import tool_schemas

    text = gbnf_call(call_schema(tool_schemas()), union=True)
    assert text.startswith('root ::= tool-call | [^<] .*\ntool-call ::= "<tool_call>\\n" '
                           'call-object "\\n</tool_call>"\n')
    assert "\ncall-object ::= " in text and "\nroot ::=" not in text
    assert "\\d" not in text  # the date patterns' digits are classes, not literals


# ------------------------------------------------------------------ with llama-cpp-python


@pytest.fixture(scope="module")
def converted() -> Path:
    from tests.conftest import converted_model

    return converted_model()


@pytest.mark.full
@needs_llama
def test_constrained_llama_cpp_writes_a_call_free_decoding_does_not(converted: Path,
                                                                     tmp_path: Path) -> None:
    from reactlab import data
    from reactlab.backends.local.grammar import GrammarFactory, generate_with
    from reactlab.backends.local.hermes import parse_tool_calls
    from reactlab.backends.local.llama import LlamaCppModel
    from reactlab.dev.local_bench import QUESTION, SYSTEM, tool_schemas
    from reactlab.runner import run_to_trace
    from reactlab.tools import ToolBox

    lm = LlamaCppModel.open(converted)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    ids = lm.prompt_ids(messages, tool_schemas())
    free, _ = generate_with(lm, ids, 80, "free", None)
    assert not any(c.valid for c in parse_tool_calls(free.text.strip()).calls)
    for native in (False, True):
        grammar = GrammarFactory(lm.tokenizer, lm.vocab_size, native=native).call(
            tool_schemas())
        runs = []
        for _ in range(2):  # a greedy rerun from an empty cache: the same tokens
            lm.reset_cache()
            gen, record = generate_with(lm, ids, 80, "forced", grammar)
            runs.append(gen.new_ids)
        calls = parse_tool_calls(gen.text.strip()).calls
        assert record["grammar_complete"] and [c.valid for c in calls] == [True]
        assert runs[0] == runs[1]
    # greedy reruns of a forced scenario (llama.cpp's grammar): byte-identical traces
    toolbox = ToolBox.from_files(*data.write(tmp_path / "data", 0))
    for backend in ("llama_cpp",):
        spec = _spec(str(converted))
        spec = replace(spec, backend_config=spec.backend_config.replace(
            max_new_tokens=48, decoding="forced", grammar_backend=backend))
        paths = [tmp_path / f"{backend}{i}.jsonl" for i in range(2)]
        for path in paths:
            run_to_trace(spec, toolbox, path)
        first = paths[0].read_bytes()
        assert first == paths[1].read_bytes() and b'"type": "tool_call"' in first
