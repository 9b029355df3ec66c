# How a cluster profile packs the pipeline's jobs (docs/cluster.md). Only the config keys
# `cluster_batch` and `cluster_local` (set by workflow/profiles/slurm through --config)
# change anything here; without them the plan is exactly the one of the other rule files.
# The `onstart` check at the end acts only under the SLURM executor.
#
# On a cluster every job costs a submission, a queue wait, a status poll and two nested
# Snakemake starts (sbatch runs Snakemake, whose job step runs Snakemake again with
# srun), about 5 s, while a simulated run takes a tenth of a second. Snakemake's own
# `group:` does not help with the SLURM plugins pinned here: the job step starts every
# member of a group with its own srun and a third nested Snakemake. So:
#
# cluster_batch: N  the simulated and scripted runs (matrix order) are cut into
#     ceil(runs / N) chunks of nearly equal size; one job per chunk (rule run_batch_<i>)
#     writes each run's trace and verification, in one process, with the same code as
#     rules run_agent and verify (same files, byte for byte). Real-model and live runs
#     keep their own jobs, with their declared threads and memory. Snakemake prefers a
#     rule without wildcards, so run_batch_<i> wins over run_agent / verify for its files.
# cluster_local: True  the data generation, tables, figures and viewer (seconds of
#     pandas and matplotlib in all) run in the Snakemake process that submits the jobs,
#     instead of as four more rounds of cluster jobs.

BATCH_SIZE = int(config.get("cluster_batch", 0))


def _chunks(keys, size):
    """``keys`` cut into ceil(len/size) consecutive chunks whose sizes differ by at most
    one."""
    if not keys:
        return []
    n = -(-len(keys) // size)
    base, extra = divmod(len(keys), n)
    out, start = [], 0
    for i in range(n):
        stop = start + base + (1 if i < extra else 0)
        out.append(keys[start:stop])
        start = stop
    return out


def _mode(run):
    """The backend mode of a run (its backend settings as a mapping or as an object)."""
    cfg = run.backend_config
    return cfg["mode"] if isinstance(cfg, dict) else cfg.mode


if BATCH_SIZE > 0:
    BATCHES = _chunks([k for k, r in RUNS.items() if _mode(r) in ("simulated", "scripted")],
                      BATCH_SIZE)

    for _i, _keys in enumerate(BATCHES):

        rule:
            name:
                f"run_batch_{_i}"
            input:
                prices=PRICES,
                news=NEWS,
            output:
                traces=[f"results/traces/{k}.jsonl" for k in _keys],
                verified=[f"results/verified/{k}.json" for k in _keys],
            params:
                # a function: Snakemake would read the JSON's braces as wildcards
                specs=lambda wildcards, keys=_keys: [RUNS[k].to_json() for k in keys],
                code=CODE["run"],
                verify_code=CODE["verify"],
            log:
                runs=[f"results/logs/run/{k}.log" for k in _keys],
                verify=[f"results/logs/verify/{k}.log" for k in _keys],
            run:
                from reactlab.analysis.verify import verify_job
                from reactlab.runner import run_job

                for i, spec in enumerate(params.specs):
                    with job_log(log.runs[i], "run") as say:
                        say(run_job(spec, input.prices, input.news, output.traces[i]))
                    with job_log(log.verify[i], "verify") as say:
                        say(verify_job(output.traces[i], output.verified[i]))


if config.get("cluster_local", False):
    workflow.localrules("generate_data", "tables", "viewer",
                        *(f"figure_{kind}" for kind in FIGURE_SOURCES))


# Longest wait between two status polls of snakemake-executor-plugin-slurm 2.8.0.
SLURM_MAX_POLL_S = 180


def slurm_status_problem(status_command, init_seconds, scontrol_config):
    """Why the SLURM executor would wait forever with this status command on a cluster
    whose `scontrol show config` is ``scontrol_config``; None if it will not.

    The plugin drops the jobs of a status poll that failed, and keeps waiting for a job
    that squeue no longer lists: with sacct, accounting must be on; with squeue, a
    finished job must stay listed (MinJobAge) until the next poll. The plugin itself
    switches from squeue to sacct when MinJobAge < 3 x the first poll delay."""
    settings = {}
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


onstart:
    # Before the first submission (not in a dry run, not in a job): refuse a SLURM set-up
    # that would hang instead of failing (docs/cluster.md).
    _plugin = getattr(workflow, "executor_plugin", None)
    if _plugin is not None and _plugin.name == "slurm":
        import subprocess as _sp

        _settings = workflow.executor_settings
        _proc = _sp.run(["scontrol", "show", "config"], capture_output=True, text=True,
                        timeout=60)
        if _proc.returncode != 0:
            raise WorkflowError(f"`scontrol show config` failed: {_proc.stderr.strip()}")
        _problem = slurm_status_problem(
            _settings.status_command, _settings.init_seconds_before_status_checks or 40,
            _proc.stdout)
        if _problem:
            raise WorkflowError(f"SLURM: {_problem}")
