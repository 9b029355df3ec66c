# Helpers shared by the rule files: the validated config and the matrix of runs.
import json
import os
import sys
import threading
from pathlib import Path

from snakemake.exceptions import WorkflowError

try:
    from reactlab.config import parse as _parse_config
    from reactlab.core.errors import ConfigError
    from reactlab.core.fingerprint import fingerprints as _fingerprints
    from reactlab.core.joblog import job_log
except ImportError as _exc:
    raise WorkflowError(
        f"cannot import reactlab ({_exc}); run `make run`, which creates the environment"
    )

try:
    RL = _parse_config(config)
except ConfigError as _exc:
    raise WorkflowError(f"invalid configuration: {_exc}") from None

def _clear_stale_locks():
    """Make a plain rerun work after a crash (SIGKILL, power loss).

    Snakemake's own directory lock survives a killed run and then demands `--unlock`.
    An flock held by every live Snakemake process of this project (released by the
    kernel when the process dies, however it dies) tells a stale lock from a live one:
    if nobody holds it, the remaining Snakemake locks are stale and are removed.
    """
    import fcntl

    meta = Path(".snakemake")
    meta.mkdir(exist_ok=True)
    handle = open(meta / "reactlab.flock", "a+")  # not "w": the live run's pid stays
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        pid = handle.read().strip()
        handle.close()  # another run is live here: leave its locks and files alone
        if workflow.is_main_process:
            # Snakemake would see the live run's jobs as "incomplete" and advise
            # --rerun-incomplete, which would rerun files that are being written.
            raise WorkflowError(
                f"another run is active in this folder ({Path.cwd()}"
                + (f", process {pid}" if pid else "") + "); wait for it to finish (or "
                "stop it), then run again. Nothing was changed.")
        return None  # a job's own Snakemake process, under the live run
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    for lock in (meta / "locks").glob("*.lock"):
        lock.unlink()
    _settle_incomplete(meta / "incomplete")
    return handle  # kept open (and locked) until this process exits


def _settle_incomplete(folder):
    """Resolve the "incomplete" marks a killed run left behind.

    Every output of this workflow is published by an atomic rename, so an output file
    that exists is complete even if the run died before Snakemake cleared its mark (a
    trace under results/traces is also checked against its own checksum, and deleted if
    it fails, so that it is regenerated). Marks of files that do not exist are simply dropped.
    """
    import base64

    from reactlab.core.errors import TraceError
    from reactlab.trace import read as read_trace

    for marker in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = "".join(marker.relative_to(folder).parts)
        try:
            path = Path(base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode())
        except (ValueError, UnicodeDecodeError):
            continue  # not a mark we understand: leave it to Snakemake
        if path.parts[:2] == ("results", "traces") and path.is_file():
            try:
                read_trace(path)
            except TraceError:
                path.unlink()
        marker.unlink()


_RUN_LOCK = _clear_stale_locks()


def _check_results():
    """Nothing trusted that was damaged (reactlab.analysis.recovery): with the folder to
    ourselves, remove damaged or orphaned results and what was built from them, so that
    this run regenerates them; report stray files."""
    from reactlab.analysis.recovery import DamagedResult, recover, summary

    costly = [k for k, r in RUNS.items() if r.backend_config.mode == "live"
              and not LIVE.get("replay", False)]
    try:
        found = recover(RUNS, tables=TABLES, figures=FIGURES, viewer=VIEWER, costly=costly)
    except DamagedResult as exc:
        raise WorkflowError(str(exc)) from None
    for line in summary(found):
        print(line, file=sys.stderr)


def _check_disk():
    from reactlab.analysis.recovery import disk_full

    message = disk_full(".")
    if message:
        raise WorkflowError(message)

# The interpreter that runs Snakemake also runs every job (the project's environment).
PY = sys.executable
RUNS = {r.key: r for r in RL.runs}
ID = "[a-z][a-z0-9_]*"

wildcard_constraints:
    task=ID,
    backend=ID,
    scenario=ID + "(/t[0-9]+)?",  # trial i of a run with trials: {scenario}/t{i}


def data_file(kind):
    """The user's own parquet file when present, else the generated one (a missing file
    of another name is an error naming data.<kind>)."""
    from reactlab.config import data_source

    try:
        return data_source(config, kind)
    except ConfigError as exc:
        raise WorkflowError(f"invalid configuration: {exc}") from None


