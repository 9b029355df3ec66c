"""Tool poisoning as an experiment (docs/mcp.md, "Tool poisoning"): every run of the
overlay ``workflow/configs/mcp_poisoning.yaml`` through the runner, in process, scored
into ``results/tables/mcp_poisoning.csv`` (:mod:`reactlab.analysis.poisoning`).

    .venv/bin/python -m reactlab.dev.poisoning [--out results/mcp_poisoning]
                                                [--table results/tables/mcp_poisoning.csv]

Each run starts its own poisoned server (:mod:`reactlab.mcp.poisoned`); the config is
planned with a fresh tool-list cache (planning is the rug pull's first start, the list it
approves) and the rug pull's start count in a temporary file. A job that refuses its
server (a changed list, pinned) leaves no trace and is scored as refused.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reactlab import config as configmod
from reactlab.analysis import poisoning
from reactlab.core.errors import ToolServerError
from reactlab.mcp.poisoned import STATE_ENV
from reactlab.runner import run_job
from reactlab.trace import read

OVERLAY = "workflow/configs/mcp_poisoning.yaml"
TABLE = "results/tables/mcp_poisoning.csv"


@contextmanager
def _fresh_state() -> Iterator[None]:
    """A temporary tool-list cache and rug-pull start count, for the experiment only."""
    names = ("REACTLAB_CACHE", STATE_ENV)
    before = {n: os.environ.get(n) for n in names}
    with tempfile.TemporaryDirectory(prefix="reactlab-poisoning-") as tmp:
        os.environ["REACTLAB_CACHE"] = tmp
        os.environ[STATE_ENV] = str(Path(tmp) / "starts")
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def run_all(out: str | Path, config: str | Path = "config.yaml",
            overlay: str | Path = OVERLAY) -> list[dict[str, Any]]:
    """Run every run of ``overlay`` (traces under ``out``); one scored row per run."""
    rows = []
    with _fresh_state():
        cfg = configmod.load(config, [overlay])
        data = cfg.raw["data"]
        for spec in cfg.runs:
            trace = Path(out) / "traces" / spec.task / spec.backend / f"{spec.scenario}.jsonl"
            try:
                run_job(spec.to_json(), data["prices"], data["news"], trace)
            except ToolServerError as exc:
                if exc.kind != "changed":
                    raise
                rows.append(poisoning.refused_outcome(spec))
                continue
            expected = cfg.raw["tasks"][spec.task].get("expected_calls") or ()
            rows.append(poisoning.run_outcome(read(trace), str(trace), expected))
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
