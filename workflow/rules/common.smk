# Helpers shared by the rule files (the validated config, the matrix of runs, the outputs,
# the recovery step). Functions live here or in the package, never beside the rules.
import difflib
import json
import os
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

try:
    from reactlab import jobs
    from reactlab.analysis import outputs as _outputs
    from reactlab.analysis import recovery as _recovery
    from reactlab.analysis import stamp as _stamp
    from reactlab.config import parse as _parse_config
    from reactlab.core.errors import ConfigError, ReactlabError
    from reactlab.core.fingerprint import fingerprints as _fingerprints
    from reactlab.core.plugins import registry as _plugins
    from reactlab.views.counts import planned as _planned
except ImportError as _exc:
    raise WorkflowError(
        f"cannot import reactlab ({_exc}): run `make env`, which creates the "
        "environment in .venv, then .venv/bin/snakemake"
    )

# A task's MCP server that cannot be listed (its program missing, an error at start)
# leaves the runs of its tasks out of the plan, said here and again at the end; the
# other runs are planned and run (reactlab.config.parse, servers="tolerate").
try:
    RL = _parse_config(config, servers="tolerate")
except ConfigError as _exc:
    raise WorkflowError(f"invalid configuration: {_exc}") from None

RUNS = {r.key: r for r in RL.runs}
LEFT_OUT = {key: left for left in RL.left_out for key in left.runs}
if workflow.is_main_process:
    jobs.warn_left_out(RL)


onsuccess:
    jobs.warn_left_out(RL, ended=True)


ID = "[a-z][a-z0-9_]*"

wildcard_constraints:
    task=ID,
    backend=ID,
    scenario=f"{ID}(/t[0-9]+)?",  # trial i of a run with trials: {scenario}/t{i}


def data_file(kind):
    """The user's own parquet file when present, else the generated one (a missing file
    of another name is an error naming data.<kind>)."""
    from reactlab.config import data_source

    try:
        return data_source(config, kind)
    except ConfigError as exc:
        raise WorkflowError(f"invalid configuration: {exc}") from None


# The code the jobs run, as a parameter of each rule: a job reruns when that code changes
# (Snakemake's own code trigger sees only the rule text). Each fingerprint hashes the
# entry module and everything it imports in the package (reactlab.core.fingerprint), so
# editing the viewer reruns the viewer only, and editing a tool reruns the runs and,
# through their outputs, everything after them. cli.py (argument parsing) and jobs.py
# (each job's log and process) are not part of any: they call the functions named here.
#
# The one file this writes while parsing is a cache, .snakemake/reactlab/imports.json:
# the reactlab imports found in each source file, keyed by its path and sha256 (never
# stale), shared with SUITE_CODE (suites.smk). It pays in every Snakemake start, each
# cluster job's included: the two fingerprint calls parse the package's 99 files in
# 0.22 s each without it, 0.014 s with it; `snakemake -n` on config.yaml took 1.56-1.66 s
# with it and 1.83-1.99 s without (2026-12-02; docs/workflow.md, "What parsing does").
_PACKAGE = Path(workflow.basedir) / "workflow" / "reactlab"
CODE = _fingerprints(_PACKAGE, {
    "data": "reactlab.data",
    "sqlite": "reactlab.data.sqlite",
    "verify": "reactlab.analysis.verify",
    "tables": "reactlab.analysis.tables",
    "figures": "reactlab.analysis.outputs",  # the registry: figures, trial_figures
    "viewer": "reactlab.views.html",
    "export_inspect": "reactlab.export.inspect_log",
    "export_otel": "reactlab.export.otel",
}, cache=".snakemake/reactlab/imports.json")


