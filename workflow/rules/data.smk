# Synthetic input data, generated deterministically from the seed in config.yaml.
# A user's own files at config.data.prices / config.data.news take precedence.


rule generate_data:
    output:
        prices=GENERATED[0],
        news=GENERATED[1],
    params:
        seed=config["data"]["seed"],
        code=CODE["data"],
    log:
        "results/logs/generate_data.log",
    benchmark:
        "results/benchmarks/generate_data.tsv"
    run:
        jobs.generate_data(output.prices, params.seed, log[0])
