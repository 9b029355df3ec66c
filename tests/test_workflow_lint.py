"""`snakemake --lint` finds nothing to report on the workflow (docs/workflow.md, "Recovery
and lints"): short `run:` blocks calling reactlab.jobs, functions apart from rules, no
shell command reading outside variables, no path built with `+`, a log for every rule;
and every rule with a job body writes a Snakemake benchmark file (results/benchmarks/),
but the two per-run rules of :data:`UNBENCHMARKED`.

Two readings of the same lints, in one temporary copy of the workflow: the command a user
types, whose whole output must be the profile line and the congratulation (no lint and no
warning printed while parsing), and the JSON form with the SLURM profile's config (its
batch rules), which must list nothing. Snakemake
9.27's command line drops the `json` of `--lint json` (its CLI calls the API's
`lint()` without it), so the JSON form is asked of the API, as `--lint json` would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# The JSON lints through Snakemake's API, with the SLURM profile's config (the batch rules
# of cluster.smk exist only there). `--lint` stays in argv: the Snakefile's recovery
# block reads it (reactlab.jobs.executes) and, as under the command, removes nothing.
LINT_JSON = """\
import json
import sys
from pathlib import Path

sys.argv = ["snakemake", "--lint", "json"]
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

# the SLURM profile's --config: cluster.smk's batch rules are linted too
cluster = {"cluster_batch": 50, "cluster_local": True}
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(cores=1),
                      config_settings=ConfigSettings(config=cluster),
                      snakefile=Path("Snakefile"))
    wf.lint(json=True)
    # the rules with a job body and no Snakemake benchmark file (where the time goes)
    rules = wf._workflow_store.rules
    print(json.dumps([r.name for r in rules if r.is_run and not r.benchmark]))
"""


#: The rules with a job body and no benchmark file, each with its reason.
UNBENCHMARKED = {
    "run_agent": "a thread job per run, mostly of milliseconds: Snakemake's sampling of the "
                 "process memory costs more than the job (workflow/rules/run.smk)",
    "verify": "a thread job per run, of milliseconds (workflow/rules/verify.smk)",
}


def test_snakemake_lint_is_clean(tmp_path: Path) -> None:
    # a copy: parsing the Snakefile in the main process takes the folder's lock and checks
    # results/, which must not touch the checkout
    shutil.copy(ROOT / "Snakefile", tmp_path / "Snakefile")
    shutil.copy(ROOT / "config.yaml", tmp_path / "config.yaml")
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    shutil.copytree(ROOT / "workflow", tmp_path / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Lints for" not in out, out[-3000:]
    assert [line for line in out.splitlines() if line.strip()] == [
        "Using workflow specific profile profiles/default for setting default command "
        "line arguments.",
        "Congratulations, your workflow is in a good condition!"], out[-3000:]

    proc = subprocess.run([sys.executable, "-c", LINT_JSON], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    lints, _, unbenchmarked = proc.stdout.rpartition("\n[")
    assert json.loads(lints) == {"snakefiles": [], "rules": []}, proc.stdout[-3000:]
    assert sorted(json.loads(f"[{unbenchmarked}")) == sorted(UNBENCHMARKED), proc.stdout[-3000:]
    assert not (tmp_path / "results").exists()  # a lint writes no result