def _entry_modules(spec):
    """The modules of a run's own plugin entries (its provider; its agent, when it is a
    framework): their code is part of its fingerprint, no other entry's is."""
    modules = [_plugins("provider").module(spec.backend_config.provider)]
    if spec.framework is not None:
        modules.append(_plugins("agent").module(spec.framework.framework))
    if spec.tool_source is not None:
        modules.append(_plugins("tool source").module(spec.tool_source.plugin))
    return tuple(m for m in modules if m is not None)


# The code of each run: the runner's and its own entries' (reactlab.core.plugins), one
# fingerprint per distinct set of entries.
_RUN_ENTRIES = {key: _entry_modules(spec) for key, spec in RUNS.items()}
_RUN_CODE = _fingerprints(_PACKAGE, {
    ",".join(mods): ["reactlab.runner", *mods] for mods in set(_RUN_ENTRIES.values())
}, cache=".snakemake/reactlab/imports.json")


def run_code(key):
    """The code fingerprint of run ``key`` (a job's ``code`` parameter)."""
    return _RUN_CODE[",".join(_RUN_ENTRIES[key])]


def batch_code(keys):
    """The code fingerprint of a batch of runs (a cluster job): each run's, in order."""
    return ",".join(run_code(k) for k in keys)


PRICES = data_file("prices")
NEWS = data_file("news")
GENERATED = [f"data/generated/{Path(config['data'][k]).name}" for k in ("prices", "news")]


def _check_user_data():
    """The user's own data files must be usable (schema, non-empty) before 60 jobs fail
    on them; warnings when they lack the values the lesson pins."""
    if PRICES in GENERATED and NEWS in GENERATED:
        return []  # generated from the seed: checked by construction
    from reactlab.core.errors import DataError
    from reactlab.data import check_user_files

    try:
        return check_user_files(*(p if p not in GENERATED else None for p in (PRICES, NEWS)))
    except DataError as exc:
        field = "data.prices" if str(exc).startswith(PRICES) else "data.news"
        raise DataError(f"{field}: {exc}") from None

# The model folder the convert_smollm2 rule builds; a local backend naming this path
# gets it as an input. Any other `model` (a folder or a cached id) is the user's.
BUILTIN_MODEL = "data/models/SmolLM2-135M-Instruct"

TRACES = [f"results/traces/{key}.jsonl" for key in RUNS]
VERIFIED = [f"results/verified/{key}.json" for key in RUNS]
# The tables and figures: one registry (reactlab.analysis.outputs), read by the CLI too.
TABLES_DIR = "results/tables"
# (mcp_poisoning too when a run's tools come from the poisoned MCP server: docs/mcp.md)
_TABLE_KINDS = _outputs.tables_for(RL.runs)
TABLES = _outputs.table_paths(RL.runs)
TABLE_OUTPUTS = {t.name: report(t.path, caption=f"../report/{t.caption}.rst",
                                category="Tables") for t in _TABLE_KINDS}
# the key tables' LaTeX twins (booktabs), written by the same job (reactlab.analysis.latex)
TABLE_OUTPUTS.update({f"{t.name}_tex": t.latex_path for t in _TABLE_KINDS if t.latex})
FIGURE_KINDS = list(_outputs.FIGURES.values())
FIGURES = _outputs.figure_paths()
VIEWER = "results/viewer"


def figure_report(figure, ext, category="Figures"):
    """A figure's PNG or SVG output, annotated for `snakemake --report`."""
    path = {"png": figure.paths[0], "svg": figure.paths[1]}[ext]
    return report(path, caption=f"../report/{figure.caption}.rst", category=category,
                  labels={"figure": figure.kind, "format": ext})

# What the trial tables need beyond the traces (expected calls, pricing, comparisons).
from reactlab.config.trials import analysis_section as _analysis_section

ANALYSIS = json.dumps(_analysis_section(config), sort_keys=True)


