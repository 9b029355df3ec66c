"""``reactlab mcp`` against the MCP conformance suite's server scenarios (npm
``@modelcontextprotocol/conformance``, pinned with its dependencies in
``tests/mcp_conformance/package-lock.json``; docs/mcp.md).

``tests/setup_mcp_conformance.sh`` installs the suite, and a Node.js 22 when the node on
PATH is older, into a cache folder from the npm registry; the test is skipped only when
npm is not installed. The server runs over Streamable HTTP on a free loopback port, the
suite runs every server scenario it has (``--suite all``), and each scenario's
``checks.json`` is read: the scenarios of :data:`EXPECTED` that pass must pass, and the
others must fail, and only by the check and for the reason written there (a scenario
that needs a tool, a capability or a feature a tools-only server of the lesson's tools
does not have); each scenario's warnings are the ones written there. A new failure, a new
pass, a new or a missing warning, or a scenario added to or removed from the suite makes
the test fail.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from reactlab.tools import TOOLS
from tests.test_mcp_server import http_server

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "tests" / "setup_mcp_conformance.sh"


class Outcome(NamedTuple):
    """What a scenario does against this server: it passes (no check fails), or the one
    check that fails, with a piece of its error message; and why. ``warnings``: the ids
    of its checks that end in a warning (SHOULD-level), in order."""

    passes: bool
    why: str
    check: str | None = None
    message: str | None = None
    warnings: tuple[str, ...] = ()


def _ok(why: str, warnings: tuple[str, ...] = ()) -> Outcome:
    return Outcome(True, why, warnings=warnings)


def _fails(check: str, message: str, why: str) -> Outcome:
    return Outcome(False, why, check, message)


def _not_ours(check: str, tool: str, why: str) -> Outcome:
    """A scenario that calls the suite's own test tool ``tool``: unknown here, -32602."""
    return _fails(check, f"MCP error -32602: Unknown tool: {tool}",
                  f"calls the suite's own test tool {tool}, not one of ours; {why}")


_NO_METHOD = "MCP error -32601: Method not found"

#: Every server scenario of conformance 0.1.16 (``--suite all``: 30 active, 2 pending).
EXPECTED: dict[str, Outcome] = {
    "server-initialize": _ok("the initialize handshake"),
    "ping": _ok("ping answers {}"),
    "tools-list": _ok("every tool has a name, a description and an inputSchema"),
    "server-sse-multiple-streams": _ok("three concurrent POST streams in one session"),
    "dns-rebinding-protection": _ok(
        "a foreign Host/Origin is refused (4xx), a loopback one accepted (the SDK's "
        "protection, on for a loopback host)"),
    "server-sse-polling": _ok(
        "no check fails: it calls the suite's test_reconnection, which is unknown here "
        "(-32602, an error, not a failed result); two SHOULD warnings: its request says "
        "protocol 2025-03-26, older than SSE priming events (2025-11-25), and the server "
        "keeps no event store for resumption",
        warnings=("server-sse-priming-event", "server-sse-retry-field")),
    "tools-call-error": _not_ours(
        "tools-call-error", "test_error_handling",
        "a tool's own error as an isError result is checked on ours (test_mcp_server.py)"),
    "tools-call-simple-text": _not_ours(
        "tools-call-simple-text", "test_simple_text",
        "a text result is checked on ours (test_mcp_server.py)"),
    "logging-set-level": _fails("logging-set-level", _NO_METHOD,
                                "no logging capability (deprecated in 2026-07-28)"),
    "completion-complete": _fails("completion-complete", _NO_METHOD,
                                  "no completions: a tools-only server"),
    "tools-call-image": _not_ours("tools-call-image", "test_image_content",
                                  "ours return one text block, no image"),
    "tools-call-audio": _not_ours("tools-call-audio", "test_audio_content",
                                  "ours return one text block, no audio"),
    "tools-call-embedded-resource": _not_ours(
        "tools-call-embedded-resource", "test_embedded_resource",
        "ours return one text block, no resource"),
    "tools-call-mixed-content": _not_ours(
        "tools-call-mixed-content", "test_multiple_content_types",
        "ours return one text block"),
    "tools-call-with-logging": _fails(
        "tools-call-with-logging", _NO_METHOD, "sets a log level first: no logging"),
    "tools-call-with-progress": _not_ours(
        "tools-call-with-progress", "test_tool_with_progress",
        "ours answer at once, without progress"),
    "tools-call-sampling": _not_ours("tools-call-sampling", "test_sampling",
                                     "ours never ask the client's model"),
    "tools-call-elicitation": _not_ours("tools-call-elicitation", "test_elicitation",
                                        "ours never ask the user"),
    "elicitation-sep1034-defaults": _not_ours(
        "elicitation-sep1034-general", "test_elicitation_sep1034_defaults",
        "ours never ask the user"),
    "elicitation-sep1330-enums": _not_ours(
        "elicitation-sep1330-general", "test_elicitation_sep1330_enums",
        "ours never ask the user"),
    **{name: _fails(name, _NO_METHOD, "no resources: a tools-only server")
       for name in ("resources-list", "resources-read-text", "resources-read-binary",
                    "resources-templates-read", "resources-subscribe",
                    "resources-unsubscribe")},
    **{name: _fails(name, _NO_METHOD, "no prompts: a tools-only server")
       for name in ("prompts-list", "prompts-get-simple", "prompts-get-with-args",
                    "prompts-get-embedded-resource", "prompts-get-with-image")},
    # pending in 0.1.16 (not in the default "active" suite)
    "json-schema-2020-12": _fails(
        "json-schema-2020-12-tool-found", "Tool 'json_schema_2020_12_tool' not found",
        "lists the suite's own test tool (our schemas are the lesson's, pydantic's draft "
        "2020-12 output, with additionalProperties: false)"),
}


