"""A framework's run, traced from the wire.

:func:`run_framework` gives the spec's framework a :class:`Kit` and lets it run: the kit's
HTTP client goes to the backend's simulator (the scenario's script, its fault plan) through
:class:`Wire`, a transport that keeps every exchange — the request body exactly as the
framework's SDK serialised it, the status and the answer — and refuses the request past
the agent's ``max_requests`` (:class:`HardStop`). The kit's tools execute the task's tools
(:class:`~reactlab.tools.ToolBox`: the lesson's validation, errors as data) and log each
execution. The trace is then built from the exchanges alone, with the project's records:

* one ``request`` per exchange: its tokens counted on the exact body (o200k_base, as every
  HTTP run's), the answer's text and calls (read by the wire API's adapter,
  :meth:`~reactlab.backends.adapter.ApiSession.read_payload`);
* one ``tool_call`` per call the model asked for: the status and result of the tool's
  execution when the framework ran it (matched by name and arguments), and in ``sent`` the
  result exactly as the framework sent it back to the model in its next request (its own
  error text included: :meth:`~reactlab.backends.adapter.ApiSession.sent_results`); a call
  the framework never ran is ``unknown`` (no such tool) or ``invalid`` (refused by the
  framework's own validation), its result the text the framework sent;
* the ``answer`` of a run that ended with a final output, and the ``end`` record with the
  framework's own ending (``end.ending``).

Nothing here depends on the wall clock: a rerun gives the same bytes as long as the
framework sends the same bodies (its ids and per-run keys made deterministic by its
module: :mod:`reactlab.frameworks.registry`).
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from reactlab.backends.registry import provider
from reactlab.config.mcp import file_copies, resolve_command, substitute
from reactlab.core.errors import UsageError
from reactlab.core.tokens import count
from reactlab.frameworks.kit import Ending, Exchange, HardStop, Kit, StdioCommand, ToolDef, Wire
from reactlab.frameworks.registry import framework
from reactlab.mcp import relay
from reactlab.mcp.recording import ToolReplay
from reactlab.mcp.source import check_recorded
from reactlab.tools import TOOLS, ToolBox, json_schema
from reactlab.trace.records import Answer, End, Request, Termination, ToolCallRecord, ToolStatus

if TYPE_CHECKING:
    from reactlab.config import RunSpec

__all__ = ["FrameworkMcp", "build_records", "run_framework"]

logger = logging.getLogger(__name__)

def _tools(spec: RunSpec, toolbox: ToolBox, executed: list[Any]) -> list[ToolDef]:
    lock = threading.Lock()

    def caller(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def call(arguments: dict[str, Any]) -> dict[str, Any]:
            result = toolbox.execute(name, arguments, spec.tools)
            with lock:
                executed.append((name, arguments, result))
            return result

        return call

    return [ToolDef(name, TOOLS[name].description, json_schema(name),
                    TOOLS[name].args_model, caller(name)) for name in spec.tools]


def _tokens_out(payload: dict[str, Any]) -> int:
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        return 0
    for key in ("output_tokens", "completion_tokens"):
        if isinstance(usage.get(key), int):
            return int(usage[key])
    return 0


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _match_executions(calls: list[list[tuple[str | None, Any]]],
                      executed: list[tuple[str, Any, dict[str, Any]]]
                      ) -> dict[tuple[int, int], int]:
    """Which execution (index into ``executed``) ran the ``j``-th call of exchange ``k``:
    first every call whose name and arguments an execution has (in order, over the whole
    run), then a call left over by name alone (a framework that passed its tool coerced
    arguments). Matching exactly over the whole run first keeps a call the framework
    refused (never executed) from taking a later call's execution of the same tool."""
    left = list(range(len(executed)))
    found: dict[tuple[int, int], int] = {}
    for exact in (True, False):
        for k, turn in enumerate(calls):
            for j, (name, arguments) in enumerate(turn):
                if (k, j) in found:
                    continue
                match = next((i for i in left if executed[i][0] == name and (
                    not exact or _canonical(executed[i][1]) == _canonical(arguments))), None)
                if match is not None:
                    left.remove(match)
                    found[k, j] = match
    return found


