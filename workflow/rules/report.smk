# Aggregate tables and figures, each annotated for `snakemake --report`.


def _table(name, caption=None):
    return report(f"results/tables/{name}.csv", caption=f"../report/{caption or name}.rst",
                  category="Tables")


rule tables:
    input:
        traces=TRACES,
        verified=VERIFIED,
    output:
        runs=_table("runs"),
        summary_by_scenario=_table("summary_by_scenario"),
        summary_by_backend=_table("summary_by_backend"),
        summary_by_defences=_table("summary_by_defences"),
        steps=_table("steps"),
        cumulative_tokens=_table("cumulative_tokens", "cumulative_tokens_table"),
        trials=_table("trials"),
        summary_trials=_table("summary_trials"),
        paired=_table("paired"),
    params:
        figure=json.dumps(config["figure"]),
        analysis=ANALYSIS,
        code=CODE,
    log:
        "results/logs/tables.log",
    shell:
        "{PY} -m reactlab tables --traces {input.traces:q} --verified {input.verified:q} "
        "--out-dir results/tables --figure {params.figure:q} "
        "--analysis {params.analysis:q} 2> {log:q}"


# Which table each figure is drawn from.
FIGURE_SOURCES = {
    "cumulative_tokens": "cumulative_tokens",
    "outcomes": "runs",
    "tokens": "runs",
    "defences": "summary_by_defences",
    "success_rates": "summary_trials",
}


for _kind, _source in FIGURE_SOURCES.items():

    rule:
        name:
            f"figure_{_kind}"
        input:
            f"results/tables/{_source}.csv",
        output:
            png=report(f"results/figures/{_kind}.png", caption=f"../report/{_kind}.rst",
                       category="Figures", labels={"figure": _kind, "format": "png"}),
            svg=report(f"results/figures/{_kind}.svg", caption=f"../report/{_kind}.rst",
                       category="Figures", labels={"figure": _kind, "format": "svg"}),
        params:
            kind=_kind,
            figure=json.dumps(config["figure"]),
            code=CODE,
        log:
            f"results/logs/figure_{_kind}.log",
        shell:
            "{PY} -m reactlab figure --kind {params.kind} --table {input:q} "
            "--out {output.png:q} --figure {params.figure:q} 2> {log:q}"


# A static HTML page per run and an index linking them (no server, no external assets).
rule viewer:
    input:
        traces=TRACES,
        verified=VERIFIED,
    output:
        # Not in `snakemake --report`: a self-contained HTML report cannot hold a
        # folder; the viewer is its own static site (results/viewer/index.html).
        directory("results/viewer"),
    params:
        code=CODE,
    log:
        "results/logs/viewer.log",
    shell:
        "{PY} -m reactlab viewer --traces {input.traces:q} --verified {input.verified:q} "
        "--out-dir {output:q} 2> {log:q}"
