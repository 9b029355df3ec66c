"""Run one (task × backend × scenario) and write its trace."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab import backends
from reactlab.agent.defences import question_tickers
from reactlab.agent.loop import run_agent
from reactlab.agent.strategies import strategy_named
from reactlab.agent.types import SessionFacts
from reactlab.backends.recording import Recorder, Replay
from reactlab.backends.registry import provider as provider_entry
from reactlab.config import RunSpec
from reactlab.core.errors import UsageError
from reactlab.frameworks.registry import FRAMEWORKS
from reactlab.frameworks.wire import FrameworkMcp, run_framework
from reactlab.mcp.source import McpToolSource, ServerJob
from reactlab.tools import ToolBox
from reactlab.tools.sources import SOURCES, open_source
from reactlab.trace import SCHEMA_VERSION, TraceWriter
from reactlab.trace.records import End, Guardrail, Header

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from reactlab.agent.loop import Executor
    from reactlab.agent.types import ModelTurn, Session
    from reactlab.backends.registry import LoadedModel

_VERSIONED = ("reactlab", "pydantic", "pandas", "tiktoken")


@cache
def package_versions(provider: str, framework: str | None = None,
                     source: str | None = None, engine: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions of Python, the package's own dependencies and the packages the run's
    plugin entries import: its provider's, its framework's and its tool source's
    (each entry's ``packages``), and its local model's engine's (``engine``)."""
    names = _VERSIONED + provider_entry(provider).packages + engine
    if framework is not None:
        names += FRAMEWORKS.lookup(framework).packages
    if source is not None:
        names += SOURCES.lookup(source).packages
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def header(spec: RunSpec, session: object | None = None) -> Header:
    """The trace header of ``spec``'s run. With the ``session`` that runs it, also what
    that session says it sends the model (:class:`reactlab.agent.types.SessionFacts`:
    whether the agent's system prompt goes to it, how tool results are written), so that
    a reader of the trace (the exports) never has to work it out from the provider."""
    run: dict[str, Any] = {"task": spec.task, "backend": spec.backend,
                           "scenario": spec.run_scenario}
    if spec.framework is not None:
        run["agent"] = spec.framework.name
    if spec.trial is not None:
        run["trial"] = spec.trial
    facts = session if isinstance(session, SessionFacts) else None
    return Header(schema_version=SCHEMA_VERSION, run=run, key=spec.key,
                  config_hash=spec.config_hash,
                  versions=package_versions(
                      spec.backend_config.provider,
                      spec.framework.framework if spec.framework is not None else None,
                      spec.tool_source.plugin if spec.tool_source is not None else None,
                      spec.backend_config.packages),
                  spec=spec.to_dict(),
                  system_prompt_sent=facts.system_prompt_sent if facts else None,
                  tool_results_ascii=facts.tool_results_ascii if facts else None)


@contextmanager
def tool_source(spec: RunSpec, prices: str | Path, news: str | Path, *,
                recording: str | Path | None = None,
                replay: str | Path | None = None) -> Iterator[Executor]:
    """The one place a run's tool source is chosen: the project's tools (a
    :class:`~reactlab.tools.ToolBox` on the data files, once per process and file
    contents), an installed tool source's (``tool_source``, a plugin:
    :mod:`reactlab.tools.sources`), or, for a task with ``mcp_server``, that server's
    (:mod:`reactlab.mcp.source`: started for the job and ended with it; with ``recording``
    the run's exchange is recorded there, with ``replay`` answered from there and the
    server never started)."""
    if spec.mcp is not None and spec.framework is not None:
        # the framework's own MCP client starts the server, or the relay that answers
        # from the recording (reactlab.frameworks.wire)
        yield FrameworkMcp(recording, replay)
        return
    if spec.tool_source is not None:
        if recording is not None or replay is not None:
            raise UsageError(f"{spec.key}: a tool recording is for a task whose tools come "
                             "from an MCP server")
        yield open_source(spec.tool_source.plugin, spec.tool_source.settings)
        return
    if spec.mcp is None:
        if recording is not None or replay is not None:
            raise UsageError(f"{spec.key}: a tool recording is for a task whose tools come "
                             "from an MCP server")
        yield ToolBox.shared(prices, news)
        return
    with ServerJob(spec.mcp, replay=replay is not None,
                   pin=spec.agent.defences.pin_tool_list) as job, \
            job.run(recording=recording, replay=replay) as tools:
        yield tools


