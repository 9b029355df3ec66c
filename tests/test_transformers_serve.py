"""A real OpenAI-compatible server the project did not write: ``transformers serve``.

The ``openai_chat`` provider runs a lesson task live against ``transformers serve``
(transformers' own FastAPI server, the pinned version) serving the converted SmolLM2
folder on a loopback port, through a copy of that folder that carries the lesson's Hermes
tool template (:mod:`reactlab.dev.serving`; SmolLM2's own template renders no tools).
Every HTTP exchange is recorded; the run is then replayed offline, without the server
and without the key variable, and the two traces are byte-identical.

The live half starts the server (model load and CPU generation: minutes on a busy
machine) and is marked ``slow`` and ``e2e``. Its recording and trace are kept as a small
fixture (``tests/fixtures/transformers_serve/``, recorded by
``REACTLAB_RECORD_FIXTURE=1 pytest tests/test_transformers_serve.py -m slow``), so the
replay half runs in every ``make test``, without the model or the server.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from reactlab import trace
from reactlab.backends import recording
from reactlab.config import RunSpec, load
from reactlab.runner import run_to_trace

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = ROOT / "workflow" / "configs" / "transformers_serve.yaml"
FIXTURE = ROOT / "tests" / "fixtures" / "transformers_serve"
SOURCE = "data/models/SmolLM2-135M-Instruct"  # built by rule convert_smollm2
SERVED = "data/models/SmolLM2-135M-Instruct-tools"  # what the overlay's model names
TASK = "variacion_busi"
#: The new tokens per turn of the recorded run (the overlay says 80; fewer keep the live
#: half within minutes on a loaded CPU; what is sent is in the recording either way).
MAX_TOKENS = 24
#: Never sent to the server (it refuses them), unless a backend is configured to.
REFUSED_FIELDS = {"tool_choice", "parallel_tool_calls", "response_format", "stream_options"}
KEY_ENV = "REACTLAB_SERVE_KEY"


def serve_spec(base_url: str | None = None) -> RunSpec:
    """The overlay's run of the task, with the recorded run's token limit (and the URL of
    the server it ran against: the trace's header names it)."""
    spec = load(ROOT / "config.yaml", [OVERLAY]).run(TASK, "smollm2_serve", "react")
    config: dict[str, Any] = {"max_tokens": MAX_TOKENS}
    if base_url is not None:
        config["base_url"] = base_url
    return dataclasses.replace(spec, backend_config=spec.backend_config.replace(**config))


def test_the_overlay_points_openai_chat_at_a_loopback_server() -> None:
    cfg = load(ROOT / "config.yaml", [OVERLAY])
    serve = [r for r in cfg.runs if r.backend == "smollm2_serve"]
    assert {r.task for r in serve} == {"variacion_busi", "cierre_acme"}
    bc = serve[0].backend_config
    assert (bc.provider, bc.mode, bc.model) == ("openai_chat", "live", SERVED)
    assert bc.base_url is not None and bc.base_url.startswith("http://127.0.0.1:")
    assert not bc.stream_include_usage  # transformers serve ignores stream_options


def _bodies(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["request"]["body"] for r in records]


def test_the_recorded_exchange_replays_byte_identically(toolbox: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Offline, every run: the recording of the live run answers the same adapter and loop;
    the trace equals the one the live run wrote, line for line after the header (whose
    package versions are those of the machine that runs it, and so is the end record's
    sha256, which covers the header)."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    rec, expected = FIXTURE / f"{TASK}.recording.jsonl", FIXTURE / f"{TASK}.trace.jsonl"
    records = recording.read(rec)
    assert records and all(r["response"]["status"] == 200 for r in records)
    assert all(REFUSED_FIELDS.isdisjoint(b) for b in _bodies(records))
    assert all(b["model"] == SERVED and b["tools"] for b in _bodies(records))
    out = tmp_path / "replayed.jsonl"
    base_url = records[0]["request"]["url"].removesuffix("/chat/completions")
    run_to_trace(serve_spec(base_url), toolbox, out, replay=rec)
    live, replayed = trace.read(expected), trace.read(out)
    assert replayed.header.spec == live.header.spec
    assert replayed.header.config_hash == live.header.config_hash
    assert replayed.records == live.records
    assert dataclasses.replace(replayed.end, sha256="") == dataclasses.replace(live.end,
                                                                                sha256="")
    assert out.read_bytes().splitlines()[1:-1] == expected.read_bytes().splitlines()[1:-1]
    # the answer is the served model's text, as the server sent it
    answer = json.loads(records[-1]["response"]["body"])["choices"][0]["message"]["content"]
    assert replayed.end.answer == answer


@pytest.mark.slow
@pytest.mark.e2e
def test_live_run_against_transformers_serve_records_and_replays(
        toolbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: None) -> None:
    """Live: `transformers serve` on a free loopback port serves the prepared SmolLM2
    copy; the lesson task runs through the openai_chat backend with recording, plain and
    streamed (the same trace after the header); then the recordings replay them with the
    server stopped and the key variable unset."""
    pytest.importorskip("fastapi")
    if not (ROOT / SOURCE / "config.json").is_file():
        pytest.skip(f"{SOURCE} is not built (rule convert_smollm2)")
    from reactlab.dev.serving import TransformersServe, prepare

    monkeypatch.chdir(ROOT)  # the model name is the folder's path relative to the checkout
    served = prepare(SOURCE, SERVED)
    assert str(served) == SERVED  # SmolLM2's own template renders no tools: a copy
    live, rec = tmp_path / "live.jsonl", tmp_path / "recording.jsonl"
    streamed, srec = tmp_path / "streamed.jsonl", tmp_path / "streamed.recording.jsonl"
    with TransformersServe(SERVED, threads=2, log=tmp_path / "serve.log") as server:
        monkeypatch.setenv(KEY_ENV, "local-server-key")
        spec = serve_spec(server.base_url)
        end = run_to_trace(spec, toolbox, live, recording=rec)
        # the same run streamed: the server's chunks read back into the same answer
        stream_spec = dataclasses.replace(spec, backend_config=spec.backend_config.replace(
            stream=True))
        assert run_to_trace(stream_spec, toolbox, streamed, recording=srec) == end
    monkeypatch.delenv(KEY_ENV)
    assert live.read_text().splitlines()[1:-1] == streamed.read_text().splitlines()[1:-1]
    assert all(r["response"]["headers"]["content-type"].startswith("text/event-stream")
               for r in recording.read(srec))
    replayed_stream = tmp_path / "replayed_stream.jsonl"
    run_to_trace(stream_spec, toolbox, replayed_stream, replay=srec)
    assert replayed_stream.read_bytes() == streamed.read_bytes()
    assert end["termination"] in ("answer", "step_limit"), end
    records = recording.read(rec)
    assert records and all(r["response"]["status"] == 200 for r in records)
    assert all(r["request"]["url"].startswith(server.base_url) for r in records)
    assert all(REFUSED_FIELDS.isdisjoint(b) for b in _bodies(records))
    assert all("local-server-key" not in json.dumps(r) for r in records)
    replayed = tmp_path / "replayed.jsonl"
    assert run_to_trace(serve_spec(server.base_url), toolbox, replayed, replay=rec) == end
    assert replayed.read_bytes() == live.read_bytes()
    if os.environ.get("REACTLAB_RECORD_FIXTURE") == "1":
        FIXTURE.mkdir(parents=True, exist_ok=True)
        shutil.copy(rec, FIXTURE / f"{TASK}.recording.jsonl")
        shutil.copy(live, FIXTURE / f"{TASK}.trace.jsonl")


#: What `python -m reactlab.dev.serving serve` runs in the signal test: the CLI itself,
#: with `transformers serve` stood in for by a loopback HTTP server that answers /health
#: and writes its PID (the real one needs the model and minutes of CPU).
_STAND_IN = r"""
import sys
from reactlab.dev import serving
pidfile = sys.argv[1]
stand_in = ("import http.server, os, sys; open(sys.argv[2], 'w').write(str(os.getpid()));"
            "h = type('H', (http.server.BaseHTTPRequestHandler,), {'do_GET': lambda s: "
            "(s.send_response(200), s.end_headers()), 'log_message': lambda *a: None});"
            "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), h).serve_forever()")
serving.TransformersServe.command = lambda self: [sys.executable, "-c", stand_in,
                                                  str(self.port), pidfile]
sys.exit(serving.main(["serve", "--model", "unused", "--port", "0"]))
"""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_serve_stops_its_server_on_a_signal(tmp_path: Path, signame: str) -> None:
    """A TERM (a job manager's stop) or an INT sent to ``serving serve`` running as a
    background job, which ignores SIGINT unless told otherwise, stops the server it
    started; a TERM used to end the CLI alone and leave ``transformers serve`` running."""
    import signal
    import subprocess
    import sys
    import time

    pidfile = tmp_path / "server.pid"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow")}
    cli = subprocess.Popen([sys.executable, "-c", _STAND_IN, str(pidfile)], env=env,
                           stdout=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert cli.stdout is not None
        assert cli.stdout.readline().startswith("serving unused at http://127.0.0.1:")
        child = int(pidfile.read_text())
        os.kill(child, 0)  # running
        cli.send_signal(getattr(signal, signame))
        assert cli.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail(f"the server (PID {child}) outlived the CLI's {signame}")
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
