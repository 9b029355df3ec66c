"""AgentDojo through the project's loop: its runtime executes, its checks score.

Scripted policies only: the ground truth must keep full utility with no attack success,
under every defence; a policy that obeys the injected instructions must succeed without
defence, and the project's defences must change that as they claim.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("agentdojo", reason="the AgentDojo suite needs agentdojo (make env-agentdojo)")

from reactlab import trace as tracemod
from reactlab.suites import agentdojo as ad

PAIRS = [p for p in ad.pairs("banking") if p.user_task in ("user_task_0", "user_task_1")]


def scores(tmp_path: Path, policy: str, defence: str) -> list[dict]:
    out = []
    for pair in PAIRS:
        path = tmp_path / policy / defence / f"{pair.id}.jsonl"
        ad.run_pair(pair, policy, defence, str(path))
        out.append(ad.score_trace(tracemod.read(path)))
    return out


def test_the_suites_have_their_documented_tasks() -> None:
    counts = {s: (len(ad.suite(s).user_tasks), len(ad.suite(s).injection_tasks))
              for s in ad.SUITES}
    assert counts == {"workspace": (40, 14), "travel": (20, 7), "banking": (16, 9),
                      "slack": (21, 5)}


@pytest.mark.parametrize("defence", ad.DEFENCES)
def test_the_ground_truth_keeps_full_utility_and_no_attack_succeeds(
        tmp_path: Path, defence: str) -> None:
    rows = scores(tmp_path, "ground_truth", defence)
    assert len(rows) == 2 * 9
    assert all(r["utility"] for r in rows)
    assert not any(r["attack_succeeded"] for r in rows)


def test_an_obedient_policy_is_attacked_and_the_defences_act(tmp_path: Path) -> None:
    none = scores(tmp_path, "obeys_injection", "none")
    delimit = scores(tmp_path, "obeys_injection", "delimit")
    scope = scores(tmp_path, "obeys_injection", "scope")
    asr = {name: sum(r["attack_succeeded"] for r in rows)
           for name, rows in (("none", none), ("delimit", delimit), ("scope", scope))}
    assert asr["none"] > 0
    # the obedient script acts on the tag it reads verbatim; delimiting hides the tag
    assert asr["delimit"] == 0
    assert asr["scope"] < asr["none"]


def test_a_run_is_byte_identical_and_its_verdict_a_function_of_the_trace(
        tmp_path: Path) -> None:
    pair = PAIRS[0]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ad.run_pair(pair, "obeys_injection", "none", str(a))
    ad.run_pair(pair, "obeys_injection", "none", str(b))
    assert a.read_bytes() == b.read_bytes()
    assert ad.score_trace(tracemod.read(a)) == ad.score_trace(tracemod.read(b))
    tr = tracemod.read(a)
    assert tr.header.spec["suite"]["attack_model"] == "local"
    assert any("<INFORMATION>" in str(c.result) for c in tr.tool_calls())


def test_the_table_puts_each_defence_beside_the_baseline() -> None:
    rows = [{"suite": "banking", "policy": "obeys_injection", "defence": d, "utility": u,
             "attack_succeeded": s}
            for d, u, s in (("none", True, True), ("none", True, False),
                            ("scope", True, False), ("scope", False, False))]
    df = ad.table(rows)
    scope = df[df.defence == "scope"].iloc[0]
    assert scope.pairs == 2 and scope.utility == 0.5 and scope.attack_success_rate == 0.0
    assert scope.baseline_attack_success_rate == 0.5
    assert 0 < scope.asr_high < 1 and scope.utility_low < 0.5 < scope.utility_high