def run_job(spec_json: str, prices: str | Path, news: str | Path, out: str | Path, *,
            recording: str | Path | None = None,
            replay: str | Path | None = None,
            tools_recording: str | Path | None = None,
            tools_replay: str | Path | None = None) -> str:
    """One run job of the pipeline (the ``run`` command and the Snakemake rule): parse the
    spec, open its tool source (:func:`tool_source`; ``tools_recording`` /
    ``tools_replay``: an MCP server's exchange), run, write the trace; returns the summary
    line for the job's log. Holds no state between calls, so jobs may run as threads."""
    spec = RunSpec.from_json(spec_json)
    with tool_source(spec, prices, news, recording=tools_recording,
                     replay=tools_replay) as tools:
        end = run_to_trace(spec, tools, out, recording=recording, replay=replay)
    return (f"{spec.key}: {end['termination']} after {end['steps']} steps, "
            f"{end['calls']} calls ({end['errors']} errors), {end['tokens_sent']} tokens sent")


def _no_sleep(seconds: float) -> None:
    """The sleep of a replay: the recorded waits are in the trace, nothing is waited."""


#: What :func:`run_to_trace` takes for the project's loop and refuses for a framework's run,
#: with the reason.
FRAMEWORK_REFUSES = {
    "recording": "a framework runs against its backend's simulator in process, and its "
                 "exchanges are traced from the wire (reactlab.frameworks.wire): there is "
                 "no API answer to record",
    "replay": "a framework's trace is built from the simulator's answers as they are made "
              "(reactlab.frameworks.wire); a recording cannot stand in for them",
    "allowed": "the framework runs the task's tools as its own",
    "model": "a framework speaks to an HTTP API, not to a loaded model",
    "first_turn": "a framework decodes no batched turn",
}


def _framework_to_trace(spec: RunSpec, tools: Executor, out: str | Path,
                        given: Mapping[str, object]) -> dict[str, Any]:
    """A framework's run (:mod:`reactlab.frameworks`): the framework runs with its own
    loop against the backend's simulator; the trace is built from the wire. An option of
    :func:`run_to_trace` it cannot honour (``given``, by name: :data:`FRAMEWORK_REFUSES`)
    is a UsageError before anything runs, never silently dropped."""
    refused = [name for name, value in given.items() if value is not None]
    if refused:
        raise UsageError(f"{spec.key}: a framework's run takes no {', '.join(refused)}: "
                         + "; ".join(FRAMEWORK_REFUSES[n] for n in refused))
    if not isinstance(tools, ToolBox | FrameworkMcp):
        raise UsageError(f"{spec.key}: a framework's run executes the task's tools "
                         "(a ToolBox) or takes them over MCP itself")
    records, end = run_framework(spec, tools)
    writer = TraceWriter(out)
    writer.add(header(spec))
    for record in records:
        writer.add(record)
    writer.close(end)
    return {k: v for k, v in end.to_json().items() if k != "type"}


def _refused_to_trace(spec: RunSpec, why: str, out: str | Path) -> dict[str, Any]:
    """The trace of a run whose MCP server was refused before any model turn (its pinned
    tool list changed, the server's ``changed_list: refuse``): its header, the guardrail
    ``pin_tool_list`` (``detail``: what changed) and the end, nothing sent or called."""
    writer = TraceWriter(out)
    writer.add(header(spec))
    writer.add(Guardrail(step=0, rule="pin_tool_list", detail=why))
    end = End(termination="pin_tool_list", steps=0, answer=None, tokens_sent=0, calls=0,
              errors=0)
    writer.close(end)
    return {k: v for k, v in end.to_json().items() if k != "type"}


