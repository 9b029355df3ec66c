# Aggregate tables and figures, each annotated for `snakemake --report`, and the viewer.
# The kinds come from one registry, reactlab.analysis.outputs (the CLI reads it too):
# TABLE_OUTPUTS and FIGURE_KINDS are built from it in common.smk. `run:` jobs: threads of
# the Snakemake process with the default profile (docs/workflow.md).


rule tables:
    input:
        traces=TRACES,
        verified=VERIFIED,
    output:
        **TABLE_OUTPUTS,
    params:
        figure=json.dumps(config["figure"]),
        analysis=ANALYSIS,
        code=CODE["tables"],
        # what the captions say: the configuration and the n (CAPTION, the Snakefile's)
        caption=lambda wildcards: CAPTION,
    log:
        "results/logs/tables.log",
    benchmark:
        "results/benchmarks/tables.tsv"
    run:
        jobs.tables(input.traces, input.verified, params.figure, params.analysis,
                    TABLES_DIR, log[0])


for _figure in FIGURE_KINDS:

    rule:
        name:
            f"figure_{_figure.kind}"
        input:
            f"results/tables/{_figure.source}.csv",
        output:
            png=figure_report(_figure, "png"),
            svg=figure_report(_figure, "svg"),
        params:
            kind=_figure.kind,
            figure=json.dumps(config["figure"]),
            code=CODE["figures"],
            caption=lambda wildcards: CAPTION,
        log:
            f"results/logs/figure_{_figure.kind}.log",
        benchmark:
            f"results/benchmarks/figure_{_figure.kind}.tsv"
        run:
            jobs.figure(params.kind, input[0], output.png, params.figure, log[0])


# A static HTML page per run and per suite case, and an index: summaries (the lesson's
# runs, each suite's table), then every run in a filterable, paged list (docs/viewer.md).
# No server, no external assets. The suite inputs come from suites.smk (included later:
# input functions, read when the DAG is built).
rule viewer:
    input:
        traces=TRACES,
        verified=VERIFIED,
        # The suites' shard manifests: the cases are the files they list.
        suite_trace_manifests=lambda wildcards: [m.traces for m in SUITE_MANIFESTS],
        suite_verified_manifests=lambda wildcards: [m.verified for m in SUITE_MANIFESTS],
        suite_tables=lambda wildcards: SUITE_TABLES,
    output:
        # Not in `snakemake --report`: a self-contained HTML report cannot hold a
        # folder; the viewer is its own static site (results/viewer/index.html).
        directory("results/viewer"),
    params:
        code=CODE["viewer"],
        # a rate's interval needs at least this many stochastic runs (docs/statistics.md)
        min_trials=json.loads(ANALYSIS)["min_trials"],
    log:
        "results/logs/viewer.log",
    benchmark:
        "results/benchmarks/viewer.tsv"
    run:
        jobs.viewer(input.traces, input.verified, output[0], log[0],
                    suite_manifests=input.suite_trace_manifests, suite_tables=input.suite_tables,
                    min_trials=params.min_trials)
