"""The body of each Snakemake rule: one function per rule, called from its ``run:`` block.

A rule's ``run:`` block is one call to a function here (``snakemake --lint`` wants short
``run:`` blocks; docs/workflow.md, "Recovery and lints"). Each function writes the job's
log through :func:`reactlab.core.joblog.job_log` (jobs run as threads of the Snakemake
process with the default profile) and calls the package function the CLI calls too.
A job that must have its own process (a real-model run: torch on its own threads; a
live run) runs ``python -m reactlab`` with the same interpreter and copies that
process's output into the log and onto stderr.

Like ``cli.py``, this is application glue: the rules' ``code`` fingerprints cover the
package functions called here, not this module (editing it reruns nothing).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import IO, Any

from reactlab import data
from reactlab.analysis import outputs, recovery, stats
from reactlab.analysis import tables as tablesmod
from reactlab.analysis.figures import manifest_path
from reactlab.analysis.outputs import draw
from reactlab.analysis.verify import verify_job
from reactlab.config import Config, RunSpec
from reactlab.config.trials import MIN_TRIALS
from reactlab.core.errors import CommandFailed, ConfigError, UsageError
from reactlab.core.io import write_text_atomic
from reactlab.core.joblog import job_log
from reactlab.data import sqlite
from reactlab.export import damaged_exports, inspect_log, otel
from reactlab.runner import run_job
from reactlab.suites.registry import benchmark as registered
from reactlab.suites.registry import figures as suite_figures
from reactlab.suites.registry import run_case, suite_record
from reactlab.suites.run import run_shard
from reactlab.suites.score import verify_shard
from reactlab.suites.shards import listed, publish, shards_of, spec_file, table_paths, write_latex
from reactlab.suites.shards import recover as recover_shards
from reactlab.suites.types import recording_path, spec_traces, verified_path
from reactlab.trace.integrity import check_manifest
from reactlab.views import html

#: pyplot keeps global state: figure jobs that run as threads draw one at a time.
FIGURE_LOCK = threading.Lock()

#: The variables through which numerical libraries pick their thread count; a job in its
#: own process gets the rule's ``threads`` in each (as Snakemake's ``shell`` sets them).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


#: How many of a failed command's last log lines its error repeats.
FAILED_TAIL = 20


def own_process(args: Sequence[str], log: str | Path, threads: int = 1, *,
                module: str = "reactlab") -> None:
    """Run ``python -m MODULE ARGS`` with this interpreter; its output (stdout and
    stderr: progress bars and library warnings included) goes to ``log`` only, so the
    run's terminal shows one line per stage. :class:`CommandFailed` when it fails, with
    the log's last lines."""
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **dict.fromkeys(THREAD_VARIABLES, str(threads))}
    cmd = [sys.executable, "-m", module, *args]
    with open(log, "w", encoding="utf-8") as fh:
        code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                              check=False).returncode
    if code != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-FAILED_TAIL:]
        raise CommandFailed(f"`{module} {args[0]}` exited with status {code}; its output "
                            f"is in {log}, ending:\n" + "\n".join(tail))


def generate_data(prices: str, seed: int, log: str) -> None:
    """Rule generate_data: the synthetic parquet files, beside ``prices``."""
    with job_log(log, "data") as say:
        written = data.write(Path(prices).parent, seed)
        say(f"wrote {written[0]} and {written[1]} (seed {seed})")


def convert_model(out: str, log: str, threads: int) -> None:
    """Rule convert_smollm2: the default GGUF model to a safetensors folder (own
    process: it loads torch)."""
    own_process(["convert-model", "--out", out], log, threads)


def needs_own_process(spec: str) -> bool:
    """Whether a run job gets its own process: a real-model run (torch on the threads the
    job reserved)."""
    return RunSpec.from_json(spec).backend_config.mode == "model"


