"""The ``mcp_servers:`` section at planning: cross-checks and each server's tool list.

A task with ``mcp_server: <name>`` takes its tools from that server (docs/mcp.md). When
the config is planned, the server's tool list is read (``tools/list``) and the task's
tools, as the server defines them, go into each run's spec (:class:`McpTools`) with the
sha256 of the whole list: a server whose tools change changes the config hash of the runs
that use it, and Snakemake runs them again.

Planning must stay fast and start no server it does not need, so:

* only the servers of tasks that the matrix runs are listed;
* a stdio server's list is cached (:func:`cache_dir`, one JSON file per key). The key is
  the server's command, arguments and environment, and the fingerprint — path, size and
  modification time — of its program (the command as resolved: a path relative to the
  working folder, or found on the PATH) and of every file under its ``watch`` paths. A
  server whose tools depend on something else (its installed package, a data file)
  names it under ``watch``; ``rm -r`` of the cache folder lists every server again.
* a Streamable HTTP server (``url``) has no fingerprint to go by: it is asked at every
  planning (and its list cached);
* a server set to ``replay: true`` is never started nor asked: its list is the one the
  recordings of its tasks' runs hold in their header, else the one cached last for its
  configuration (:mod:`reactlab.config.mcp_lists`); with neither, a ConfigError says so.

Listing starts a stdio server with its ``files`` as copies in a temporary folder (an
empty folder when a file does not exist yet: a rule builds it later), then ends it.

How a failure is taken is the caller's (:data:`MODES`): ``require`` (``reactlab check``)
refuses the config; ``tolerate`` (the Snakefile) leaves the runs of that server's tasks
out of the plan, the others planned; ``skip`` (the commands that read other sections of
the config: ``reactlab mcp``, ``serve``, ``tables``, ``figure``) starts and reaches no
server at all. A planning from inside an MCP server that reactlab started (the
:data:`INSIDE` variable in its environment) starts no stdio server: a server that plans
the config would start itself again, without end.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from reactlab.config.mcp_lists import cache_dir as cache_dir  # re-exported
from reactlab.config.mcp_lists import cached_for, recorded_tools, tool_def
from reactlab.config.mcp_lists import tools_hash as tools_hash  # re-exported
from reactlab.config.mcp_tasks import check_names, check_several, owners, side_effects
from reactlab.config.mcp_tasks import task_servers as task_servers  # re-exported
from reactlab.config.tool_parts import (
    McpServerSettings,
    McpTools,
    mcp_server_settings,
    mcp_tools,
)
from reactlab.core.errors import ConfigError, ToolServerError, UsageError
from reactlab.core.io import write_json_atomic
from reactlab.core.mcp_wire import list_tools, open_wire

_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")

#: How planning takes the MCP servers of the matrix's tasks (see the module docstring).
MODES = ("require", "tolerate", "skip")

#: Set in the environment of ``reactlab mcp`` and of a server planning starts to list its
#: tools (inherited by their children): a planning that sees it refuses to start a stdio
#: server (:func:`server_tools`).
INSIDE = "REACTLAB_MCP_SERVER"


def relisted(part: McpTools, listed: list[dict[str, Any]]) -> McpTools:
    """``part`` with the task's tools as the server lists them now (``listed``; a tool no
    longer listed is dropped) and the new list's hash: what a job whose list changed
    offers the model when the list is not pinned (``agent.defences.pin_tool_list``)."""
    now = {t.get("name"): t for t in listed}
    defs = [tool_def(now[t["name"]]) for t in part.tools if t["name"] in now]
    return mcp_tools({**part.to_dict(), "tools": defs, "tools_hash": tools_hash(listed)},
                     "mcp")


def replay_tasks(raw: Mapping[str, Any]) -> list[str]:
    """The tasks whose MCP server replays (``replay: true``): their runs are answered from
    their recordings (rule ``replay_mcp``), and recovery keeps a damaged one for the user."""
    given = raw.get("mcp_servers") or {}
    return sorted(t for t, c in raw["tasks"].items()
                  if "mcp_server" in c and (given.get(c["mcp_server"]) or {}).get("replay"))
    # (a task of several servers never replays: reactlab.config.mcp_tasks.check_several)


def servers(raw: Mapping[str, Any]) -> dict[str, McpServerSettings]:
    """The typed ``mcp_servers:`` entries, their placeholders checked."""
    out: dict[str, McpServerSettings] = {}
    for name, entry in (raw.get("mcp_servers") or {}).items():
        where = f"mcp_servers.{name}"
        server = mcp_server_settings(entry, where)
        for field, values in (("args", list(enumerate(server.args))),
                              ("env", list(server.env.items()))):
            for key, value in values:
                for used in _PLACEHOLDER.findall(value):
                    if used not in server.files:
                        raise ConfigError(
                            f"{where}.{field}[{key}]" if field == "args" else
                            f"{where}.{field}.{key}",
                            f"{{{used}}} names no file of the server's `files` "
                            f"({', '.join(server.files) or 'it has none'})")
        out[name] = server
    return out


def substitute(value: str, paths: Mapping[str, str]) -> str:
    """``value`` with each ``{name}`` replaced by ``paths[name]``."""
    return _PLACEHOLDER.sub(lambda m: paths.get(m.group(1), m.group(0)), value)


#: The project's folder (the one holding ``workflow/``): a server's relative command is
#: looked up there too, so that a config planned from another working folder (a test, a
#: ``--directory`` run) finds the environment ``make env`` built beside the project.
PROJECT_ROOT = Path(__file__).resolve().parents[3]


def resolve_command(command: str, root: str | Path = ".") -> Path | None:
    """The program of a stdio server, as an absolute path: a path (with a ``/``) under
    ``root`` or else under the project's folder, or a name on the PATH; None when there
    is none."""
    if "/" in command:
        for base in (Path(root), PROJECT_ROOT):
            path = base / command
            if path.is_file():
                return path.absolute()
        return None
    found = shutil.which(command)
    return Path(found) if found else None


def _stat(path: Path) -> list[Any]:
    try:
        st = path.stat()
    except OSError:
        return [str(path), None]
    return [str(path.resolve()), st.st_size, st.st_mtime_ns]


def fingerprint(server: McpServerSettings, program: Path | None,
                root: str | Path = ".") -> list[Any]:
    """What the cached tool list of a stdio server is valid for."""
    prints = [_stat(program)] if program is not None else []
    for watched in server.watch:
        path = Path(root) / watched
        if path.is_dir():
            prints += [_stat(p) for p in sorted(path.rglob("*"))
                       if p.is_file() and "__pycache__" not in p.parts]
        else:
            prints.append(_stat(path))
    return prints


@contextmanager
def file_copies(server: McpServerSettings | McpTools,
                root: str | Path = ".") -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary folder holding a copy of each of the server's ``files`` (when it
    exists), and the path of each copy by name; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="reactlab-mcp-") as tmp:
        paths: dict[str, str] = {}
        for name, rel in server.files.items():
            copy = Path(tmp) / f"{name}{Path(rel).suffix}"
            src = Path(root) / rel
            if src.is_file():
                shutil.copyfile(src, copy)
            paths[name] = str(copy)
        yield Path(tmp), paths


def launch(server: McpServerSettings | McpTools, name: str, paths: Mapping[str, str],
           root: str | Path = ".", *, marker: Mapping[str, str] | None = None) -> Any:
    """The server started (stdio) or reached (HTTP), after the handshake
    (:func:`reactlab.core.mcp_wire.open_wire`); ``marker``: variables added to its
    environment beside its own ``env``."""
    command = server.command
    if command is not None:
        program = resolve_command(command, root)
        command = str(program) if program is not None else command
    return open_wire(name=name, command=command,
                     args=[substitute(a, paths) for a in server.args],
                     env={**{k: substitute(v, paths) for k, v in server.env.items()},
                          **(marker or {})},
                     url=server.url, timeout=float(server.timeout),
                     max_bytes=server.max_result_bytes)


def read_tools(server: McpServerSettings, name: str,
               root: str | Path = ".") -> list[dict[str, Any]]:
    """The server's tool list, asked of the server now (ToolServerError on failure). The
    server runs with :data:`INSIDE` set: a planning in it starts no other."""
    with file_copies(server, root) as (_, paths):
        wire = launch(server, name, paths, root,
                      marker={INSIDE: f"mcp_servers.{name}, listed by pid {os.getpid()}"})
        try:
            return list_tools(wire)
        finally:
            wire.close()


def _cached(key_text: str) -> tuple[Path, list[dict[str, Any]] | None]:
    """The cache file of a key, and the tool list it holds (None when it holds none)."""
    cached = cache_dir() / f"{hashlib.sha256(key_text.encode()).hexdigest()[:32]}.json"
    try:
        tools: list[dict[str, Any]] = json.loads(cached.read_text(encoding="utf-8"))["tools"]
        return cached, tools
    except (OSError, ValueError, KeyError, TypeError):
        return cached, None


def _store(cached: Path, key_text: str, tools: list[dict[str, Any]]) -> None:
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(cached, {"key": json.loads(key_text), "tools": tools})
    except OSError:
        pass  # a read-only cache only costs the next planning a listing


def _config_key(server: McpServerSettings) -> dict[str, Any]:
    """What a server's cached list is keyed by, but its program's fingerprint."""
    if server.url is not None:
        return {"url": server.url}
    return {"command": server.command, "args": server.args, "env": server.env,
            "files": server.files}


def replayed_tools(server: McpServerSettings, name: str, tasks: list[str],
                   root: str | Path = ".") -> list[dict[str, Any]]:
    """The tool list of a server set to ``replay: true``, the server never started nor
    asked: the one the recordings of its ``tasks``' runs hold, else the one cached last
    for its configuration; a one-line ConfigError when there is neither."""
    tools = recorded_tools(name, tasks, root)
    if tools is None:
        tools = cached_for(_config_key(server))
    if tools is None:
        raise ConfigError(f"mcp_servers.{name}",
                          "replay: true, but no recording of its tasks' runs (results/"
                          "recordings/<task>/...mcp.jsonl) holds its tool list, and none "
                          "is cached; record the runs first (replay: false)")
    return tools


class Listed(NamedTuple):
    """A server's tool list at planning, and where it came from."""

    tools: list[dict[str, Any]]
    #: the cache file the list was read from; None when the server was asked now
    cached: Path | None


