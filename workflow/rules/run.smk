# One job per (task x backend x scenario): run the agent loop, write the JSONL trace.
# The job receives its whole config slice as JSON (params), so editing one scenario
# re-runs only the jobs that use it.


rule run_agent:
    input:
        prices=PRICES,
        news=NEWS,
        model=model_input,
    output:
        "results/traces/{task}/{backend}/{scenario}.jsonl",
    params:
        spec=run_spec,
        code=CODE,
    log:
        "results/logs/run/{task}/{backend}/{scenario}.log",
    threads: run_threads
    shell:
        "{PY} -m reactlab run --spec {params.spec:q} --prices {input.prices:q} "
        "--news {input.news:q} --out {output:q} 2>&1 | tee {log:q}"
