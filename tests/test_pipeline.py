"""End to end: run the Snakemake pipeline in a temporary directory, compare with goldens.

`make golden` (pytest --regen-golden) rewrites tests/golden/ instead of comparing; it is
never done automatically.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, overlay_stacks
from tests.golden import diff_tables
from tests.test_viewer_browser import chromium  # noqa: F401  (the browser fixture)

GOLDEN = ROOT / "tests" / "golden"
TABLES = ["runs", "summary_by_scenario", "summary_by_backend", "summary_by_defences",
          "steps", "cumulative_tokens", "trials", "summary_trials", "paired",
          "agents", "bfcl", "bfcl_cases", "agentdojo"]

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def shared_run() -> Iterator[None]:
    """The default run is shared by test processes (pytest-xdist workers): one test at a
    time runs commands in it or copies it (tests/doc_commands.py, `using_default_run`).
    The tests that only read its results, or work in a folder of their own, do not wait."""
    from tests.doc_commands import using_default_run

    with using_default_run():
        yield


def copy_workflow(dest: Path) -> None:
    shutil.copy(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copy(ROOT / "config.yaml", dest / "config.yaml")
    shutil.copytree(ROOT / "workflow", dest / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(ROOT / "profiles", dest / "profiles")  # the default profile (threads)


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args],
                          cwd=workdir, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default run, made by the README's `make run` in a checkout copy: one per test
    process, shared with the docs' commands (tests/test_docs_commands.py); a test that
    changes it works on a copy."""
    from tests.doc_commands import finished_default_run

    with shared_run():  # a kept run is checked by a rerun in it
        work, ran = finished_default_run(tmp_path_factory.getbasetemp())
    assert ran.rc == 0, ran.why()
    return work


@pytest.mark.parametrize("name", TABLES)
def test_tables_match_golden(pipeline: Path, name: str, request: pytest.FixtureRequest) -> None:
    actual = pipeline / "results" / "tables" / f"{name}.csv"
    assert actual.exists()
    golden = GOLDEN / f"{name}.csv"
    if request.config.getoption("--regen-golden"):
        GOLDEN.mkdir(exist_ok=True)
        shutil.copy(actual, golden)
        pytest.skip(f"regenerated {golden.relative_to(ROOT)}; review `git diff tests/golden`")
    assert golden.exists(), f"no golden file {golden}; run `make golden` and review it"
    diffs = diff_tables(golden, actual)
    assert not diffs, "tables differ from tests/golden:\n" + "\n".join(diffs)


def test_every_run_has_trace_and_verification(pipeline: Path) -> None:
    from reactlab import config, trace

    cfg = config.load(pipeline / "config.yaml")
    for spec in cfg.runs:
        tr = trace.read(pipeline / "results" / "traces" / f"{spec.key}.jsonl")
        assert tr.header.config_hash == spec.config_hash
        assert (pipeline / "results" / "verified" / f"{spec.key}.json").exists()
        log = (pipeline / "results" / "logs" / "run" / f"{spec.key}.log").read_text()
        assert spec.key in log  # the job log carries a summary line per run


