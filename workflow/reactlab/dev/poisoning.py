"""Tool poisoning as an experiment, in process (docs/mcp.md, "Tool poisoning"): every run
of the overlay ``workflow/configs/mcp_poisoning.yaml`` through the runner, one after the
other in this process, scored into ``results/tables/mcp_poisoning.csv``
(:mod:`reactlab.analysis.poisoning`) — the table the pipeline's tables job writes from the
same runs, in seconds and without Snakemake (tests/test_mcp_poisoning.py compares them).

    .venv/bin/python -m reactlab.dev.poisoning [--out results/mcp_poisoning]
                                                [--table results/tables/mcp_poisoning.csv]

Each run starts its own poisoned server (:mod:`reactlab.mcp.poisoned`); each answer is
verified as the pipeline's verify job does (:mod:`reactlab.analysis.verify`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reactlab import config as configmod
from reactlab.analysis import poisoning
from reactlab.analysis.verify import Verification
from reactlab.config.trials import analysis_section
from reactlab.runner import run_job
from reactlab.trace import read

OVERLAY = "workflow/configs/mcp_poisoning.yaml"
TABLE = "results/tables/mcp_poisoning.csv"


def run_all(out: str | Path, config: str | Path = "config.yaml",
            overlay: str | Path = OVERLAY) -> list[dict[str, Any]]:
    """Run every run of ``overlay`` on the poisoned server (traces under ``out``); one
    scored row per run, in the config's order."""
    cfg = configmod.load(config, [overlay])
    data, analysis = cfg.raw["data"], analysis_section(cfg.raw)
    rows = []
    for spec in cfg.runs:
        if not poisoning.on_poisoned_server(spec):
            continue
        trace = Path(out) / "traces" / f"{spec.key}.jsonl"
        run_job(spec.to_json(), data["prices"], data["news"], trace)
        tr = read(trace)
        rows.append(poisoning.run_outcome(tr, Verification.of(tr, str(trace)).verified,
                                          poisoning.expected_calls(analysis, spec.task)))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m reactlab.dev.poisoning",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/mcp_poisoning",
                        help="where the runs' traces go")
    parser.add_argument("--table", default=TABLE, help="the CSV table to write")
    parser.add_argument("--config", default="config.yaml")
    args = parser.parse_args(argv)
    rows = poisoning.table(run_all(args.out, args.config))
    path = poisoning.write_table(rows, args.table)
    print(path.read_text(encoding="utf-8"), end="")


if __name__ == "__main__":
    main()
