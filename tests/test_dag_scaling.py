"""How planning scales: dry runs of generated matrices of ~250, ~500 and 1,000 runs.

Each size gets its own temporary copy of the workflow with a config.yaml from
`reactlab.dev.matrixgen` (scripted and simulated backends only, so no model folder is
needed). The wall time of `snakemake -n --cores 4` is measured in a subprocess. The
bounds are guards against a quadratic slip (an O(runs) lookup per job, say), not a
benchmark: the machine is shared and noisy, so they are wide. The measured numbers are
printed (past pytest's capture) by test_print_measures and the parse test.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.test_profiles import copy_workflow, job_stats, make_sandbox, snakemake

BASELINE = 2  # measured first: the fixed cost (start-up, parse, data and report jobs)
SIZES = (250, 500, 1000)
LARGE = 1000
LARGE_BOUND_S = 60.0  # a 1,000-run dry run takes seconds; minutes would be a regression
RATIO_BOUND = 8.0  # 4x the runs; start-up cost keeps the real ratio well below 4
PARSE_RUNS = 10_000
PARSE_BOUND_S = 20.0


@dataclass(frozen=True)
class Measure:
    runs: int
    jobs: int
    stats: dict[str, int]
    wall_s: float

    @property
    def per_job_ms(self) -> float:
        return 1000 * self.wall_s / self.jobs


@pytest.fixture(scope="module")
def base() -> dict:
    from reactlab.config import load_yaml

    return load_yaml(ROOT / "config.yaml")


@pytest.fixture(scope="module")
def measures(tmp_path_factory: pytest.TempPathFactory, base: dict) -> dict[int, Measure]:
    from reactlab.config import parse
    from reactlab.dev.matrixgen import generate

    tmp = tmp_path_factory.mktemp("scaling")
    box = make_sandbox(tmp / "sandbox")
    out: dict[int, Measure] = {}
    for n in (BASELINE, *SIZES):
        cfg = generate(n, base)
        assert len(parse(cfg).runs) == n
        work = copy_workflow(tmp / f"runs{n}")
        (work / "config.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True),
                                          encoding="utf-8")
        start = time.perf_counter()
        proc = snakemake(work, box, "-n", "--cores", "4")
        wall = time.perf_counter() - start
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        stats = job_stats(proc.stdout + proc.stderr)
        out[n] = Measure(n, stats["total"], stats, wall)
    assert box.attempts() == []
    return out


def test_generated_configs_have_distinct_runs(base: dict) -> None:
    from reactlab.config import parse
    from reactlab.dev.matrixgen import generate

    for n in (2, 44, 45, 46, 250, 1001):
        cfg = generate(n, base)
        runs = parse(cfg).runs
        assert len(runs) == len({r.key for r in runs}) == n
        assert {r.backend_config.mode for r in runs} <= {"simulated", "scripted"}
        assert all(b["mode"] in ("simulated", "scripted") for b in cfg["backends"].values())
        windows = [(t["params"]["desde"], t["params"]["hasta"]) for t in cfg["tasks"].values()]
        assert len(set(windows)) == len(windows)  # every task asks about its own window
    with pytest.raises(ValueError):
        generate(1, base)


def test_job_count_is_two_per_run_plus_fixed(measures: dict[int, Measure]) -> None:
    fixed = {n: m.jobs - 2 * n for n, m in measures.items()}
    for n, m in measures.items():
        assert m.stats["run_agent"] == m.stats["verify"] == n
        assert m.jobs == 2 * n + fixed[n]
    # the rest (data, tables, figures, all) does not grow with the matrix
    assert len(set(fixed.values())) == 1, fixed
    assert 0 < fixed[LARGE] < 20
    assert "convert_smollm2" not in measures[LARGE].stats  # no model backend


def test_large_dry_run_plans_in_seconds(measures: dict[int, Measure]) -> None:
    assert measures[LARGE].wall_s < LARGE_BOUND_S


def test_cost_grows_roughly_linearly(measures: dict[int, Measure]) -> None:
    ratio = measures[LARGE].wall_s / measures[SIZES[0]].wall_s
    assert ratio < RATIO_BOUND, f"t({LARGE})/t({SIZES[0]}) = {ratio:.2f}"


def test_parse_and_expand_10000_runs(base: dict, capsys: pytest.CaptureFixture[str]) -> None:
    from reactlab.config import parse
    from reactlab.dev.matrixgen import generate

    cfg = generate(PARSE_RUNS, base)
    parse(cfg)  # warm: schema loading and imports are paid once per process
    start = time.perf_counter()
    runs = parse(cfg).runs
    elapsed = time.perf_counter() - start
    assert len(runs) == PARSE_RUNS
    with capsys.disabled():
        print(f"\nconfig.parse of {PARSE_RUNS} runs: {elapsed:.3f} s "
              f"({1e6 * elapsed / PARSE_RUNS:.1f} µs per run)")
    assert elapsed < PARSE_BOUND_S


def test_print_measures(measures: dict[int, Measure], capsys: pytest.CaptureFixture[str]) -> None:
    base = measures[BASELINE]
    # every size was measured, and each plans more jobs than the baseline: the marginal
    # cost per job printed below divides by that difference
    assert list(measures) == [BASELINE, *SIZES]
    assert all(m.jobs > base.jobs and m.wall_s > 0 for m in measures.values() if m is not base)
    lines = ["", "snakemake -n --cores 4 (wall time, one subprocess each; marginal = over "
             f"the {BASELINE}-run dry run):",
             f"{'runs':>6} {'jobs':>6} {'wall s':>8} {'ms/job':>8} {'marginal ms/job':>16}"]
    for m in measures.values():
        marginal = (f"{1000 * (m.wall_s - base.wall_s) / (m.jobs - base.jobs):>16.2f}"
                    if m is not base else f"{'-':>16}")
        lines.append(f"{m.runs:>6} {m.jobs:>6} {m.wall_s:>8.2f} {m.per_job_ms:>8.2f}"
                     + marginal)
    ratio = measures[LARGE].wall_s / measures[SIZES[0]].wall_s
    lines.append(f"t({LARGE})/t({SIZES[0]}) = {ratio:.2f}")
    with capsys.disabled():
        print("\n".join(lines))


SUITE_BOUND_S = 60.0  # a 9,920-run suite plans in seconds; a minute would be a regression


def test_a_large_suite_plans_as_two_jobs_per_shard(tmp_path: Path) -> None:
    """9,920 suite runs (1,240 BFCL cases x 4 scripted policies x 2 backends) are 248
    shards: one run and one verify job each, two wildcard rules whatever the number of
    shards, and no per-case file in the plan (docs/workflow.md, "Planning at scale")."""
    pytest.importorskip("bfcl_eval", reason="the BFCL suite needs bfcl-eval (make env)")
    from reactlab.dev.plan_bench import write_config

    box = make_sandbox(tmp_path / "sandbox")
    work = copy_workflow(tmp_path / "suite")
    write_config(work, "10k", copies=2)
    start = time.perf_counter()
    proc = snakemake(work, box, "-n", "--cores", "4", "results/tables/bfcl.csv")
    wall = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    stats = job_stats(out)
    assert stats == {"suite_run": 248, "suite_verify": 248, "suite_tables_bfcl": 1,
                     "total": 497}, stats
    assert "results/suites/bfcl/traces/" not in out  # the manifests stand for the cases
    assert wall < SUITE_BOUND_S


def test_model_shards_reserve_threads_and_need_the_model(tmp_path: Path) -> None:
    """The bfcl overlay's model shards (suite_run, a wildcard rule): the converted model
    as input and two of Snakemake's cores per torch thread; scripted shards neither."""
    pytest.importorskip("bfcl_eval", reason="the BFCL suite needs bfcl-eval (make env)")
    from tests.test_profiles import planned_jobs

    box = make_sandbox(tmp_path / "sandbox")
    work = copy_workflow(tmp_path / "overlay")
    proc = snakemake(work, box, "-n", "--cores", "4", "results/tables/bfcl.csv",
                     "--configfile", "workflow/configs/bfcl.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    runs = [j for j in planned_jobs(out) if j.rule == "suite_run"]
    assert len(runs) == 8 * 31  # 1,240 cases in shards of 40, 4 policies + 4 model backends
    for job in runs:
        model = "__smollm2" in job.wildcards["shard"]
        assert job.threads == (2 if model else 1), job
        assert (job.fields.get("input") == "data/models/SmolLM2-135M-Instruct") == model, job
