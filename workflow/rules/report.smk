# Aggregate tables and the lesson's cumulative-token figure.


rule tables:
    input:
        traces=TRACES,
        verified=VERIFIED,
    output:
        TABLES,
    params:
        figure=json.dumps(config["figure"]),
        code=CODE,
    log:
        "results/logs/tables.log",
    shell:
        "{PY} -m reactlab tables --traces {input.traces:q} --verified {input.verified:q} "
        "--out-dir results/tables --figure {params.figure:q} 2> {log:q}"


rule figure_cumulative_tokens:
    input:
        "results/tables/cumulative_tokens.csv",
    output:
        "results/figures/cumulative_tokens.png",
    params:
        figure=json.dumps(config["figure"]),
        code=CODE,
    log:
        "results/logs/figure_cumulative_tokens.log",
    shell:
        "{PY} -m reactlab figure --table {input:q} --out {output:q} "
        "--figure {params.figure:q} 2> {log:q}"