def _stdio_key(server: McpServerSettings, program: Path, root: str | Path) -> str:
    """The cache key of a stdio server's tool list (see the module docstring)."""
    return json.dumps({**_config_key(server), "fingerprint": fingerprint(server, program, root)},
                      sort_keys=True)


def refuse_inside(where: str) -> None:
    """ConfigError when this process runs inside an MCP server that reactlab started
    (:data:`INSIDE`): starting another from here may be the same server again, at every
    depth."""
    inside = os.environ.get(INSIDE)
    if inside:
        raise ConfigError(where, f"not started: this planning runs inside an MCP server "
                          f"({INSIDE}: {inside}), and a server that plans its config would "
                          "start itself again without end; plan the config outside it")


def server_tools(server: McpServerSettings, name: str, root: str | Path = ".") -> Listed:
    """The server's tool list at planning (a live server: :func:`replayed_tools` for one
    set to replay): from the cache when its key is there, else asked of the server (and
    cached). A Streamable HTTP server is asked every time, its list cached. ConfigError
    naming the server's field when the program is missing, the server cannot be listed,
    or a stdio server would be started from inside an MCP server (:func:`refuse_inside`)."""
    where = f"mcp_servers.{name}"
    if server.url is not None:
        key_text = json.dumps(_config_key(server), sort_keys=True)
        cached, _ = _cached(key_text)
        try:
            tools = read_tools(server, name, root)
        except ToolServerError as exc:
            raise ConfigError(f"{where}.url", f"cannot list the server's tools: {exc}") from exc
        _store(cached, key_text, tools)
        return Listed(tools, None)
    assert server.command is not None  # the schema: a command or a url
    program = resolve_command(server.command, root)
    if program is None:
        raise ConfigError(f"{where}.command",
                          f"{server.command!r} is not a file here nor a program on the PATH"
                          + (" (the Makefile builds the sqlite server's environment: "
                             "`make env`)" if ".venv-mcp" in server.command else ""))
    key_text = _stdio_key(server, program, root)
    cached, known = _cached(key_text)
    if known is not None:
        return Listed(known, cached)
    refuse_inside(where)
    try:
        tools = read_tools(server, name, root)
    except ToolServerError as exc:
        raise ConfigError(where, f"cannot list the server's tools: {exc}") from exc
    _store(cached, key_text, tools)
    return Listed(tools, None)


