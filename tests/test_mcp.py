"""A task's tools from an MCP server (docs/mcp.md): config and planning, the tool source,
recording and replay, servers that misbehave (tests/mcp_bad_server.py), and
mcp-server-sqlite, a server nobody here wrote, on the lesson's data."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reactlab.config import parse
from reactlab.core.errors import ConfigError, RecordingError, ToolServerError
from tests.conftest import ROOT, with_own_mcp_server

BAD = str(ROOT / "tests" / "mcp_bad_server.py")
SQLITE = ROOT / ".venv-mcp-sqlite" / "bin" / "mcp-server-sqlite"
needs_sqlite = pytest.mark.skipif(not SQLITE.is_file(),
                                  reason="mcp-server-sqlite's environment: `make env`")

SCRIPT = [
    {"calls": [{"name": "eco", "arguments": {"texto": "hola {ticker}"}},
               {"name": "suma", "arguments": {"a": 2, "b": 3}}]},
    {"calls": [{"name": "falla", "arguments": {}},
               {"name": "contador", "arguments": {}}]},
    {"answer": "La suma es {ok[1][suma]}."},
]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test plans with its own tool-list cache."""
    monkeypatch.setenv("REACTLAB_CACHE", str(tmp_path / "cache"))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def pids_of(pidfile: Path) -> list[int]:
    return [int(x) for x in pidfile.read_text().split()] if pidfile.exists() else []


def bad_config(raw_config: dict[str, Any], mode: str = "ok", *, pidfile: Path | None = None,
               extra_file: Path | None = None, timeout: float = 5,
               steps: list[dict[str, Any]] | None = None,
               backends: tuple[str, ...] = ("openai",)) -> dict[str, Any]:
    """The shipped config with a server of tests/mcp_bad_server.py in ``mode``, a task
    on it and one scenario playing ``steps`` on ``backends``."""
    raw = copy.deepcopy(raw_config)
    args = [BAD, mode]
    if pidfile is not None:
        args += ["--pidfile", str(pidfile), "--child"]
    if extra_file is not None:
        args += ["--extra-file", str(extra_file)]
    raw["mcp_servers"]["bad"] = {"command": sys.executable, "args": args, "timeout": timeout,
                                 **({"watch": [str(extra_file)]} if extra_file else {})}
    # the shipped SQL slice stays out of these plans (its server is listed elsewhere)
    raw["matrix"] = [b for b in raw["matrix"]
                     if not any("mcp_server" in raw["tasks"][t] for t in b["tasks"])]
    raw["tasks"]["eco_task"] = {"question": "¿Cuánto suman 2 y 3?", "mcp_server": "bad",
                                "tools": ["eco", "suma", "falla", "contador"],
                                "params": {"ticker": "BUSI"}}
    raw["scenarios"]["eco_script"] = {"description": "the bad server's tools",
                                      "steps": steps or SCRIPT}
    raw["matrix"] = [*raw["matrix"], {"tasks": ["eco_task"], "backends": list(backends),
                                      "scenarios": ["eco_script"]}]
    return raw


def spec_of(raw: dict[str, Any], backend: str = "openai") -> Any:
    return parse(raw).run("eco_task", backend, "eco_script")


def records(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]


def calls(trace: Path) -> list[dict[str, Any]]:
    return [r for r in records(trace) if r["type"] == "tool_call"]


def run(spec: Any, out: Path, **kw: Any) -> str:
    from reactlab.runner import run_job

    return run_job(spec.to_json(), "unused-prices", "unused-news", out, **kw)


# --- config and planning ---------------------------------------------------------------


def test_the_spec_holds_the_servers_tools_as_the_model_reads_them(raw_config, tmp_path):
    spec = spec_of(bad_config(raw_config))
    assert spec.tools == ("eco", "suma", "falla", "contador")
    assert [t["name"] for t in spec.tool_schemas] == list(spec.tools)
    eco = spec.tool_schemas[0]
    assert eco["description"] == "Devuelve el texto que recibe."
    assert eco["parameters"]["required"] == ["texto"]  # the server's inputSchema
    assert json.loads(spec.to_json())["mcp"]["tools_hash"] == spec.mcp.tools_hash
    from reactlab.backends import tool_definitions

    assert tool_definitions(spec)[1] == ("suma", "Suma dos números.",
                                         spec.tool_schemas[1]["parameters"])


def test_planning_lists_a_server_once_and_again_when_a_watched_file_changes(
        raw_config, tmp_path):
    pidfile, extra = tmp_path / "pids", tmp_path / "extra"
    raw = bad_config(raw_config, pidfile=pidfile, extra_file=extra)
    first = spec_of(raw)
    assert len(pids_of(pidfile)) == 2  # the server and its child, once
    again = spec_of(raw)
    assert len(pids_of(pidfile)) == 2  # the cached list: no server started
    assert again.config_hash == first.config_hash
    extra.write_text("x")
    changed = spec_of(raw)
    assert len(pids_of(pidfile)) == 4  # listed again
    assert changed.mcp.tools_hash != first.mcp.tools_hash
    assert changed.config_hash != first.config_hash  # the run runs again
    assert not [p for p in pids_of(pidfile) if alive(p)]


def test_a_task_without_a_server_in_the_matrix_starts_nothing(raw_config, tmp_path):
    pidfile = tmp_path / "pids"
    raw = bad_config(raw_config, pidfile=pidfile)
    raw["matrix"] = raw["matrix"][:-1]
    parse(raw)
    assert pids_of(pidfile) == []