def _sent(session: Any, exchange: Exchange) -> dict[str, str]:
    """The tool results ``exchange``'s request carries back, by call id."""
    try:
        return dict(session.sent_results(json.loads(exchange.body)))
    except ValueError:
        return {}


def _discard_suspects(answers: list[Any], sent: list[dict[str, str]]) -> set[int]:
    """The answers whose calls the framework may have discarded: a later answer has a
    call of the same id before any request carries a result for one of its calls (the
    simulator numbers call ids by the conversation before an answer, so the conversation
    went on from before that answer: e.g. Inspect's reasoning-summary probe on the
    Responses API, a request of its own whose answer it drops)."""
    suspects: set[int] = set()
    for k, answer in enumerate(answers):
        if not answer or not answer[0]:
            continue
        ids = {c.id for c in answer[0]}
        for j in range(k + 1, len(answers)):
            if ids & set(sent[j]):
                break
            later = answers[j]
            if later and ids & {c.id for c in later[0]}:
                suspects.add(k)
                break
    return suspects


def _calls(answers: list[Any], without: Collection[int] = ()
           ) -> list[list[tuple[str | None, Any]]]:
    """(name, arguments) of each answer's calls; none for the answers ``without``."""
    return [[(c.name, c.arguments) for c in a[0]] if a and k not in without else []
            for k, a in enumerate(answers)]


def _drop_discarded(answers: list[Any], sent: list[dict[str, str]],
                    executed: list[tuple[str, Any, dict[str, Any]]]
                    ) -> tuple[list[Any], dict[tuple[int, int], int]]:
    """``answers`` with no calls in an answer the framework discarded, and which
    execution ran each call kept (:func:`_match_executions`). The tool executions the
    kit logged are the ground truth: an answer is dropped only when it is a suspect
    (:func:`_discard_suspects`) and none of its calls ran — matched after every other
    answer's calls, it takes only executions that no other call accounts for. A dropped
    answer's request stays in the trace; its calls were never the run's."""
    suspects = _discard_suspects(answers, sent)
    executions = _match_executions(_calls(answers, suspects), executed)
    if suspects:
        used = set(executions.values())
        left = [i for i in range(len(executed)) if i not in used]
        ran = _match_executions(_calls(answers, set(range(len(answers))) - suspects),
                                [executed[i] for i in left])
        if ran:
            suspects -= {k for k, _ in ran}
            executions = _match_executions(_calls(answers, suspects), executed)
    out = [([], a[1], a[2]) if k in suspects else a for k, a in enumerate(answers)]
    return out, executions


