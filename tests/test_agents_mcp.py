"""Frameworks take MCP tools through their own MCP clients (docs/mcp.md, "Frameworks take
MCP tools"): the Agents SDK, pydantic-ai and Inspect run a task whose tools come from an
MCP server — mcp-server-sqlite, which nobody here wrote, and the project's own server —
with the server started by the framework, traced from the model's wire and from the
relay's log of the server's calls."""

from __future__ import annotations

import copy
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from reactlab.config import parse
from reactlab.core.errors import ConfigError
from tests.conftest import ROOT, with_own_mcp_server

SQLITE = ROOT / ".venv-mcp-sqlite" / "bin" / "mcp-server-sqlite"
needs_sqlite = pytest.mark.skipif(not SQLITE.is_file(),
                                  reason="mcp-server-sqlite's environment: `make env`")
#: The built-in frameworks whose own MCP client takes a task's tools.
FRAMEWORKS = ("openai_agents", "pydantic_ai", "inspect_react")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTLAB_CACHE", str(tmp_path / "cache"))


def with_agents(raw: dict[str, Any], tasks: list[str], scenarios: list[str],
                backends: tuple[str, ...] = ("openai_chat",)) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    raw["agents"] = {**raw.get("agents", {}),
                     **{f"{f}_mcp": {"framework": f} for f in FRAMEWORKS}}
    raw["matrix"].append({"tasks": tasks, "backends": list(backends), "scenarios": scenarios,
                          "agents": [f"{f}_mcp" for f in FRAMEWORKS]})
    return raw


def spec_of(cfg: Any, key: str) -> Any:
    return next(r for r in cfg.runs if r.key == key)


def records(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]


def relays() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)
            if "reactlab.mcp.relay" in " ".join(p.cmdline())}


@needs_sqlite
def test_frameworks_run_sql_over_mcp_server_sqlite(raw_config, data_files, tmp_path,
                                                   monkeypatch):
    """Each framework's own MCP client on mcp-server-sqlite: the model is offered the
    task's tools only (never write_query), the correct script is verified from the rows
    the server sent, a write is never made, and no server process is left."""
    from reactlab.analysis.verify import verify_job
    from reactlab.data import sqlite
    from reactlab.frameworks import wire
    from reactlab.mcp.recording import read
    from reactlab.runner import run_job

    bodies: list[bytes] = []  # what the simulator received: each run's first request
    build = wire.build_records

    def keep(spec: Any, exchanges: list[Any], *args: Any, **kw: Any) -> Any:
        bodies.append(exchanges[0].body)
        return build(spec, exchanges, *args, **kw)

    monkeypatch.setattr(wire, "build_records", keep)
    monkeypatch.chdir(tmp_path)
    db = sqlite.write(*data_files, tmp_path / "data" / "generated" / "acciones6.sqlite")
    pristine = db.read_bytes()
    cfg = parse(with_agents(raw_config, ["sql_cierre_busi"], ["sql_correcto", "sql_escritura"]))
    for framework in FRAMEWORKS:
        for scenario in ("sql_correcto", "sql_escritura"):
            spec = spec_of(cfg, f"sql_cierre_busi/openai_chat/{scenario}__{framework}_mcp")
            trace, calls_log = (tmp_path / f"{framework}-{scenario}.jsonl",
                                tmp_path / "c.mcp.jsonl")
            run_job(spec.to_json(), *data_files, trace, tools_recording=calls_log)
            recs = records(trace)
            end = recs[-1]
            offered = [t["function"]["name"] for t in json.loads(bodies[-1])["tools"]]
            assert "write_query" not in offered and "read_query" in offered, offered
            calls = [r for r in recs if r["type"] == "tool_call"]
            logged = [r["request"]["params"]["name"] for r in read(calls_log).records
                      if r["request"]["method"] == "tools/call"]
            # the run's MCP recording: exactly the calls the server ran
            assert logged == [c["name"] for c in calls if c["status"] in ("ok", "error")]
            assert "write_query" not in logged  # never reached the server
            if scenario == "sql_escritura":
                assert calls[0]["name"] == "write_query"
                assert calls[0]["status"] == "unknown"  # refused by the framework, unsent
                if framework == "openai_agents":  # as shipped: an unknown tool ends the run
                    assert (end["termination"], end["ending"]) == (
                        "framework_error", "ModelBehaviorError")
                    continue
            assert end["termination"] == "answer", (framework, scenario, end)
            reads = [c for c in calls if c["name"] == "read_query"]
            assert [c["status"] for c in reads] == ["ok"], (framework, calls)
            assert "26.19" in reads[0]["result"]["resultado"]  # the row the server sent
            verify_job(str(trace), str(trace.with_suffix(".json")))
            verdict = json.loads(trace.with_suffix(".json").read_text())
            if (framework, scenario) == ("inspect_react", "sql_escritura"):
                # Inspect sends its refusal as free text in a tool message ("Error: Tool
                # write_query not found"), which the scripted model cannot tell from a
                # result: it quotes it, and the verifier refuses the answer
                assert "write_query not found" in end["answer"]
                assert [f["rule"] for f in verdict["findings"]] == ["non_answer"]
                continue
            assert verdict["verified"], (framework, scenario, verdict)
    assert db.read_bytes() == pristine
    assert not relays()


