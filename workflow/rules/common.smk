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
