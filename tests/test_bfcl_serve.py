"""BFCL against a real OpenAI-compatible server: ``transformers serve --continuous-batching``.

The overlay ``workflow/configs/bfcl_serve.yaml`` runs the whole BFCL suite on SmolLM2-135M
served by ``transformers serve`` (the tool-aware copy of :mod:`reactlab.dev.serving`,
bfloat16 weights, continuous batching) through the ``openai_chat`` live backend, several
cases in flight; every case's exchanges are recorded and replayed offline
(docs/suites.md, "Against a live server").

The live half starts the server and runs the default slice (2 cases per category, 10
cases) in one shard with the overlay's 8 cases in flight: it is marked ``slow`` and
``e2e``. A recorded slice is kept as a small fixture (``tests/fixtures/bfcl_serve/``: the
10 recordings and ``expected.json``, written by :func:`write_fixture`), so that the replay
half runs in every ``make test`` through the suite path (plan, ``run_shard`` with
``replay``, BFCL's checker, the table) without the model, the server or a key.
``REACTLAB_RECORD_FIXTURE=1 pytest tests/test_bfcl_serve.py -m slow`` rewrites it from the
slice the live half records; the kept one holds the same 10 cases taken from the
overlay's pipeline run against the server on port 8011 (the 200-case run of
docs/suites.md). A trace's header holds the package versions of the machine that writes
it (and its end record a checksum covering the header), so the fixture keeps, per case,
the checksum of the trace's other lines, the calls, the answer and BFCL's verdict, and
the table's measured rows: all computed from the live run's traces.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from reactlab import config
from reactlab import trace as tracemod
from reactlab.config.settings import LiveBackend
from reactlab.suites.bfcl_tables import build_bfcl
from reactlab.suites.plan import plan
from reactlab.suites.registry import run_case, suite_record
from reactlab.suites.run import run_shard
from reactlab.suites.score import verify_shard
from reactlab.suites.types import Shard, recording_path, verified_path

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = ROOT / "workflow" / "configs" / "bfcl_serve.yaml"
FIXTURE = ROOT / "tests" / "fixtures" / "bfcl_serve"
SOURCE = "data/models/SmolLM2-135M-Instruct"  # built by rule convert_smollm2
SERVED = "data/models/SmolLM2-135M-Instruct-tools"  # what the overlay's model names
KEY_ENV = "REACTLAB_SERVE_KEY"
BACKEND = "smollm2_serve"
#: The recorded slice: the default config's sample (2 seeded cases per category).
SAMPLE = 2


def serve_raw(base_url: str | None = None, sample: int | None = SAMPLE) -> dict[str, Any]:
    """config.yaml with the overlay, the BFCL entry alone (on the served model), the
    slice's sample and, when given, the URL of the server the slice ran against."""
    raw = config.merge(config.load_yaml(ROOT / "config.yaml"), config.load_yaml(OVERLAY))
    raw["suites"] = {"bfcl": {**raw["suites"]["bfcl"], "sample": sample}}
    if base_url is not None:
        raw["backends"][BACKEND]["base_url"] = base_url
    config.parse(raw)
    return raw


def serve_shard(base_url: str | None = None) -> Shard:
    (shard,) = plan(serve_raw(base_url))
    return shard


def body_sha256(path: str | Path) -> str:
    """sha256 of a trace's lines between its header and its end record."""
    lines = Path(path).read_bytes().splitlines(keepends=True)
    return hashlib.sha256(b"".join(lines[1:-1])).hexdigest()


def outcomes(traces: list[str]) -> dict[str, dict[str, Any]]:
    """Per case (its task id): what the recording implies for its trace and verdict."""
    out = {}
    for t in traces:
        tr = tracemod.read(t)
        rec = suite_record(tr, t)
        out[Path(t).stem] = {
            "body_sha256": body_sha256(t),
            "calls": [{"name": c.name, "arguments": c.arguments} for c in tr.tool_calls()],
            "answer": tr.end.answer, "termination": tr.end.termination,
            "tokens_sent": tr.end.tokens_sent,
            "bfcl_correct": rec["verified"], "error_type": rec["error_type"],
            "project_correct": rec["project_verified"]}
    return out


def measured_rows(traces: list[str], out_dir: Path) -> list[dict[str, str]]:
    """bfcl.csv's measured rows for ``traces`` (verified first, as the pipeline does)."""
    verified = [verified_path(t) for t in traces]
    verify_shard(traces, verified, suite_record)
    table = build_bfcl(zip(traces, verified, strict=True), out_dir)["bfcl"]
    with table.open(encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["source"] == "measured"]


def test_the_overlay_runs_the_whole_suite_on_the_served_model() -> None:
    raw = config.merge(config.load_yaml(ROOT / "config.yaml"), config.load_yaml(OVERLAY))
    config.parse(raw)
    bfcl = [s for s in plan(raw) if s.suite == "bfcl"]
    assert {s.backend for s in bfcl} == {BACKEND} and all(s.live for s in bfcl)
    assert sum(len(s.specs) for s in bfcl) == 1240 and len(bfcl) == 31
    bc = bfcl[0].specs[0].backend_config
    assert isinstance(bc, LiveBackend)
    assert (bc.provider, bc.mode, bc.model) == ("openai_chat", "live", SERVED)
    assert bc.base_url is not None and bc.base_url.startswith("http://127.0.0.1:")
    assert (bc.max_tokens, bc.temperature, bc.max_in_flight) == (80, 0, 3)
    assert config.load_yaml(ROOT / "workflow" / "configs" / "replay.yaml")["live"] == {
        "enabled": True, "replay": True}