def not_planned(what, name, planned):
    """One line: ``name`` is no ``what`` of the config, the nearest that are, and how to
    list them all."""
    near = difflib.get_close_matches(name, planned, n=3, cutoff=0.6) or sorted(planned)[:3]
    return (f"{name} is not a {what} of the config ({len(planned)} planned; nearest: "
            f"{', '.join(near) or 'none'}); `snakemake -n` lists every job, `python -m "
            "reactlab check --list [--configfile OVERLAY]` every run")


# A target on the command line that names a run or a shard the config does not plan:
# Snakemake would ask the rules' input functions for its settings and print their
# KeyError as a traceback; the Snakefile refuses it first, in one line.
_RUN_TARGET = re.compile(r"(?:\./)?results/(?:traces|verified)/(.+?)\.jsonl?")
_SHARD_TARGET = re.compile(r"(?:\./)?results/suites/[^/]+/shards/([^/]+)\.(?:traces|verified)\.json")


def unplanned_target(argv):
    """The error for the first target in ``argv`` (Snakemake's command line) outside the
    matrix or the suites' shards, None when every target is planned."""
    for arg in argv:
        if (m := _RUN_TARGET.fullmatch(arg)) and m.group(1) in LEFT_OUT:
            return f"{arg}: {LEFT_OUT[m.group(1)].line()}"
        if (m := _RUN_TARGET.fullmatch(arg)) and m.group(1) not in RUNS:
            return f"{arg}: {not_planned('run', m.group(1), RUNS)}"
        if (m := _SHARD_TARGET.fullmatch(arg)) and m.group(1) not in SUITE_BY_ID:
            return f"{arg}: {not_planned('suite shard', m.group(1), SUITE_BY_ID)}"
    return None


def _run(wildcards):
    """The planned run of a job's wildcards (reactlab.config.RunSpec)."""
    key = f"{wildcards.task}/{wildcards.backend}/{wildcards.scenario}"
    try:
        return RUNS[key]
    except KeyError:
        raise WorkflowError(not_planned("run", key, RUNS)) from None


def run_spec(wildcards):
    return _run(wildcards).to_json()


def _backend(wildcards):
    """The typed settings of the job's backend (reactlab.config.settings)."""
    return _run(wildcards).backend_config


def model_input(wildcards):
    """The converted default model, for runs of a local model backend that use it."""
    cfg = _backend(wildcards)
    return [BUILTIN_MODEL] if cfg.mode == "model" and cfg.model == BUILTIN_MODEL else []


def run_threads(wildcards):
    """Cores a run job reserves. A model job runs torch on `threads` but reserves two of
    Snakemake's cores per torch thread, so that `--cores 4` on this 2-core machine runs
    at most two model jobs at once, one per physical core."""
    cfg = _backend(wildcards)
    return 2 * cfg.threads if cfg.mode == "model" else 1


# The suite shards' rules (workflow/rules/suites.smk) read their shard by its id.
def _suite_shard(wildcards):
    """The planned shard (reactlab.suites.types.Shard) named by the job's wildcards."""
    try:
        return SUITE_BY_ID[wildcards.shard]
    except KeyError:
        raise WorkflowError(not_planned("suite shard", wildcards.shard, SUITE_BY_ID)) from None


def suite_live(wildcards):
    """A live API's shard: "record" (its exchanges recorded beside the traces) or, with
    `live: {replay: true}`, "replay"; "" for any other shard."""
    if not _suite_shard(wildcards).live:
        return ""
    return "replay" if LIVE.get("replay", False) else "record"


def suite_run_code(wildcards):
    """The code a shard runs, except for a recording live shard: as for a live run of the
    matrix (run.smk), editing the code never re-buys API calls (a replay shard has it)."""
    if suite_live(wildcards) == "record":
        return ""
    return SUITE_CODE[f"run_{_benchmark_of(_suite_shard(wildcards))}"]


def suite_model_input(wildcards):
    """The converted default model, for the shards of a model backend that uses it."""
    cfg = _suite_shard(wildcards).specs[0].backend_config
    return [BUILTIN_MODEL] if getattr(cfg, "model", None) == BUILTIN_MODEL else []


