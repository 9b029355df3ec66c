# Outside task suites (docs/suites.md): the `suites:` section of the config, expanded into
# shards of cases (reactlab.suites.plan). One shard = one run job writing one trace per
# case (a model is loaded once per job), one verify job scoring each trace with the
# benchmark's own checker; the suite tables aggregate every case.
#
# Two wildcard rules serve every shard of every suite (the shard id names the suite,
# backend, scenario and index). A run or verify job declares one output, the shard's
# checksum manifest of its per-case files (reactlab.suites.shards): Snakemake then plans
# a 10,000-case suite as ~500 jobs over ~500 files, not 20,000 files (docs/workflow.md,
# "Planning at scale"). The recovery step (the Snakefile's one block) checks each manifest against its files
# before every run, so a missing or damaged trace still reruns its shard only; a shard's
# spec digest (a param of its run job) reruns it when a case, the backend or the sample
# changes. The table rules are generated: one per benchmark of the config, from the
# registry of benchmarks (reactlab.suites.registry), each with its tables' captions.
# The run, verify and table rules write Snakemake benchmark files under
# results/benchmarks/: where the time goes.

from reactlab.analysis.trials import deterministic as _deterministic
from reactlab.suites.plan import plan as _suite_plan
from reactlab.suites.registry import BENCHMARKS as _BENCHMARKS
from reactlab.suites.registry import figures as _suite_figures
from reactlab.suites.shards import benchmark_of as _benchmark_of
from reactlab.suites.shards import has_latex as _has_latex
from reactlab.suites.shards import latex_paths as _suite_latex_paths
from reactlab.suites.shards import shard_files as _shard_files
from reactlab.suites.shards import shards_of as _shards_of
from reactlab.suites.shards import table_paths as _suite_table_paths

try:
    SUITE_SHARDS = _suite_plan(config)
except (ValueError, RuntimeError) as _exc:  # an unknown category, the package missing
    raise WorkflowError(f"invalid configuration: suites: {_exc}") from None
SUITE_BY_ID = {s.id: s for s in SUITE_SHARDS}
SUITE_MANIFESTS = [_shard_files(s.suite, s.id) for s in SUITE_SHARDS]
SUITE_TABLES = _suite_table_paths(SUITE_SHARDS)
SUITE_LATEX = _suite_latex_paths(SUITE_SHARDS)  # their LaTeX twins, by the same jobs
# Each benchmark of the config (a registered one, reactlab.suites.registry) has its own
# tables, built from its own shards' manifests.
SUITE_SHARDS_OF = _shards_of(SUITE_SHARDS)
SUITE_MANIFESTS_OF = {b: [_shard_files(s.suite, s.id) for s in shards]
                      for b, shards in SUITE_SHARDS_OF.items()}
# The benchmarks' figures (Benchmark.figures) of the tables made here.
SUITE_FIGURE_KINDS = _outputs.suite_figures(SUITE_TABLES, _suite_figures().values())
SUITE_FIGURES = [p for f in SUITE_FIGURE_KINDS for p in f.paths]
# What a suite figure needs to draw an interval only where something is estimated
# (reactlab.analysis.suite_figures): whether each backend is deterministic, min_trials.
SUITE_STATISTICS = json.dumps({"statistics": {
    "deterministic": {s.backend: _deterministic(s.specs[0].backend_config)
                      for s in SUITE_SHARDS},
    "min_trials": json.loads(ANALYSIS)["min_trials"]}}, sort_keys=True)
# The code each rule runs, per benchmark: the generic module and the benchmark's own for
# that step (Benchmark.code), so that editing one benchmark's scorer reruns its verify
# jobs only; a figure's, the figures registry and its drawing function's module.
SUITE_CODE = _fingerprints(_PACKAGE, {
    **{f"{_step}_{_b}": [_generic, *([_BENCHMARKS[_b].code[_step]]
                                     if _step in _BENCHMARKS[_b].code else [])]
       for _b in SUITE_SHARDS_OF
       for _step, _generic in (("run", "reactlab.suites.run"),
                               ("verify", "reactlab.suites.score"),
                               ("tables", "reactlab.suites.types"))},
    **{f"figure_{_f.kind}": ["reactlab.analysis.outputs", _f.draw.__module__]
       for _f in SUITE_FIGURE_KINDS},
}, cache=".snakemake/reactlab/imports.json")

