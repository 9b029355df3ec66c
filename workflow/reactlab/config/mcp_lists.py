"""An MCP server's tool list when the server is not asked: the planning cache, the
headers of its runs' recordings, and what differs between two lists.

* :func:`tools_hash` is the sha256 a run's spec keeps of the server's whole list;
* the cache (:func:`cache_dir`) holds one JSON file ``{"key", "tools"}`` per listing
  (:mod:`reactlab.config.mcp` keys it);
* every MCP recording (:mod:`reactlab.mcp.recording`) starts with a header line that
  holds the server's identity and its whole tool list with that list's hash
  (:func:`header_problem` checks one): a server set to ``replay: true`` is planned from
  the recordings of its tasks' runs (:func:`recorded_tools`), never started;
* :func:`tools_diff` names each tool added, removed or changed between two lists, for the
  error that stops a server whose tools are not the planned ones.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reactlab.core.errors import ConfigError
from reactlab.core.io import loads_strict

#: The format of an MCP recording's header (``{"mcp_recording": 1, ...}``, its first line).
RECORDING_FORMAT = 1
#: Where a run's MCP recording lives, below the working folder (rules run_mcp, replay_mcp).
RECORDINGS = Path("results") / "recordings"


def cache_dir() -> Path:
    """Where the tool lists are cached: ``$REACTLAB_CACHE/mcp_tools`` (default
    ``~/.cache/reactlab``)."""
    root = os.environ.get("REACTLAB_CACHE") or Path.home() / ".cache" / "reactlab"
    return Path(root) / "mcp_tools"


def tools_hash(tools: list[dict[str, Any]]) -> str:
    """sha256 of a server's tool list (its canonical JSON: sorted keys, no spaces)."""
    text = json.dumps(tools, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _cache_entries() -> Iterable[tuple[Path, dict[str, Any]]]:
    """Every readable cache file and its content (``{"key", "tools"}``)."""
    folder = cache_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and isinstance(entry.get("tools"), list):
            yield path, entry


def cached_for(config_key: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The tool list cached last for a server of this configuration (its key's fields
    but the program's ``fingerprint``: the program may be gone), or None."""
    found: list[tuple[int, list[dict[str, Any]]]] = []
    for path, entry in _cache_entries():
        key = entry.get("key")
        if isinstance(key, dict) and {k: v for k, v in key.items()
                                      if k != "fingerprint"} == dict(config_key):
            try:
                found.append((path.stat().st_mtime_ns, entry["tools"]))
            except OSError:
                continue
    return max(found, key=lambda f: f[0])[1] if found else None


def header_problem(header: Any) -> str | None:
    """What is wrong with an MCP recording's first line as its header (None: it is one,
    and its tool list matches its hash)."""
    if not isinstance(header, dict) or "mcp_recording" not in header:
        if isinstance(header, dict) and "exchange" in header:
            return ("it has no header (an MCP recording written by an older reactlab, "
                    "before recordings named their server and its tools); record the run "
                    "again: `replay: false` on its server")
        return "its first line is not an MCP recording's header"
    if header["mcp_recording"] != RECORDING_FORMAT:
        return (f"recording format {header['mcp_recording']!r}, this reader understands "
                f"{RECORDING_FORMAT}")
    tools = header.get("tools")
    if not isinstance(header.get("server"), str) or not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        return "its header lacks the server's name or its tool list"
    if header.get("tools_hash") != tools_hash(tools):
        return "its header's tool list does not match the header's tools_hash"
    return None


def read_header(path: str | Path) -> dict[str, Any] | None:
    """The header of the MCP recording at ``path`` when its first line is a sound one,
    else None (a recording without one, damaged, or unreadable)."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
        header = loads_strict(first.decode("utf-8"))
    except (OSError, ValueError):
        return None
    return header if header_problem(header) is None else None


def recorded_tools(name: str, tasks: Sequence[str],
                   root: str | Path = ".") -> list[dict[str, Any]] | None:
    """The tool list of server ``name`` as the recordings of its ``tasks``' runs hold it
    (``results/recordings/<task>/...mcp.jsonl`` under ``root``), None when none does.
    ConfigError naming the server when they hold different lists."""
    lists: dict[str, tuple[list[dict[str, Any]], list[str]]] = {}
    for task in tasks:
        folder = Path(root) / RECORDINGS / task
        for path in sorted(folder.rglob("*.mcp.jsonl")) if folder.is_dir() else []:
            header = read_header(path)
            if header is None or header["server"] != name:
                continue
            entry = lists.setdefault(header["tools_hash"], (header["tools"], []))
            entry[1].append(str(path))
    if len(lists) > 1:
        shown = "; ".join(f"{files[0]} (and {len(files) - 1} more)" if len(files) > 1
                          else files[0] for _, files in lists.values())
        raise ConfigError(f"mcp_servers.{name}",
                          f"replay: true, but the recordings of its runs hold "
                          f"{len(lists)} different tool lists ({shown}); remove the "
                          "stale ones, or record the runs again (replay: false)")
    return next(iter(lists.values()))[0] if lists else None


def planned_list(server: str, digest: str,
                 root: str | Path = ".") -> list[dict[str, Any]] | None:
    """The whole tool list whose hash is ``digest`` (a run's planned one), from the
    planning cache or a recording of server ``server`` under ``root``, or None."""
    for _, entry in _cache_entries():
        if tools_hash(entry["tools"]) == digest:
            tools: list[dict[str, Any]] = entry["tools"]
            return tools
    folder = Path(root) / RECORDINGS
    for path in sorted(folder.rglob("*.mcp.jsonl")) if folder.is_dir() else []:
        header = read_header(path)
        if header is not None and header["server"] == server and header[
                "tools_hash"] == digest:
            recorded: list[dict[str, Any]] = header["tools"]
            return recorded
    return None


def tool_def(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A listed tool as a run's spec keeps it (:class:`~reactlab.config.tool_parts.McpTools`
    ``tools``): ``name``, ``description``, ``parameters`` (its ``inputSchema``) and, when
    it declares one, ``output_schema`` (its ``outputSchema``: results are checked
    against it)."""
    out = {"name": tool["name"], "description": tool.get("description") or "",
           "parameters": tool.get("inputSchema") or {"type": "object"}}
    if isinstance(tool.get("outputSchema"), dict):
        out["output_schema"] = tool["outputSchema"]
    return out


#: A spec's field names as a server lists them (for the messages).
_LISTED_NAMES = {"parameters": "inputSchema", "output_schema": "outputSchema"}


def _changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return [_LISTED_NAMES.get(k, k) for k in sorted({*old, *new} - {"name"})
            if old.get(k) != new.get(k)]


def tools_diff(planned: Sequence[Mapping[str, Any]], listed: Sequence[Mapping[str, Any]],
               *, partial: bool = False) -> str:
    """Each tool added, removed or changed (which of its fields: ``description``,
    ``inputSchema``, ``outputSchema``...) from ``planned`` to ``listed``, by name, on
    one line. ``partial``: ``planned`` holds only some of the planned tools, as a spec
    keeps them (a task's, :func:`tool_def`): the tools of ``listed`` that it does not name
    are not called added, and each listed tool is compared as a spec would keep it."""
    old = {t["name"]: t for t in planned}
    new = {t["name"]: tool_def(t) if partial else t for t in listed}
    parts = []
    added = [n for n in new if n not in old]
    if added and not partial:
        parts.append("added: " + ", ".join(added))
    removed = [n for n in old if n not in new]
    if removed:
        parts.append("removed: " + ", ".join(removed))
    changed = [f"{n} ({', '.join(fields)})" for n in old if n in new
               and (fields := _changed_fields(old[n], new[n]))]
    if changed:
        parts.append("changed: " + ", ".join(changed))
    if not parts:
        return ("the task's tools are the planned ones; others of the server's list differ "
                "(the planned list is not cached here to name them)" if partial else
                "the same tools in another order")
    return "; ".join(parts)
