"""A small MCP server over stdio, well-behaved or deliberately broken (tests/test_mcp*.py).

    python tests/mcp_bad_server.py MODE [--pidfile PATH] [--child]

It speaks JSON-RPC by hand (standard library only), so that it can break the protocol in
ways a real SDK would not let it. Its tools: ``eco`` (returns its ``texto``), ``suma``
(``a`` + ``b`` as text and as ``structuredContent``), ``falla`` (an ``isError: true``
result), ``contador`` (counts the calls this process has answered: state kept between
runs of one job). What ``tools/call`` does by MODE:

* ``ok`` — answers;
* ``crash`` — the process exits (status 3) on the second call;
* ``hang`` — never answers a call (answers the handshake and ``tools/list``);
* ``malformed`` — writes a line that is not JSON instead of the answer;
* ``notrpc`` — writes a JSON line that is not JSON-RPC;
* ``huge`` — answers with a 10 MB text result;
* ``dies_at_start`` — exits before the handshake (after a line on stderr with its pid);
* ``outschema`` — every tool declares an ``outputSchema``: ``contador`` answers with a
  ``structuredContent`` that conforms (``{"n": <count>}``), ``suma`` with one that does not
  (the sum as a string), ``eco`` with none, ``falla`` with an ``isError`` result (which no
  schema binds).

``--pidfile`` appends this process's pid (and, with ``--child``, the pid of a child
process it starts and leaves running: a server's own children must go with it).
``--extra-file PATH``: when that file exists, the server lists one more tool (its tool
list changes with a file, as a server's may with its code); when the file's text holds
``sin-falla``, ``falla`` is not listed, and with ``otra-suma`` ``suma`` has another
description.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

TOOLS = [
    {"name": "eco", "description": "Devuelve el texto que recibe.",
     "inputSchema": {"type": "object", "properties": {"texto": {"type": "string"}},
                     "required": ["texto"]}},
    {"name": "suma", "description": "Suma dos números.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number"},
                                                      "b": {"type": "number"}},
                     "required": ["a", "b"]}},
    {"name": "falla", "description": "Siempre falla.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "contador", "description": "Cuenta las llamadas.",
     "inputSchema": {"type": "object", "properties": {}}},
]


OUTPUT_SCHEMAS = {
    "eco": {"type": "object", "properties": {"texto": {"type": "string"}},
            "required": ["texto"]},
    "suma": {"type": "object", "properties": {"suma": {"type": "number"}},
             "required": ["suma"]},
    "falla": {"type": "object"},
    "contador": {"type": "object", "properties": {"n": {"type": "integer"}},
                 "required": ["n"]},
}


def tool_list(mode: str, extra: str | None) -> list[dict]:
    """The tools this server lists in ``mode``, with the ``--extra-file`` at ``extra``."""
    tools = [dict(t) for t in TOOLS]
    if mode == "outschema":
        for t in tools:
            t["outputSchema"] = OUTPUT_SCHEMAS[t["name"]]
    if extra is not None and os.path.exists(extra):
        with open(extra) as fh:
            words = fh.read()
        if "sin-falla" in words:
            tools = [t for t in tools if t["name"] != "falla"]
        if "otra-suma" in words:
            tools[1]["description"] = "Suma dos números, de otra manera."
        tools.append({"name": "extra", "description": "Otra.",
                      "inputSchema": {"type": "object"}})
    return tools


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def text(s: str) -> dict:
    return {"content": [{"type": "text", "text": s}], "isError": False}


def main() -> None:
    mode = sys.argv[1]
    args = sys.argv[2:]
    if "--pidfile" in args:
        path = args[args.index("--pidfile") + 1]
        pids = [os.getpid()]
        if "--child" in args:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            pids.append(child.pid)
        with open(path, "a") as fh:
            fh.write("".join(f"{p}\n" for p in pids))
    if mode == "dies_at_start":
        sys.stderr.write(f"no puedo arrancar (pid {os.getpid()})\n")
        sys.exit(2)
    tools = tool_list(mode, args[args.index("--extra-file") + 1]
                      if "--extra-file" in args else None)
    calls = 0
    for line in sys.stdin:
        msg = json.loads(line)
        method, ident = msg.get("method"), msg.get("id")
        if ident is None:
            continue  # a notification
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-bad-server", "version": "0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
        elif method == "tools/call":
            calls += 1
            name = msg["params"]["name"]
            arguments = msg["params"].get("arguments") or {}
            if mode == "crash" and calls == 2:
                sys.stderr.write(f"me caigo (pid {os.getpid()})\n")
                sys.stderr.flush()
                sys.exit(3)
            if mode == "hang":
                time.sleep(3600)
            if mode == "malformed":
                sys.stdout.write("esto no es JSON\n")
                sys.stdout.flush()
                continue
            if mode == "notrpc":
                send({"hola": "mundo"})
                continue
            if mode == "huge":
                send({"jsonrpc": "2.0", "id": ident, "result": text("x" * 10_000_000)})
                continue
            if name == "eco":
                result = text(str(arguments.get("texto")))
            elif name == "suma":
                total = arguments["a"] + arguments["b"]
                result = {**text(str(total)), "structuredContent": {
                    "suma": str(total) if mode == "outschema" else total}}
            elif name == "falla":
                result = {"content": [{"type": "text", "text": "fallo a propósito"}],
                          "isError": True}
            elif name == "contador":
                result = text(str(calls))
                if mode == "outschema":
                    result["structuredContent"] = {"n": calls}
            else:
                send({"jsonrpc": "2.0", "id": ident,
                      "error": {"code": -32602, "message": f"Unknown tool: {name}"}})
                continue
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        else:
            send({"jsonrpc": "2.0", "id": ident,
                  "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
