"""`snakemake --lint` finds nothing to report on the workflow (docs/workflow.md, "Recovery
and lints"): short `run:` blocks calling reactlab.jobs, functions apart from rules, no
shell command reading outside variables, no path built with `+`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_snakemake_lint_is_clean(tmp_path: Path) -> None:
    # a copy: parsing the Snakefile in the main process takes the folder's lock and checks
    # results/, which must not touch the checkout
    shutil.copy(ROOT / "Snakefile", tmp_path / "Snakefile")
    shutil.copy(ROOT / "config.yaml", tmp_path / "config.yaml")
    shutil.copytree(ROOT / "workflow", tmp_path / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Lints for" not in out, out[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in out