def run_to_trace(spec: RunSpec, tools: Executor, out: str | Path, *,
                 recording: str | Path | None = None,
                 replay: str | Path | None = None,
                 allowed: Collection[str] | None = None,
                 model: LoadedModel | None = None,
                 first_turn: ModelTurn | None = None) -> dict[str, Any]:
    """Run ``spec`` with ``tools`` and write the trace to ``out`` atomically: the one
    path from a spec to its trace, for the config's runs and every outside suite's case
    (:mod:`reactlab.suites`) alike. The session is the backend's provider's
    (:func:`reactlab.backends.open_session`), the loop :func:`reactlab.agent.loop.run_agent`
    under the spec's strategy.

    Returns the end record's data (termination, steps, answer, tokens, calls, errors).

    ``allowed``: the tools a call may run (default: the spec's; an AgentDojo case under
    its scope defence narrows them); the scope rule of the lesson's defences applies to
    the config's runs only (an outside case's question names no tickers). ``model`` and
    ``first_turn``: a shard's model, loaded once for its cases, and the case's turn
    decoded in a batch (:mod:`reactlab.backends.local.batch`), for a local model backend.

    ``recording``: write every HTTP attempt of the run to this JSONL file (atomically, at
    the end, also when the run ends in ``backend_error``). ``replay``: answer every
    request from this recording instead of sending it — no key, no network, no waits;
    the trace is byte-identical to the recorded run's. A request that differs from the
    recorded one, or one more than the recording holds, ends the run in
    ``backend_error`` (kind ``protocol``); a run that ends with recorded attempts left
    over raises :class:`~reactlab.backends.recording.RecordingError` and writes no trace. Both
    are for the providers with an HTTP layer only (:mod:`reactlab.backends.registry`). In
    live mode a missing key raises ClientError before anything is sent, and nothing is
    written.

    A framework's run (``spec.framework``: :func:`reactlab.frameworks.wire.run_framework`)
    goes through the same function: it takes none of ``recording``, ``replay``,
    ``allowed``, ``model`` or ``first_turn`` (:data:`FRAMEWORK_REFUSES` says why), and
    one given is a UsageError before anything runs.
    """
    if recording is not None and replay is not None:
        raise UsageError("run_to_trace: give `recording` or `replay`, not both")
    if spec.framework is not None:  # every option of this function honoured or refused
        return _framework_to_trace(spec, tools, out, {
            "recording": recording, "replay": replay, "allowed": allowed, "model": model,
            "first_turn": first_turn})
    if isinstance(tools, McpToolSource) and tools.refused is not None:
        return _refused_to_trace(spec, tools.refused, out)
    strategy = strategy_named(spec.script.strategy)
    defences = spec.agent.defences
    if isinstance(tools, McpToolSource) and spec.mcp is not None and tools.part != spec.mcp:
        # the server's list changed and is not pinned: the model reads it as listed now
        spec = replace(spec, mcp=tools.part)
    refused = spec.mcp.refused() if spec.mcp is not None and defences.side_effect_allowlist \
        else frozenset()
    recorder = Recorder() if recording is not None else None
    player = Replay.load(replay) if replay is not None else None
    # the session the strategy needs, as the backend's provider opens it
    # (looked up on the package at each run, where a test may put its own)
    session: Session = backends.open_session(
        spec, sleep=_no_sleep if player is not None else None, recorder=recorder,
        replay=player, model=model, first_turn=first_turn)
    writer = TraceWriter(out)
    writer.add(header(spec, session))  # with what the session says it sends
    try:
        end = run_agent(session, tools, spec.tools if allowed is None else allowed,
                        spec.limits.max_steps, spec.limits.token_budget, writer.add,
                        scope=question_tickers(spec.question)
                        if defences.scope_rule and spec.suite is None else None,
                        delimit=defences.delimit_tool_output, strategy=strategy,
                        refused=refused)
    finally:
        if recorder is not None and recording is not None:
            recorder.write(recording)
    if player is not None:
        player.check_finished()
    writer.close(end)
    return {k: v for k, v in end.to_json().items() if k != "type"}
