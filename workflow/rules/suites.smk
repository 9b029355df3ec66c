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

if _RUN_LOCK is not None:  # the main run, with the folder to itself (common.smk)
    from reactlab.suites.score import recover as _recover_suites

    for _line in _recover_suites(SUITE_SHARDS, SUITE_TABLES):
        print(f"reactlab: {_line}", file=sys.stderr)


def _shard_spec(shard):
    return f"results/suites/{shard.suite}/shards/{shard.id}.json"


# The specs of one shard, as the job reads them (a model shard runs in its own process).
rule suite_shard_spec:
    output:
        "results/suites/{suite}/shards/{shard}.json",
    params:
        digest=lambda wildcards: SUITE_BY_ID[wildcards.shard].digest,
    run:
        from reactlab.core.io import write_text_atomic

        write_text_atomic(output[0], SUITE_BY_ID[wildcards.shard].to_json())


for _shard in SUITE_SHARDS:

    rule:
        name:
            f"suite_run_{_shard.id}"
        input:
            spec=_shard_spec(_shard),
            model=[BUILTIN_MODEL] if _shard.specs[0].backend_config.get("model") == BUILTIN_MODEL
            else [],
        output:
            _shard.traces(),
        params:
            model=_shard.model,
            code=SUITE_CODE["suite_run"],
        log:
            f"results/logs/suites/{_shard.id}.run.log",
        threads: 2 * int(_shard.specs[0].backend_config.get("threads", 1)) if _shard.model else 1
        run:
            if params.model:
                shell("{PY} -m reactlab.suites.run {input.spec:q} 2>&1 | tee {log:q}")
            else:
                from reactlab.suites.run import run_shard

                with job_log(log[0], "suite-run") as say:
                    say(run_shard(Path(input.spec).read_text(encoding="utf-8"), list(output)))

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
            from reactlab.suites.score import verify_shard

            with job_log(log[0], "suite-verify") as say:
                say(verify_shard(list(input), list(output)))


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
            from reactlab.suites.tables import build_bfcl

            with job_log(log[0], "suite-tables") as say:
                written = build_bfcl(zip(input.traces, input.verified, strict=True),
                                     Path(output.bfcl).parent)
                say(f"wrote {', '.join(sorted(written))} to {Path(output.bfcl).parent}")
