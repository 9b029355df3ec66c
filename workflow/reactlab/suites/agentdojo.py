"""AgentDojo (``agentdojo`` 0.1.35) as a suite: user task × injection task through the loop.

One run is a (suite, user task, injection task, policy, defence). AgentDojo's own runtime
executes the tools on its own environment (loaded with the attack's injections), the
project's loop (:func:`reactlab.agent.loop.run_agent`) drives the turns, and AgentDojo's
own ``utility`` / ``security`` functions score the run (``security`` True means the
injection task was carried out: the attack succeeded).

* Injections: the ``important_instructions`` attack by default, built by AgentDojo's own
  attack registry. Its text names the target model; AgentDojo reads the name from
  ``pipeline.name``, which must contain a key of ``agentdojo.models.MODEL_NAMES``: the
  stand-in pipeline is named :data:`ATTACK_MODEL`.
* Policies (scripted, written as a run's steps by
  :func:`~reactlab.suites.agentdojo_run.policy_steps` and played by the backend: the local
  scripted one as Hermes text, a simulated API over the wire): ``ground_truth`` makes the
  user task's ground-truth calls, then answers with its ``GROUND_TRUTH_OUTPUT``; ``obeys_injection``
  does the same, but when a tool result it reads carries the attack's ``<INFORMATION>``
  tag it first makes the injection task's ground-truth calls (the worst case).
* Defences (the project's, :mod:`reactlab.agent.defences`): ``delimit`` marks tool output
  as data (``<`` and ``>`` become ``‹`` ``›``, so the tag is no longer seen verbatim);
  ``scope`` offers every tool but lets a call run only on the tools the user task's ground
  truth uses (the scope a task declares), refusing the rest unexecuted (status
  ``unknown``).
* Verification replays the trace: the executed calls (status ``ok`` or ``error``), in
  order, on a fresh copy of the same injected environment, then AgentDojo's checks on the
  answer, the environment before and after, and the call stack. The environment and its
  tools are deterministic, so the verdict is a pure function of the trace.

* A model (a ``local`` backend in ``model`` mode, or a live API) plays a pair
  multi-turn, reading AgentDojo's own tool schemas and system message; a local model is
  loaded once per shard job (:mod:`reactlab.suites.run`).

In the pipeline a ``benchmark: agentdojo`` entry of the ``suites:`` section is run by
the registry entry :data:`AGENTDOJO` (:mod:`reactlab.suites.registry`): its specs
(:func:`~reactlab.suites.agentdojo_run.case_specs`) are
:class:`~reactlab.config.RunSpec` shards like BFCL's;
:func:`~reactlab.suites.agentdojo_run.run_case` runs one,
:func:`~reactlab.suites.agentdojo_score.suite_record` is its verification and
:func:`~reactlab.suites.agentdojo_score.table` is ``agentdojo.csv``. Planning reads a JSON
index of the suites (pairs, prompts, tool schemas, scopes) cached on disk, so that a plan
does not import agentdojo. ``python -m reactlab.suites.agentdojo`` runs the same code
without Snakemake.

The code is cut in four modules: the package, its environments and the planning index
(:mod:`reactlab.suites.agentdojo_env`), specs, policies and runs
(:mod:`reactlab.suites.agentdojo_run`), the verdict and the table
(:mod:`reactlab.suites.agentdojo_score`), and this one: the registry entry and the
standalone command; it re-exports the others' public names.

The tool texts stay AgentDojo's (English), as every suite's text stays in its own language.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reactlab import trace
from reactlab.analysis.figure_kinds import Figure
from reactlab.analysis.suite_figures import agentdojo_rates
from reactlab.core.io import atomic_path
from reactlab.suites.agentdojo_env import (
    ATTACK,
    ATTACK_MODEL,
    DEFENCES,
    FIXED_NOW,
    INDEX_CACHE,
    MAX_STEPS,
    POLICIES,
    SUITES,
    TAG,
    VERSION,
    AgentDojoCase,
    Pair,
    Runtime,
    _environment,
    _jsonable,
    build_index,
    environment,
    index,
    injections,
    inline_refs,
    pairs,
    scope_tools,
    suite,
    tool_schemas,
)
from reactlab.suites.agentdojo_run import (
    NAME,
    case_specs,
    fields_of,
    pair_of,
    run_case,
    run_pair,
    sample_pairs,
    scenario_name,
    spec_for,
    system_message,
)
from reactlab.suites.agentdojo_score import (
    TABLE_COLUMNS,
    build_agentdojo,
    score_trace,
    suite_record,
    table,
)
from reactlab.suites.entry import BenchmarkEntry
from reactlab.suites.summaries import agentdojo_summary

__all__ = ["AGENTDOJO", "ATTACK", "ATTACK_MODEL", "DEFENCES", "FIXED_NOW", "INDEX_CACHE",
           "MAX_STEPS", "NAME", "POLICIES", "SUITES", "TABLE_COLUMNS", "TAG", "VERSION",
           "Pair", "Runtime", "_environment", "_jsonable",
           "build_agentdojo", "build_index", "case_specs", "environment", "fields_of", "index",
           "injections", "inline_refs", "pair_of", "pairs", "run_all", "run_case",
           "run_pair", "sample_pairs", "scenario_name", "scope_tools", "score_trace",
           "spec_for", "suite", "suite_record", "system_message", "table", "tool_schemas"]


#: AgentDojo's registry entry (:mod:`reactlab.suites.registry` registers it). A case is
#: multi-turn: a batched first turn never comes (``batch_size`` is BFCL's only).
AGENTDOJO = BenchmarkEntry(
    name=NAME, tables=("agentdojo",), categories=SUITES, policies=POLICIES,
    only=("defences", "max_steps"), case_fields=AgentDojoCase,
    figures=(Figure("agentdojo_rates", "agentdojo", agentdojo_rates),),
    summaries={"agentdojo": agentdojo_summary},
    code={"run": "reactlab.suites.agentdojo_run", "verify": "reactlab.suites.agentdojo_score",
          "tables": "reactlab.suites.agentdojo_score"},
    specs=case_specs, run_case=run_case, record=suite_record, build_tables=build_agentdojo)


def run_all(suites: Sequence[str], policies: Sequence[str], defences: Sequence[str],
            root: str, limit: int | None = None) -> Any:
    """Every pair of ``suites`` under each policy and defence: one trace per run under
    ``root/traces/{suite}/{policy}/{defence}/{user}__{injection}.jsonl``, then
    ``root/agentdojo.csv`` (written atomically) from the replayed verdicts."""
    rows = []
    for name in suites:
        for policy in policies:
            for defence in defences:
                for pair in pairs(name)[:limit]:
                    out = (f"{root}/traces/{name}/{policy}/{defence.replace('+', '_')}/"
                           f"{pair.id}.jsonl")
                    run_pair(pair, policy, defence, out)
                    rows.append(score_trace(trace.read(out)))
    df = table(rows)
    path = Path(root) / "agentdojo.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n")
    return df


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m reactlab.suites.agentdojo [--suites ...] [--limit N] [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m reactlab.suites.agentdojo")
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--defences", nargs="+", default=list(DEFENCES), choices=DEFENCES)
    parser.add_argument("--limit", type=int, default=None,
                        help="the first N pairs of each suite (default: all)")
    parser.add_argument("--out", default="results/suites/agentdojo")
    args = parser.parse_args(argv)
    df = run_all(args.suites, args.policies, args.defences, args.out, args.limit)
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