def build_records(spec: RunSpec, exchanges: list[Exchange],
                  executed: list[tuple[str, Any, dict[str, Any]]],
                  ending: Ending | None, termination: str,
                  ending_name: str, answer_tool: str | None = None
                  ) -> tuple[list[Any], End]:
    """The records of a framework's run, from its exchanges and tool executions (see
    the module docstring); a call to ``answer_tool`` (the framework's own answer tool,
    :attr:`Kit.answer_tool`) is the run's answer, not a tool call."""
    session = provider(spec.backend_config.provider).adapter()
    answers = [None if ex.payload is None else session.read_payload(ex.payload)
               for ex in exchanges]
    answers = [None if a is None else ([c for c in a[0] if c.name != answer_tool], a[1], a[2])
               for a in answers]
    answers, executions = _drop_discarded(answers, [_sent(session, ex) for ex in exchanges],
                                          executed)
    records: list[Any] = []
    cumulative = calls = errors = 0
    for k, ex in enumerate(exchanges):
        step = k + 1
        tokens = count(ex.body.decode("utf-8", errors="replace"))
        cumulative += tokens
        if ex.payload is None:
            records.append(Request(step=step, tokens_sent=tokens, cumulative_tokens=cumulative,
                                   tokens_out=0, attempts=1,
                                   text=f"HTTP {ex.status}" if ex.status else "no answer",
                                   n_calls=0))
            continue
        answer_k = answers[k]
        assert answer_k is not None
        found, text, _ = answer_k
        records.append(Request(step=step, tokens_sent=tokens, cumulative_tokens=cumulative,
                               tokens_out=_tokens_out(ex.payload), attempts=1, text=text,
                               n_calls=len(found)))
        sent: dict[str, str] = {}
        for later in exchanges[k + 1:]:
            try:
                sent = session.sent_results(json.loads(later.body))
            except ValueError:
                sent = {}
            if sent:
                break
        for j, call in enumerate(found):
            calls += 1
            match = executions.get((k, j))
            status: ToolStatus
            if match is not None:
                result = executed[match][2]
                status = "ok" if "resultado" in result else "error"
            else:
                status = "invalid" if call.name in spec.tools else "unknown"
                result = {"error": sent.get(call.id, "")}
            errors += status != "ok"
            records.append(ToolCallRecord(step=step, id=call.id, name=call.name,
                                          arguments=call.arguments, status=status,
                                          result=result, raw=call.raw,
                                          sent=sent.get(call.id)))
    answer = ending.answer if ending is not None else None
    if answer is not None and termination == "answer":
        records.append(Answer(step=len(exchanges), text=answer))
    end = End(termination=cast("Termination", termination), steps=len(exchanges),
              answer=answer if termination == "answer" else None, tokens_sent=cumulative,
              calls=calls, errors=errors, ending=ending_name)
    return records, end


class FrameworkMcp:
    """The tool source of a framework's run on a task whose tools come from an MCP server:
    nothing runs here — the framework's own MCP client starts the server and calls it
    (:func:`run_framework`) — but the runner's one place that picks a run's tools
    (:func:`reactlab.runner.tool_source`) hands this over with where to write the run's
    MCP recording (``recording``) or where to answer it from (``replay``: the server is
    never started; docs/mcp.md)."""

    def __init__(self, recording: str | Path | None = None,
                 replay: str | Path | None = None) -> None:
        self.recording = None if recording is None else Path(recording)
        self.replay = None if replay is None else Path(replay)

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        """Never called: the framework's MCP client runs the tools."""
        return {"error": f"herramienta desconocida: {name}"}


@contextmanager
def _server(spec: RunSpec, log: Path | None,
            replay: Path | None) -> Iterator[StdioCommand | None]:
    """How the framework starts the task's MCP server (None: the task's tools run in
    process): the server's command line behind the relay that logs its exchanges, on this
    run's own copies of the server's ``files`` (so a write in one run is seen by no
    other), with the server's ``env`` over this process's; or, in a replay, the relay
    that answers from the recording ``replay`` (no program, no files)."""
    part = spec.mcp
    if part is None:
        yield None
        return
    assert log is not None, "a run with MCP tools has the relay's log"
    if replay is not None:
        line = relay.replay_command(log, replay)
        yield StdioCommand(line[0], line[1:], relay.environment())
        return
    if part.command is None:
        raise UsageError(f"{spec.key}: a framework takes MCP tools from a stdio server, "
                         f"and {part.server!r} is reached by URL")
    program = resolve_command(part.command)
    with file_copies(part) as (_, paths):
        line = relay.command(log, [str(program or part.command),
                                   *(substitute(a, paths) for a in part.args)])
        env = relay.environment({k: substitute(v, paths) for k, v in part.env.items()})
        yield StdioCommand(line[0], line[1:], env)


