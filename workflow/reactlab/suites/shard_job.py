"""``python -m reactlab.suites.shard_job SPECS.json``: one shard in this process.

What a model shard's job runs in its own process (``jobs.suite_run``): the specs of the
file, each case run by its benchmark (:func:`reactlab.suites.registry.run_case`) through
:func:`reactlab.suites.run.run_shard`; the outputs are the specs' own trace paths, and a
model's reproduction record goes beside SPECS.json
(:func:`reactlab.suites.shards.reproduction_file`).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from reactlab.config import RunSpec
from reactlab.suites.registry import run_case
from reactlab.suites.run import run_shard
from reactlab.suites.shards import reproduction_file
from reactlab.suites.types import shard_paths

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m reactlab.suites.shard_job SPECS.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    text = Path(args[0]).read_text(encoding="utf-8")
    outputs = [shard_paths(RunSpec.from_dict(d))[0] for d in json.loads(text)]
    print(run_shard(text, outputs, run_case, reproduction_file(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
