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
# Each benchmark has its own tables, built from its own shards.
SUITE_BENCHMARK_TABLES = {"bfcl": ["bfcl", "bfcl_cases"], "agentdojo": ["agentdojo"]}
SUITE_SHARDS_OF = {b: [s for s in SUITE_SHARDS if s.specs[0].suite["benchmark"] == b]
                   for b in SUITE_BENCHMARK_TABLES}
SUITE_TABLES = [f"results/tables/{name}.csv" for b, names in SUITE_BENCHMARK_TABLES.items()
                if SUITE_SHARDS_OF[b] for name in names]

if workflow.is_main_process:  # recovery runs in the main process only (common.smk)
    for _b, _names in SUITE_BENCHMARK_TABLES.items():
        jobs.recover_suites(SUITE_SHARDS_OF[_b], [f"results/tables/{n}.csv" for n in _names])



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


if SUITE_SHARDS_OF["bfcl"]:

    rule suite_tables:
        input:
            traces=[p for s in SUITE_SHARDS_OF["bfcl"] for p in s.traces()],
            verified=[p for s in SUITE_SHARDS_OF["bfcl"] for p in s.verified()],
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


if SUITE_SHARDS_OF["agentdojo"]:

    rule suite_tables_agentdojo:
        input:
            traces=[p for s in SUITE_SHARDS_OF["agentdojo"] for p in s.traces()],
            verified=[p for s in SUITE_SHARDS_OF["agentdojo"] for p in s.verified()],
        output:
            agentdojo=report("results/tables/agentdojo.csv", caption="../report/agentdojo.rst",
                             category="Suites"),
        params:
            code=SUITE_CODE["suite_tables"],
        log:
            "results/logs/suite_tables_agentdojo.log",
        run:
            jobs.suite_tables(input.traces, input.verified, os.path.dirname(output.agentdojo),
                              log[0], benchmark="agentdojo")