# A live shard takes one unit of its provider's slots (`--resources openai_slots=2`).
SUITE_SLOTS = _slot_resources(
    lambda wildcards: _suite_shard(wildcards).provider if _suite_shard(wildcards).live
    else "")

wildcard_constraints:
    suite=ID,
    shard="[^/.]+",  # {shard}.traces.json and {shard}.verified.json stay apart


# One shard's cases through the loop. The job first writes the shard's specs (the file a
# model shard's own process reads), then one trace per case, then the trace manifest.
# The digest of the specs is a parameter: a changed case, backend or sample reruns it.
rule suite_run:
    input:
        model=suite_model_input,
    output:
        "results/suites/{suite}/shards/{shard}.traces.json",
    params:
        digest=lambda wildcards: _suite_shard(wildcards).digest,
        model=lambda wildcards: _suite_shard(wildcards).model,
        live=suite_live,
        code=suite_run_code,
    resources:
        **SUITE_SLOTS,
    log:
        "results/logs/suites/{suite}/{shard}.run.log",
    benchmark:
        "results/benchmarks/suites/{suite}/{shard}.run.tsv"
    threads: suite_threads
    run:
        jobs.suite_run(_suite_shard(wildcards).to_json(), output[0], log[0],
                       model=bool(params.model), threads=threads, live=params.live or None)


rule suite_verify:
    input:
        "results/suites/{suite}/shards/{shard}.traces.json",
    output:
        "results/suites/{suite}/shards/{shard}.verified.json",
    params:
        code=lambda wildcards: SUITE_CODE[f"verify_{_benchmark_of(_suite_shard(wildcards))}"],
    log:
        "results/logs/suites/{suite}/{shard}.verify.log",
    benchmark:
        "results/benchmarks/suites/{suite}/{shard}.verify.tsv"
    run:
        jobs.suite_verify(input[0], output[0], log[0])


# One table rule per benchmark of the config (reactlab.suites.registry): its tables from
# every case of its shards, each table in the report with its caption
# (workflow/report/{table}.rst).
for _b, _manifests in SUITE_MANIFESTS_OF.items():

    rule:
        name:
            f"suite_tables_{_b}"
        input:
            traces=[m.traces for m in _manifests],
            verified=[m.verified for m in _manifests],
        output:
            [report(f"results/tables/{t}.csv", caption=f"../report/{t}.rst", category="Suites")
             for t in _BENCHMARKS[_b].tables],
            # the LaTeX twins (booktabs) of its tables but a per-case one (shards.has_latex)
            [f"results/tables/{t}.tex" for t in _BENCHMARKS[_b].tables if _has_latex(t)],
        params:
            benchmark=_b,
            code=SUITE_CODE[f"tables_{_b}"],
            caption=lambda wildcards: CAPTION,  # the configuration and n (the Snakefile's)
            # a rate's interval needs this many stochastic runs (docs/statistics.md)
            min_trials=json.loads(ANALYSIS)["min_trials"],
        log:
            f"results/logs/suite_tables_{_b}.log",
        benchmark:
            f"results/benchmarks/suite_tables_{_b}.tsv"
        run:
            jobs.suite_tables(params.benchmark, input.traces, os.path.dirname(output[0]),
                              log[0], params.min_trials)


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
            statistics=SUITE_STATISTICS,
            code=SUITE_CODE[f"figure_{_figure.kind}"],
            caption=lambda wildcards: CAPTION,
        log:
            f"results/logs/figure_{_figure.kind}.log",
        benchmark:
            f"results/benchmarks/figure_{_figure.kind}.tsv"
        run:
            jobs.figure(params.kind, input[0], output.png, params.statistics, log[0])
