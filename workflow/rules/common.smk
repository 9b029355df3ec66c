# Helpers shared by the rule files: the validated config and the matrix of runs.
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

try:
    from reactlab.config import parse as _parse_config
    from reactlab.errors import ConfigError
except ImportError as _exc:
    raise WorkflowError(
        f"cannot import reactlab ({_exc}); run `make run`, which creates the environment"
    )

try:
    RL = _parse_config(config)
except ConfigError as _exc:
    raise WorkflowError(f"invalid configuration: {_exc}") from None

# The interpreter that runs Snakemake also runs every job (the project's environment).
PY = sys.executable
RUNS = {r.key: r for r in RL.runs}
ID = "[a-z][a-z0-9_]*"

wildcard_constraints:
    task=ID,
    backend=ID,
    scenario=ID,


def data_file(kind):
    """The user's own parquet file when present, else the generated one."""
    path = Path(config["data"][kind])
    return str(path) if path.exists() else f"data/generated/{path.name}"


PRICES = data_file("prices")
NEWS = data_file("news")
GENERATED = [f"data/generated/{Path(config['data'][k]).name}" for k in ("prices", "news")]

# The model folder the convert_smollm2 rule builds; a local backend naming this path
# gets it as an input. Any other `model` (a folder or a cached id) is the user's.
BUILTIN_MODEL = "data/models/SmolLM2-135M-Instruct"

TRACES = [f"results/traces/{key}.jsonl" for key in RUNS]
VERIFIED = [f"results/verified/{key}.json" for key in RUNS]
TABLE_NAMES = ["runs", "summary_by_scenario", "summary_by_backend", "steps", "cumulative_tokens"]
TABLES = [f"results/tables/{name}.csv" for name in TABLE_NAMES]
FIGURES = ["results/figures/cumulative_tokens.png"]


def run_spec(wildcards):
    key = f"{wildcards.task}/{wildcards.backend}/{wildcards.scenario}"
    if key not in RUNS:
        raise WorkflowError(f"{key} is not in the matrix of config.yaml")
    return RUNS[key].to_json()


def _backend(wildcards):
    return RUNS[f"{wildcards.task}/{wildcards.backend}/{wildcards.scenario}"].backend_config


def model_input(wildcards):
    """The converted default model, for runs of a local model backend that use it."""
    cfg = _backend(wildcards)
    return [BUILTIN_MODEL] if cfg.get("model") == BUILTIN_MODEL else []


def run_threads(wildcards):
    """Cores a run job reserves. A model job runs torch on `threads` (default 1) but
    reserves two of Snakemake's cores per torch thread, so that `--cores 4` on this
    2-core machine runs at most two model jobs at once, one per physical core."""
    cfg = _backend(wildcards)
    return 2 * int(cfg.get("threads", 1)) if cfg["mode"] == "model" else 1