# The code each rule's jobs run, as a rule parameter: a job reruns when that code changes
# (Snakemake's own code trigger sees only the rule text). Each fingerprint hashes the
# entry module and everything it imports in the package (reactlab.core.fingerprint), so
# editing the viewer reruns the viewer only, and editing a tool reruns the runs and,
# through their outputs, everything after them. cli.py (argument parsing) is not part
# of any: the jobs call the functions named here, the `run` command as well.
_PACKAGE = Path(workflow.basedir) / "workflow" / "reactlab"
CODE = _fingerprints(_PACKAGE, {
    "data": "reactlab.data",
    "run": "reactlab.runner",
    "verify": "reactlab.analysis.verify",
    "tables": "reactlab.analysis.tables",
    "figures": ["reactlab.analysis.figures", "reactlab.analysis.trial_figures"],
    "viewer": "reactlab.views.html",
}, cache=".snakemake/reactlab/imports.json")

PRICES = data_file("prices")
NEWS = data_file("news")
GENERATED = [f"data/generated/{Path(config['data'][k]).name}" for k in ("prices", "news")]


def _check_user_data():
    """The user's own data files must be usable (schema, non-empty) before 60 jobs fail
    on them; a warning when they lack the values the lesson pins."""
    if PRICES in GENERATED and NEWS in GENERATED:
        return  # generated from the seed: checked by construction
    from reactlab.core.errors import DataError
    from reactlab.data import check_user_files

    try:
        warnings = check_user_files(
            *(p if p not in GENERATED else None for p in (PRICES, NEWS)))
    except DataError as exc:
        field = "data.prices" if str(exc).startswith(PRICES) else "data.news"
        raise WorkflowError(f"{field}: {exc}") from None
    for line in warnings:
        print(f"reactlab: warning: {line}", file=sys.stderr)

# The model folder the convert_smollm2 rule builds; a local backend naming this path
# gets it as an input. Any other `model` (a folder or a cached id) is the user's.
BUILTIN_MODEL = "data/models/SmolLM2-135M-Instruct"

TRACES = [f"results/traces/{key}.jsonl" for key in RUNS]
VERIFIED = [f"results/verified/{key}.json" for key in RUNS]
TABLE_NAMES = ["runs", "summary_by_scenario", "summary_by_backend", "summary_by_defences",
               "steps", "cumulative_tokens", "trials", "summary_trials", "paired"]
TABLES = [f"results/tables/{name}.csv" for name in TABLE_NAMES]
VIEWER = "results/viewer"
FIGURES = [f"results/figures/{kind}.{ext}" for kind in
           ("cumulative_tokens", "outcomes", "tokens", "defences", "success_rates")
           for ext in ("png", "svg")]

# What the trial tables need beyond the traces (expected calls, pricing, comparisons).
from reactlab.config.trials import analysis_section as _analysis_section

ANALYSIS = json.dumps(_analysis_section(config), sort_keys=True)


def run_spec(wildcards):
    key = f"{wildcards.task}/{wildcards.backend}/{wildcards.scenario}"
    if key not in RUNS:
        raise WorkflowError(f"{key} is not in the matrix of config.yaml")
    return RUNS[key].to_json()


def _backend(wildcards):
    """The typed settings of the job's backend (reactlab.config.settings)."""
    return RUNS[f"{wildcards.task}/{wildcards.backend}/{wildcards.scenario}"].backend_config


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


# Decoding modes that keep a model calling tools until a result without error arrives
# (README "Constrained decoding"): their runs take the most steps.
FORCING_DECODINGS = ("forced", "forced_scored")


def run_priority(wildcards):
    """Longest runs first. Real-model runs hold the machine's lanes for 10-25 s each while
    a simulated run takes milliseconds, and among them the forced-decoding runs make the
    most steps; starting those first keeps one lane from running the last long job alone
    while the other idles (README "Workflow"). Only the order changes: no trace depends
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


if _RUN_LOCK is not None:  # the main run, with the folder to itself
    _check_disk()
    _check_user_data()
    _check_results()


onerror:
    # Snakemake reports a failed metadata write as a permission problem ("ensure write
    # permissions"); when the disk is full, say so.
    from reactlab.analysis.recovery import disk_full as _disk_full

    if _disk_full("."):
        print(f"reactlab: {_disk_full('.')} (not a permission problem)", file=sys.stderr)