def stale_cache(server: McpServerSettings, name: str, planned: str,
                root: str | Path = ".") -> Path | None:
    """When the tool list a planning read from the cache (its sha256: ``planned``) is no
    longer the one the stdio server lists: the cache file, removed, so that the next
    planning asks the server. None when the lists agree, or when the server cannot be
    asked now (its jobs then fail with their own error)."""
    if server.command is None:
        return None
    program = resolve_command(server.command, root)
    if program is None:
        return None
    cached, _ = _cached(_stdio_key(server, program, root))
    try:
        if tools_hash(read_tools(server, name, root)) == planned:
            return None
    except ToolServerError:
        return None
    cached.unlink(missing_ok=True)
    return cached


def forget(part: McpTools) -> int:
    """Remove every cached tool list of the server a run's ``part`` reaches (the same
    command, arguments, environment and files, or URL): the next planning asks it. The
    number of files removed."""
    wanted = ({"url": part.url} if part.url is not None else
              {"command": part.command, "args": part.args, "env": part.env,
               "files": part.files})
    removed = 0
    for path in sorted(cache_dir().glob("*.json")):
        try:
            key = json.loads(path.read_text(encoding="utf-8"))["key"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(key, dict) and all(key.get(k) == v for k, v in wanted.items()):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


class Planner:
    """Each used server listed once per planning; each MCP task's :class:`McpTools`.
    ``mode`` (:data:`MODES`) says what a server that cannot be listed does: ``require``
    raises its ConfigError, ``tolerate`` keeps it (:meth:`unlisted`) for the runs of its
    tasks to be left out, ``skip`` lists no server."""

    def __init__(self, raw: Mapping[str, Any], root: str | Path = ".", *,
                 mode: str = "require") -> None:
        if mode not in MODES:
            raise UsageError(f"planning mode {mode!r}: one of {', '.join(MODES)}")
        self.raw = raw
        self.root = root
        self.mode = mode
        self.servers = servers(raw)
        self._tools: dict[str, list[dict[str, Any]]] = {}
        self._parts: dict[str, McpTools] = {}
        #: the servers whose tool list came from the cache
        self.cached: set[str] = set()
        #: the servers not listed, and why (``tolerate``, ``skip``)
        self.failed: dict[str, ConfigError] = {}

    def check_task(self, task: str) -> None:
        """The task's ``mcp_server`` (or each of its ``mcp_servers``) names a server (with
        a suggestion)."""
        check_names(task, self.raw["tasks"][task], list(self.servers))

    def _list(self, name: str) -> None:
        if name in self._tools or name in self.failed:
            return
        if self.mode == "skip":
            self.failed[name] = ConfigError(f"mcp_servers.{name}",
                                            "not listed: this command starts no MCP server")
            return
        server = self.servers[name]
        try:
            if server.replay:  # never started: the list its recordings (or cache) hold
                tasks = [t for t, e in self.raw["tasks"].items() if name in task_servers(e)]
                listed = Listed(replayed_tools(server, name, tasks, self.root), None)
            else:
                listed = server_tools(server, name, self.root)
        except ConfigError as exc:
            if self.mode == "require":
                raise
            self.failed[name] = exc
            return
        self._tools[name] = listed.tools
        if listed.cached is not None:
            self.cached.add(name)

    def unlisted_server(self, task: str) -> str | None:
        """The first of the task's servers whose tools are not known (its runs are then
        left out of the plan); None when all are, or when the task takes other tools."""
        names = task_servers(self.raw["tasks"][task])
        if names:
            self.check_task(task)
            check_several(task, self.raw["tasks"][task], self.servers)
        for name in names:
            self._list(name)
            if name in self.failed:
                return name
        return None

    def unlisted(self, task: str) -> ConfigError | None:
        """Why the tools of (one of) the task's servers are not known (:meth:`unlisted_server`)."""
        name = self.unlisted_server(task)
        return None if name is None else self.failed[name]

    def part(self, task: str) -> McpTools | None:
        """The task's tool part (None for a task of the project's tools): its first
        server's, with each other server's under ``also`` (``mcp_servers``); the server's
        ConfigError when one was not listed (:meth:`unlisted`)."""
        entry = self.raw["tasks"][task]
        names = task_servers(entry)
        if not names:
            if entry.get("allow_side_effects") is not None:
                raise ConfigError(f"tasks.{task}.allow_side_effects",
                                  "only a task with an `mcp_server` has side-effecting tools")
            return None
        if task in self._parts:
            return self._parts[task]
        self.check_task(task)
        check_several(task, entry, self.servers)
        for name in names:
            self._list(name)
            if name in self.failed:
                raise self.failed[name]
        owner = owners(task, entry, {n: self._tools[n] for n in names})
        parts = [self._server_part(task, n, [t for t in entry["tools"] if owner[t] == n])
                 for n in names]
        part = parts[0] if len(parts) == 1 else mcp_tools(
            {**parts[0].to_dict(), "also": [p.to_dict() for p in parts[1:]]}, f"tasks.{task}")
        self._parts[task] = part
        return part

    def _server_part(self, task: str, name: str, mine: list[str]) -> McpTools:
        """The part of server ``name`` for the task's tools it serves (``mine``)."""
        server = self.servers[name]
        listed = {t["name"]: t for t in self._tools[name]}
        effects = side_effects(task, self.raw["tasks"][task], name, self.servers, listed, mine)
        given = server.to_dict()
        return mcp_tools({"server": name,
                          **{k: given[k] for k in ("command", "args", "env", "url", "files")
                             if k in given},
                          "timeout": server.timeout,
                          "max_result_bytes": server.max_result_bytes,
                          # only when not the default, so that other runs' hashes stay put
                          **({"results": server.results} if server.results != "text"
                             else {}),
                          **({"changed_list": server.changed_list}
                             if server.changed_list != "stop" else {}),
                          "tools": [tool_def(listed[t]) for t in mine],
                          "tools_hash": tools_hash(self._tools[name]), **effects},
                         f"tasks.{task}")
