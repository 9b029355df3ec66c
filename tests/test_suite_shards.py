"""A suite shard's manifests (reactlab.suites.shards) and the plan's shard digests.

Snakemake sees a shard's trace and verification manifests, not its per-case files; the
recovery step must therefore find a missing or edited case file itself and remove the
manifest that stands for it (the shard then reruns, and only it). The dry runs through
Snakemake are in tests/test_suites.py (e2e); here the same rules on the files alone.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("bfcl_eval", reason="the BFCL suite needs bfcl-eval (make env)")

from reactlab.suites import shards as sh
from reactlab.suites.plan import plan
from reactlab.suites.registry import run_case, suite_record
from reactlab.suites.run import run_shard
from reactlab.suites.score import verify_shard
from reactlab.suites.types import _digest, shard_paths, spec_traces, verified_path
from tests.test_suites import suite_config


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Two shards (oracle, wrong_type) of two cases each, run and verified as the
    pipeline's jobs do, in ``tmp_path`` as the working folder."""
    monkeypatch.chdir(tmp_path)
    raw = suite_config(sample=1, categories=["simple_python", "irrelevance"],
                       policies=["oracle", "wrong_type"], backends=["local"])
    (tmp_path / "config.yaml").write_text(json.dumps(raw), encoding="utf-8")  # JSON is YAML
    shards = plan(raw)
    for shard in shards:
        files = sh.shard_files(shard.suite, shard.id)
        Path(files.spec).parent.mkdir(parents=True, exist_ok=True)
        Path(files.spec).write_text(shard.to_json(), encoding="utf-8")
        traces = spec_traces(shard.to_json())
        run_shard(shard.to_json(), traces, run_case)
        sh.publish(files.traces, traces)
        verified = [verified_path(t) for t in traces]
        verify_shard(traces, verified, suite_record)
        sh.publish(files.verified, verified)
    for t in ("results/tables/bfcl.csv", "results/tables/bfcl_cases.csv"):
        Path(t).parent.mkdir(parents=True, exist_ok=True)
        Path(t).write_text("table\n", encoding="utf-8")
    return shards


TABLES = ["results/tables/bfcl.csv", "results/tables/bfcl_cases.csv"]


def present(shards: list[Any]) -> dict[str, tuple[bool, bool]]:
    out = {}
    for s in shards:
        files = sh.shard_files(s.suite, s.id)
        out[s.id] = (Path(files.traces).exists(), Path(files.verified).exists())
    return out


def test_paths_agree_with_the_plan(built: list[Any]) -> None:
    shard = built[0]
    assert spec_traces(shard.to_json()) == shard.traces()
    assert [verified_path(t) for t in shard.traces()] == shard.verified()
    assert shard_paths(shard.specs[0]) == (shard.traces()[0], shard.verified()[0])
    assert sh.listed(sh.shard_files(shard.suite, shard.id).traces) == sorted(shard.traces())
    with pytest.raises(ValueError, match="not a suite trace path"):
        verified_path("results/suites/bfcl/elsewhere/x.jsonl")


def test_intact_shards_are_left_alone(built: list[Any]) -> None:
    assert sh.recover(built, TABLES) == []
    assert set(present(built).values()) == {(True, True)}
    assert all(Path(t).exists() for t in TABLES)


@pytest.mark.parametrize("damage", ["delete", "edit_same_size", "truncate"])
def test_a_damaged_trace_reruns_its_shard_only(built: list[Any], damage: str) -> None:
    first, second = built
    trace = Path(first.traces()[1])
    if damage == "delete":
        trace.unlink()
    elif damage == "truncate":
        trace.write_bytes(trace.read_bytes()[:-10])
    else:
        data = trace.read_bytes()
        trace.write_bytes(data.replace(b'"', b"'", 1))
        assert len(trace.read_bytes()) == len(data)
    messages = sh.recover(built, TABLES)
    assert present(built) == {first.id: (False, False), second.id: (True, True)}
    assert not any(Path(t).exists() for t in TABLES)
    assert str(trace) in messages[0] and f"shard {first.id} will be rerun" in messages[0]


def test_a_damaged_verification_reruns_its_verify_job_only(built: list[Any]) -> None:
    first, second = built
    verified = Path(second.verified()[0])
    verified.write_text(verified.read_text() + " ")
    messages = sh.recover(built, TABLES)
    assert present(built) == {first.id: (True, True), second.id: (True, False)}
    assert "will be verified again" in messages[0]
    assert not any(Path(t).exists() for t in TABLES)


def test_an_unreadable_or_foreign_manifest_reruns_its_shard(built: list[Any]) -> None:
    first, second = built
    Path(sh.shard_files(first.suite, first.id).traces).write_text("{", encoding="utf-8")
    manifest = Path(sh.shard_files(second.suite, second.id).traces)
    entries = json.loads(manifest.read_text())
    entries["files"]["results/suites/bfcl/traces/local/oracle/other.jsonl"] = "0" * 64
    manifest.write_text(json.dumps(entries))
    messages = sh.recover(built, TABLES)
    assert present(built) == {first.id: (False, False), second.id: (False, False)}
    assert "unreadable manifest" in messages[0]
    assert f"shard {second.id}: its cases changed" in messages[1]


def test_changed_cases_rerun_the_shard_but_keep_the_tables(built: list[Any]) -> None:
    """A config that changes a shard's cases is not damage: the shard reruns (rule all
    asks for its manifest), the tables are rebuilt after it, not removed before."""
    first, second = built
    manifest = Path(sh.shard_files(second.suite, second.id).traces)
    entries = json.loads(manifest.read_text())
    entries["files"].pop(sorted(entries["files"])[0])
    manifest.write_text(json.dumps(entries))
    messages = sh.recover(built, TABLES)
    assert messages == [f"shard {second.id}: its cases changed in the config: it will be "
                        "rerun"]
    assert present(built) == {first.id: (True, True), second.id: (False, False)}
    assert all(Path(t).exists() for t in TABLES)


