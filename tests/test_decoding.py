"""Grammar-constrained decoding (reactlab.backends.local.grammar) on the real SmolLM2-135M.

The pure parts (schemas, config, trace records) run without the model; the rest loads the
converted model once (fixtures shared with tests/test_local_model.py) and keeps generations
short: each forced call is at most 60 new tokens.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("torch", reason="the local model needs torch")
pytest.importorskip("xgrammar", reason="constrained decoding needs xgrammar")

from reactlab.agent.loop import run_agent
from reactlab.agent.types import ModelTurn
from reactlab.backends.local.grammar import (
    MODES,
    Decoder,
    DecodingError,
    GrammarFactory,
    call_schema,
)
from reactlab.backends.local.hermes import parse_tool_calls
from reactlab.backends.local.model import LocalModel
from reactlab.config import load_yaml, parse
from reactlab.core.errors import ConfigError
from reactlab.dev.local_bench import SYSTEM, tool_schemas
from reactlab.tools import json_schema
from tests.test_local_model import converted, loaded  # noqa: F401  (session fixtures)

ROOT = Path(__file__).resolve().parents[1]
MAX_NEW = 60
QUESTIONS = [
    "¿Cuánto cambió en porcentaje el cierre de BUSI entre el 2024-03-15 y el 2024-03-22?",
    "¿Cuál fue el cierre de ACME el 2024-03-15?",
    "¿Qué noticias hubo de BUSI entre el 2024-03-18 y el 2024-03-20?",
]


def messages(question: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture
def lm(loaded: tuple[LocalModel, float]) -> LocalModel:  # noqa: F811
    lm = loaded[0]
    lm.reuse_cache = True
    lm.reset_cache()
    return lm


# ------------------------------------------------------------------------ without the model


def test_call_schema_is_built_from_the_tool_schemas_the_model_reads() -> None:
    tools = tool_schemas()
    schema = call_schema(tools)
    assert [o["properties"]["name"] for o in schema["anyOf"]] == [
        {"const": t["function"]["name"]} for t in tools]
    for option, tool in zip(schema["anyOf"], tools, strict=True):
        # the very schema of the system prompt, not a tightened copy
        assert option["properties"]["arguments"] == json_schema(tool["function"]["name"])
        assert option["properties"]["arguments"] is tool["function"]["parameters"]
        assert option["required"] == ["name", "arguments"]
    one = call_schema(tools[:1])
    assert one["properties"]["name"] == {"const": tools[0]["function"]["name"]}


def test_no_tools_no_call_grammar() -> None:
    with pytest.raises(DecodingError, match="at least one tool"):
        call_schema([])


def test_config_accepts_the_modes_and_only_on_model_backends() -> None:
    raw = load_yaml(ROOT / "config.yaml")
    assert raw["backends"]["smollm2_forced"]["decoding"] == "forced"
    for mode in MODES:
        ok = copy.deepcopy(raw)
        ok["backends"]["smollm2"]["decoding"] = mode
        parse(ok)
    bad = copy.deepcopy(raw)
    bad["backends"]["smollm2"]["decoding"] = "greedy"
    with pytest.raises(ConfigError, match="decoding"):
        parse(bad)
    scripted = copy.deepcopy(raw)
    scripted["backends"]["local"]["decoding"] = "forced"
    with pytest.raises(ConfigError, match="local"):
        parse(scripted)


class _Session:
    def __init__(self, decoding: dict[str, Any] | None) -> None:
        self.decoding = decoding

    def request(self, budget_left: int | None) -> ModelTurn:
        return ModelTurn(text="No hay datos.", calls=(), tokens_sent=7, decoding=self.decoding)

    def add_results(self, outcomes: list) -> None:  # pragma: no cover - no calls here
        raise AssertionError


def _request_record(decoding: dict[str, Any] | None) -> dict[str, Any]:
    out: list[Any] = []
    run_agent(_Session(decoding), None, [], 2, None, out.append)  # type: ignore[arg-type]
    return next(r.to_json() for r in out if r.type == "request")


def test_free_decoding_leaves_the_request_record_as_it_was() -> None:
    assert list(_request_record(None)) == ["type", "step", "tokens_sent", "cumulative_tokens",
                                           "tokens_out", "attempts", "text", "n_calls"]
    rec = _request_record({"mode": "forced", "constrained": False})
    assert rec["decoding"] == {"mode": "forced", "constrained": False}


# -------------------------------------------------------------------------- with the model


def test_grammar_text_and_hash_come_from_the_schemas(lm: LocalModel) -> None:
    tools = tool_schemas()
    vocab = int(lm.model.config.vocab_size)
    a = GrammarFactory(lm.tokenizer, vocab).call(tools)
    b = GrammarFactory(lm.tokenizer, vocab).call(tools)
    assert a.text == b.text and a.sha256 == b.sha256 and len(a.sha256) == 64
    for t in tools:
        assert json.dumps(t["function"]["name"]) in a.text.replace("\\", "")
    other = GrammarFactory(lm.tokenizer, vocab).call(tools[:2])
    assert other.sha256 != a.sha256


def test_unknown_mode_and_missing_tools_are_clear_errors(lm: LocalModel) -> None:
    with pytest.raises(DecodingError, match="unknown decoding mode 'greedy'"):
        Decoder("greedy", lm, tool_schemas())
    with pytest.raises(DecodingError, match="send_tools"):
        Decoder("forced", lm, [])


@pytest.mark.parametrize("question", QUESTIONS, ids=["variacion", "acme", "noticias"])
def test_every_forced_output_parses(lm: LocalModel, question: str) -> None:
    """A completed grammar is exactly one valid call to an offered tool. The only other
    outcome is a call cut by max_new_tokens (the model can fill a string with anything
    the schema allows): recorded as grammar_complete False, parsed as one unterminated
    invalid call, never more. (At 60 tokens the news question is cut: its call invents a
    long string.)"""
    tools = tool_schemas()
    dec = Decoder("forced", lm, tools)
    out = dec.generate(dec.prepare(messages(question), required=True), MAX_NEW)
    parsed = parse_tool_calls(out.text)
    assert out.record["constrained"] is True
    assert out.record["prefix"] == "" and out.record["xgrammar"] == "0.2.9"
    assert len(parsed.calls) == 1 and out.text.startswith("<tool_call>\n{\"name\": \"")
    if out.record["grammar_complete"]:
        assert parsed.errors == [] and parsed.calls[0].valid
        assert parsed.calls[0].name in {t["function"]["name"] for t in tools}
    else:
        assert out.tokens_out == MAX_NEW
        assert not parsed.calls[0].valid and parsed.errors[0].startswith("unterminated")
    if question != QUESTIONS[2]:  # the two price questions complete within 60 tokens
        assert out.record["grammar_complete"] is True
    # once a result without error has arrived, forced decoding is free again
    free = dec.prepare(messages(question), required=False)
    assert free.grammar is None


def test_forced_scored_writes_the_best_whole_name(lm: LocalModel) -> None:
    tools = tool_schemas()
    dec = Decoder("forced_scored", lm, tools)
    out = dec.generate(dec.prepare(messages(QUESTIONS[1]), required=True), MAX_NEW)
    scores = out.record["name_logprobs"]
    best = max(scores, key=lambda n: scores[n])
    assert out.record["prefix"] == f'<tool_call>\n{{"name": "{best}", "arguments": '
    parsed = parse_tool_calls(out.text)
    assert parsed.errors == [] and [c.name for c in parsed.calls] == [best]


def test_a_grammar_cut_by_max_new_tokens_is_recorded(lm: LocalModel) -> None:
    dec = Decoder("forced", lm, tool_schemas())
    out = dec.generate(dec.prepare(messages(QUESTIONS[0]), required=True), 6)
    assert out.tokens_out == 6 and out.record["grammar_complete"] is False
    assert not parse_tool_calls(out.text).calls[0].valid  # unterminated


@pytest.mark.full  # two whole forced decodings of the model (about 1.5 min)
def test_constrained_generation_is_deterministic(lm: LocalModel) -> None:
    runs = []
    for _ in range(2):
        lm.reset_cache()
        dec = Decoder("forced", lm, tool_schemas())
        out = dec.generate(dec.prepare(messages(QUESTIONS[0]), required=True), MAX_NEW)
        runs.append(json.dumps([out.text, out.tokens_sent, out.tokens_out, out.record]))
    assert runs[0] == runs[1]


def test_plan_extraction_grammar_is_variacion_schema(lm: LocalModel) -> None:
    factory = GrammarFactory(lm.tokenizer, int(lm.model.config.vocab_size))
    g = factory.json_object(json_schema("variacion"))
    assert all(k in g.text for k in ("ticker", "desde", "hasta"))


def test_structural_and_union_change_nothing_when_the_model_never_opens_a_call(
        lm: LocalModel) -> None:
    """SmolLM2 does not choose `<` at the start: the trigger-based modes leave its text as
    free decoding writes it (docs/local-models.md's claim, checked on the lesson's question)."""
    msgs = messages(QUESTIONS[0])
    tools = tool_schemas()
    lm.reset_cache()
    free = lm.generate(lm.prompt_ids(msgs, tools), max_new_tokens=40)
    assert "<tool_call>" not in free.text
    for mode in ("structural", "union"):
        dec = Decoder(mode, lm, tools)
        out = dec.generate(dec.prepare(msgs, required=True), 40)
        assert out.text == free.text.strip() and out.tokens_out == len(free.new_ids)
        assert out.record["constrained"] is True
