"""MCP you can trust (docs/mcp.md, "Runs, recordings and replay"): an offline replay that
needs neither the server's program nor a cache, recordings whose tools are not the
planned ones refused tool by tool, results held to their tool's declared outputSchema,
and damaged recordings never trusted by the recovery step. Servers: tests/mcp_bad_server.py
(helpers shared with tests/test_mcp.py)."""

from __future__ import annotations

import copy
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactlab.core.errors import ConfigError, DamagedResult, ToolServerError
from tests.conftest import ROOT
from tests.test_mcp import BAD, bad_config, calls, records, run, spec_of

KEY = "eco_task/openai/eco_script"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTLAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One run on the bad server recorded as the pipeline lays it out, in a project
    folder of its own: the server's program is ``servidor-eco``, a script found on the
    PATH (``bin/``), gone after the fixture."""
    work = tmp_path_factory.mktemp("project")
    program = work / "bin" / "servidor-eco"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{BAD}" ok "$@"\n')
    program.chmod(0o755)
    from reactlab.config import load_yaml

    raw = bad_config(load_yaml(ROOT / "config.yaml"))
    raw["mcp_servers"]["bad"] = {"command": "servidor-eco", "timeout": 5}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        mp.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
        mp.setenv("REACTLAB_CACHE", str(work / "cache"))
        spec = spec_of(raw)
        trace = work / "results" / "traces" / f"{KEY}.jsonl"
        rec = work / "results" / "recordings" / f"{KEY}.mcp.jsonl"
        run(spec, trace, tools_recording=rec)
    shutil.rmtree(program.parent)  # the program is gone: off the PATH, deleted
    shutil.rmtree(work / "cache")
    yield {"work": work, "raw": raw, "spec": spec, "trace": trace, "recording": rec}


def replaying(raw: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    raw["mcp_servers"]["bad"]["replay"] = True
    return raw


def test_an_offline_replay_needs_neither_the_program_nor_a_cache(recorded, tmp_path,
                                                                 monkeypatch):
    """replay: true plans from the recordings' headers (the program is deleted, the
    cache empty), then the replay writes the recorded trace's bytes, and the runs
    table's row built from it is the recorded run's."""
    from reactlab.analysis.tables import run_row
    from reactlab.analysis.verify import load_verified, verify_job

    monkeypatch.chdir(recorded["work"])
    spec = spec_of(replaying(recorded["raw"]))
    assert spec == recorded["spec"]  # the same config hash: the same trace header
    replayed = tmp_path / "replayed.jsonl"
    run(spec, replayed, tools_replay=recorded["recording"])
    assert replayed.read_bytes() == recorded["trace"].read_bytes()
    rows = []
    for trace in (recorded["trace"], replayed):
        verify_job(str(trace), str(trace.with_suffix(".json")))
        row = run_row(load_verified(str(trace), trace.with_suffix(".json")))
        rows.append({k: v for k, v in row.items() if k != "trace"})
        trace.with_suffix(".json").unlink()
    assert rows[0] == rows[1] and rows[0]["verified"] is True


def test_a_replay_with_no_recording_and_no_cache_is_a_one_line_error(recorded, tmp_path,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)  # no results/recordings here
    with pytest.raises(ConfigError) as err:
        spec_of(replaying(recorded["raw"]))
    assert err.value.field == "mcp_servers.bad"
    assert "no recording of its tasks' runs" in str(err.value) and "\n" not in str(err.value)


def test_recordings_that_disagree_on_the_tools_are_not_planned_from(recorded, tmp_path,
                                                                    monkeypatch):
    from reactlab.mcp.recording import encode, read

    monkeypatch.chdir(tmp_path)
    shutil.copytree(recorded["work"] / "results", tmp_path / "results")
    rec = read(recorded["recording"])
    other = copy.deepcopy(rec.header)
    other["tools"][0]["description"] = "Otra."
    from reactlab.config.mcp import tools_hash

    other["tools_hash"] = tools_hash(other["tools"])
    stale = tmp_path / "results" / "recordings" / "eco_task" / "local" / "eco_script.mcp.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(encode(other, rec.records))
    with pytest.raises(ConfigError, match="hold 2 different tool lists"):
        spec_of(replaying(recorded["raw"]))


def test_a_recording_of_other_tools_is_refused_before_any_model_turn(recorded, tmp_path):
    """A replay whose recording's tool hash is not the run's planned one (here: the
    server's list then lacked ``falla`` and described ``suma`` otherwise) is refused,
    naming each tool; so is a recording of another server."""
    from reactlab.mcp.recording import encode, read

    rec = read(recorded["recording"])
    head = copy.deepcopy(rec.header)
    head["tools"] = [t for t in head["tools"] if t["name"] != "falla"]
    head["tools"][1]["description"] = "Suma, de otra manera."
    head["tools"].append({"name": "extra", "inputSchema": {"type": "object"}})
    from reactlab.config.mcp import tools_hash

    head["tools_hash"] = tools_hash(head["tools"])
    other = tmp_path / "other.mcp.jsonl"
    other.write_bytes(encode(head, rec.records))
    out = tmp_path / "t.jsonl"
    with pytest.raises(ToolServerError) as err:
        run(recorded["spec"], out, tools_replay=other)
    assert err.value.kind == "changed"
    # the planned list is not cached here: the task's tools are compared
    assert "not the ones planned (the run's spec): removed: falla; changed: suma " \
           "(description); record the run again" in str(err.value)
    renamed = tmp_path / "renamed.mcp.jsonl"
    renamed.write_bytes(encode({**rec.header, "server": "otro"}, rec.records))
    with pytest.raises(ToolServerError, match="records MCP server 'otro'"):
        run(recorded["spec"], out, tools_replay=renamed)
    assert not out.exists()


def test_the_tools_diff_names_each_tool():
    from reactlab.config.mcp_lists import tools_diff

    a = {"name": "a", "description": "A", "inputSchema": {"type": "object"}}
    b = {"name": "b", "description": "B", "inputSchema": {"type": "object"}}
    b2 = {**b, "inputSchema": {"type": "object", "required": ["x"]},
          "outputSchema": {"type": "object"}}
    c = {"name": "c", "description": "C"}
    assert tools_diff([a, b], [b2, c]) == ("added: c; removed: a; changed: b "
                                           "(inputSchema, outputSchema)")
    assert tools_diff([a, b], [b, a]) == "the same tools in another order"


def test_a_result_against_its_output_schema_is_an_error_the_tables_count(raw_config,
                                                                         tmp_path):
    """mcp_bad_server.py outschema: every tool declares an outputSchema. A result with no
    structuredContent, or one that breaks the schema, reaches the model as a Spanish
    error and is traced ``nonconforming``; a conforming one and an isError one are as
    ever; the replay reads the same."""
    spec = spec_of(bad_config(raw_config, "outschema"))
    assert spec.mcp.tools[1]["output_schema"]["required"] == ["suma"]
    trace, rec = tmp_path / "t.jsonl", tmp_path / "r.mcp.jsonl"
    run(spec, trace, tools_recording=rec)
    got = calls(trace)
    prefix = "el resultado no cumple el esquema declarado por la herramienta: "
    assert [(c["name"], c["status"], c["result"]) for c in got] == [
        ("eco", "nonconforming", {"error": prefix + "no trae structuredContent"}),
        ("suma", "nonconforming",
         {"error": prefix + "structuredContent.suma: '5' is not of type 'number'"}),
        ("falla", "error", {"error": "fallo a propósito"}),
        ("contador", "ok", {"resultado": {"n": 4}})]
    end = records(trace)[-1]
    assert (end["calls"], end["errors"]) == (4, 3)  # the runs table's calls and errors
    replayed = tmp_path / "replayed.jsonl"
    run(spec, replayed, tools_replay=rec)
    assert replayed.read_bytes() == trace.read_bytes()


def test_what_a_broken_output_schema_reads():
    from reactlab.mcp.output_schema import OutputSchemas

    schemas = OutputSchemas([
        {"name": "ok"},
        {"name": "lista", "output_schema": {"type": "object", "properties": {
            "filas": {"type": "array", "items": {"type": "integer"}}}}},
        {"name": "roto", "output_schema": {"type": "object", "minProperties": "x"}},
        {"name": "ref", "output_schema": {"$ref": "https://example.invalid/s.json"}},
    ])
    prefix = "el resultado no cumple el esquema declarado por la herramienta: "
    assert schemas.problem("ok", {}) is None  # no schema declared
    assert schemas.problem("lista", {"structuredContent": {"filas": [1, 2]}}) is None
    assert schemas.problem("lista", {"isError": True}) is None  # errors are not bound
    assert schemas.problem("lista", {"structuredContent": {"filas": [1, "2"]}}) == (
        prefix + "structuredContent.filas[1]: '2' is not of type 'integer'")
    assert schemas.problem("lista", {"structuredContent": [1]}) == (
        prefix + "no trae structuredContent")
    assert "no es un esquema JSON válido" in schemas.problem("roto", {"structuredContent": {}})
    assert "referencia que no se puede resolver" in schemas.problem(
        "ref", {"structuredContent": {}})


def _project(tmp_path: Path, recording: bytes) -> Path:
    """A results folder with one MCP run's recording, trace and verification."""
    results = tmp_path / "results"
    for sub, suffix, data in (("recordings", ".mcp.jsonl", recording),
                              ("traces", ".jsonl", b"{}\n"), ("verified", ".json", b"{}")):
        path = results / sub / f"{KEY}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return results


@pytest.mark.parametrize("replays", [False, True, None])
def test_recover_never_trusts_a_damaged_mcp_recording(recorded, tmp_path, replays):
    """A damaged recording of a recording server is removed with its run (which records
    it again); one whose server replays (or where that is not known) stops the run,
    naming the file and the repair, and is kept."""
    from reactlab.analysis.recovery import recover

    good = recorded["recording"].read_bytes()
    damaged = good.replace(b"hola BUSI", b"hola ACME")
    results = _project(tmp_path, damaged)
    args = {"keys": [KEY], "tables": [], "figures": [], "viewer": str(results / "viewer"),
            "results": results, "mcp": {KEY: replays}}
    if replays is False:
        found = recover(**args)
        assert sorted(found.removed) == sorted(str(results / sub / f"{KEY}{suffix}") for
                                               sub, suffix in (("recordings", ".mcp.jsonl"),
                                                               ("traces", ".jsonl"),
                                                               ("verified", ".json")))
        assert "checksum mismatch" in found.messages[0]
        return
    with pytest.raises(DamagedResult) as err:
        recover(**args)
    assert str(err.value).startswith(str(results / "recordings" / f"{KEY}.mcp.jsonl"))
    assert "checksum mismatch" in str(err.value) and "Restore it from a copy" in str(err.value)
    assert (results / "recordings" / f"{KEY}.mcp.jsonl").read_bytes() == damaged


def test_recover_keeps_a_sound_mcp_recording_and_drops_an_old_one(recorded, tmp_path):
    from reactlab.analysis.recovery import recover

    good = recorded["recording"].read_bytes()
    results = _project(tmp_path / "sound", good)
    (results / "traces" / f"{KEY}.jsonl").write_bytes(recorded["trace"].read_bytes())
    (results / "verified" / f"{KEY}.json").unlink()
    found = recover([KEY], tables=[], figures=[], viewer=str(results / "viewer"),
                    results=results, mcp={KEY: False})
    assert found.removed == [] and found.messages == []
    old = b"".join(line + b"\n" for line in good.split(b"\n")[1:-2])  # no header, no end
    results = _project(tmp_path / "old", old)
    found = recover([KEY], tables=[], figures=[], viewer=str(results / "viewer"),
                    results=results, mcp={KEY: False})
    assert "older reactlab" in found.messages[0]
    assert not (results / "recordings" / f"{KEY}.mcp.jsonl").exists()