def run_agent(spec: str, prices: str, news: str, out: str, log: str, threads: int = 1, *,
              recording: str | None = None, replay: str | None = None,
              tools_recording: str | None = None, tools_replay: str | None = None) -> None:
    """Rules run_agent, run_live, replay_live, run_mcp and replay_mcp: one run, its trace
    at ``out`` (``tools_recording`` / ``tools_replay``: its MCP server's exchange). A
    real-model run or a live one has its own process; any other is a thread here."""
    if recording is not None or replay is not None or needs_own_process(spec):
        args = ["run", "--spec", spec, "--prices", prices, "--news", news, "--out", out]
        for flag, value in (("--recording", recording), ("--replay", replay),
                            ("--tools-recording", tools_recording),
                            ("--tools-replay", tools_replay)):
            if value is not None:
                args += [flag, value]
        own_process(args, log, threads)
        return
    with job_log(log, "run") as say:
        say(run_job(spec, prices, news, out, tools_recording=tools_recording,
                    tools_replay=tools_replay))


def sqlite_db(prices: str, news: str, out: str, log: str) -> None:
    """Rule sqlite_db: the prices and news as a SQLite database (:mod:`reactlab.data.sqlite`)."""
    with job_log(log, "data") as say:
        say(f"wrote {sqlite.write(prices, news, out)}")


def verify(trace: str, out: str, log: str) -> None:
    """Rule verify: check one trace's final answer, write its verification."""
    with job_log(log, "verify") as say:
        say(verify_job(trace, out))


def latex_tables() -> list[str]:
    """The key tables, written as LaTeX beside their CSV (``Table.latex``; a conditional
    one when it is built: :func:`reactlab.analysis.outputs.latex_names`)."""
    return outputs.latex_names()


def tables(traces: Sequence[str], verified: Sequence[str], figure: str, analysis: str,
           out_dir: str, log: str) -> None:
    """Rule tables: every table of :data:`reactlab.analysis.outputs.TABLES` into
    ``out_dir`` (``figure`` and ``analysis``: the config sections as JSON)."""
    with job_log(log, "tables") as say:
        written = tablesmod.build(zip(traces, verified, strict=True), json.loads(figure),
                                  out_dir, json.loads(analysis), latex=latex_tables())
        say(f"wrote {len(written)} tables (CSV, and LaTeX for the key ones) to {out_dir}")


def figure(kind: str, table: str, png: str, figure: str, log: str) -> None:
    """Rules figure_<kind>: draw ``kind`` (PNG and SVG) from its table (a lesson's figure,
    or a benchmark's: :func:`reactlab.suites.registry.figures`)."""
    with job_log(log, "figure") as say, FIGURE_LOCK:
        draw(kind, table, png, json.loads(figure), suite_figures().values())
        say(f"drew {png} and {Path(png).with_suffix('.svg')}")


def viewer(traces: Sequence[str], verified: Sequence[str], out: str, log: str, *,
           suite_manifests: Sequence[str] = (), suite_tables: Sequence[str] = (),
           min_trials: int = MIN_TRIALS) -> None:
    """Rule viewer: the static HTML pages (lesson runs and suite cases) and their index;
    the suite cases are those the shards' trace ``suite_manifests`` list (each
    verification read beside its trace)."""
    suite_traces = [t for m in suite_manifests for t in listed(m)]
    with job_log(log, "viewer") as say:
        written = html.build(zip(traces, verified, strict=True), out,
                             suite_pairs=((t, verified_path(t)) for t in suite_traces),
                             suite_tables=suite_tables, min_trials=min_trials)
        say(f"wrote {written[0]}, {len(traces)} run pages and {len(suite_traces)} suite "
            "case pages")


def remove_damaged_exports(folders: Sequence[str], *, apply: bool = True) -> list[str]:
    """An export folder edited or damaged after it was published is removed (with
    ``apply``), so that the next ``exports`` target rebuilds it. Returns the messages."""
    messages = []
    for folder, problem in damaged_exports(folders):
        messages.append(f"{problem}: {folder} will be rebuilt")
        if apply:
            shutil.rmtree(folder)
    return messages


