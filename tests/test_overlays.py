"""Overlays have one meaning (issue 41, item 4): lists replace, mappings merge, and
`reactlab check` says so; a run that would drop another configuration's runs from a
results folder is refused (reactlab.analysis.stamp)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reactlab.analysis import stamp
from reactlab.config.overlays import describe, run_changes, summary
from reactlab.core.errors import ReactlabError


def test_describe_names_replaced_merged_and_added_keys() -> None:
    base = {"matrix": [{"tasks": ["a"]}, {"tasks": ["b"]}], "backends": {"x": {}, "y": {}},
            "seed": 1}
    overlay = {"backends": {"y": {"mode": "live"}, "z": {}}, "matrix": [{"tasks": ["c"]}],
               "seed": 2, "live": {"enabled": True}}
    assert describe(base, overlay) == [
        "backends: merged (adds z; changes y)",
        "matrix: replaced (2 items -> 1 item)",
        "seed: replaced (1 -> 2)",
        "live: added (1 entries)",
    ]
    kept, added, removed = run_changes(["a/x/s", "b/x/s"], ["b/x/s", "c/x/s"])
    assert (kept, added, removed) == (1, ["c/x/s"], ["a/x/s"])
    assert summary(kept, added, removed) == \
        "runs: 1 kept, 1 added, 1 removed; added: c/x/s; removed: a/x/s"


def test_stamp_keeps_a_grown_plan_and_refuses_a_dropped_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stamp.REPLACE_ENV, raising=False)
    default = stamp.stamp(["config.yaml"], ["t/a/s", "t/b/s"], ["bfcl-1"])
    assert stamp.check(default, apply=True, root=tmp_path) is None  # an empty folder
    written = json.loads((tmp_path / stamp.STAMP).read_text(encoding="utf-8"))
    assert written == {"configs": ["config.yaml"], "runs": ["t/a/s", "t/b/s"],
                       "shards": ["bfcl-1"], "fingerprint": stamp.fingerprint(written)}
    grown = stamp.stamp(["config.yaml", "workflow/configs/replay.yaml"],
                        ["t/a/s", "t/b/s", "t/c/s"], ["bfcl-1"])
    assert grown["fingerprint"] != written["fingerprint"]  # the captions tell them apart
    assert stamp.check(grown, apply=True, root=tmp_path) is None
    suite = stamp.stamp(["config.yaml", "workflow/configs/bfcl.yaml"],
                        ["t/a/s", "t/b/s", "t/c/s"], ["bfcl-9"])
    note = stamp.check(suite, apply=False, root=tmp_path)  # a dry run: a note only
    assert note is not None and "1 suite shard (e.g. bfcl-1)" in note
    with pytest.raises(ReactlabError) as refused:
        stamp.check(suite, apply=True, root=tmp_path)
    message = str(refused.value)
    assert "results/ holds the results of config.yaml + workflow/configs/replay.yaml" in message
    assert "this run of config.yaml + workflow/configs/bfcl.yaml" in message
    assert "--directory DIR" in message and "REACTLAB_REPLACE_RESULTS=1" in message
    assert json.loads((tmp_path / stamp.STAMP).read_text(encoding="utf-8")) == grown
    monkeypatch.setenv(stamp.REPLACE_ENV, "1")  # on purpose: replaced, stamped anew
    assert stamp.check(suite, apply=True, root=tmp_path) is None
    assert json.loads((tmp_path / stamp.STAMP).read_text(encoding="utf-8")) == suite


@pytest.mark.e2e  # a Snakemake start (a few seconds), no job
def test_an_overlay_dropping_the_folders_runs_is_refused_before_any_job(
        tmp_path: Path) -> None:
    from tests.doc_commands import copy_checkout

    work = copy_checkout(tmp_path / "work")
    (work / "results").mkdir(exist_ok=True)
    old = stamp.stamp(["config.yaml"], ["variacion_busi/openai/correcto", "gone/x/y"], [])
    (work / stamp.STAMP).write_text(json.dumps(old), encoding="utf-8")
    before = sorted(p.relative_to(work) for p in (work / "results").rglob("*"))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1",
                           "--configfile", "workflow/configs/lesson.yaml"],
                          cwd=work, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert ("results/ holds the results of config.yaml (results/.reactlab-config.json); "
            "this run of config.yaml + workflow/configs/lesson.yaml plans without 1 run "
            "(e.g. gone/x/y)") in proc.stderr, proc.stderr[-3000:]
    assert sorted(p.relative_to(work) for p in (work / "results").rglob("*")) == before
    assert not (work / "data" / "generated").exists()