def test_figure_is_a_png(pipeline: Path) -> None:
    png = pipeline / "results" / "figures" / "cumulative_tokens.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rerun_is_a_noop(pipeline: Path) -> None:
    with shared_run():
        proc = snakemake(pipeline, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.parametrize("old,new,message", [
    ("max_steps: 6 ", "max_step: 6 ", "agent.max_step: unknown key (did you mean 'max_steps'?)"),
    ("max_steps: 6 ", "max_steps: 0 ", "agent.max_steps: 0 is less than the minimum of 1"),
    ("max_steps: 6 ", 'max_steps: "6" ', "agent.max_steps: '6' is not of type 'integer'"),
    ("backends: [openai, anthropic, openai_chat, local]\n    scenarios: [correcto,",
     "backends: [openai, anthropic, openai_chat, lokal]\n    scenarios: [correcto,",
     "no backend named 'lokal' (did you mean 'local'?)"),
    ("    max_tokens: 500\n", "    max_tokens: 500\n    max_attempts: -1\n",
     "backends.anthropic.max_attempts: -1 is less than the minimum of 1"),
])
def test_bad_config_stops_before_any_job(tmp_path: Path, old: str, new: str,
                                         message: str) -> None:
    copy_workflow(tmp_path)
    cfg = tmp_path / "config.yaml"
    text = cfg.read_text()
    assert text.count(old) == 1, old
    cfg.write_text(text.replace(old, new))
    proc = snakemake(tmp_path)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_users_own_data_files_are_used_and_checked(tmp_path: Path, data_files) -> None:
    """Parquet files dropped into data/ replace the generated ones, after a schema check."""
    import pandas as pd

    copy_workflow(tmp_path)
    (tmp_path / "data").mkdir()
    target = "results/traces/variacion_busi/openai/correcto.jsonl"
    prices = pd.read_parquet(data_files[0]).drop(columns=["cierre"])
    prices.to_parquet(tmp_path / "data" / "acciones6_precios.parquet")
    proc = snakemake(tmp_path, target)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "column 'cierre' is missing" in out, out[-3000:]
    assert not (tmp_path / target).exists()

    own = pd.read_parquet(data_files[0])
    own["cierre"] = own["cierre"] * 2  # a recognisably different panel
    own.to_parquet(tmp_path / "data" / "acciones6_precios.parquet")
    proc = snakemake(tmp_path, target)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from reactlab import trace

    closes = [c.result["resultado"]["cierre"]
              for c in trace.read(tmp_path / target).tool_calls() if c.name == "precio"]
    assert closes == [52.38, 55.76]  # 2 x 26.19 and 2 x 27.88: the user's file was used


@pytest.mark.full  # a second whole default run (about 6 minutes here): `make test-full`
def test_sigkill_mid_run_then_plain_rerun_gives_identical_tables(
        pipeline: Path, tmp_path: Path) -> None:
    """Kill the whole pipeline (SIGKILL, process group) while traces are being written;
    a plain rerun completes and its tables are byte-identical to an uninterrupted run."""
    import os
    import signal
    import time

    copy_workflow(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    traces = tmp_path / "results" / "traces"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if len(list(traces.glob("*/*/*.jsonl"))) >= 5:
                break
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    written = len(list(traces.glob("*/*/*.jsonl")))
    assert 5 <= written < len(list((pipeline / "results" / "traces").glob("*/*/*.jsonl")))
    assert not (tmp_path / "results" / "tables" / "runs.csv").exists()

    rerun = snakemake(tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    for name in TABLES:
        expected = (pipeline / "results" / "tables" / f"{name}.csv").read_bytes()
        assert (tmp_path / "results" / "tables" / f"{name}.csv").read_bytes() == expected, name
    # Two runs from a clean folder, every trace byte for byte: the sampled model's trials
    # (seeded per trial and per call) and the forced-decoding runs included.
    def traces_of(root: Path) -> dict[str, bytes]:
        base = root / "results" / "traces"
        return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*.jsonl")}

    first, second = traces_of(pipeline), traces_of(tmp_path)
    assert sorted(second) == sorted(first)
    assert [k for k in first if first[k] != second[k]] == []
    assert any("smollm2_sampled" in k for k in first)
    # and every recording of an MCP server's exchange (docs/mcp.md), byte for byte
    def recordings_of(root: Path) -> dict[str, bytes]:
        base = root / "results" / "recordings"
        return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*.mcp.jsonl")}

    first, second = recordings_of(pipeline), recordings_of(tmp_path)
    assert first and sorted(second) == sorted(first)
    assert [k for k in first if first[k] != second[k]] == []


def test_every_figure_in_png_and_svg(pipeline: Path) -> None:
    for kind in ("cumulative_tokens", "outcomes", "tokens", "defences", "success_rates",
                 "bfcl_accuracy"):
        png = pipeline / "results" / "figures" / f"{kind}.png"
        svg = pipeline / "results" / "figures" / f"{kind}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", kind
        assert b"<svg" in svg.read_bytes()[:2000], kind


_REPORT: dict[str, str] = {}


def built_report(pipeline: Path) -> str:
    """The report of the default run, built once by its make target (`make report`)."""
    from tests.doc_commands import shell

    if "html" not in _REPORT:
        with shared_run():
            ran = shell("make report", pipeline, timeout=900)
            assert ran.rc == 0, ran.why()
            _REPORT["html"] = (pipeline / "results" / "report.html").read_text(
                encoding="utf-8", errors="replace")
    return _REPORT["html"]


def test_snakemake_report_is_self_contained_html(pipeline: Path) -> None:
    html = built_report(pipeline)
    for text in ("Outcome matrix", "The lesson's figure", "One row per run",
                 "summary_by_defences.csv", "defences.png", "exact McNemar p-value",
                 "success_rates.png"):
        assert text in html, text


def test_the_report_opens_in_a_browser_without_console_error(
        pipeline: Path, chromium: str, loopback: None,  # noqa: F811
        tmp_path: Path) -> None:
    """Issue 41, item 5: `make report`'s file, opened in headless chromium, renders its
    front page and its tables' list with no console error, exception or failed load."""
    from tests.report_browser import console_errors

    built_report(pipeline)
    with shared_run():  # a copy: the shared run's file may be rebuilt by another process
        html = tmp_path / "report.html"
        html.write_bytes((pipeline / "results" / "report.html").read_bytes())
    text, errors = console_errors(chromium, html, tmp_path / "profile", "Chat Completions",
                                  {"Tables": ("summary_by_backend.csv", "paired.csv")})
    assert errors == [], errors
    assert "summary_trials.csv" in text


def test_every_result_of_the_report_shows_its_caption_with_configuration_and_n(
        pipeline: Path, chromium: str, loopback: None,  # noqa: F811
        tmp_path: Path) -> None:
    """Issue 41: in headless chromium, every figure and table of `make report`'s file has
    its caption, which names the folder stamp's config files and fingerprint and an n
    counted from the results (tests/report_browser.check_captions); no console error."""
    from reactlab.analysis import outputs
    from tests.report_browser import check_captions, result_infos

    built_report(pipeline)
    with shared_run():
        html = tmp_path / "report.html"
        html.write_bytes((pipeline / "results" / "report.html").read_bytes())
        shown, errors = result_infos(chromium, html, tmp_path / "profile", "Chat Completions")
        wrong = check_captions(shown, pipeline / "results")
    assert errors == [], errors
    wanted = {*outputs.figure_paths(), *(t.path for t in outputs.TABLES),
              "results/tables/bfcl.csv", "results/figures/bfcl_accuracy.png",
              "results/tables/agentdojo.csv", "results/figures/agentdojo_rates.png"}
    assert wanted <= set(shown), sorted(wanted - set(shown))
    assert wrong == [], wrong


def _cells(index: str, backend: str) -> list[int]:
    """The numeric cells of the index's by-backend row of ``backend``."""
    row = index[index.index(f"<tr><td>{backend}</td>"):]
    return [int(c.split("<")[0]) for c in row[:row.index("</tr>")].split('<td class="num">')[1:-1]]


def test_one_count_everywhere(pipeline: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41, item 3: for the same selection, per backend, the config, the tables, the
    viewer's index, the terminal (`reactlab summary`) and the exports (built here from the
    run's traces) give the same run counts. Selections (reactlab.views.counts): every run
    (a trial one run), the runs without repeated trials (runs.csv), the lesson loop's runs
    without repeated trials (summary_by_backend.csv's `runs`)."""
    import csv
    import json
    from collections import Counter

    from reactlab import cli, config
    from reactlab.export import find_pairs, inspect_log, otel
    from tests.test_viewer import index_rows

    results = pipeline / "results"

    def table(name: str) -> list[dict[str, str]]:
        with (results / "tables" / f"{name}.csv").open(encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))

    index = (results / "viewer" / "index.html").read_text(encoding="utf-8")
    viewer = [r for r in index_rows(index) if r["suite"] == "lesson"]
    # every run: one trace each
    every = Counter(s.backend for s in config.load(pipeline / "config.yaml").runs)
    assert Counter(r["backend"] for r in table("trials")) == every
    assert Counter(r["backend"] for r in viewer) == every
    assert f'<span class="label">runs</span><b>{sum(every.values())}</b>' in index
    spans = otel.write_spans(find_pairs(results), tmp_path / "otel")
    by_file = Counter(p.relative_to(tmp_path / "otel").parts[1] for p in spans)
    assert by_file == every
    samples: Counter[str] = Counter()
    for log in inspect_log.write_logs(find_pairs(results), tmp_path / "inspect"):
        data = json.loads(log.read_text(encoding="utf-8"))
        samples[data["eval"]["metadata"]["backend"]] += len(data["samples"])
    assert samples == every
    # one draw: the runs without repeated trials
    one = Counter(r["backend"] for r in table("runs"))
    assert Counter(r["backend"] for r in viewer if not r["trial"]) == one
    assert sum(int(r["runs"]) for r in table("summary_by_scenario")) == sum(one.values())
    assert Counter(p.relative_to(tmp_path / "otel").parts[1] for p in spans
                   if not re.search(r"/t\d+\.jsonl$", p.as_posix())) == one
    # the lesson loop's runs without repeated trials
    loop = {r["backend"]: int(r["runs"]) for r in table("summary_by_backend")}
    assert dict(Counter(r["backend"] for r in viewer
                        if not r["trial"] and r["agent"] == "lesson")) == loop
    assert sum(int(r["runs"]) for r in table("summary_by_defences")) == sum(loop.values())
    # the terminal and the index's table by backend: runs, one draw, lesson loop
    assert cli.main(["summary", "--results", str(results)]) == 0
    shown = {line.split()[0]: [int(n) for n in line.split()[1:]]
             for line in capsys.readouterr().out.splitlines()[1:]
             if line and line.split()[0] in every}
    for backend, n in every.items():
        expected = [n, one.get(backend, 0), loop.get(backend, 0)]
        assert shown[backend] == expected, backend
        cells = _cells(index, backend)
        assert [cells[0], *cells[4:6]] == expected, backend


def test_viewer_pages_for_every_run(pipeline: Path) -> None:
    from reactlab import config
    from tests.test_viewer import index_rows

    index = (pipeline / "results" / "viewer" / "index.html").read_text(encoding="utf-8")
    listed = {r["href"] for r in index_rows(index)}
    for spec in config.load(pipeline / "config.yaml").runs:
        assert (pipeline / "results" / "viewer" / f"{spec.key}.html").is_file(), spec.key
        assert f"{spec.key}.html" in listed, spec.key
    # the suite cases of the default slice: a row and a page each
    cases = [p.relative_to(pipeline / "results" / "suites").with_suffix("")
             for p in (pipeline / "results" / "suites").rglob("*.jsonl")]
    assert cases
    for case in cases:  # {suite}/traces/{backend}/{scenario}/{case}
        suite, _, *rest = case.parts
        href = "/".join(("suites", suite, *rest)) + ".html"
        assert href in listed and (pipeline / "results" / "viewer" / href).is_file(), href


def results_digest(work: Path) -> dict[str, str]:
    """Every file under results/ with the SHA-256 of its bytes (what a dry run must not
    change)."""
    import hashlib

    return {p.relative_to(work).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((work / "results").rglob("*")) if p.is_file()}


GROWN = "\nmatrix:\n  - tasks: [variacion_busi_alto]\n    backends: [openai]\n" \
        "    scenarios: [correcto]\n"


@pytest.mark.full  # a dry run per overlay and a real run after them (about 1.5 min)
def test_a_dry_run_changes_no_file_with_a_grown_config_or_any_overlay(
        pipeline: Path, tmp_path: Path) -> None:
    """Issue 27, item 1: after a complete default run, `snakemake -n` with a run added to
    the matrix, and with each overlay of workflow/configs/, changes no file under
    results/ (recovery checks and reports, removes nothing); a damaged result is reported
    as what a run would do. The real run with the grown config then removes nothing
    either: the new run is built and the tables rebuilt after it."""
    from tests.doc_commands import copy_run

    with shared_run():  # the converted model (hundreds of MB, only read) hard-linked
        work = copy_run(pipeline, tmp_path / "work")
    before = results_digest(work)
    assert any(k.startswith("results/suites/agentdojo/") for k in before)
    assert any(k.startswith("results/tables/") for k in before)
    config = work / "config.yaml"
    text = config.read_text(encoding="utf-8")
    assert text.count("\nmatrix:\n") == 1
    config.write_text(text.replace("\nmatrix:\n", GROWN), encoding="utf-8")
    new_trace = "results/traces/variacion_busi_alto/openai/correcto.jsonl"
    proc = snakemake(work, "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "is missing" not in proc.stderr and new_trace in proc.stdout + proc.stderr
    assert results_digest(work) == before
    stacks = overlay_stacks()
    assert len(stacks) >= 10
    for stack in stacks:
        proc = snakemake(work, "-n", "--configfile", *map(str, stack))
        assert results_digest(work) == before, f"{stack[-1].name}: {proc.stderr[-3000:]}"
    # a damaged trace under a dry run: reported as what a run would do, nothing removed
    key = "variacion_busi/anthropic/correcto"
    trace = work / "results" / "traces" / f"{key}.jsonl"
    intact = trace.read_bytes()
    trace.write_bytes(intact.replace(b'"step": 2', b'"step": 3', 1))
    damaged = results_digest(work)
    proc = snakemake(work, "-n")
    assert (f"reactlab: dry run, nothing removed: results/traces/{key}.jsonl: checksum "
            "mismatch") in proc.stderr, proc.stderr[-3000:]
    assert results_digest(work) == damaged
    trace.write_bytes(intact)
    # the real run with the grown config: nothing removed first, the new run built, every
    # old trace the same bytes, the tables rebuilt with the new run's row
    proc = snakemake(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "will be rebuilt" not in proc.stderr and "is missing" not in proc.stderr
    after = results_digest(work)
    assert new_trace in after
    assert {k: after[k] for k in before if k.startswith("results/traces/")} == \
        {k: v for k, v in before.items() if k.startswith("results/traces/")}
    runs_csv = (work / "results" / "tables" / "runs.csv").read_text(encoding="utf-8")
    assert "\nvariacion_busi_alto,openai,correcto," in runs_csv


def test_the_default_run_prints_one_line_per_stage(pipeline: Path,
                                                   tmp_path_factory: pytest.TempPathFactory
                                                   ) -> None:
    """Issue 38: `make run` shows the planned jobs, then one progress line per stage (its
    jobs done / total, all jobs, elapsed), in at most 300 lines; third-party output (the
    model conversion's progress bars, an MCP server's warnings) is in the job logs."""
    from tests.conftest import stages
    from tests.doc_commands import finished_default_run

    _, ran = finished_default_run(tmp_path_factory.getbasetemp())
    shown = ran.out + ran.err
    assert len(shown.splitlines()) <= 300, shown[-3000:]
    (planned,) = re.findall(r"\] (\d+) jobs in (\d+) stages", shown)
    done = stages(shown)
    assert len(done) == int(planned[1]) and sum(done.values()) == int(planned[0]), shown
    for noise in ("it/s]", "validation error", "Select jobs to execute"):
        assert noise not in shown, noise
    assert "Converting" in (pipeline / "results/logs/convert_smollm2.log").read_text()