def export(kind: str, traces: Sequence[str], verified: Sequence[str], out: str,
           log: str) -> None:
    """Rules export_inspect / export_otel: every run as Inspect logs or OTel spans."""
    module = {"inspect": inspect_log, "otel": otel}[kind]
    with job_log(log, "export") as say:
        say(module.export_job(traces, verified, out))


#: Snakemake options that only look at the folder (never run a job): under them, as under
#: ``-n``, recovery checks and reports but removes nothing.
INSPECTING_OPTIONS = ("--lint", "--summary", "--detailed-summary", "--list-rules",
                      "--list-target-rules", "--list-changes", "--list-code-changes",
                      "--list-input-changes", "--list-params-changes", "--list-untracked",
                      "--report", "--dag", "--rulegraph", "--filegraph", "--d3dag",
                      "--unlock", "--cleanup-metadata", "--print-compilation",
                      "--delete-all-output", "--delete-temp-output", "--touch")


def executes(dryrun: bool, argv: Sequence[str] = ()) -> bool:
    """Whether this Snakemake invocation runs jobs: not under ``-n``
    (``workflow.output_settings.dryrun``, which Snakemake sets before it parses the
    Snakefile) nor an option that only inspects the folder (:data:`INSPECTING_OPTIONS`,
    read from ``argv`` before a ``--``; ``-t`` is ``--touch``)."""
    if dryrun:
        return False
    for arg in argv:
        if arg == "--":
            break
        if arg.split("=", 1)[0] in INSPECTING_OPTIONS or arg == "-t":
            return False
    return True


def recover(*, runs: Sequence[Any], tables: Sequence[str], figures: Sequence[str],
            viewer: str, live_replay: bool = False,
            check_data: Callable[[], list[str]] | None = None,
            suite_shards: Sequence[Any] = (), suite_figures: Sequence[Any] = (),
            exports: Sequence[str] = (), apply: bool = True,
            mcp_replay: Collection[str] | None = None) -> IO[str]:
    """The one recovery step, before a run plans its jobs (the Snakefile's main process)
    and by hand (``reactlab recover``): take the folder's lock, check the disk and the
    user's data, then check every published result — the runs' traces, verifications,
    tables, figures and viewer (:func:`reactlab.analysis.recovery.start`), each suite
    shard's manifests and its benchmark's tables (:func:`reactlab.suites.shards.recover`),
    the suite figures, the exports — and remove what is damaged with what was built from
    it. ``apply=False`` (a dry run) checks the same and removes nothing: the messages say
    what a run would do. ``mcp_replay``: the tasks whose MCP server is set to replay (None:
    not known; then a damaged MCP recording is never removed). Returns the lock's open
    file (keep it for the run)."""
    def say(line: str) -> None:
        print(line, file=sys.stderr)

    costly = [r.key for r in runs if r.backend_config.mode == "live" and not live_replay]
    # the runs that record their exchange with an MCP server (the lesson loop's, and a
    # framework's own client's through its relay), and whether their server replays
    mcp = {r.key: None if mcp_replay is None else r.task in mcp_replay for r in runs
           if r.mcp is not None}
    lock = recovery.start([r.key for r in runs], tables=tables, figures=figures,
                          viewer=viewer, costly=costly, check_data=check_data, say=say,
                          apply=apply, mcp=mcp)
    prefix = "reactlab: " if apply else "reactlab: dry run, nothing removed: "
    try:
        lines: list[str] = []
        for shards in shards_of(suite_shards).values():
            lines += recover_shards(shards, table_paths(shards), apply=apply)
        lines += remove_damaged_figures(suite_figures, apply=apply)
        lines += remove_damaged_exports(exports, apply=apply)
    except BaseException:
        lock.close()
        raise
    for line in lines:
        say(prefix + line)
    return lock


