# Check each run's final answer against its own trace (pure, deterministic rules).
# A `run:` job: a thread of the Snakemake process (README "Workflow").


rule verify:
    input:
        "results/traces/{task}/{backend}/{scenario}.jsonl",
    output:
        "results/verified/{task}/{backend}/{scenario}.json",
    params:
        code=CODE["verify"],
    log:
        "results/logs/verify/{task}/{backend}/{scenario}.log",
    run:
        from reactlab.analysis.verify import verify_job

        with job_log(log[0], "verify") as say:
            say(verify_job(input[0], output[0]))
