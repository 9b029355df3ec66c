# Check each run's final answer against its own trace (pure, deterministic rules).
# A `run:` job: a thread of the Snakemake process (docs/workflow.md), of milliseconds: no
# `benchmark:` file, whose sampling would cost more than the job (run.smk says why).


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
        jobs.verify(input[0], output[0], log[0])