def test_the_recorded_slice_replays_offline_to_the_recorded_verdicts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run: the 10 cases recorded from transformers serve answer the same specs
    offline (no key, no server) through the suite's shard path; each trace is what the
    recording implies (its lines after the header, calls, answer, BFCL's verdict) and the
    table's rows are the live run's."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    expected = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
    shard = serve_shard(expected["base_url"])
    assert len(shard.specs) == 10 and shard.live
    assert sorted(s.task for s in shard.specs) == sorted(expected["cases"])
    traces = [str(tmp_path / "bfcl" / "traces" / f"{s.task}.jsonl") for s in shard.specs]
    recs = [str(FIXTURE / "recordings" / f"{s.task}.jsonl") for s in shard.specs]
    summary = run_shard(shard.to_json(), traces, run_case, recordings=recs, replay=True)
    assert summary.startswith(f"10 cases of bfcl/{BACKEND}/react")
    assert outcomes(traces) == expected["cases"]
    rows = measured_rows(traces, tmp_path / "tables")
    # the live run's rows, cell for cell but the intervals: the fixture was written when
    # bfcl.csv gave one on every row; now a rate over fewer than min_trials (3) cases
    # gets none (docs/statistics.md), and every row here has 2 cases
    assert len(rows) == len(expected["table"])
    for row, live in zip(rows, expected["table"], strict=True):
        if int(row["cases"]) < 3:
            assert row["ci_low"] == row["ci_high"] == "", row
            live = {**live, "ci_low": "", "ci_high": ""}
        assert row == live
    # the requests were the served model's, FC mode: tools as API tools, no dots
    body = json.loads(Path(recs[0]).read_text(encoding="utf-8").splitlines()[0])
    assert body["request"]["body"]["model"] == SERVED
    assert all("." not in t["function"]["name"] for t in body["request"]["body"]["tools"])


@pytest.mark.slow
@pytest.mark.e2e
def test_live_slice_against_transformers_serve_records_and_replays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: None) -> None:
    """Live: ``transformers serve --continuous-batching`` (bfloat16) on a free loopback
    port serves the prepared SmolLM2 copy; the slice runs as one live shard with 8 cases
    in flight, recorded; then replayed with the server stopped and the key unset, byte
    for byte."""
    pytest.importorskip("fastapi")
    if not (ROOT / SOURCE / "config.json").is_file():
        pytest.skip(f"{SOURCE} is not built (rule convert_smollm2)")
    from reactlab.dev.serving import TransformersServe, prepare

    monkeypatch.chdir(ROOT)  # the model name is the folder's path relative to the checkout
    assert str(prepare(SOURCE, SERVED)) == SERVED
    live_dir = tmp_path / "live" / "bfcl" / "traces"
    with TransformersServe(SERVED, threads=2, dtype="bfloat16", continuous_batching=True,
                           cb_batch_tokens=512, log=tmp_path / "serve.log") as server:
        monkeypatch.setenv(KEY_ENV, "local-server-key")
        shard = serve_shard(server.base_url)
        traces = [str(live_dir / f"{s.task}.jsonl") for s in shard.specs]
        recs = [recording_path(t) for t in traces]
        run_shard(shard.to_json(), traces, run_case, recordings=recs)
    monkeypatch.delenv(KEY_ENV)
    again = [t.replace("/live/", "/replayed/") for t in traces]
    run_shard(shard.to_json(), again, run_case, recordings=recs, replay=True)
    for a, b in zip(traces, again, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes()
    assert all("local-server-key" not in Path(r).read_text() for r in recs)
    if os.environ.get("REACTLAB_RECORD_FIXTURE") == "1":
        write_fixture(shard, traces, server.base_url, tmp_path / "tables")


def write_fixture(shard: Shard, traces: list[str], base_url: str, work: Path) -> None:
    """Keep a live slice as the fixture: its recordings (beside ``traces``, as
    :func:`recording_path` puts them) and ``expected.json``, computed from its traces."""
    expected = {"base_url": base_url,
                "recorded_with": {
                    "server": "transformers serve --continuous-batching, bfloat16, cpu",
                    "server_versions": {n: metadata.version(n)
                                        for n in ("transformers", "torch")},
                    "client_versions": tracemod.read(traces[0]).header.versions},
                "cases": outcomes(traces),
                "table": measured_rows(traces, work)}
    shutil.rmtree(FIXTURE, ignore_errors=True)
    (FIXTURE / "recordings").mkdir(parents=True)
    for s, t in zip(shard.specs, traces, strict=True):
        shutil.copy(recording_path(t), FIXTURE / "recordings" / f"{s.task}.jsonl")
    (FIXTURE / "expected.json").write_text(json.dumps(expected, indent=1,
                                                      ensure_ascii=False) + "\n")
