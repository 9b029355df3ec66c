"""AgentDojo shard jobs running as threads of one process (profiles/default,
``force-use-threads``) share one cold agentdojo import and its registries.

The first ``make run`` once failed with ``KeyError: 'important_instructions'`` from
AgentDojo's ``load_attack``: two shard threads imported agentdojo at once, and the second
found ``agentdojo.attacks.attack_registry`` complete in ``sys.modules`` while the first
was still running ``agentdojo/attacks/__init__.py``, whose imports register the attacks.
The test widens that window deterministically in a fresh interpreter (import state must be
cold): an import hook sleeps while ``important_instructions_attacks`` is being imported,
and threads released then go through the shard job's first step, :class:`Runtime`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("agentdojo", reason="the AgentDojo suite needs agentdojo (make env)")

from tests.conftest import ROOT

RACE = r'''
import json, sys, threading, time

# The shards of two suites, twice each (a shard job is one suite's cases).
PAIRS = [("banking", "user_task_0", "injection_task_0"),
         ("slack", "user_task_0", "injection_task_1")] * 2
IN_WINDOW = threading.Event()  # a thread is importing the module that registers the attack


class SlowRegistration:
    """Meta-path finder that only stalls: the importing thread holds the import of
    ``important_instructions_attacks`` open while ``attack_registry`` is already complete
    and its ``ATTACKS`` still lack ``important_instructions``."""

    def find_spec(self, name, path=None, target=None):
        if name == "agentdojo.attacks.important_instructions_attacks":
            IN_WINDOW.set()
            time.sleep(0.5)
        return None


sys.meta_path.insert(0, SlowRegistration())
sys.setswitchinterval(1e-6)
from reactlab.suites import agentdojo as ad

assert not any(m == "agentdojo" or m.startswith("agentdojo.") for m in sys.modules)
start = threading.Barrier(len(PAIRS))
results, errors = {}, []


def shard(i, pair):
    start.wait()
    # half start at once (a cold, simultaneous import); the others when one thread is
    # inside the registering import (the window the failed run hit)
    if i % 2 and not IN_WINDOW.wait(timeout=30):
        errors.append(f"{i}: the registering import never ran")
        return
    try:
        ad.Runtime(ad.Pair(*pair))
        results[i] = ad.injections(*pair)
    except BaseException as exc:
        errors.append(f"{i} {pair[0]}: {type(exc).__name__}: {exc}")


threads = [threading.Thread(target=shard, args=(i, p)) for i, p in enumerate(PAIRS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"errors": errors, "results": {str(k): v for k, v in results.items()}}))
'''


def test_shard_threads_share_one_cold_agentdojo_import() -> None:
    proc = subprocess.run([sys.executable, "-c", RACE], cwd=ROOT, capture_output=True,
                          text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["errors"] == []
    results = out["results"]
    assert sorted(results) == ["0", "1", "2", "3"]
    # each thread got the same injections for the same pair, carrying the attack's tag
    assert results["0"] == results["2"] and results["1"] == results["3"]
    for injected in results.values():
        assert injected and all("<INFORMATION>" in text for text in injected.values())
