"""The outside suites on live backends: recorded over a real socket, replayed offline.

A loopback server (tests/test_live.py's ``FakeAPI``) answers every request of a BFCL
case with BFCL's oracle for that case, through the project's simulator of the wire API,
so the live adapters go through the official SDKs and their real transports. What is
checked is what a researcher pointing a suite at their own endpoint relies on:

* each case's exchanges are recorded beside its trace; the replay, with no key and no
  server, writes the same bytes;
* the oracle scores 100 % by BFCL's own checker in FC mode (names with dots made
  underscores on the wire, mapped back by the checker's ``underscore_to_dot``);
* a shard never has more than its backend's ``max_in_flight`` cases waiting for an
  answer at once, and with a bound above 1 it does overlap them.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reactlab import config
from reactlab import trace as tracemod
from reactlab.config.scripts import Script
from reactlab.simulate import ScriptedPolicy
from reactlab.suites import bfcl
from reactlab.suites.plan import plan
from reactlab.suites.registry import run_case, suite_record
from reactlab.suites.run import run_shard
from reactlab.suites.types import recording_path
from tests.test_live import KEY, SIMULATORS, FakeAPI, loopback  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]


class OracleServer(FakeAPI):
    """Answers each request with the BFCL oracle of the case its question asks, and
    counts the requests it is answering at once (each held ``hold`` seconds)."""

    def __init__(self, provider: str, model: str, hold: float = 0.05) -> None:
        cases = [c for cat in bfcl.CATEGORIES for c in bfcl.load_cases(cat)]
        self.by_question = {c.question: c for c in cases}
        self.model, self.hold = model, hold
        self.active = self.most = 0
        self.lock = threading.Lock()
        super().__init__(provider, ScriptedPolicy({}, {}, ""), respond=self.answer)

    def answer(self, request: Any, headers: Any) -> Any:
        import json

        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            time.sleep(self.hold)
            body = json.loads(request.content)
            question = next(m["content"] for m in body["messages"] if m["role"] == "user")
            case = self.by_question[question]
            calls = bfcl.policy_calls(case, "oracle")
            step = ({"answer": bfcl.DECLINE} if not calls else
                    {"calls": [{"name": bfcl.api_name(c["name"]), "arguments": c["arguments"]}
                               for c in calls]})
            from reactlab.config.scripts import literal

            policy = ScriptedPolicy({self.model: Script("oracle", (literal(step),))}, {},
                                    question)
            return SIMULATORS[self.provider].handler(policy)(request)
        finally:
            with self.lock:
                self.active -= 1


def live_shard(base_url: str, in_flight: int) -> Any:
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["live"] = {"enabled": True}
    raw["backends"]["openai_chat_live"].update(base_url=base_url, max_in_flight=in_flight)
    raw["suites"] = {"bfcl": {**raw["suites"]["bfcl"], "backends": ["openai_chat_live"],
                              "sample": 2}}
    config.parse(raw)
    (shard,) = plan(raw)
    return shard


@pytest.mark.usefixtures("loopback")
def test_a_live_suite_shard_is_recorded_bounded_and_replays_byte_identically(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with OracleServer("openai_chat", "gpt-5") as api:
        shard = live_shard(api.base_url, in_flight=3)
        assert shard.live and shard.provider == "openai_chat"
        traces = [str(tmp_path / "bfcl" / "traces" / f"{s.task}.jsonl") for s in shard.specs]
        recs = [recording_path(t) for t in traces]
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        summary = run_shard(shard.to_json(), traces, run_case, recordings=recs)
        assert summary.startswith("10 cases of bfcl/openai_chat_live/react")
        assert 1 < api.most <= 3  # overlapped, and never more than max_in_flight
        assert len(api.requests) == 10
    # the oracle, by BFCL's checker in FC mode, on every case
    for t in traces:
        rec = suite_record(tracemod.read(t), t)
        assert rec["verified"] and rec["project_verified"], (t, rec["findings"])
    sent = tracemod.read(traces[0]).header.spec["suite"]["tools"]
    assert all("." not in tool["name"] for tool in sent)
    # offline: no key, no server; the same bytes
    monkeypatch.delenv("OPENAI_API_KEY")
    again = [t.replace("/traces/", "/replayed/") for t in traces]
    run_shard(shard.to_json(), again, run_case, recordings=recs, replay=True)
    for a, b in zip(traces, again, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes()
    assert all(KEY not in Path(r).read_text() for r in recs)


def test_live_suite_backends_wait_for_live_enabled() -> None:
    """Like the matrix's live runs, a suite's live backend is planned only with
    ``live: {enabled: true}``: the default pipeline never asks for a key."""
    raw = config.load_yaml(ROOT / "config.yaml")
    raw["suites"] = {"bfcl": {**raw["suites"]["bfcl"], "sample": 1,
                              "backends": ["local", "openai_chat_live"]}}
    config.parse(raw)
    assert {s.backend for s in plan(raw)} == {"local"}
    raw["live"] = {"enabled": True}
    assert {s.backend for s in plan(raw)} == {"local", "openai_chat_live"}
    live = next(s for s in plan(raw) if s.live)
    assert live.specs[0].backend_config.max_in_flight == 4  # the schema's default
