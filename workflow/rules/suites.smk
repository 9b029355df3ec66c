# Outside task suites (docs/suites.md): the `suites:` section of the config, expanded into
# shards of cases (reactlab.suites.plan). One shard = one run job writing one trace per
# case (a model is loaded once per job), one verify job scoring each trace with the
# benchmark's own checker; the suite tables aggregate every case. Shards have explicit
# outputs (one rule per shard, generated below), so a missing or damaged trace reruns
# its shard only, and a shard's params (the digest of its specs) rerun it when a case,
# the backend or the sample changes.

from reactlab.suites.plan import plan as _suite_plan

try:
    SUITE_SHARDS = _suite_plan(config)
except (ValueError, RuntimeError) as _exc:  # an unknown category, the package missing
    raise WorkflowError(f"invalid configuration: suites: {_exc}") from None
SUITE_BY_ID = {s.id: s for s in SUITE_SHARDS}
SUITE_CODE = _fingerprints(_PACKAGE, {
    "suite_run": "reactlab.suites.run",
    "suite_verify": "reactlab.suites.score",
    "suite_tables": "reactlab.suites.tables",
}, cache=".snakemake/reactlab/imports.json")
SUITE_TRACES = [p for s in SUITE_SHARDS for p in s.traces()]
SUITE_VERIFIED = [p for s in SUITE_SHARDS for p in s.verified()]
SUITE_TABLES = ([f"results/tables/{name}.csv" for name in ("bfcl", "bfcl_cases")]
                if SUITE_SHARDS else [])

# The suite figures (reactlab.analysis.outputs.SUITE_FIGURES) of the tables made here.
SUITE_FIGURE_KINDS = _outputs.suite_figures(SUITE_TABLES)
SUITE_FIGURES = [p for f in SUITE_FIGURE_KINDS for p in f.paths]

if workflow.is_main_process:  # recovery runs in the main process only (common.smk)
    jobs.recover_suites(SUITE_SHARDS, SUITE_TABLES)
    jobs.remove_damaged_figures(SUITE_FIGURE_KINDS)



# The specs of one shard, as the job reads them (a model shard runs in its own process).
rule suite_shard_spec:
    output:
        "results/suites/{suite}/shards/{shard}.json",
    params:
        digest=lambda wildcards: SUITE_BY_ID[wildcards.shard].digest,
    log:
        "results/logs/suites/{suite}/{shard}.spec.log",
    run:
        jobs.suite_shard_spec(SUITE_BY_ID[wildcards.shard].to_json(), output[0], log[0])


for _shard in SUITE_SHARDS:

    rule:
        name:
            f"suite_run_{_shard.id}"
        input:
            spec=f"results/suites/{_shard.suite}/shards/{_shard.id}.json",
            model=[BUILTIN_MODEL] if getattr(_shard.specs[0].backend_config, "model", None) == BUILTIN_MODEL
            else [],
        output:
            _shard.traces(),
        params:
            model=_shard.model,
            code=SUITE_CODE["suite_run"],
        log:
            f"results/logs/suites/{_shard.id}.run.log",
        threads: 2 * int(getattr(_shard.specs[0].backend_config, "threads", 1)) if _shard.model else 1
        run:
            jobs.suite_run(input.spec, output, log[0], model=bool(params.model),
                           threads=threads)

    rule:
        name:
            f"suite_verify_{_shard.id}"
        input:
            _shard.traces(),
        output:
            _shard.verified(),
        params:
            code=SUITE_CODE["suite_verify"],
        log:
            f"results/logs/suites/{_shard.id}.verify.log",
        run:
            jobs.suite_verify(input, output, log[0])


if SUITE_SHARDS:

    rule suite_tables:
        input:
            traces=SUITE_TRACES,
            verified=SUITE_VERIFIED,
        output:
            bfcl=report("results/tables/bfcl.csv", caption="../report/bfcl.rst",
                        category="Suites"),
            cases="results/tables/bfcl_cases.csv",
        params:
            code=SUITE_CODE["suite_tables"],
        log:
            "results/logs/suite_tables.log",
        run:
            jobs.suite_tables(input.traces, input.verified, os.path.dirname(output.bfcl),
                              log[0])


for _figure in SUITE_FIGURE_KINDS:

    rule:
        name:
            f"figure_{_figure.kind}"
        input:
            f"results/tables/{_figure.source}.csv",
        output:
            png=figure_report(_figure, "png", category="Suites"),
            svg=figure_report(_figure, "svg", category="Suites"),
        params:
            kind=_figure.kind,
            code=CODE["figures"],
        log:
            f"results/logs/figure_{_figure.kind}.log",
        run:
            jobs.figure(params.kind, input[0], output.png, "{}", log[0])
