"""A large result set for the viewer: n verified lesson runs cloned from a few real ones.

The viewer's index and pages must stay usable at thousands of runs
(tests/test_viewer_scale.py, docs/viewer.md). Running thousands of runs through the
pipeline to get them costs minutes; :func:`clone_runs` writes them in seconds with the
project's own writers instead: each clone is a template trace (a real run) under a new
(task, backend, scenario) name, written by :class:`reactlab.trace.TraceWriter` (so it has
its own checksum) and verified by the project's verifier
(:func:`reactlab.analysis.verify.verification_record`). The conversation, verdict and
findings of a clone are its template's; only the names differ.

    python -m reactlab.dev.viewer_scale 5000 --templates results/traces \\
        --out /tmp/big --viewer /tmp/big/viewer
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from reactlab import trace
from reactlab.analysis import verify
from reactlab.config.trials import trial_key
from reactlab.core.errors import UsageError
from reactlab.views import html

__all__ = ["clone_runs", "main"]


def clone_runs(templates: Sequence[str | Path], n: int, out: str | Path
               ) -> list[tuple[str, str]]:
    """Write ``n`` runs cloned from the ``templates`` (trace paths) under
    ``out/traces/{task}/{backend}/{scenario}.jsonl`` (a trial *i*:
    ``…/{scenario}/t{i}.jsonl``, the pipeline's layout) with their verification under
    ``out/verified/...json``; returns the (trace, verification) pairs.

    Clone ``i`` copies template ``i % len(templates)`` and renames its task to
    ``{task}_{i // len(templates):04d}`` (backend, scenario and trial kept), so every
    clone is a distinct run and each task has the template's scenarios, backends and
    trials: the traces of a default run (``results/traces``, trials included) are
    templates as they are.
    """
    if not templates:
        raise UsageError("viewer_scale: no template traces")
    if n < 1:
        raise UsageError(f"viewer_scale: n must be at least 1, got {n}")
    read = [trace.read(t) for t in templates]
    out = Path(out)
    pairs = []
    for i in range(n):
        tr = read[i % len(read)]
        run = {**tr.run, "task": f"{tr.run['task']}_{i // len(read):04d}"}
        # a trial keeps its trial: …/{scenario}/t{i}, the pipeline's own layout
        trial = run.get("trial")
        key = trial_key("/".join((run["task"], run["backend"], run["scenario"])),
                        None if trial is None else int(trial))
        header = dataclasses.replace(tr.header, run=run, key=key,
                                     spec={**tr.header.spec, "task": run["task"]})
        tpath = out / "traces" / f"{key}.jsonl"
        w = trace.TraceWriter(tpath)
        w.add(header)
        for rec in tr.records:
            w.add(rec)
        w.close(dataclasses.replace(tr.end, records=None, sha256=None))
        vpath = out / "verified" / f"{key}.json"
        trace.write_json_atomic(vpath, verify.verification_record(trace.read(tpath),
                                                                  str(tpath)))
        pairs.append((str(tpath), str(vpath)))
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reactlab.dev.viewer_scale",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("n", type=int, help="runs to write")
    p.add_argument("--templates", required=True,
                   help="a folder of template traces (searched for *.jsonl)")
    p.add_argument("--out", required=True, help="the folder to write traces/ and verified/")
    p.add_argument("--viewer", help="also build the viewer there, and time it")
    a = p.parse_args(argv)
    templates = sorted(str(t) for t in Path(a.templates).rglob("*.jsonl"))
    start = time.perf_counter()
    pairs = clone_runs(templates, a.n, a.out)
    print(f"wrote {len(pairs)} runs from {len(templates)} templates in "
          f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    if a.viewer:
        start = time.perf_counter()
        written = html.build(pairs, a.viewer)
        print(f"built the viewer ({len(written)} files) in "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
