# How a cluster profile packs the pipeline's jobs (docs/cluster.md). Only the config keys
# `cluster_batch` and `cluster_local` (set by workflow/profiles/slurm through --config)
# change anything here; without them the plan is exactly the one of the other rule files.
# The `onstart` check at the end acts only under the SLURM executor or a default
# storage provider.
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
#     rules run_agent / run_mcp / replay_mcp and verify (same files, byte for byte): a run
#     on an MCP server's tools starts its server in the batch's process and writes its
#     recording (or reads it, for a server set to replay) as its own job would.
#     Real-model and live runs keep their own jobs, with their declared threads and
#     memory. Snakemake prefers a rule without wildcards, so run_batch_<i> wins over
#     run_agent / run_mcp / replay_mcp / verify for its files.
# cluster_local: True  the data generation, tables, figures, viewer, and the suites'
#     tables (seconds of pandas and matplotlib in all) run in the Snakemake
#     process that submits the jobs, instead of as more rounds of cluster jobs.

BATCH_SIZE = int(config.get("cluster_batch", 0))


if BATCH_SIZE > 0:
    BATCHES = jobs.chunks([k for k, r in RUNS.items()
                         if r.backend_config.mode in ("simulated", "scripted")], BATCH_SIZE)

    def _mcp_record(key):
        """The recording a batched run on an MCP server's tools writes, or reads when
        its server is set to replay (rules run_mcp / replay_mcp), or None."""
        return (f"results/recordings/{key}.mcp.jsonl" if RUNS[key].mcp is not None
                else None)

    def _replaying(key):
        return RUNS[key].mcp is not None and RUNS[key].task in MCP_REPLAY_TASKS

    for _i, _keys in enumerate(BATCHES):

        rule:
            name:
                f"run_batch_{_i}"
            input:
                prices=PRICES,
                news=NEWS,
                files=sorted({f for k in _keys if RUNS[k].mcp is not None
                              for p in RUNS[k].mcp.parts() for f in p.files.values()}),
                replays=[_mcp_record(k) for k in _keys if _replaying(k)],
            output:
                traces=[f"results/traces/{k}.jsonl" for k in _keys],
                verified=[f"results/verified/{k}.json" for k in _keys],
                recordings=[_mcp_record(k) for k in _keys
                            if _mcp_record(k) and not _replaying(k)],
            params:
                # a function: Snakemake would read the JSON's braces as wildcards
                specs=lambda wildcards, keys=_keys: [RUNS[k].to_json() for k in keys],
                tools=lambda wildcards, keys=_keys: [
                    (None, None) if _mcp_record(k) is None
                    else (None, _mcp_record(k)) if _replaying(k)
                    else (_mcp_record(k), None) for k in keys],
                code=batch_code(_keys),
                verify_code=CODE["verify"],
            log:
                runs=[f"results/logs/run/{k}.log" for k in _keys],
                verify=[f"results/logs/verify/{k}.log" for k in _keys],
            benchmark:
                f"results/benchmarks/run_batch_{_i}.tsv"
            run:
                jobs.run_batch(params.specs, input.prices, input.news, output.traces,
                               output.verified, log.runs, log.verify, tools=params.tools)


if config.get("cluster_local", False):
    workflow.localrules("generate_data", "sqlite_db", "tables", "viewer",
                        *(f"figure_{f.kind}" for f in FIGURE_KINDS),
                        *(f"suite_tables_{b}" for b in SUITE_SHARDS_OF))


# Before the first job (not in a dry run, not in a job's own process): refuse the suites
# under a default storage provider, and a SLURM status command that would wait forever
# (reactlab.jobs.onstart; docs/cluster.md); and an MCP server whose tool list changed
# since the plan read it from the cache, before any of its jobs removes a result
# (reactlab.jobs.check_tool_lists, called there; docs/mcp.md).
onstart:
    jobs.onstart(workflow, suites=bool(SUITE_SHARDS), config=RL)
    if workflow.is_main_process:  # whose results the folder holds (Snakefile, STAMP)
        _stamp.write_stamp(STAMP)
