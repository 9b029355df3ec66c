# One job per (task x backend x scenario): run the agent loop, write the JSONL trace.
# The job receives its whole config slice as JSON (params), so editing one scenario
# re-runs only the jobs that use it.
#
# Every run is a `run:` job calling reactlab.jobs.run_agent: with the default profile
# (profiles/default, force-use-threads) a simulated or scripted run is a thread of the
# Snakemake process, which imports the SDKs, pandas and tiktoken once, not once per job
# (docs/workflow.md); a real-model run (mode: model) and a live run keep their own
# process (`python -m reactlab run`), with the threads they reserve.
#
# No `benchmark:` file on run_agent (nor on verify): Snakemake samples the memory of the
# process that runs a `run:` job, here the whole Snakemake process (its smaps, every
# job), which cost ~15 ms of system time per job and 18 % of the simulated matrix's wall
# time (docs/workflow.md, "Where the time goes"). The live and replayed runs, few and in
# their own process, have one; so have the cluster's run batches (cluster.smk).


rule run_agent:
    input:
        prices=PRICES,
        news=NEWS,
        model=model_input,
    output:
        "results/traces/{task}/{backend}/{scenario}.jsonl",
    params:
        spec=run_spec,
        code=lambda wildcards: run_code(_run(wildcards).key),
    log:
        "results/logs/run/{task}/{backend}/{scenario}.log",
    wildcard_constraints:
        backend="|".join(OFFLINE_BACKENDS),
        task=task_pattern(TOOLBOX_TASKS),
    threads: run_threads
    priority: run_priority
    run:
        jobs.run_agent(params.spec, input.prices, input.news, output[0], log[0], threads)


# A task whose tools come from an MCP server (docs/mcp.md): the job starts the server
# (once: one process per job, on its own copies of the server's `files`) and records the
# run's exchange with it beside the trace; with the server's `replay: true` the trace is
# rebuilt from that recording, the server never started, byte for byte. A job of a second
# or so (the server's start): its benchmark file costs little.
if MCP_RECORD_TASKS:

    rule run_mcp:
        input:
            prices=PRICES,
            news=NEWS,
            model=model_input,
            files=mcp_files,
        output:
            trace="results/traces/{task}/{backend}/{scenario}.jsonl",
            recording="results/recordings/{task}/{backend}/{scenario}.mcp.jsonl",
        params:
            spec=run_spec,
            code=lambda wildcards: run_code(_run(wildcards).key),
        log:
            "results/logs/run/{task}/{backend}/{scenario}.log",
        benchmark:
            "results/benchmarks/run/{task}/{backend}/{scenario}.tsv"
        wildcard_constraints:
            backend="|".join(OFFLINE_BACKENDS),
            task=task_pattern(MCP_RECORD_TASKS),
        threads: run_threads
        run:
            jobs.run_agent(params.spec, input.prices, input.news, output.trace, log[0],
                           threads, tools_recording=output.recording)


if MCP_REPLAY_TASKS:

    rule replay_mcp:
        input:
            prices=PRICES,
            news=NEWS,
            model=model_input,
            recording="results/recordings/{task}/{backend}/{scenario}.mcp.jsonl",
        output:
            "results/traces/{task}/{backend}/{scenario}.jsonl",
        params:
            spec=run_spec,
            code=lambda wildcards: run_code(_run(wildcards).key),
        log:
            "results/logs/run/{task}/{backend}/{scenario}.log",
        benchmark:
            "results/benchmarks/run/{task}/{backend}/{scenario}.tsv"
        wildcard_constraints:
            backend="|".join(OFFLINE_BACKENDS),
            task=task_pattern(MCP_REPLAY_TASKS),
        threads: run_threads
        run:
            jobs.run_agent(params.spec, input.prices, input.news, output[0], log[0],
                           threads, tools_replay=input.recording)


# A live run records every HTTP exchange (keys and auth headers stripped) beside the
# trace; its params carry no code hash, so editing the code never re-buys API calls.
if LIVE_BACKENDS and not LIVE.get("replay", False):

    rule run_live:
        input:
            prices=PRICES,
            news=NEWS,
        output:
            trace="results/traces/{task}/{backend}/{scenario}.jsonl",
            recording="results/recordings/{task}/{backend}/{scenario}.jsonl",
        wildcard_constraints:
            backend="|".join(LIVE_BACKENDS),
        params:
            spec=run_spec,
        resources:
            **PROVIDER_SLOTS,
        log:
            "results/logs/run/{task}/{backend}/{scenario}.log",
        benchmark:
            "results/benchmarks/run/{task}/{backend}/{scenario}.tsv"
        run:
            jobs.run_agent(params.spec, input.prices, input.news, output.trace, log[0],
                           recording=output.recording)

elif LIVE_BACKENDS:

    # Offline, on any machine, without keys: the same adapter and loop, answered from
    # the recording; the trace comes out identical.
    rule replay_live:
        input:
            prices=PRICES,
            news=NEWS,
            recording="results/recordings/{task}/{backend}/{scenario}.jsonl",
        output:
            "results/traces/{task}/{backend}/{scenario}.jsonl",
        wildcard_constraints:
            backend="|".join(LIVE_BACKENDS),
        params:
            spec=run_spec,
            code=lambda wildcards: run_code(_run(wildcards).key),
        log:
            "results/logs/run/{task}/{backend}/{scenario}.log",
        benchmark:
            "results/benchmarks/run/{task}/{backend}/{scenario}.tsv"
        run:
            jobs.run_agent(params.spec, input.prices, input.news, output[0], log[0],
                           replay=input.recording)