def _player(spec: RunSpec, tools: ToolBox | FrameworkMcp) -> ToolReplay | None:
    """The recording a replay answers from, checked before any model turn: its checksum
    and header (RecordingError naming the file), its server and tool list the run's
    planned ones (ToolServerError, kind ``changed``); None when the run is not a
    replay."""
    if spec.mcp is None or not isinstance(tools, FrameworkMcp) or tools.replay is None:
        return None
    player = ToolReplay.load(tools.replay)
    check_recorded(spec.mcp, player.header, tools.replay)
    return player


def _relayed(spec: RunSpec, recording: Path | None, log: Path,
             player: ToolReplay | None) -> list[tuple[str, Any, dict[str, Any]]]:
    """The tool executions of a run on MCP tools, from the relay's log, once its replay
    is checked to be the recorded run (:func:`reactlab.mcp.relay.check_replay`); a
    recorded run's MCP recording is written to ``recording`` when there is one."""
    assert spec.mcp is not None
    if player is not None:
        relay.check_replay(log, player)
    if noise := relay.server_stderr(log).strip():
        logger.info("the MCP server's stderr:\n%s", noise)
    if player is None and recording is not None:
        relay.write_recording(log, recording, spec.mcp.server, spec.mcp.tools_hash)
    return relay.executions(log, spec.mcp.results)


def _run_entry(entry: Any, kit: Kit, log: Path | None,
               player: ToolReplay | None) -> tuple[Ending | None, str, str]:
    """Run the framework (in a thread of its own: a framework may start its own event
    loop, asyncio.run, which it cannot do in a thread that runs one already, as a
    Snakemake job's run block does); its ending, termination and ending's name. A replay
    that stopped on a problem raises that problem (RecordingError) rather than what the
    framework made of the closed connection."""
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="reactlab-agent") as pool:
            ending: Ending = pool.submit(entry.run, kit).result()
        return ending, ending.termination, ending.ending
    except HardStop:
        return None, "hard_stop", "HardStop"
    except Exception:
        if player is not None and log is not None:
            relay.check_replay(log, player)
        raise


def run_framework(spec: RunSpec, tools: ToolBox | FrameworkMcp) -> tuple[list[Any], End]:
    """Run ``spec``'s framework against its backend's simulator; the trace's records
    (between its header and its end) and its end record, built from the wire (the
    runner writes them: :func:`reactlab.runner.run_to_trace`). With MCP tools
    (``tools`` a :class:`FrameworkMcp`) the executions are the relay's log, and the run's
    MCP recording is written to its ``recording``, or the run answered from its
    ``replay``."""
    assert spec.framework is not None, f"{spec.key} runs the lesson's loop"
    entry = framework(spec.framework.framework)
    wire = Wire(spec, spec.framework.max_requests)
    executed: list[tuple[str, Any, dict[str, Any]]] = []
    if spec.mcp is not None and not entry.mcp:
        raise UsageError(f"{spec.key}: framework {entry.name!r} takes no MCP tools")
    if spec.mcp is None and not isinstance(tools, ToolBox):
        raise UsageError(f"{spec.key}: the task's tools run in process (a ToolBox)")
    player = _player(spec, tools)
    mcp = tools if isinstance(tools, FrameworkMcp) else FrameworkMcp()
    kit = Kit(spec, wire, [] if spec.mcp is not None or isinstance(tools, FrameworkMcp)
              else _tools(spec, tools, executed), executed)
    # the relay's log of the MCP exchanges: a temporary folder only for a run with MCP tools
    with (tempfile.TemporaryDirectory(prefix="reactlab-relay-") if spec.mcp is not None
          else nullcontext(None)) as tmp:
        log = None if tmp is None else Path(tmp) / "exchanges.jsonl"
        with _server(spec, log, mcp.replay) as server:
            kit.mcp = server
            ending, termination, name = _run_entry(entry, kit, log, player)
        if log is not None:
            executed[:] = _relayed(spec, mcp.recording, log, player)
    return build_records(spec, wire.exchanges, executed, ending, termination, name,
                         kit.answer_tool)
