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


# The lesson's prices and news as a SQLite database (reactlab.data.sqlite): what the
# mcp-server-sqlite server of config.yaml works on (each run on its own copy).
rule sqlite_db:
    input:
        prices=PRICES,
        news=NEWS,
    output:
        "data/generated/acciones6.sqlite",
    params:
        code=CODE["sqlite"],
    log:
        "results/logs/sqlite_db.log",
    benchmark:
        "results/benchmarks/sqlite_db.tsv"
    run:
        jobs.sqlite_db(input.prices, input.news, output[0], log[0])
