"""A benchmark is one registered object (tests/toy_benchmark.py), as a provider is.

The toy benchmark is planned from a ``suites:`` entry, accepted by the config's schema
and cross-checks, and run through the functions the rules call (``jobs.suite_run``,
``jobs.suite_verify``, ``jobs.suite_tables``); nothing in the package names it.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Any

import pytest

import tests.toy_benchmark as toy
from reactlab import jobs
from reactlab.config import ConfigError, load_yaml, parse
from reactlab.suites.plan import plan
from reactlab.suites.registry import BENCHMARKS, benchmark
from reactlab.suites.shards import listed, shard_files, table_paths

ROOT = Path(__file__).resolve().parents[1]


def toy_config(**overrides: Any) -> dict[str, Any]:
    raw = load_yaml(ROOT / "config.yaml")
    raw["suites"] = {"play": {"benchmark": toy.NAME, "backends": ["local"], "shard_size": 2,
                              **overrides}}
    return raw


def test_the_toy_is_registered_and_accepted_by_the_config() -> None:
    assert benchmark(toy.NAME) is toy.TOY and toy.NAME in BENCHMARKS
    parse(toy_config())  # the schema's enum and config/suites.py accept it
    with pytest.raises(ConfigError, match=r"suites\.play\.categories\[0\]"):
        parse(toy_config(categories=["simple_python"]))  # another benchmark's category


def test_the_toy_runs_through_the_rules_jobs(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    raw = toy_config()
    shards = plan(raw)
    assert [s.id for s in shards] == ["play__local__direct__0000", "play__local__direct__0001"]
    assert table_paths(shards) == ["results/tables/toy.csv"]
    monkeypatch.chdir(tmp_path)  # the jobs write under results/, as in a pipeline run
    manifests = []
    for shard in shards:
        files = shard_files(shard.suite, shard.id)
        jobs.suite_run(shard.to_json(), files.traces, f"logs/{shard.id}.run.log",
                       model=False)
        jobs.suite_verify(files.traces, files.verified, f"logs/{shard.id}.verify.log")
        assert listed(files.traces) == shard.traces()
        assert listed(files.verified) == shard.verified()
        manifests.append(files.traces)
    jobs.suite_tables(toy.NAME, manifests, "results/tables", "logs/tables.log")
    with open("results/tables/toy.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows == [
        {"suite": "play", "backend": "local", "scenario": "direct", "category": "numbers",
         "cases": "1", "correct": "1"},
        {"suite": "play", "backend": "local", "scenario": "direct", "category": "words",
         "cases": "2", "correct": "2"}]
    assert os.path.exists("logs/tables.log")


def test_the_toys_name_appears_nowhere_in_the_package() -> None:
    """No code, rule, schema or caption names the toy (a docstring may point to its
    module as the example of a benchmark outside the package)."""
    named = re.compile(r"""["']toy["']|\btoy\.csv|import tests|tests\.toy_benchmark""")
    found = [str(path) for path in (ROOT / "workflow").rglob("*")
             if path.is_file() and path.suffix in (".py", ".smk", ".yaml", ".rst")
             and named.search(path.read_text(encoding="utf-8"))]
    found += [str(p) for p in (ROOT / "workflow").rglob("*toy*")]
    assert found == []