def suite_threads(wildcards):
    """A model shard reserves two of Snakemake's cores per torch thread (run_threads)."""
    shard = _suite_shard(wildcards)
    return 2 * int(getattr(shard.specs[0].backend_config, "threads", 1)) if shard.model else 1


# Decoding modes that keep a model calling tools until a result without error arrives
# (docs/local-models.md): their runs take the most steps.
FORCING_DECODINGS = ("forced", "forced_scored")


def run_priority(wildcards):
    """Longest runs first. Real-model runs hold the machine's lanes for 10-25 s each while
    a simulated run takes milliseconds, and among them the forced-decoding runs make the
    most steps; starting those first keeps one lane from running the last long job alone
    while the other idles (docs/workflow.md). Only the order changes: no trace depends
    on it."""
    cfg = _backend(wildcards)
    if cfg.mode != "model":
        return 0
    return 2 if cfg.decoding in FORCING_DECODINGS else 1


# Live backends (real APIs). They are in RUNS only with `live: {enabled: true}`; with
# `replay: true` their traces are rebuilt offline from results/recordings/.
LIVE = config.get("live", {})
LIVE_BACKENDS = sorted(b for b, c in config["backends"].items() if c["mode"] == "live")
OFFLINE_BACKENDS = sorted(b for b in config["backends"] if b not in LIVE_BACKENDS)


# One resource per registered HTTP provider, 1 for a live job of that provider: cap
# parallel calls with --resources openai_slots=N (reactlab.backends.registry).
from reactlab.backends.registry import slot_resources as _slot_resources

PROVIDER_SLOTS = _slot_resources(lambda wildcards: _backend(wildcards).provider)

if LIVE.get("replay", False):
    _missing = [key for key, spec in RUNS.items() if spec.backend in LIVE_BACKENDS
                and not Path(f"results/recordings/{key}.jsonl").is_file()]
    if _missing:
        raise WorkflowError(
            f"live.replay is on but {len(_missing)} live run(s) have no recording, e.g. "
            f"results/recordings/{_missing[0]}.jsonl: run them live first "
            "(--configfile workflow/configs/live.yaml) or copy the recordings here")


onerror:
    # Snakemake reports a failed metadata write as a permission problem ("ensure write
    # permissions"); when the disk is full, say so.
    from reactlab.analysis.recovery import disk_full as _disk_full

    if _disk_full("."):
        print(f"reactlab: {_disk_full('.')} (not a permission problem)", file=sys.stderr)


# Tasks whose tools come from an MCP server (docs/mcp.md): their runs record the exchange
# with the server beside the trace (run_mcp), or, for a server set to replay, are answered
# from that recording (replay_mcp). Every other task runs the project's tools (run_agent).
MCP_SERVERS = config.get("mcp_servers") or {}
from reactlab.config.mcp import task_servers as _task_servers

# (a task of several servers, `mcp_servers`, is keyed by its first: it never replays)
_MCP_TASKS = {t: _task_servers(c)[0] for t, c in config["tasks"].items() if _task_servers(c)}
MCP_RECORD_TASKS = sorted(t for t, s in _MCP_TASKS.items()
                          if not MCP_SERVERS.get(s, {}).get("replay", False))
from reactlab.config.mcp import replay_tasks as _replay_tasks
MCP_REPLAY_TASKS = _replay_tasks(config)
TOOLBOX_TASKS = sorted(t for t in config["tasks"] if t not in _MCP_TASKS)


def task_pattern(names):
    """A wildcard constraint matching exactly these task names (none: nothing)."""
    return "|".join(map(re.escape, names)) or "(?!)"


def mcp_files(wildcards):
    """The files the run's MCP server works on (each run gets its own copy of them)."""
    spec = _run(wildcards)
    return sorted({f for p in spec.mcp.parts() for f in p.files.values()}) \
        if spec.mcp is not None else []
