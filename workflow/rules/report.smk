# Aggregate tables and figures, each annotated for `snakemake --report`. `run:` jobs:
# threads of the Snakemake process with the default profile (README "Workflow").

# pyplot keeps global state: figure jobs that run as threads draw one at a time.
FIGURE_LOCK = threading.Lock()


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
        code=CODE["tables"],
    log:
        "results/logs/tables.log",
    run:
        from reactlab.analysis import tables

        with job_log(log[0], "tables") as say:
            written = tables.build(zip(input.traces, input.verified, strict=True),
                                   json.loads(params.figure), Path(output.runs).parent,
                                   json.loads(params.analysis))
            say(f"wrote {len(written)} tables to {Path(output.runs).parent}")


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
            code=CODE["figures"],
        log:
            f"results/logs/figure_{_kind}.log",
        run:
            from reactlab.analysis import figures

            with job_log(log[0], "figure") as say, FIGURE_LOCK:
                figures.check_source(input[0])
                if params.kind == "cumulative_tokens":
                    figures.cumulative_tokens(input[0], output.png,
                                              json.loads(params.figure))
                elif params.kind == "success_rates":
                    from reactlab.analysis import trial_figures

                    trial_figures.success_rates(input[0], output.png)
                else:
                    getattr(figures, params.kind)(input[0], output.png)
                say(f"drew {output.png} and {output.svg}")


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
        code=CODE["viewer"],
    log:
        "results/logs/viewer.log",
    run:
        from reactlab.views import html as viewer

        with job_log(log[0], "viewer") as say:
            written = viewer.build(zip(input.traces, input.verified, strict=True), output[0])
            say(f"wrote {written[0]} and {len(written) - 1} run pages")