@pytest.mark.parametrize("edit,field,words", [
    (lambda r: r["tasks"]["eco_task"].update(mcp_server="bda"),
     "tasks.eco_task.mcp_server", "did you mean 'bad'"),
    (lambda r: r["tasks"]["eco_task"].update(tools=["eco", "sumar"]),
     "tasks.eco_task.tools[1]", "server 'bad' has no tool 'sumar' (did you mean 'suma'?)"),
    (lambda r: r["mcp_servers"]["bad"].update(args=["{db}"]),
     "mcp_servers.bad.args[0]", "{db} names no file"),
    (lambda r: r["mcp_servers"]["bad"].update(url="http://127.0.0.1:1/mcp"),
     "mcp_servers.bad", ""),
    (lambda r: r["mcp_servers"]["bad"].update(timout=3),
     "mcp_servers.bad.timout", "did you mean 'timeout'"),
    (lambda r: r["mcp_servers"]["bad"].update(timeout=0),
     "mcp_servers.bad.timeout", ""),
    (lambda r: r["mcp_servers"]["bad"].update(command="no/such/server"),
     "mcp_servers.bad.command", "not a file here nor a program on the PATH"),
    (None, "tasks.eco_task.tools[0]", ""),
    # a framework without MCP support of its own (frameworks with it: test_agents_mcp.py)
    (lambda r: r["matrix"][-1].update(backends=["openai_chat"], agents=["langchain"]),
     "matrix[", "its framework 'langchain' takes no MCP tools"),
])
def test_config_mistakes_name_their_field(raw_config, edit, field, words):
    raw = bad_config(raw_config)
    if edit is None:  # a task of the project's tools naming a server's tool: the enum
        raw["tasks"]["eco_task"].pop("mcp_server")
        raw["tasks"]["eco_task"]["tools"] = ["eco"]
    else:
        edit(raw)
    with pytest.raises(ConfigError) as err:
        parse(raw)
    assert err.value.field.startswith(field), err.value
    assert words in str(err.value)


def test_a_server_that_cannot_start_is_a_config_error_at_planning(raw_config):
    with pytest.raises(ConfigError) as err:
        parse(bad_config(raw_config, "dies_at_start"))
    assert err.value.field == "mcp_servers.bad"
    assert "no puedo arrancar" in str(err.value)  # its stderr, for the person


def test_a_server_that_cannot_be_listed_leaves_only_its_runs_out(raw_config):
    """As the Snakefile plans (servers="tolerate"): the runs on a server that cannot be
    listed are left out, named with the server's error in one line; every other run is
    planned as without them. `reactlab check` (require) refuses the config instead."""
    raw = bad_config(raw_config, "dies_at_start")
    cfg = parse(raw, servers="tolerate")
    (left,) = cfg.left_out
    assert (left.server, left.error.field) == ("bad", "mcp_servers.bad")
    assert left.runs == ("eco_task/openai/eco_script",)
    line = left.line()
    assert "\n" not in line and "no puedo arrancar" in line and "eco_task/openai" in line
    without = copy.deepcopy(raw)
    without["matrix"] = raw["matrix"][:-1]
    assert [r.to_json() for r in cfg.runs] == [r.to_json() for r in parse(without).runs]
    raw["mcp_servers"]["bad"]["command"] = "no/such/server"  # a program that is not there
    (left,) = parse(raw, servers="tolerate").left_out
    assert left.error.field == "mcp_servers.bad.command"
    # the figure's own run needs the server: that is the config's error, named
    raw["figure"]["task"], raw["figure"]["backend"] = "eco_task", "openai"
    raw["figure"]["loop"] = raw["figure"]["reference"] = "eco_script"
    with pytest.raises(ConfigError) as err:
        parse(raw, servers="tolerate")
    assert err.value.field == "figure.loop" and "no/such/server" in str(err.value)


def test_a_command_that_needs_no_tools_starts_no_server(raw_config, tmp_path):
    pidfile = tmp_path / "pids"
    cfg = parse(bad_config(raw_config, pidfile=pidfile), servers="skip")
    assert pids_of(pidfile) == []
    assert [(left.server, left.runs) for left in cfg.left_out] == [
        ("bad", ("eco_task/openai/eco_script",))]