@pytest.mark.slow  # about 30 s: a server start per run, three frameworks
def test_over_the_projects_own_server_the_results_are_the_in_process_ones(
        raw_config, data_files, toolbox, tmp_path):
    """The lesson's task with its tools from `python -m reactlab mcp`: each framework's
    tool results are the ones the tools give in process, and its verdict the same."""
    from reactlab.analysis.verify import verify_job
    from reactlab.runner import run_to_trace

    raw = with_own_mcp_server(raw_config, data_files)
    raw["tasks"]["variacion_mcp"] = {**raw["tasks"]["variacion_busi"], "mcp_server": "reactlab"}
    cfg = parse(with_agents(raw, ["variacion_mcp"], ["correcto", "argumentos_inventados"]))
    for framework in FRAMEWORKS:
        for scenario in ("correcto", "argumentos_inventados"):
            spec = spec_of(cfg, f"variacion_mcp/openai_chat/{scenario}__{framework}_mcp")
            out = tmp_path / f"{framework}-{scenario}.jsonl"
            from reactlab.frameworks.wire import FrameworkMcp

            run_to_trace(spec, FrameworkMcp(), out)
            calls = [r for r in records(out) if r["type"] == "tool_call"]
            assert calls, (framework, scenario)
            for call in calls:
                if call["status"] in ("ok", "error"):  # the server ran it
                    assert call["result"] == toolbox.execute(call["name"], call["arguments"])
            verify_job(str(out), str(out.with_suffix(".json")))
            assert json.loads(out.with_suffix(".json").read_text())["verified"]
            if scenario == "argumentos_inventados" and framework != "inspect_react":
                # no validation of its own over MCP: the server's Spanish error is read
                assert calls[0]["status"] == "error"
                assert "argumentos no v" in calls[0]["sent"]  # (JSON-escaped "á")
    assert not relays()


def test_a_framework_without_mcp_support_on_an_mcp_task_is_a_config_error(raw_config):
    raw = copy.deepcopy(raw_config)
    raw["matrix"].append({"tasks": ["sql_cierre_busi"], "backends": ["openai_chat"],
                          "scenarios": ["sql_correcto"], "agents": ["langchain"]})
    with pytest.raises(ConfigError) as exc:
        parse(raw)
    assert exc.value.field.startswith(f"matrix[{len(raw['matrix']) - 1}].agents")
    assert "takes no MCP tools" in str(exc.value)


# --- a framework's run over MCP, recorded and replayed offline --------------------------

#: The framework of the replay tests: pydantic-ai's client sends a turn's calls
#: concurrently, which the recording must keep in the order they were sent.
REPLAYED = "pydantic_ai"
REPLAY_KEY = f"eco_task/openai_chat/eco_script__{REPLAYED}_mcp"


def eco_config(server: Path, *, replay: bool = False) -> dict[str, Any]:
    """The shipped config with tests/mcp_bad_server.py's tools (a copy at ``server``) and
    the framework's agent on them (tests/test_mcp.py's ``eco_task`` and its script)."""
    from reactlab.config import load_yaml
    from tests.test_mcp import bad_config

    raw = bad_config(load_yaml(ROOT / "config.yaml"), backends=("openai_chat",))
    raw["mcp_servers"]["bad"] = {"command": sys.executable, "args": [str(server), "ok"],
                                 "timeout": 5, **({"replay": True} if replay else {})}
    raw["agents"] = {**raw.get("agents", {}), f"{REPLAYED}_mcp": {"framework": REPLAYED}}
    raw["matrix"].append({"tasks": ["eco_task"], "backends": ["openai_chat"],
                          "scenarios": ["eco_script"], "agents": [f"{REPLAYED}_mcp"]})
    return raw


