# One job per (task x backend x scenario): run the agent loop, write the JSONL trace.
# The job receives its whole config slice as JSON (params), so editing one scenario
# re-runs only the jobs that use it.
#
# A simulated or scripted run is a `run:` job: with the default profile
# (workflow/profiles/default, force-use-threads) it is a thread of the Snakemake process,
# which imports the SDKs, pandas and tiktoken once, not once per job (README "Workflow").
# A real-model run (mode: model) keeps its own process, with the threads it reserves.


rule run_agent:
    input:
        prices=PRICES,
        news=NEWS,
        model=model_input,
    output:
        "results/traces/{task}/{backend}/{scenario}.jsonl",
    params:
        spec=run_spec,
        code=CODE["run"],
    log:
        "results/logs/run/{task}/{backend}/{scenario}.log",
    wildcard_constraints:
        backend="|".join(OFFLINE_BACKENDS),
    threads: run_threads
    priority: run_priority
    run:
        if _backend(wildcards).mode == "model":
            shell("{PY} -m reactlab run --spec {params.spec:q} --prices {input.prices:q} "
                  "--news {input.news:q} --out {output:q} 2>&1 | tee {log:q}")
        else:
            from reactlab.runner import run_job

            with job_log(log[0], "run") as say:
                say(run_job(params.spec, input.prices, input.news, output[0]))


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
        shell:
            "{PY} -m reactlab run --spec {params.spec:q} --prices {input.prices:q} "
            "--news {input.news:q} --out {output.trace:q} "
            "--recording {output.recording:q} 2>&1 | tee {log:q}"

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
            code=CODE["run"],
        log:
            "results/logs/run/{task}/{backend}/{scenario}.log",
        shell:
            "{PY} -m reactlab run --spec {params.spec:q} --prices {input.prices:q} "
            "--news {input.news:q} --out {output:q} --replay {input.recording:q} "
            "2>&1 | tee {log:q}"
