# Exports for other tools (docs/exports.md): Inspect logs (`inspect view`) and
# OpenTelemetry GenAI spans (OTLP JSON). Not part of `rule all`: they would more than
# double the bytes of results/ (docs/exports.md, "Cost"); build them with
# `make exports` or `snakemake --cores 4 exports`. Each is one `run:` job over all the
# runs, publishing its folder whole with a checksum manifest.

INSPECT = "results/inspect"
OTEL = "results/otel"


rule export_inspect:
    input:
        traces=TRACES,
        verified=VERIFIED,
    output:
        directory(INSPECT),
    params:
        code=CODE["export_inspect"],
    log:
        "results/logs/export_inspect.log",
    benchmark:
        "results/benchmarks/export_inspect.tsv"
    run:
        jobs.export("inspect", input.traces, input.verified, output[0], log[0])


rule export_otel:
    input:
        traces=TRACES,
        verified=VERIFIED,
    output:
        directory(OTEL),
    params:
        code=CODE["export_otel"],
    log:
        "results/logs/export_otel.log",
    benchmark:
        "results/benchmarks/export_otel.tsv"
    run:
        jobs.export("otel", input.traces, input.verified, output[0], log[0])


rule exports:
    input:
        INSPECT,
        OTEL,
