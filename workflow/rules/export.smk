# Exports for other tools (docs/exports.md): Inspect logs (`inspect view`) and
# OpenTelemetry GenAI spans (OTLP JSON). Not part of `rule all`: they would more than
# double the bytes of results/ (docs/exports.md, "Cost"); build them with
# `make exports` or `snakemake --cores 4 exports`. Each is one `run:` job over all the
# runs, publishing its folder whole with a checksum manifest.

INSPECT = "results/inspect"
OTEL = "results/otel"


def _check_exports():
    """An export folder edited or damaged after it was published is removed, so that
    the next `exports` target rebuilds it from the traces."""
    import shutil

    from reactlab.export import damaged_exports

    for folder, problem in damaged_exports([INSPECT, OTEL]):
        print(f"reactlab: {problem}: {folder} will be rebuilt", file=sys.stderr)
        shutil.rmtree(folder)


if _RUN_LOCK is not None:  # the main run, with the folder to itself
    _check_exports()


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
    run:
        from reactlab.export import inspect_log

        with job_log(log[0], "export") as say:
            say(inspect_log.export_job(input.traces, input.verified, output[0]))


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
    run:
        from reactlab.export import otel

        with job_log(log[0], "export") as say:
            say(otel.export_job(input.traces, input.verified, output[0]))


rule exports:
    input:
        INSPECT,
        OTEL,
