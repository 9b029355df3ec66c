# Check each run's final answer against its own trace (pure, deterministic rules).


rule verify:
    input:
        "results/traces/{task}/{backend}/{scenario}.jsonl",
    output:
        "results/verified/{task}/{backend}/{scenario}.json",
    params:
        code=CODE,
    log:
        "results/logs/verify/{task}/{backend}/{scenario}.log",
    shell:
        "{PY} -m reactlab verify --trace {input:q} --out {output:q} 2>&1 | tee {log:q}"
