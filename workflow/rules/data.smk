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
    run:
        from reactlab import data

        with job_log(log[0], "data") as say:
            prices, news = data.write(Path(output.prices).parent, params.seed)
            say(f"wrote {prices} and {news} (seed {params.seed})")