def test_serve_and_mcp_read_no_servers_program(raw_config, data_files, tmp_path, monkeypatch):
    """`reactlab serve` and `reactlab mcp` read the sections they serve: an MCP server's
    program missing (a clone without .venv-mcp-sqlite) stops neither, while `reactlab
    check` names it."""
    import yaml

    from reactlab import cli
    from reactlab.config import GENERATED_DATA

    raw = copy.deepcopy(raw_config)  # the shipped SQL slice is in its matrix
    raw["mcp_servers"]["sqlite"]["command"] = ".venv-mcp-nosuch/bin/mcp-server-sqlite"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    (tmp_path / "data" / "generated").mkdir(parents=True)
    for kind, src in zip(("prices", "news"), data_files, strict=True):
        (tmp_path / "data" / "generated" / GENERATED_DATA[kind]).write_bytes(src.read_bytes())
    served: list[Any] = []
    monkeypatch.setattr("reactlab.simulate.server.serve",
                        lambda config, *a, **kw: served.append(config))
    monkeypatch.setattr("reactlab.mcp.server.serve_stdio", served.append)
    assert cli.main(["serve", "--config", str(path)]) == 0
    assert cli.main(["mcp", "--config", str(path), "--task", "variacion_busi"]) == 0
    assert len(served) == 2 and "sql_cierre_busi" in served[0].raw["tasks"]
    with pytest.raises(ConfigError) as err:
        parse(raw)
    assert err.value.field == "mcp_servers.sqlite.command"
    # the Snakefile's warning, as docs/mcp.md shows it for a clone without the environment
    (left,) = parse(raw, servers="tolerate").left_out
    shipped = raw_config["mcp_servers"]["sqlite"]["command"]
    line = f"reactlab: warning: {left.line()}".replace(raw["mcp_servers"]["sqlite"]["command"],
                                                     shipped)
    assert line in (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8"), line


def test_planning_inside_an_mcp_server_starts_no_server(raw_config, tmp_path, monkeypatch):
    from reactlab.config.mcp import INSIDE

    pidfile = tmp_path / "pids"
    monkeypatch.setenv(INSIDE, "reactlab mcp, pid 1")
    with pytest.raises(ConfigError) as err:
        parse(bad_config(raw_config, pidfile=pidfile))
    assert err.value.field == "mcp_servers.bad" and "inside an MCP server" in str(err.value)
    assert pids_of(pidfile) == []


def test_a_server_that_plans_its_own_config_is_refused_at_the_second_level(
        raw_config, tmp_path):
    """A cycle at any depth: a "server" whose command plans the very config that lists it
    (`reactlab check` on it) is started once by the planning, with the marker in its
    environment, and its own planning refuses to start it again: one line, no process
    left."""
    import yaml

    raw = copy.deepcopy(raw_config)
    raw["matrix"] = [b for b in raw["matrix"]
                     if not any("mcp_server" in raw["tasks"][t] for t in b["tasks"])]
    path = tmp_path / "config.yaml"
    raw["mcp_servers"]["loop"] = {"command": sys.executable, "timeout": 60,
                                  "args": ["-m", "reactlab", "check", "--config", str(path)]}
    raw["tasks"]["loop_task"] = {**raw["tasks"]["variacion_busi"], "mcp_server": "loop"}
    raw["matrix"].append({"tasks": ["loop_task"], "backends": ["openai"],
                          "scenarios": ["correcto"]})
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        parse(raw)
    line = str(err.value)
    assert "\n" not in line and err.value.field == "mcp_servers.loop", line
    assert "cannot list the server's tools" in line, line
    assert "mcp_servers.loop: not started: this planning runs inside an MCP server" in line


# --- the tool source, recording and replay ---------------------------------------------


def test_a_run_records_its_exchange_and_replays_byte_identical(raw_config, tmp_path):
    pidfile = tmp_path / "pids"
    spec = spec_of(bad_config(raw_config, pidfile=pidfile))
    trace, rec = tmp_path / "t.jsonl", tmp_path / "r.mcp.jsonl"
    run(spec, trace, tools_recording=rec)
    got = calls(trace)
    assert [(c["name"], c["status"]) for c in got] == [
        ("eco", "ok"), ("suma", "ok"), ("falla", "error"), ("contador", "ok")]
    assert got[0]["result"] == {"resultado": "hola BUSI"}
    assert got[1]["result"] == {"resultado": {"suma": 5}}  # structuredContent
    assert got[2]["result"] == {"error": "fallo a propósito"}  # isError: true
    assert records(trace)[-1]["answer"] == "La suma es 5."
    from reactlab.mcp.recording import read

    recorded = read(rec)
    lines = recorded.records
    assert [x["request"]["params"]["name"] for x in lines] == ["eco", "suma", "falla",
                                                               "contador"]
    assert lines[2]["response"]["isError"] is True
    # the header: the server's identity and its whole tool list, the planned hash
    head = recorded.header
    assert (head["server"], head["server_info"]) == ("bad", {"name": "mcp-bad-server",
                                                            "version": "0"})
    assert head["tools_hash"] == spec.mcp.tools_hash
    assert [t["name"] for t in head["tools"]] == ["eco", "suma", "falla", "contador"]
    # the replay starts no server and writes the same bytes
    started = len(pids_of(pidfile))
    replayed = tmp_path / "replayed.jsonl"
    run(spec, replayed, tools_replay=rec)
    assert replayed.read_bytes() == trace.read_bytes()
    assert len(pids_of(pidfile)) == started
    assert not [p for p in pids_of(pidfile) if alive(p)]


def test_a_replay_that_is_not_the_recorded_run_fails(raw_config, tmp_path):
    from reactlab.mcp.recording import encode, read

    spec = spec_of(bad_config(raw_config))
    rec = tmp_path / "r.jsonl"
    run(spec, tmp_path / "t.jsonl", tools_recording=rec)
    recorded = read(rec)
    head, lines = recorded.header, recorded.records
    edited = copy.deepcopy(lines[0])
    edited["request"]["params"]["arguments"]["texto"] = "adiós"
    # recordings that are sound files (their checksum sealed) of another run
    (tmp_path / "diverged.jsonl").write_bytes(encode(head, [edited, *lines[1:]]))
    with pytest.raises(RecordingError, match="diverged at exchange 1"):
        run(spec, tmp_path / "t2.jsonl", tools_replay=tmp_path / "diverged.jsonl")
    (tmp_path / "short.jsonl").write_bytes(encode(head, lines[:2]))
    with pytest.raises(RecordingError, match="ran out"):
        run(spec, tmp_path / "t3.jsonl", tools_replay=tmp_path / "short.jsonl")
    (tmp_path / "long.jsonl").write_bytes(encode(head, [*lines, {**lines[0], "exchange": 5}]))
    with pytest.raises(RecordingError, match="4 of the 5 recorded exchanges"):
        run(spec, tmp_path / "t4.jsonl", tools_replay=tmp_path / "long.jsonl")


def test_a_damaged_or_old_recording_is_refused_naming_the_file(raw_config, tmp_path):
    """A recording is tamper-evident: an edit (even one that keeps it valid JSON), a
    truncation, a lost end record, an old recording without a header: each is refused
    before any model turn, naming the file and the problem."""
    spec = spec_of(bad_config(raw_config))
    rec = tmp_path / "r.jsonl"
    run(spec, tmp_path / "t.jsonl", tools_recording=rec)
    good = rec.read_bytes()
    text = good.decode()
    lines = text.splitlines(keepends=True)
    damaged = {
        "edited": (text.replace("hola BUSI", "hola ACME"), "checksum mismatch"),
        "truncated": (text[:-3], "truncated"),
        "no_end": ("".join(lines[:-1]), "truncated (no end record)"),
        "old": ("".join(lines[1:-1]), "no header (an MCP recording written by an older"),
        "empty": ("", "empty file"),
    }
    for name, (content, words) in damaged.items():
        path = tmp_path / f"{name}.mcp.jsonl"
        path.write_text(content, encoding="utf-8")
        with pytest.raises(RecordingError) as err:
            run(spec, tmp_path / f"{name}.jsonl", tools_replay=path)
        assert str(err.value).startswith(str(path)) and words in str(err.value), err.value
        assert not (tmp_path / f"{name}.jsonl").exists()


def test_a_tool_outside_the_task_is_never_sent(raw_config, tmp_path):
    steps = [{"calls": [{"name": "eco", "arguments": {"texto": "a"}}]},
             {"calls": [{"name": "otra", "arguments": {}}]},
             {"answer": "fin"}]
    raw = bad_config(raw_config, steps=steps)
    raw["tasks"]["eco_task"]["tools"] = ["eco"]
    spec = spec_of(raw)
    rec = tmp_path / "r.jsonl"
    run(spec, tmp_path / "t.jsonl", tools_recording=rec)
    got = calls(tmp_path / "t.jsonl")
    assert got[1]["result"] == {"error": "herramienta desconocida: otra"}
    from reactlab.mcp.recording import read

    assert len(read(rec).records) == 1  # only eco went to the server


@pytest.mark.parametrize("words,cached,diff", [
    ("x", True, "added: extra"),
    ("sin-falla otra-suma", True,
     "added: extra; removed: falla; changed: suma (description)"),
    # the planned list not at hand (another machine's cache): the task's tools compared
    ("sin-falla otra-suma", False, "removed: falla; changed: suma (description)"),
])
def test_a_server_whose_tools_changed_since_planning_is_refused(raw_config, tmp_path,
                                                                words, cached, diff):
    """A live run whose server lists other tools than the planned ones stops before any
    model turn, naming each tool added, removed or changed."""
    extra = tmp_path / "extra"
    spec = spec_of(bad_config(raw_config, extra_file=extra))
    extra.write_text(words)
    if not cached:
        import shutil

        from reactlab.config.mcp import cache_dir

        shutil.rmtree(cache_dir())
    with pytest.raises(ToolServerError) as err:
        run(spec, tmp_path / "t.jsonl")
    assert err.value.kind == "changed"
    assert str(err.value).endswith(
        "MCP server bad: its tools are not the ones planned (the run's spec): " + diff
        + "; its cached tool list is removed: run the pipeline again, which plans with the "
        "server's tools")


def test_a_change_the_cache_key_misses_is_refused_and_the_stale_list_removed(
        raw_config, tmp_path):
    """A change the cache key does not see (the file is not under `watch`): the job
    refuses to run, and removes the stale cached list, so that planning again (what its
    error says to do) plans with the server's tools."""
    extra = tmp_path / "extra"
    raw = bad_config(raw_config, extra_file=extra)
    del raw["mcp_servers"]["bad"]["watch"]
    spec = spec_of(raw)
    extra.write_text("x")
    assert spec_of(raw).config_hash == spec.config_hash  # planned from the stale list
    with pytest.raises(ToolServerError) as err:
        run(spec, tmp_path / "t.jsonl")
    assert err.value.kind == "changed" and "run the pipeline again" in str(err.value)
    assert not (tmp_path / "t.jsonl").exists()
    assert spec_of(raw).mcp.tools_hash != spec.mcp.tools_hash


def test_a_stale_cached_list_is_found_before_any_job(raw_config, tmp_path):
    """What the Snakefile's onstart asks (reactlab.jobs.check_tool_lists) of a server
    whose planned list came from the cache: nothing while the server lists the same
    tools; once it lists others, the cache file, removed."""
    from reactlab.config.mcp import servers, stale_cache

    extra = tmp_path / "extra"
    raw = bad_config(raw_config, extra_file=extra)
    del raw["mcp_servers"]["bad"]["watch"]
    first = parse(raw)
    assert first.cached_servers == frozenset()  # asked of the server: fresh
    cfg = parse(raw)
    assert cfg.cached_servers == {"bad"}
    planned = cfg.run("eco_task", "openai", "eco_script").mcp.tools_hash
    settings = servers(raw)["bad"]
    assert stale_cache(settings, "bad", planned) is None
    extra.write_text("x")
    removed = stale_cache(settings, "bad", planned)
    assert removed is not None and not removed.exists()
    again = parse(raw)
    assert again.run("eco_task", "openai", "eco_script").mcp.tools_hash != planned


# --- servers that misbehave ------------------------------------------------------------

BAD_RUNS = [
    # mode, the results the model reads (in order), the longest the run may take
    ("crash", [{"resultado": "hola BUSI"},
               {"error": "el servidor de herramientas no está disponible (terminó o cerró "
                         "la conexión)"}], 10),
    ("hang", [{"error": "el servidor de herramientas no respondió a tiempo (límite: 1 s)"},
              {"error": "el servidor de herramientas no está disponible (terminó o cerró "
                        "la conexión)"}], 6),
    ("malformed", [{"error": "el servidor de herramientas dio una respuesta no válida"}], 10),
    ("notrpc", [{"error": "el servidor de herramientas dio una respuesta no válida"}], 10),
    ("huge", [{"error": "resultado demasiado grande (máximo: 1000000 bytes)"}], 10),
]


@pytest.mark.parametrize("mode,expected,limit", BAD_RUNS, ids=[m for m, *_ in BAD_RUNS])
def test_a_bad_server_is_a_tool_error_as_data_and_leaves_no_process(
        raw_config, tmp_path, caplog, mode, expected, limit):
    pidfile = tmp_path / "pids"
    steps = [{"calls": [{"name": "eco", "arguments": {"texto": "hola {ticker}"}},
                        {"name": "suma", "arguments": {"a": 2, "b": 3}}]},
             {"answer": "No pude obtener la suma."}]
    spec = spec_of(bad_config(raw_config, mode, pidfile=pidfile, timeout=1, steps=steps))
    listed = pids_of(pidfile)
    assert len(listed) == 2 and not [p for p in listed if alive(p)]  # planning's, gone
    trace, rec = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    t0 = time.monotonic()
    run(spec, trace, tools_recording=rec)
    took = time.monotonic() - t0
    assert took < limit
    results = [c["result"] for c in calls(trace)]
    assert results[:len(expected)] == expected
    assert all("error" in r for r in results[len(expected) - 1:])
    assert records(trace)[-1]["termination"] == "answer"
    started = pids_of(pidfile)[2:]
    assert len(started) == 2  # the run's server and its child ...
    assert not [p for p in started if alive(p)]  # ... both gone
    # the failures are recorded, and the replay reads the same
    run(spec, tmp_path / "replayed.jsonl", tools_replay=rec)
    assert (tmp_path / "replayed.jsonl").read_bytes() == trace.read_bytes()
    # the recording holds no exit status, stderr or pid: the person reads them (logged)
    assert "stderr" not in rec.read_text() and "status" not in rec.read_text()
    if mode == "crash":
        assert "it exited with status 3; stderr: me caigo (pid" in caplog.text
        again = tmp_path / "again.mcp.jsonl"
        run(spec, tmp_path / "again.jsonl", tools_recording=again)
        assert again.read_bytes() == rec.read_bytes()  # another process, the same bytes


def test_a_server_that_dies_at_start_ends_the_job_with_its_own_error(raw_config, tmp_path):
    spec = spec_of(bad_config(raw_config))
    broken = spec.mcp.replace(args=[BAD, "dies_at_start"])
    from dataclasses import replace

    with pytest.raises(ToolServerError) as err:
        run(replace(spec, mcp=broken), tmp_path / "t.jsonl")
    assert err.value.kind == "start" and "status 2" in str(err.value)
    assert not (tmp_path / "t.jsonl").exists()


def test_a_job_runs_several_runs_on_one_server(raw_config, tmp_path):
    """One server process per job: its state (the call counter) carries over between
    runs, its pid is the same, and it is gone when the job ends."""
    from reactlab.mcp.source import ServerJob

    pidfile = tmp_path / "pids"
    spec = spec_of(bad_config(raw_config, pidfile=pidfile))
    before = len(pids_of(pidfile))
    counts = []
    with ServerJob(spec.mcp) as job:
        pid = job.pid
        for _ in range(3):
            with job.run() as tools:
                counts.append(tools.execute("contador", {}))
        assert alive(pid)
    assert counts == [{"resultado": "1"}, {"resultado": "2"}, {"resultado": "3"}]
    assert len(pids_of(pidfile)) == before + 2
    assert not alive(pid)


# --- mcp-server-sqlite on the lesson's data ------------------------------------------


def test_the_database_has_deterministic_bytes(data_files, tmp_path):
    from reactlab.data import sqlite

    a = sqlite.write(*data_files, tmp_path / "a.sqlite")
    b = sqlite.write(*data_files, tmp_path / "b.sqlite")
    assert a.read_bytes() == b.read_bytes()
    import sqlite3

    with sqlite3.connect(a) as db:
        row = db.execute("SELECT cierre FROM precios WHERE ticker = 'BUSI' "
                         "AND fecha = '2024-03-15'").fetchone()
    from reactlab.tools import ToolBox

    assert row[0] == ToolBox.from_files(*data_files).precio("BUSI", "2024-03-15")["cierre"]


@needs_sqlite
def test_each_run_works_on_its_own_copy_of_the_database(raw_config, data_files, tmp_path):
    """A write in one run changes nothing the next run of the job, or the pipeline's
    database, sees (mcp-server-sqlite opens the file at every query)."""
    from reactlab.data import sqlite
    from reactlab.mcp.source import ServerJob

    db = sqlite.write(*data_files, tmp_path / "lesson.sqlite")
    pristine = db.read_bytes()
    raw = copy.deepcopy(raw_config)
    raw["mcp_servers"]["sqlite"]["files"] = {"db": str(db)}
    raw["tasks"]["sql_cierre_busi"]["tools"] = ["read_query", "write_query"]
    spec = parse(raw).run("sql_cierre_busi", "openai", "sql_correcto")
    read = {"query": "SELECT cierre FROM precios WHERE ticker = 'BUSI' "
                     "AND fecha = '2024-03-15'"}
    with ServerJob(spec.mcp) as job:
        with job.run() as tools:
            assert tools.execute("read_query", read) == {"resultado": "[{'cierre': 26.19}]"}
            wrote = tools.execute("write_query", {"query": "UPDATE precios SET cierre = 1.5 "
                                                           "WHERE ticker = 'BUSI'"})
            import sqlite3

            with sqlite3.connect(db) as con:
                n = con.execute("SELECT COUNT(*) FROM precios WHERE ticker = 'BUSI'").fetchone()
            assert n[0] > 1 and wrote == {"resultado": f"[{{'affected_rows': {n[0]}}}]"}
            assert tools.execute("read_query", read) == {"resultado": "[{'cierre': 1.5}]"}
        with job.run() as tools:
            assert tools.execute("read_query", read) == {"resultado": "[{'cierre': 26.19}]"}
    assert db.read_bytes() == pristine


@needs_sqlite
def test_the_sql_scenarios_verdicts(raw_config, data_files, tmp_path, monkeypatch):
    """The default config's SQL slice, run through the runner and the verifier unchanged:
    the SQL error is text the model reads, the write is refused unsent, every answer
    is verified from the rows the server sent."""
    from reactlab.analysis.verify import verify_job
    from reactlab.data import sqlite

    monkeypatch.chdir(tmp_path)
    sqlite.write(*data_files, tmp_path / "data" / "generated" / "acciones6.sqlite")
    cfg = parse(raw_config)
    verdicts = {}
    for key in ("sql_cierre_busi/local/sql_correcto", "sql_cierre_busi/local/sql_consulta_erronea",
                "sql_cierre_busi/local/sql_escritura", "sql_cierre_acme/openai/sql_sin_datos"):
        task, backend, scenario = key.split("/")
        trace = tmp_path / f"{scenario}.jsonl"
        run(cfg.run(task, backend, scenario), trace, tools_recording=tmp_path / "r.jsonl")
        verify_job(str(trace), str(tmp_path / f"{scenario}.json"))
        verdicts[scenario] = json.loads((tmp_path / f"{scenario}.json").read_text())["verified"]
        if scenario == "sql_consulta_erronea":
            assert calls(trace)[0]["result"] == {
                "resultado": "Database error: no such column: precio"}
        if scenario == "sql_escritura":
            assert calls(trace)[0]["result"] == {"error": "herramienta desconocida: write_query"}
            from reactlab.mcp.recording import read

            assert "write_query" not in json.dumps(read(tmp_path / "r.jsonl").records)
    assert verdicts == {"sql_correcto": True, "sql_consulta_erronea": True,
                        "sql_escritura": True, "sql_sin_datos": True}


# --- the project's own server over stdio (once `reactlab mcp` is merged) ----------------


@pytest.mark.slow  # about 20 s: two interpreters of the server, 16 runs
@pytest.mark.skipif(importlib.util.find_spec("reactlab.mcp.server") is None,
                    reason="the project's MCP server (reactlab.mcp.server) is not on this branch")
def test_the_projects_server_over_stdio_gives_the_in_process_results_and_verdicts(
        raw_config, data_files, tmp_path, toolbox):
    """`python -m reactlab mcp` as a stdio server: the lesson's tasks, with their tools
    taken from it, give the same tool results and verdicts as the in-process tools."""
    from dataclasses import replace

    from reactlab.analysis.verify import verify_job
    from tests.conftest import run_specs

    raw = with_own_mcp_server(raw_config, data_files)
    raw["mcp_servers"]["reactlab"]["watch"] = [str(ROOT / "workflow/reactlab/tools"),
                                               str(ROOT / "workflow/reactlab/mcp")]
    cfg_in = parse(raw)
    runs = [r for r in cfg_in.runs if r.task in ("variacion_busi", "cierre_acme")
            and r.backend == "openai" and r.mcp is None][:8]
    run_specs(runs, toolbox, tmp_path / "in")
    for name in ("variacion_busi", "cierre_acme"):
        raw["tasks"][name]["mcp_server"] = "reactlab"
    raw["matrix"] = raw["matrix"][:2]  # the lesson loop's blocks of the two tasks
    cfg_mcp = parse(raw)
    from reactlab.mcp.source import ServerJob
    from reactlab.runner import run_to_trace

    part = cfg_mcp.run(runs[0].task, runs[0].backend, runs[0].scenario).mcp
    assert part is not None
    with ServerJob(part) as job:  # one server for the runs, as one job runs them
        for spec in runs:
            over = replace(spec, mcp=cfg_mcp.run(spec.task, spec.backend, spec.scenario).mcp)
            assert over.mcp == part
            out = tmp_path / "mcp" / f"{spec.key}.jsonl"
            out.parent.mkdir(parents=True, exist_ok=True)
            with job.run() as tools:
                run_to_trace(over, tools, out)
            inproc = tmp_path / "in" / "traces" / f"{spec.key}.jsonl"
            assert [(c["result"], c["status"]) for c in calls(out)] == [
                (c["result"], c["status"]) for c in calls(inproc)]
            v_mcp, v_in = out.with_suffix(".json"), inproc.with_suffix(".json")
            verify_job(str(out), str(v_mcp))
            verify_job(str(inproc), str(v_in))
            assert json.loads(v_mcp.read_text())["verified"] == json.loads(
                v_in.read_text())["verified"]


def test_the_bad_server_needs_only_the_standard_library():
    proc = subprocess.run([sys.executable, "-I", BAD, "ok"], input=b"", capture_output=True,
                          timeout=30, env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr


# --- Streamable HTTP --------------------------------------------------------------------

HTTP_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer
server = MCPServer("eco-http")
@server.tool()
def eco(texto: str) -> str:
    '''Devuelve el texto que recibe.'''
    return texto
server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]),
           json_response=sys.argv[2] == "json")
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("answers", ["json", "sse"])
def test_a_streamable_http_server_plans_runs_and_replays(raw_config, tmp_path, loopback,
                                                         answers):
    """The SDK's own server (mcp 2.x MCPServer) over Streamable HTTP, answering with JSON
    bodies or with SSE streams."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", HTTP_SERVER, str(port), answers],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        import httpx

        for _ in range(100):  # until it listens
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        steps = [{"calls": [{"name": "eco", "arguments": {"texto": "hola"}}]},
                 {"answer": "Dijo {ok[0]}."}]
        raw = bad_config(raw_config, steps=steps)
        raw["mcp_servers"]["bad"] = {"url": url, "timeout": 10}
        raw["tasks"]["eco_task"]["tools"] = ["eco"]
        spec = spec_of(raw)
        assert spec.tool_schemas[0]["parameters"]["required"] == ["texto"]
        trace, rec = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
        run(spec, trace, tools_recording=rec)
        assert calls(trace)[0]["result"] == {"resultado": {"result": "hola"}}
        assert records(trace)[-1]["answer"] == "Dijo {'result': 'hola'}."
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    run(spec, tmp_path / "replayed.jsonl", tools_replay=rec)  # the server is gone
    assert (tmp_path / "replayed.jsonl").read_bytes() == trace.read_bytes()
    # with the server gone, a replay plans from the list cached when it was asked
    raw["mcp_servers"]["bad"]["replay"] = True
    assert spec_of(raw) == spec
    raw["mcp_servers"]["bad"]["replay"] = False
    with pytest.raises(ConfigError, match="cannot list the server's tools"):
        spec_of(raw)


def test_the_server_settings_take_the_schemas_defaults_and_bounds():
    import yaml

    from reactlab.config.tool_parts import McpServerSettings

    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    props = schema["properties"]["mcp_servers"]["additionalProperties"]["properties"]
    assert set(McpServerSettings.model_fields) == set(props)
    for name, info in McpServerSettings.model_fields.items():
        if "default" in props[name]:
            assert info.default == props[name]["default"], name
    timeout = McpServerSettings.model_fields["timeout"].metadata
    assert {getattr(m, k) for m in timeout for k in ("gt", "le")
            if getattr(m, k, None) is not None} == {0, 600}


@pytest.mark.parametrize("response,results,expected", [
    ({"content": [{"type": "text", "text": '{"a": 1}'}]}, "text", {"resultado": '{"a": 1}'}),
    ({"content": [{"type": "text", "text": '{"a": 1}'}]}, "json", {"resultado": {"a": 1}}),
    ({"content": [{"type": "text", "text": "no JSON"}]}, "json", {"resultado": "no JSON"}),
    ({"content": [{"type": "text", "text": '{"resultado": {"cierre": 1.5}}'}]}, "lesson",
     {"resultado": {"cierre": 1.5}}),
    ({"content": [{"type": "text", "text": '{"error": "ticker desconocido: ACME"}'}],
      "isError": True}, "lesson", {"error": "ticker desconocido: ACME"}),
    ({"content": [{"type": "text", "text": "{\"resultado\": 1, \"resultado\": 2}"}]},
     "lesson", {"error": "el servidor de herramientas dio una respuesta no válida"}),
    ({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "AAAA",
                                                   "mimeType": "image/png"}]}, "text",
     {"resultado": ["a", {"tipo": "image", "mimeType": "image/png"}]}),
    ({"content": "?"}, "text",
     {"error": "el servidor de herramientas dio una respuesta no válida"}),
    ({"content": [], "isError": True}, "text", {"error": "error del servidor de herramientas"}),
])
def test_what_the_model_reads_of_an_answer(response, results, expected):
    from reactlab.mcp.source import result_of

    assert result_of(response, results) == expected


@needs_sqlite
@pytest.mark.e2e
def test_the_pipeline_records_the_sql_runs_and_replays_them_byte_identical(tmp_path):
    """Snakemake end to end on the SQL slice alone: rule sqlite_db builds the database,
    run_mcp records each run's exchange beside its trace; with `replay: true` on the
    server, replay_mcp rebuilds the same trace bytes from the recordings."""
    import yaml

    from reactlab.dev.bench import copy_workflow

    work = tmp_path / "work"
    work.mkdir()
    copy_workflow(work)
    cfg = work / "config.yaml"
    raw = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    fig = raw["figure"]
    raw["matrix"] = [{"tasks": ["sql_cierre_busi"], "backends": ["openai", "local"],
                      "scenarios": ["sql_correcto", "sql_escritura"]},
                     {"tasks": [fig["task"]], "backends": [fig["backend"]],  # the config's
                      "scenarios": [fig["loop"], fig["reference"]]}]  # figure (not built)
    raw.pop("suites", None)
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    keys = [f"sql_cierre_busi/{b}/{s}" for b in ("openai", "local")
            for s in ("sql_correcto", "sql_escritura")]
    targets = [f"results/traces/{k}.jsonl" for k in keys]

    def snakemake(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args],
                              cwd=work, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    out = snakemake(*targets)
    assert "rule sqlite_db" in out and out.count("rule run_mcp") == 4
    recorded = {t: (work / t).read_bytes() for t in targets}
    for k in keys:
        assert (work / "results" / "recordings" / f"{k}.mcp.jsonl").is_file()
    pristine = (work / "data/generated/acciones6.sqlite").read_bytes()
    for t in targets:
        (work / t).unlink()
    (work / "replay.yaml").write_text("mcp_servers:\n  sqlite:\n    replay: true\n")
    out = snakemake(*targets, "--configfile", "replay.yaml")
    assert out.count("rule replay_mcp") == 4 and "rule run_mcp" not in out
    assert {t: (work / t).read_bytes() for t in targets} == recorded
    assert (work / "data/generated/acciones6.sqlite").read_bytes() == pristine


@pytest.mark.full
def test_the_pipeline_keeps_its_results_when_a_servers_tools_change_or_it_breaks(
        raw_config, tmp_path):
    """Snakemake on a small plan: a run on tests/mcp_bad_server.py, and the config's two
    figure runs. (1) The server's tools change in a way its cache key does not see, and
    the run's scenario is edited, so its job would run: the run stops before any job,
    its trace and recording kept byte for byte, and the command it prints, run as
    printed, plans with the new tools and runs the job. (2) The server then dies at
    start: its run is left out with one warning line, the other runs are built, and a
    target of the left-out run is refused in one line naming the server's error."""
    import yaml

    from reactlab.dev.bench import copy_workflow

    work = tmp_path / "work"
    work.mkdir()
    copy_workflow(work)
    extra = tmp_path / "extra"
    raw = bad_config(raw_config, extra_file=extra)
    del raw["mcp_servers"]["bad"]["watch"]
    fig = raw["figure"]
    raw["matrix"] = [raw["matrix"][-1],
                     {"tasks": [fig["task"]], "backends": [fig["backend"]],
                      "scenarios": [fig["loop"], fig["reference"]]}]
    raw.pop("suites", None)

    def write(raw: dict[str, Any]) -> None:
        (work / "config.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True),
                                          encoding="utf-8")

    env = {**os.environ, "REACTLAB_CACHE": str(tmp_path / "cache")}

    def snakemake(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args],
                              cwd=work, env=env, capture_output=True, text=True, timeout=600)

    key = "eco_task/openai/eco_script"
    other = f"{fig['task']}/{fig['backend']}/{fig['reference']}"
    write(raw)
    proc = snakemake(f"results/verified/{key}.json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [work / "results" / "traces" / f"{key}.jsonl",
               work / "results" / "recordings" / f"{key}.mcp.jsonl",
               work / "results" / "verified" / f"{key}.json"]
    kept = [p.read_bytes() for p in results]

    extra.write_text("x")  # one tool more; the cached list does not see it
    raw["scenarios"]["eco_script"]["steps"][-1]["answer"] = "Suman {ok[1][suma]}."
    write(raw)
    proc = snakemake(f"results/verified/{key}.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "mcp_servers.bad: its tools are not the ones this plan read from the cache" in out
    assert "no job ran and no result was removed" in out and "rule run_mcp" not in out
    assert [p.read_bytes() for p in results] == kept
    printed = re.search(r"The stale list is removed: `([^`]+)`", out)
    assert printed, out[-3000:]
    proc = subprocess.run(printed.group(1), shell=True, cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rule run_mcp" in proc.stdout + proc.stderr
    header = records(results[0])[0]
    assert header["spec"]["mcp"]["tools_hash"] != json.loads(kept[0].splitlines()[0])[
        "spec"]["mcp"]["tools_hash"]

    raw["mcp_servers"]["bad"]["args"][1] = "dies_at_start"
    write(raw)
    proc = snakemake(f"results/verified/{other}.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    warned = [line for line in out.splitlines() if "left out" in line]
    assert len(warned) == 2, out[-3000:]  # at planning, and again at the end
    assert warned[0].startswith("reactlab: warning: 1 run(s) on MCP server 'bad' left out "
                                f"of this plan ({key}), the others planned: config: "
                                "mcp_servers.bad: cannot list"), warned
    assert "no puedo arrancar" in warned[0]
    assert warned[1] == warned[0].replace("warning: ", "warning: not run: ", 1)
    assert (work / "results" / "verified" / f"{other}.json").is_file()
    assert results[0].is_file()  # the left-out run's results stay (reported, not read)
    proc = snakemake(f"results/verified/{key}.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"results/verified/{key}.json: 1 run(s) on MCP server " \
        "'bad' left out" in out, out[-3000:]


def test_the_slice_benchmark_drops_exactly_the_mcp_runs(raw_config: dict) -> None:
    """``reactlab bench --mcp --pipeline`` compares the simulated matrix with and without
    its MCP slice: the config it times without the slice plans every other run, unchanged,
    and none on an MCP server's tools."""
    import copy

    from reactlab import config
    from reactlab.dev.bench import without_mcp

    raw = copy.deepcopy(raw_config)
    without_mcp(raw)
    full = {r.key: r for r in config.parse(raw_config).runs}
    kept = {r.key: r for r in config.parse(raw).runs}
    mcp = {k for k, r in full.items() if r.mcp is not None}
    assert mcp and set(kept) == set(full) - mcp
    assert all(kept[k].to_json() == full[k].to_json() for k in kept)