def remove_damaged_figures(figures: Sequence[Any], tables_dir: str = "results/tables", *,
                           apply: bool = True) -> list[str]:
    """A suite figure (:class:`reactlab.analysis.figure_kinds.Figure`) edited or damaged after
    it was drawn, or whose source table is gone (the suite recovery removed it), is
    removed (with ``apply``) so that it is drawn again. Returns the messages."""
    messages = []
    for figure in figures:
        png, svg = (Path(p) for p in figure.paths)
        if not (png.exists() or svg.exists()):
            continue
        problems = check_manifest(manifest_path(png), png.parent)
        table = Path(tables_dir) / f"{figure.source}.csv"
        if problems or not table.exists():
            reason = problems[0] if problems else f"{table} will be rebuilt"
            messages.append(f"{png}: {reason}: the figure will be redrawn")
            if apply:
                for p in (png, svg, manifest_path(png)):
                    p.unlink(missing_ok=True)
    return messages


def suite_run(specs_json: str, manifest: str, log: str, *, model: bool,
              threads: int = 1, live: str | None = None) -> None:
    """Rule suite_run: one shard of cases through the loop, one trace per case, then the
    shard's trace manifest (reactlab.suites.shards), the job's only declared output. The
    shard's specs are written first, beside the manifest (``{shard}.json``): a model
    shard runs in its own process from that file (the model is loaded once per shard).
    ``live``: a live API's shard, ``record`` (each case's HTTP exchanges recorded beside
    its trace, :func:`reactlab.suites.types.recording_path`) or ``replay`` (each case
    answered from that recording: no key, no network)."""
    spec = spec_file(manifest)
    write_text_atomic(spec, specs_json)
    traces = spec_traces(specs_json)
    if model:
        own_process([str(spec)], log, threads, module="reactlab.suites.shard_job")
        publish(manifest, traces)
        return
    recordings = [recording_path(t) for t in traces] if live is not None else None
    with job_log(log, "suite-run") as say:
        say(run_shard(specs_json, traces, run_case, recordings=recordings,
                      replay=live == "replay"))
        publish(manifest, traces)


def suite_verify(traces_manifest: str, manifest: str, log: str) -> None:
    """Rule suite_verify: each case of a shard (the traces its trace manifest lists)
    scored by the benchmark's own checker, then the shard's verification manifest (the
    job's only declared output)."""
    traces = listed(traces_manifest)
    verified = [verified_path(t) for t in traces]
    with job_log(log, "suite-verify") as say:
        say(verify_shard(traces, verified, suite_record))
        publish(manifest, verified)


def suite_tables(benchmark: str, manifests: Sequence[str], out_dir: str, log: str,
                 min_trials: int = MIN_TRIALS) -> None:
    """Rules suite_tables_{benchmark} (one per registered benchmark in the config): the
    benchmark's tables (:attr:`reactlab.suites.registry.Benchmark.tables`) from every
    case the shards' trace ``manifests`` list (each verification read beside its
    trace); a rate's interval needs ``min_trials`` runs (:func:`stats.suite_min_trials`)."""
    entry = registered(benchmark)
    traces = [t for m in manifests for t in listed(m)]
    with job_log(log, "suite-tables") as say, stats.suite_min_trials(min_trials):
        written = entry.build_tables(((t, verified_path(t)) for t in traces), Path(out_dir))
        tex = [p.name for p in write_latex(written)]  # the twins (booktabs) of its tables
        say(f"wrote {', '.join(sorted(written))} and {', '.join(tex) or 'no LaTeX'} to {out_dir}")