def test_a_dry_run_recovery_removes_nothing(built: list[Any]) -> None:
    first, _ = built
    Path(first.traces()[1]).unlink()
    before = {p: p.read_bytes() for p in Path("results").rglob("*") if p.is_file()}
    messages = sh.recover(built, TABLES, apply=False)
    assert f"shard {first.id} will be rerun" in messages[0]
    assert {p: p.read_bytes() for p in Path("results").rglob("*") if p.is_file()} == before
    assert sh.recover(built, TABLES) == messages  # a real run does what the dry run said
    assert not any(Path(t).exists() for t in TABLES)


def test_the_stat_cache_spares_reading_and_is_refreshed(built: list[Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from reactlab.suites import shards

    hashed: list[str] = []
    real = shards.sha256_file

    def counting(path: str | Path) -> str:
        hashed.append(str(path))
        return real(path)

    monkeypatch.setattr(shards, "sha256_file", counting)
    assert sh.recover(built, TABLES) == []
    assert hashed == []  # every file's stat matches what its job recorded
    trace = built[0].traces()[0]
    st = os.stat(trace)
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched, not changed
    assert sh.recover(built, TABLES) == []
    assert hashed == [trace]  # read once, found intact, cache refreshed
    assert sh.recover(built, TABLES) == []
    assert hashed == [trace]
    # a stat cache that does not belong to the manifest is not trusted
    cache = sh.stat_cache_path(sh.shard_files(built[1].suite, built[1].id).traces)
    cache.write_text("[", encoding="utf-8")
    assert sh.recover(built, TABLES) == []
    assert sorted(hashed[1:]) == sorted(built[1].traces())


def test_shard_digests_follow_the_specs() -> None:
    raw = suite_config(sample=2, policies=["oracle"], backends=["local", "smollm2"])
    shards = plan(raw)
    # the digests plan() computes with one memo are the ones each shard gets alone
    assert [s.digest for s in shards] == [_digest(s.specs, {}) for s in shards]
    base = {s.id: s.digest for s in shards}
    # a case's data, the backend's settings, the system prompt: the digest changes
    changed = copy.deepcopy(raw)
    changed["suites"]["bfcl"]["system_prompt"] = "Another prompt."
    assert all(base[s.id] != s.digest for s in plan(changed))
    changed = copy.deepcopy(raw)
    changed["backends"]["smollm2"]["max_new_tokens"] = 77
    assert {s.id for s in plan(changed) if base[s.id] != s.digest} == {
        s.id for s in shards if s.backend == "smollm2"}
    # the same config planned again: the same digests
    assert {s.id: s.digest for s in plan(copy.deepcopy(raw))} == base


def test_reactlab_recover_checks_the_suites_too(built: list[Any]) -> None:
    from reactlab.cli import main

    first, second = built
    Path(second.traces()[0]).unlink()
    assert main(["recover"]) == 0
    assert present(built) == {first.id: (True, True), second.id: (False, False)}
    assert not any(Path(t).exists() for t in TABLES)


class _Host:
    """A model host that loads nothing: what a provider's ``models`` member points to."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def load(self, spec: Any) -> Any:
        self.calls.append("load")
        return type("Loaded", (), {"name": "fake-model"})()

    def first_turns(self, model: Any, specs: Any, batch_size: int,
                    layout: list[list[str]]) -> list[Any]:
        self.calls.append(f"first_turns {batch_size}")
        layout.append([s.task for s in specs])
        return [None] * len(specs)

    def describe(self, model: Any) -> dict[str, Any]:
        return {"model": model.name, "dtype": "float32"}

    def runtime(self) -> dict[str, Any]:
        return {"torch": "none"}


HOST = _Host()


def test_a_model_shard_reaches_its_model_only_through_the_provider(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model shard loads its model by its provider's host (``Provider.model_host``),
    hands it to every case, batches the first turns and writes the reproduction record
    from what the host says; no suite module imports a backend's package."""
    import ast
    from dataclasses import replace

    from reactlab.backends import registry as providers
    from reactlab.suites import run as shard_run

    raw = suite_config(sample=1, categories=["simple_python", "multiple"],
                       policies=["oracle"], backends=["smollm2"])
    raw["suites"]["bfcl"]["batch_size"] = 2
    shards = plan(raw)
    assert shards and shards[0].specs[0].backend_config.mode == "model"
    host = HOST
    local = replace(providers.provider("local"), models=(__name__, "HOST"))
    monkeypatch.setattr(shard_run, "provider", lambda name: local)
    got: list[Any] = []

    def case(spec: Any, out: Any, **kw: Any) -> dict[str, Any]:
        got.append(kw["model"])
        return {"calls": 0, "termination": "answer"}

    specs = [s for sh_ in shards for s in sh_.specs][:2]
    text = json.dumps([s.to_dict() for s in specs])
    run_shard(text, ["a", "b"], case, tmp_path / "record.json")
    assert host.calls == ["load", "first_turns 2"]
    assert [m.name for m in got] == ["fake-model", "fake-model"]
    record = json.loads((tmp_path / "record.json").read_text(encoding="utf-8"))
    assert (record["model"], record["dtype"], record["torch"]) == ("fake-model", "float32",
                                                                   "none")
    assert record["batches"] == [[s.task for s in specs]]
    with pytest.raises(Exception, match="loads no model in process"):
        providers.provider("openai").model_host()
    assert providers.provider("local").model_host().__class__.__name__ == "LocalModels"
    suites = Path(shard_run.__file__).parent
    for path in suites.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("reactlab.backends.local"), path