@pytest.fixture(scope="module")
def framework_recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One framework run on MCP tools recorded as the pipeline lays it out, twice (two
    server processes, two relay folders), in a project folder of its own; the server's
    program, a copy of tests/mcp_bad_server.py there, and the planning cache are gone
    after the fixture."""
    from reactlab.runner import run_job
    from tests.test_mcp import BAD

    work = tmp_path_factory.mktemp("project")
    server = work / "servidor.py"
    shutil.copyfile(BAD, server)
    raw = eco_config(server)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        mp.setenv("REACTLAB_CACHE", str(work / "cache"))
        spec = spec_of(parse(raw), REPLAY_KEY)
        trace = work / "results" / "traces" / f"{REPLAY_KEY}.jsonl"
        rec = work / "results" / "recordings" / f"{REPLAY_KEY}.mcp.jsonl"
        run_job(spec.to_json(), "unused", "unused", trace, tools_recording=rec)
        again = work / "again.mcp.jsonl"
        run_job(spec.to_json(), "unused", "unused", work / "again.jsonl",
                tools_recording=again)
    server.unlink()
    shutil.rmtree(work / "cache")
    yield {"work": work, "server": server, "spec": spec, "trace": trace, "recording": rec,
           "again": again}


def test_a_framework_run_over_mcp_replays_offline_byte_for_byte(framework_recorded,
                                                                 tmp_path, monkeypatch):
    """The recording has the loop's format (its header the server's identity and tool
    list, the framework client's every request with its answer, a checksum), the same
    bytes from another server process; with ``replay: true`` the run plans from it (no
    program, no cache), and the relay answers the framework's own client from it: the
    recorded trace's bytes, and the same verification."""
    from reactlab.analysis.tables import run_row
    from reactlab.analysis.verify import load_verified, verify_job
    from reactlab.mcp.recording import read
    from reactlab.runner import run_job

    got = framework_recorded
    assert got["recording"].read_bytes() == got["again"].read_bytes()
    rec = read(got["recording"])
    assert rec.header["server"] == "bad" and rec.header["server_info"]["name"] == "mcp-bad-server"
    assert rec.header["tools_hash"] == got["spec"].mcp.tools_hash
    methods = [r["request"]["method"] for r in rec.records]
    assert "initialize" in methods and "tools/list" in methods
    assert [r["request"]["params"]["name"] for r in rec.records
            if r["request"]["method"] == "tools/call"] == ["eco", "suma", "falla", "contador"]
    assert not got["server"].exists()
    monkeypatch.chdir(got["work"])
    spec = spec_of(parse(eco_config(got["server"], replay=True)), REPLAY_KEY)
    assert spec == got["spec"]  # planned from the recording's header: the same spec
    replayed = tmp_path / "replayed.jsonl"
    run_job(spec.to_json(), "unused", "unused", replayed, tools_replay=got["recording"])
    assert replayed.read_bytes() == got["trace"].read_bytes()
    assert [c["status"] for c in records(replayed) if c["type"] == "tool_call"] == [
        "ok", "ok", "error", "ok"]
    rows = []
    for trace in (got["trace"], replayed):
        verify_job(str(trace), str(tmp_path / "v.json"))
        rows.append({k: v for k, v in run_row(load_verified(
            str(trace), tmp_path / "v.json")).items() if k != "trace"})
    assert rows[0] == rows[1] and rows[0]["verified"] is True


def test_a_framework_replay_refuses_a_tampered_recording_or_another_request(
        framework_recorded, tmp_path, monkeypatch):
    """A recording edited after it was written is refused before any model turn, and a
    run whose framework sends a request the recording does not hold stops; both name the
    file and leave no trace. The recovery step checks a framework run's recording too."""
    from reactlab.core.errors import DamagedResult, RecordingError
    from reactlab.jobs import recover
    from reactlab.runner import run_job

    got = framework_recorded
    monkeypatch.chdir(got["work"])
    raw = eco_config(got["server"], replay=True)
    tampered = tmp_path / "tampered.mcp.jsonl"
    tampered.write_bytes(got["recording"].read_bytes().replace(b"hola BUSI", b"hola ACME"))
    out = tmp_path / "t.jsonl"
    spec = spec_of(parse(raw), REPLAY_KEY)
    with pytest.raises(RecordingError, match=f"^{tampered}: checksum mismatch"):
        run_job(spec.to_json(), "unused", "unused", out, tools_replay=tampered)
    raw = copy.deepcopy(raw)  # (the script is tests/test_mcp.py's, shared)
    raw["scenarios"]["eco_script"]["steps"][0]["calls"][1]["arguments"] = {"a": 2, "b": 4}
    other = spec_of(parse(raw), REPLAY_KEY)
    with pytest.raises(RecordingError) as err:
        run_job(other.to_json(), "unused", "unused", out, tools_replay=got["recording"])
    assert str(err.value).startswith("tool replay diverged at exchange ")
    assert f"of {got['recording']}: params.arguments.b: recorded 3, sent 4" in str(err.value)
    assert not out.exists()
    shutil.copytree(got["work"] / "results", tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    damaged = Path("results") / "recordings" / f"{REPLAY_KEY}.mcp.jsonl"
    damaged.write_bytes(tampered.read_bytes())
    with pytest.raises(DamagedResult, match=f"^{damaged}: checksum mismatch"):
        recover(runs=[spec], tables=[], figures=[], viewer="results/viewer/index.html",
                mcp_replay=["eco_task"]).close()
