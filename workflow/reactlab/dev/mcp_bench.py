"""What a tool call costs over MCP (stdio) beyond the same work in process (docs/mcp.md).

Two pairs, each timed call by call (``calls`` of them after ``warmup``), medians reported:

* **mcp-server-sqlite** (the default config's SQL server, its own environment): the
  lesson's close query, ``read_query`` through the tool source
  (:class:`reactlab.mcp.source.McpToolSource`: JSON-RPC over the server's stdin and stdout,
  the answer mapped to the lesson's data) against the same query run in process with
  ``sqlite3`` (a connection per query, as that server opens one);
* **the project's own server** (``python -m reactlab mcp``, when ``reactlab.mcp.server``
  is installed): ``precio`` through the tool source against :meth:`ToolBox.execute`.

The added latency is the difference of the medians. :func:`reactlab.dev.bench.mcp_slice`
(``reactlab bench --mcp --pipeline``) times the simulated matrix with and without its MCP
slice, side by side.
Timings are the machine's; nothing here reaches a trace.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from reactlab import data
from reactlab.config.mcp import read_tools, tools_hash
from reactlab.config.tool_parts import mcp_server_settings, mcp_tools
from reactlab.data import sqlite
from reactlab.mcp.source import ServerJob
from reactlab.tools import ToolBox

ROOT = Path(__file__).resolve().parents[3]
SQLITE_SERVER = ROOT / ".venv-mcp-sqlite" / "bin" / "mcp-server-sqlite"
QUERY = ("SELECT fecha, cierre FROM precios WHERE ticker = 'BUSI' AND fecha <= '2024-03-15' "
         "ORDER BY fecha DESC LIMIT 1")


def timed(call: Callable[[], Any], calls: int, warmup: int) -> list[float]:
    """Seconds per call of ``call``, ``calls`` times after ``warmup`` untimed calls."""
    for _ in range(warmup):
        call()
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def _source(server: dict[str, Any], tools: list[str], root: Path) -> Any:
    """A :class:`~reactlab.mcp.source.ServerJob` for ``server`` (as under ``mcp_servers:``),
    its tool list read as planning reads it."""
    settings = mcp_server_settings(server)
    listed = read_tools(settings, "bench", root)
    defs = [{"name": t["name"], "description": t.get("description", ""),
             "parameters": t.get("inputSchema", {})} for t in listed if t["name"] in tools]
    given = settings.to_dict()
    part = mcp_tools({"server": "bench", **{k: v for k, v in given.items()
                                             if k in ("command", "args", "env", "files",
                                                      "results")},
                      "timeout": settings.timeout, "max_result_bytes": settings.max_result_bytes,
                      "tools": defs, "tools_hash": tools_hash(listed)})
    return ServerJob(part, root=root)


def sqlite_pair(prices: Path, news: Path, calls: int, warmup: int) -> tuple[list[float],
                                                                              list[float]]:
    """(in process, over MCP) seconds per call of the close query."""
    with tempfile.TemporaryDirectory(prefix="reactlab-mcp-bench-") as tmp:
        db = sqlite.write(prices, news, Path(tmp) / "lesson.sqlite")

        def direct() -> Any:
            with closing(sqlite3.connect(db)) as con:
                return [dict(zip(("fecha", "cierre"), r, strict=True))
                        for r in con.execute(QUERY).fetchall()]

        inproc = timed(direct, calls, warmup)
        server = {"command": str(SQLITE_SERVER), "args": ["--db-path", "{db}"],
                  "files": {"db": str(db)}}
        with _source(server, ["read_query"], Path(tmp)) as job, job.run() as tools:
            got = tools.execute("read_query", {"query": QUERY})
            assert "resultado" in got, got
            over = timed(lambda: tools.execute("read_query", {"query": QUERY}), calls, warmup)
    return inproc, over


def project_pair(prices: Path, news: Path, calls: int, warmup: int) -> tuple[list[float],
                                                                               list[float]]:
    """(in process, over MCP) seconds per ``precio`` call on the project's own server."""
    box = ToolBox.from_files(prices, news)
    args = {"ticker": "BUSI", "fecha": "2024-03-15"}
    inproc = timed(lambda: box.execute("precio", args), calls, warmup)
    server = {"command": sys.executable,
              "args": ["-m", "reactlab", "mcp", "--prices", str(prices), "--news", str(news)],
              "env": {"PYTHONPATH": str(ROOT / "workflow")}, "results": "lesson"}
    with _source(server, ["precio"], ROOT) as job, job.run() as tools:
        over = timed(lambda: tools.execute("precio", args), calls, warmup)
    return inproc, over


def main(calls: int = 200, warmup: int = 20, say: Callable[[str], None] = print) -> None:
    """Print the medians of each pair that can run here, and the added latency."""
    med = statistics.median
    with tempfile.TemporaryDirectory(prefix="reactlab-mcp-data-") as tmp:
        prices, news = data.write(Path(tmp), 6)
        pairs: list[tuple[str, Callable[..., tuple[list[float], list[float]]]]] = []
        if SQLITE_SERVER.is_file():
            pairs.append(("mcp-server-sqlite read_query vs sqlite3", sqlite_pair))
        else:
            say("mcp tool call: mcp-server-sqlite's environment is missing (`make env`)")
        if importlib.util.find_spec("reactlab.mcp.server") is not None:
            pairs.append(("reactlab mcp precio vs ToolBox.execute", project_pair))
        for label, pair in pairs:
            inproc, over = pair(prices, news, calls, warmup)
            say(f"mcp tool call, {label}: in process {med(inproc) * 1e3:.3f} ms, "
                f"stdio MCP {med(over) * 1e3:.3f} ms, added {(med(over) - med(inproc)) * 1e3:.3f} "
                f"ms per call (median of {calls})")


if __name__ == "__main__":
    main()