def conformance() -> tuple[str, str]:
    """(node, the suite's entry point), installed by the setup script if need be."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the MCP conformance suite is an npm package")
    proc = subprocess.run(["sh", str(SETUP)], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    node, entry = proc.stdout.split()
    return node, entry


_RESULT_DIR = re.compile(r"server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z")


def read_results(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Each scenario's checks, from ``OUT/server-<scenario>-<time>/checks.json``."""
    results: dict[str, list[dict[str, Any]]] = {}
    for folder in sorted(out.iterdir()):
        match = _RESULT_DIR.fullmatch(folder.name)
        assert match, folder.name
        assert match.group(1) not in results, f"{match.group(1)} ran twice"
        results[match.group(1)] = json.loads((folder / "checks.json").read_text("utf-8"))
    return results


def problems(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """How ``results`` differ from :data:`EXPECTED`: a scenario missing or new, one that
    fails but should pass, one that should fail by a check and a message but does not."""
    out = []
    if sorted(results) != sorted(EXPECTED):
        out.append(f"scenarios: {sorted(set(results) - set(EXPECTED))} are new, "
                   f"{sorted(set(EXPECTED) - set(results))} did not run")
    for scenario, checks in results.items():
        want = EXPECTED.get(scenario)
        if want is None:
            continue
        warned = tuple(c["id"] for c in checks if c["status"] == "WARNING")
        if warned != want.warnings:
            out.append(f"{scenario}: warnings {list(warned)}, expected {list(want.warnings)}")
        failed = [c for c in checks if c["status"] == "FAILURE"]
        if want.passes and failed:
            out.append(f"{scenario}: now fails {[c['id'] for c in failed]}: "
                       f"{[c.get('errorMessage') for c in failed]}")
        elif not want.passes and not (
                [c["id"] for c in failed] == [want.check]
                and want.message in (failed[0].get("errorMessage") or "")):
            got = [(c["id"], c.get("errorMessage")) for c in failed]
            out.append(f"{scenario}: expected {want.check} to fail with "
                       f"{want.message!r}, got {got}")
    return out


def _as_expected() -> dict[str, list[dict[str, Any]]]:
    """Results exactly as :data:`EXPECTED` says."""
    return {name: ([{"id": name, "status": "SUCCESS"}] if want.passes else
                   [{"id": want.check, "status": "FAILURE",
                     "errorMessage": f"x {want.message} y"}])
            + [{"id": w, "status": "WARNING"} for w in want.warnings]
            for name, want in EXPECTED.items()}


def test_problems_sees_every_departure() -> None:
    """The comparison is not vacuous: a new failure, a new pass, another failing check or
    message, a new or a missing warning, a new scenario and a missing one are each
    reported."""
    assert problems(_as_expected()) == []
    assert any(want.warnings for want in EXPECTED.values())
    for change in ("fails", "passes", "other check", "other message", "new", "gone",
                   "warns", "no warning"):
        results = _as_expected()
        if change == "fails":
            results["ping"] = [{"id": "ping", "status": "FAILURE", "errorMessage": "x"}]
        elif change == "passes":
            results["prompts-list"] = [{"id": "prompts-list", "status": "SUCCESS"}]
        elif change == "other check":
            results["prompts-list"][0]["id"] = "prompts-list-2"
        elif change == "other message":
            results["prompts-list"][0]["errorMessage"] = "Internal error"
        elif change == "new":
            results["tools-call-new"] = [{"id": "x", "status": "SUCCESS"}]
        elif change == "warns":
            results["ping"].append({"id": "ping-slow", "status": "WARNING"})
        elif change == "no warning":
            results["server-sse-polling"] = results["server-sse-polling"][:-1]
        else:
            del results["ping"]
        assert len(problems(results)) == 1, change


def test_read_results_sees_failures(tmp_path: Path) -> None:
    """The reader is not vacuous: a FAILURE check is read as one."""
    folder = tmp_path / "server-ping-2026-12-02T10-21-16-997Z"
    folder.mkdir()
    (folder / "checks.json").write_text(json.dumps([{"id": "ping", "status": "FAILURE"}]))
    assert read_results(tmp_path) == {"ping": [{"id": "ping", "status": "FAILURE"}]}


@pytest.mark.slow
def test_conformance_server_scenarios(data_files: tuple[Path, Path], tmp_path: Path,
                                      loopback: None) -> None:
    node, entry = conformance()
    out = tmp_path / "results"
    with http_server(data_files) as (url, _proc, _log):
        # localhost in the URL, as a client on this machine names it (the DNS-rebinding
        # scenario requires a loopback URL, and accepts localhost or 127.0.0.1)
        proc = subprocess.run([node, entry, "server", "--url", url, "--suite", "all",
                               "--output-dir", str(out)],
                              capture_output=True, text=True, timeout=300, check=False)
    assert "=== SUMMARY ===" in proc.stdout, proc.stdout + proc.stderr
    results = read_results(out)
    assert problems(results) == []
    # the listing the suite saw is ours
    listing = next(c for c in results["tools-list"] if c["id"] == "tools-list")
    assert listing["details"]["tools"] == list(TOOLS)
    counts = {s: sum(c["status"] == s for cs in results.values() for c in cs)
              for s in ("SUCCESS", "FAILURE", "WARNING")}
    passed = sum(not any(c["status"] == "FAILURE" for c in cs) for cs in results.values())
    print(f"conformance: {passed} of {len(results)} scenarios pass; checks: {counts}")


def test_the_docs_list_every_outcome() -> None:
    """docs/mcp.md gives the counts of :data:`EXPECTED` and names every scenario."""
    doc = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    passing = sum(want.passes for want in EXPECTED.values())
    assert (passing, len(EXPECTED) - passing) == (6, 26)
    assert f"**{passing} scenarios pass**" in doc
    assert f"**{len(EXPECTED) - passing} scenarios fail**" in doc
    assert f"The suite has {len(EXPECTED)} server scenarios" in doc
    assert [name for name in EXPECTED if f"`{name}`" not in doc] == []