def chunks(keys: Sequence[str], size: int) -> list[list[str]]:
    """``keys`` cut into ceil(len/size) consecutive chunks whose sizes differ by at most
    one (the cluster profile's run batches: workflow/rules/cluster.smk)."""
    if not keys:
        return []
    n = -(-len(keys) // size)
    base, extra = divmod(len(keys), n)
    out, start = [], 0
    for i in range(n):
        stop = start + base + (1 if i < extra else 0)
        out.append(list(keys[start:stop]))
        start = stop
    return out


def run_batch(specs: Sequence[str], prices: str, news: str, traces: Sequence[str],
              verified: Sequence[str], run_logs: Sequence[str],
              verify_logs: Sequence[str], *,
              tools: Sequence[tuple[str | None, str | None]] | None = None) -> None:
    """Rules run_batch_*: a chunk of simulated or scripted runs and their verifications in
    one process, with the code of rules run_agent, run_mcp, replay_mcp and verify (same
    files, byte for byte). ``tools``: per run, the MCP recording it writes and the one
    it replays (None, None for a run on the project's tools)."""
    for i, spec in enumerate(specs):
        recording, replay = tools[i] if tools is not None else (None, None)
        with job_log(run_logs[i], "run") as say:
            say(run_job(spec, prices, news, traces[i], tools_recording=recording,
                        tools_replay=replay))
        with job_log(verify_logs[i], "verify") as say:
            say(verify_job(traces[i], verified[i]))


def onstart(workflow: Any, *, suites: bool, config: Config | None = None,
            scontrol: Callable[[], str] | None = None) -> None:
    """The checks of ``onstart`` (workflow/rules/cluster.smk): before the first job, not
    in a dry run, not in a job's own process. ``workflow`` is Snakemake's (its storage
    settings, executor plugin and executor settings are read); ``suites``: whether the
    config plans outside-suite shards; ``config``: the planned config, whose MCP servers'
    cached tool lists are checked (:func:`check_tool_lists`). ``scontrol`` returns the
    text of ``scontrol show config`` (default: :func:`scontrol_show_config`).

    - The suites' shard jobs declare only their checksum manifests and write the per-case
      traces beside them (docs/suites.md): they need the working folder shared by every
      job. A default storage provider (the Kubernetes profile) moves declared files only,
      so the traces would stay in the job's pod: :class:`ConfigError` instead of losing
      them.
    - Under the SLURM executor, a status command that would leave the run waiting forever
      (:func:`slurm_status_problem`; docs/cluster.md) is a :class:`UsageError` naming the
      fix; ``scontrol`` failing is a :class:`CommandFailed`.

    Snakemake reports either as it reports a ``WorkflowError`` raised there: the class,
    the message, and the run stops before any job."""
    storage = workflow.storage_settings.default_storage_provider
    if suites and storage:
        raise ConfigError(
            "suites", "a shard writes its traces beside its manifest, which a default "
            f"storage provider ({storage}) does not carry between jobs; run the suites "
            "where the jobs share the working folder (locally, or the SLURM profile), or "
            "leave `suites:` out")
    if config is not None:
        check_tool_lists(workflow, config, sys.argv[1:])
    plugin = getattr(workflow, "executor_plugin", None)
    if plugin is None or plugin.name != "slurm":
        return
    settings = workflow.executor_settings
    problem = slurm_status_problem(settings.status_command,
                                   settings.init_seconds_before_status_checks or 40,
                                   (scontrol or scontrol_show_config)())
    if problem:
        raise UsageError(f"SLURM: {problem}")


def warn_left_out(config: Config, *, ended: bool = False) -> None:
    """One warning line on stderr per MCP server whose runs the plan left out
    (:attr:`reactlab.config.Config.left_out`): at planning, and again when the run has
    ``ended`` (``onsuccess``), where it is not lost in the jobs' output."""
    for left in config.left_out:
        print(f"reactlab: warning: {'not run: ' if ended else ''}{left.line()}",
              file=sys.stderr)


#: A run's trace among a job's outputs: its run key.
_TRACE = re.compile(r"(?:\./)?results/traces/(.+)\.jsonl")


def check_tool_lists(workflow: Any, config: Config, argv: Sequence[str]) -> None:
    """The MCP check of ``onstart``, before the first job: each stdio server whose
    planned tool list came from the cache, and some of whose runs are about to run, is
    listed once (:func:`reactlab.config.mcp.stale_cache`). A list that is no longer the
    planned one (a change the cache key does not see) would fail every such job, after
    Snakemake removed its outputs: instead the stale list is removed, nothing runs and
    nothing is removed, and the ConfigError names the command that plans again with the
    new tools (``argv``: Snakemake's command line). ``workflow`` is Snakemake's."""
    from reactlab.config.mcp import servers, stale_cache  # lazy: only when jobs run

    runs = {r.key: r for r in config.runs}
    pending: dict[str, list[str]] = {}
    hashes: dict[str, str] = {}
    for job in workflow.dag.needrun_jobs():
        for out in job.output:
            found = _TRACE.fullmatch(str(out))
            key = found.group(1) if found else ""
            mcp = runs[key].mcp if key in runs else None
            for part in mcp.parts() if mcp is not None else ():  # every server of the task
                if part.server in config.cached_servers:
                    pending.setdefault(part.server, []).append(key)
                    hashes[part.server] = part.tools_hash
    settings = servers(config.raw)
    for name, keys in sorted(pending.items()):
        if settings[name].replay:
            continue
        removed = stale_cache(settings[name], name, hashes[name])
        if removed is not None:
            command = shlex.join([sys.executable, "-m", "snakemake", *argv])
            raise ConfigError(
                f"mcp_servers.{name}",
                f"its tools are not the ones this plan read from the cache ({removed}), "
                "a change its cache key does not see (name the path under `watch`); no "
                f"job ran and no result was removed. The stale list is removed: `{command}` "
                f"plans its {len(set(keys))} run(s) with the server's tools and runs them")


def scontrol_show_config(timeout: float = 60) -> str:
    """The output of ``scontrol show config`` (the SLURM controller's settings);
    :class:`CommandFailed` when it cannot run or fails."""
    try:
        proc = subprocess.run(["scontrol", "show", "config"], capture_output=True,
                              text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandFailed(f"`scontrol show config` did not run: {exc}") from None
    if proc.returncode != 0:
        raise CommandFailed(f"`scontrol show config` failed: {proc.stderr.strip()}")
    return proc.stdout


# Longest wait between two status polls of snakemake-executor-plugin-slurm 2.8.0.
SLURM_MAX_POLL_S = 180


def slurm_status_problem(status_command: str, init_seconds: int,
                         scontrol_config: str) -> str | None:
    """Why the SLURM executor would wait forever with this status command on a cluster
    whose `scontrol show config` is ``scontrol_config``; None if it will not.

    The plugin drops the jobs of a status poll that failed, and keeps waiting for a job
    that squeue no longer lists: with sacct, accounting must be on; with squeue, a
    finished job must stay listed (MinJobAge) until the next poll. The plugin itself
    switches from squeue to sacct when MinJobAge < 3 x the first poll delay."""
    settings: dict[str, str] = {}
    for line in scontrol_config.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            settings[key.strip()] = value.strip()
    accounting = settings.get("AccountingStorageType", "")
    age_text = settings.get("MinJobAge", "").split()
    min_age = int(age_text[0]) if age_text and age_text[0].isdigit() else None
    no_accounting = accounting in ("", "(null)", "accounting_storage/none")
    if status_command == "squeue" and (min_age is None or min_age < 3 * init_seconds):
        status_command = "sacct"  # what the plugin then uses instead
    if status_command == "sacct" and no_accounting:
        return ("job status would be asked with sacct, but this cluster has no accounting "
                f"(AccountingStorageType={accounting or 'unset'}): every query fails and "
                "the run waits forever. Use --slurm-status-command squeue (the profile's "
                "setting) with MinJobAge >= 180 s in slurm.conf, or enable slurmdbd.")
    if status_command == "squeue" and min_age is not None and min_age < SLURM_MAX_POLL_S:
        return (f"job status is asked with squeue, but MinJobAge={min_age} s: a finished "
                f"job leaves squeue before the next poll (up to {SLURM_MAX_POLL_S} s) and "
                "the run waits for it forever. Ask for MinJobAge >= 180 s, or use "
                "--slurm-status-command sacct on a cluster with accounting (slurmdbd).")
    return None
