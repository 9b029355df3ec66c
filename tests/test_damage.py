"""Nothing trusted that was damaged (issue 12): one test per numbered failure.

Unit tests call the package; the tests marked ``e2e`` run real ``snakemake`` processes
on a copy of the project with a 3-run simulated matrix, damage real files on disk and
check what a plain rerun does. Each test's docstring names the item it covers.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reactlab.core.errors import ConfigError, DataError, TraceError
from tests.conftest import ROOT

SMALL_MATRIX = """matrix:
  - tasks: [variacion_busi]
    backends: [anthropic]
    scenarios: [correcto, bucle_sin_limite, herramienta_equivocada]
"""
RUNS = ["variacion_busi/anthropic/correcto", "variacion_busi/anthropic/bucle_sin_limite",
        "variacion_busi/anthropic/herramienta_equivocada"]
TABLES = ["runs", "summary_by_scenario", "summary_by_backend", "summary_by_defences",
          "steps", "cumulative_tokens"]


def small_project(dest: Path) -> Path:
    """A copy of the project whose matrix is three simulated runs (the figure's two)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copytree(ROOT / "workflow", dest / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    text = (ROOT / "config.yaml").read_text(encoding="utf-8")
    start = text.index("\nmatrix:") + 1
    end = text.index("\n# The lesson's cumulative-token figure")
    (dest / "config.yaml").write_text(text[:start] + SMALL_MATRIX + text[end:],
                                      encoding="utf-8")
    return dest


def snakemake(workdir: Path, *args: str, env: dict[str, str] | None = None,
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args],
                          cwd=workdir, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def out(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def edit_config(work: Path, old: str, new: str) -> None:
    cfg = work / "config.yaml"
    text = cfg.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    cfg.write_text(text.replace(old, new, 1), encoding="utf-8")


def snapshot(work: Path) -> dict[str, bytes]:
    """The bytes of every trace, verification and table (what must come back identical)."""
    paths = [*(f"results/traces/{k}.jsonl" for k in RUNS),
             *(f"results/verified/{k}.json" for k in RUNS),
             *(f"results/tables/{t}.csv" for t in TABLES)]
    return {p: (work / p).read_bytes() for p in paths}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small project, run once to completion."""
    work = small_project(tmp_path_factory.mktemp("damage") / "built")
    proc = snakemake(work)
    assert proc.returncode == 0, out(proc)[-4000:]
    return work


@pytest.fixture
def copy(built: Path, tmp_path: Path) -> Path:
    """A private copy of the built project (mtimes kept) to damage."""
    dest = tmp_path / "work"
    shutil.copytree(built, dest, symlinks=True)
    return dest


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    return small_project(tmp_path / "fresh")


# ------------------------------------------------------------------ 1, 2: the config loader


@pytest.mark.e2e
def test_item1_duplicate_keys_are_refused_by_the_pipeline(fresh: Path) -> None:
    """Item 1: `max_steps: 6` then `max_steps: 8` (and a scenario defined twice) stop the
    pipeline at parse time, as `reactlab check` does; Snakemake's loader kept the last."""
    edit_config(fresh, "  max_steps: 6 ", "  max_steps: 6\n  max_steps: 8 ")
    proc = snakemake(fresh, "-n")
    assert proc.returncode != 0
    assert "agent.max_steps: " in out(proc) and "duplicate key 'max_steps' at line" in out(proc)
    assert not (fresh / "results").exists()

    edit_config(fresh, "  max_steps: 6\n  max_steps: 8 ", "  max_steps: 6 ")
    edit_config(fresh, "\n  ticker_inexistente:\n",
                "\n  correcto:\n    description: twin\n    steps: [{answer: x}]"
                "\n  ticker_inexistente:\n")
    proc = snakemake(fresh, "-n")
    assert proc.returncode != 0
    assert "scenarios.correcto: " in out(proc) and "duplicate key 'correcto'" in out(proc)


@pytest.mark.e2e
def test_item1_duplicate_keys_in_a_configfile_override_are_refused(fresh: Path) -> None:
    """Item 1: an overlay given with --configfile goes through the same loader."""
    (fresh / "overlay.yaml").write_text("agent:\n  max_steps: 4\n  max_steps: 9\n")
    proc = snakemake(fresh, "-n", "--configfile", "overlay.yaml")
    assert proc.returncode != 0
    assert "overlay.yaml: duplicate key 'max_steps' at line 3" in out(proc), out(proc)[-2000:]


def test_item2_reactlab_check_reads_overlays_like_snakemake(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 2: an overlay with a tab error (which Snakemake's CLI reads before the
    Snakefile, without its place) gets line and column from `reactlab check
    --configfile`; a good overlay is merged as Snakemake merges it."""
    from reactlab import cli, config

    bad = tmp_path / "overlay.yaml"
    bad.write_text("agent:\n\tmax_steps: 4\n")
    assert cli.main(["check", "--config", str(ROOT / "config.yaml"),
                     "--configfile", str(bad)]) == 2
    assert "overlay.yaml: invalid YAML at line 2, column 1" in capsys.readouterr().err
    good = tmp_path / "good.yaml"
    good.write_text("agent:\n  max_steps: 4\n")
    cfg = config.load(ROOT / "config.yaml", [good])
    assert cfg.raw["agent"]["max_steps"] == 4 and cfg.raw["agent"]["send_tools"] is True


@pytest.mark.e2e
def test_item2_yaml_syntax_and_tab_errors_name_line_and_column(fresh: Path) -> None:
    """Item 2: a tab and a broken flow list give line and column, not Snakemake's
    generic "not valid JSON or YAML"."""
    text = (fresh / "config.yaml").read_text(encoding="utf-8")
    line = text[: text.index("  max_steps: 6 ")].count("\n") + 1
    edit_config(fresh, "  max_steps: 6 ", "\tmax_steps: 6 ")
    proc = snakemake(fresh, "-n")
    assert proc.returncode != 0
    assert f"invalid YAML at line {line}, column 1" in out(proc), out(proc)[-2000:]
    assert "tabs" in out(proc)
    edit_config(fresh, "\tmax_steps: 6 ", "  max_steps: [6 ")
    proc = snakemake(fresh, "-n")
    assert proc.returncode != 0
    assert "invalid YAML at line" in out(proc) and ", column " in out(proc)


# ------------------------------------------------------------------ 3, 4, 5: config checks


def test_item3_names_are_capped_to_what_a_file_system_holds(raw_config: dict) -> None:
    """Item 3: a 300-character scenario name is refused naming the field (it crashed the
    run with `File name too long`), so is a name Snakemake takes for a periodic wildcard;
    100 characters still work."""
    from reactlab.config import MAX_NAME, parse

    for table, old in (("scenarios", "correcto"), ("tasks", "variacion_busi"),
                       ("backends", "anthropic")):
        raw = json.loads(json.dumps(raw_config))
        raw[table]["x" * 300] = raw[table][old]
        with pytest.raises(ConfigError) as err:
            parse(raw)
        assert err.value.field.startswith(f"{table}.xxx"), err.value
        assert f"at most {MAX_NAME}" in str(err.value)

    raw = json.loads(json.dumps(raw_config))
    raw["scenarios"]["bucle" + "_x" * 20] = raw["scenarios"]["correcto"]
    with pytest.raises(ConfigError) as err:  # Snakemake's PeriodicWildcardError
        parse(raw)
    assert err.value.field == "scenarios.bucle" + "_x" * 20
    assert "'_x' repeated 20 times" in str(err.value)

    raw = json.loads(json.dumps(raw_config))
    long = "c" + "de" * (MAX_NAME // 2 - 1) + "f"
    raw["scenarios"][long] = raw["scenarios"]["correcto"]
    raw["matrix"][0]["scenarios"].append(long)
    run = next(r for r in parse(raw).runs if r.scenario == long)
    assert len(f".{run.scenario}.jsonl.{2**22}.tmp") < 255


@pytest.mark.e2e
def test_item4_missing_data_file_names_data_prices(fresh: Path) -> None:
    """Item 4: `data.prices` naming a file that does not exist (under another name than
    the generated one) stops at parse time naming `data.prices`, not with a
    MissingOutputException in generate_data."""
    edit_config(fresh, "prices: data/acciones6_precios.parquet",
                "prices: data/mis_precios.parquet")
    proc = snakemake(fresh, "-n")
    assert proc.returncode != 0
    assert "data.prices: data/mis_precios.parquet does not exist" in out(proc), out(proc)[-2000:]


def test_item4_data_source_resolution(raw_config: dict, tmp_path: Path) -> None:
    """Item 4: the user's file, else the generated default name, else a ConfigError."""
    from reactlab.config import data_source

    raw = json.loads(json.dumps(raw_config))
    assert data_source(raw, "prices", tmp_path) == "data/generated/acciones6_precios.parquet"
    raw["data"]["prices"] = "data/otro.parquet"
    with pytest.raises(ConfigError) as err:
        data_source(raw, "prices", tmp_path)
    assert err.value.field == "data.prices"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "otro.parquet").write_bytes(b"x")
    assert data_source(raw, "prices", tmp_path) == "data/otro.parquet"


def test_item4_reactlab_check_names_data_prices(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Item 4: `reactlab check` resolves the data files as the pipeline does."""
    from reactlab import cli

    cfg = tmp_path / "config.yaml"
    cfg.write_text((ROOT / "config.yaml").read_text(encoding="utf-8").replace(
        "prices: data/acciones6_precios.parquet", "prices: data/mis_precios.parquet"))
    assert cli.main(["check", "--config", str(cfg)]) == 2
    assert "config: data.prices: data/mis_precios.parquet does not exist" in \
        capsys.readouterr().err


def test_item5_figure_marks_beyond_the_run_length(raw_config: dict) -> None:
    """Item 5: a mark past the loop run's max_steps names `figure.marks[i]`."""
    from reactlab.config import parse

    raw = json.loads(json.dumps(raw_config))
    raw["figure"]["marks"] = [6, 12, 31]
    with pytest.raises(ConfigError) as err:
        parse(raw)
    assert err.value.field == "figure.marks[2]"
    assert "beyond the run's length" in str(err.value) and "30" in str(err.value)
    raw["figure"]["marks"] = [6, 12, 30]
    parse(raw)


# ------------------------------------------------------------------ 6: user data files


def test_item6_empty_data_files_are_refused(data_files: tuple[Path, Path]) -> None:
    """Item 6: a prices (or news) file with zero rows is a DataError naming the file."""
    import pandas as pd

    from reactlab.data import check_news, check_prices

    with pytest.raises(DataError, match=r"mine\.parquet: the file has no rows"):
        check_prices(pd.read_parquet(data_files[0]).iloc[:0], "mine.parquet")
    with pytest.raises(DataError, match="no rows"):
        check_news(pd.read_parquet(data_files[1]).iloc[:0], "news.parquet")


def test_item6_lesson_values_missing_give_a_warning(data_files: tuple[Path, Path]) -> None:
    """Item 6: user data without the lesson's pinned values warns; the generated one not."""
    import pandas as pd

    from reactlab.data import check_prices, lesson_warnings, load_news, load_prices

    prices, news = load_prices(data_files[0]), load_news(data_files[1])
    assert lesson_warnings(prices, news) == []
    other = prices.copy()
    other.loc[other.ticker == "BUSI", "cierre"] *= 2
    (warning,) = lesson_warnings(check_prices(other), news)
    assert "BUSI close 26.19 on 2024-03-15 (found 52.38)" in warning
    assert "Un fondo ofrece comprar" not in warning
    (warning,) = lesson_warnings(None, news[news.ticker != "BUSI"].reset_index(drop=True))
    assert "Un fondo ofrece comprar Busmar Hogar" in warning
    assert isinstance(prices, pd.DataFrame)


@pytest.mark.e2e
def test_item6_empty_prices_file_stops_before_any_job(fresh: Path, data_files) -> None:
    """Item 6: a zero-row prices file in data/ stops the run at parse time naming
    data.prices (it used to run, and 45 of 66 runs ended in backend_error)."""
    import pandas as pd

    (fresh / "data").mkdir()
    pd.read_parquet(data_files[0]).iloc[:0].to_parquet(
        fresh / "data" / "acciones6_precios.parquet")
    proc = snakemake(fresh, "-n")
    assert proc.returncode != 0
    assert "data.prices: data/acciones6_precios.parquet: the file has no rows" in out(proc), \
        out(proc)[-2000:]

    own = pd.read_parquet(data_files[0])
    own["cierre"] = own["cierre"] * 2
    own.to_parquet(fresh / "data" / "acciones6_precios.parquet")
    proc = snakemake(fresh, "-n")
    assert proc.returncode == 0, out(proc)[-2000:]
    assert "warning: your data lacks the lesson's pinned values" in out(proc)


# ------------------------------------------------------------------ 7: the viewer


def test_item7_viewer_folder_is_published_atomically(tmp_path: Path) -> None:
    """Item 7: a viewer build that dies half-way leaves the previous folder untouched and
    no half-written one; a complete build carries a checksum manifest."""
    from reactlab.trace.integrity import MANIFEST, check_manifest, publish_dir

    out_dir = tmp_path / "viewer"

    def good(tmp: Path) -> list[Path]:
        (tmp / "index.html").write_text("v1")
        return [tmp / "index.html"]

    publish_dir(out_dir, good)
    assert check_manifest(out_dir / MANIFEST) == []

    def dies(tmp: Path) -> list[Path]:
        (tmp / "page.html").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        publish_dir(out_dir, dies)
    assert (out_dir / "index.html").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["viewer"]
    (out_dir / "index.html").write_text("edited")
    assert "checksum mismatch" in check_manifest(out_dir / MANIFEST)[0]


@pytest.mark.e2e
def test_item7_incomplete_viewer_is_rebuilt_by_a_plain_rerun(copy: Path) -> None:
    """Item 7: a viewer folder with index.html and pages missing (what a killed or
    disk-full viewer job left) is rebuilt by a plain rerun, not "Nothing to be done"."""
    viewer = copy / "results" / "viewer"
    expected = {p.relative_to(viewer): p.read_bytes() for p in viewer.rglob("*.html")}
    (viewer / "index.html").unlink()
    (viewer / f"{RUNS[0]}.html").unlink()
    proc = snakemake(copy)
    assert proc.returncode == 0, out(proc)[-3000:]
    assert "the viewer will be rebuilt" in out(proc)
    assert {p.relative_to(viewer): p.read_bytes() for p in viewer.rglob("*.html")} == expected


# ------------------------------------------------------------------ 8-11: damaged results


@pytest.mark.full  # a rerun that regenerates five runs (about 1.5 min)
@pytest.mark.e2e
def test_item8_deleted_or_edited_traces_and_verifications_are_regenerated(copy: Path) -> None:
    """Items 8 (and 9, 10 through the pipeline): a deleted trace, an edited trace, a
    deleted verification, an edited verdict and a truncated verification are all found
    before the DAG is built and regenerated by a plain rerun, byte-identical."""
    before = snapshot(copy)
    res = copy / "results"
    (res / "traces" / f"{RUNS[0]}.jsonl").unlink()
    edited = res / "traces" / f"{RUNS[1]}.jsonl"
    edited.write_bytes(edited.read_bytes().replace(b'"step": 2', b'"step": 3', 1))
    verdict = res / "verified" / f"{RUNS[2]}.json"
    record = json.loads(verdict.read_text())
    assert record["verified"] is False  # herramienta_equivocada answers without a figure
    verdict.write_text(json.dumps({**record, "verified": True, "findings": []}))
    proc = snakemake(copy)
    assert proc.returncode == 0, out(proc)[-3000:]
    text = out(proc)
    assert f"results/traces/{RUNS[0]}.jsonl is missing: it will be regenerated" in text
    assert f"results/traces/{RUNS[1]}.jsonl: checksum mismatch" in text
    assert f"results/verified/{RUNS[2]}.json: 'verified' differs" in text
    assert snapshot(copy) == before
    assert "Nothing to be done" in out(snakemake(copy, "-n"))

    # A deleted verification, and a run whose trace and verification are both gone (as a
    # run the config gained: no message, nothing else removed): rule all asks for both,
    # and the tables are rebuilt after them.
    (res / "verified" / f"{RUNS[0]}.json").unlink()
    (res / "traces" / f"{RUNS[2]}.jsonl").unlink()
    (res / "verified" / f"{RUNS[2]}.json").unlink()
    proc = snakemake(copy)
    assert proc.returncode == 0, out(proc)[-3000:]
    assert "is missing" not in out(proc)
    assert snapshot(copy) == before

    # A truncated verification: the same repair, no JSONDecodeError traceback.
    truncated = res / "verified" / f"{RUNS[1]}.json"
    truncated.write_bytes(truncated.read_bytes()[:40])
    proc = snakemake(copy)
    assert proc.returncode == 0, out(proc)[-3000:]
    assert "cannot read the verification" in out(proc)
    assert "Traceback" not in out(proc)
    assert snapshot(copy) == before


def test_item8_a_damaged_live_trace_stops_naming_file_and_repair(tmp_path: Path) -> None:
    """Item 8: a trace that costs real API calls is never removed: the error names the
    file and the commands that repair it."""
    from reactlab.analysis.recovery import DamagedResult, recover

    key = "variacion_busi/openai_live/react"
    path = tmp_path / "results" / "traces" / f"{key}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text('{"type": "header"}\n')
    with pytest.raises(DamagedResult) as err:
        recover([key], tables=[], figures=[], viewer=str(tmp_path / "v"), costly=[key],
                results=tmp_path / "results")
    assert str(path) in str(err.value) and "workflow/configs/replay.yaml" in str(err.value)
    assert path.exists()


def _one_run(tmp_path: Path, toolbox) -> tuple[Path, Path]:
    from reactlab.analysis.verify import verification_record
    from reactlab.config import load
    from reactlab.runner import run_to_trace
    from reactlab.trace import read, write_json_atomic

    spec = load(ROOT / "config.yaml").run("variacion_busi", "anthropic", "cierre_como_porcentaje")
    trace = tmp_path / "t.jsonl"
    run_to_trace(spec, toolbox, trace)
    verified = tmp_path / "v.json"
    write_json_atomic(verified, verification_record(read(trace), str(trace)))
    return trace, verified


FIGURE = {"task": "variacion_busi", "backend": "anthropic", "loop": "cierre_como_porcentaje",
          "reference": "cierre_como_porcentaje", "marks": [1]}


def test_item8_verify_error_says_how_to_repair(tmp_path: Path, toolbox,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Item 8: a job that meets an edited trace says what is wrong and how to repair it."""
    from reactlab import cli

    trace, _ = _one_run(tmp_path, toolbox)
    trace.write_bytes(trace.read_bytes().replace(b'"step": 1', b'"step": 7', 1))
    assert cli.main(["verify", "--trace", str(trace), "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert "checksum mismatch" in err and "run the pipeline again (`snakemake" in err


def test_item9_tables_recompute_the_verdict(tmp_path: Path, toolbox) -> None:
    """Item 9: an edited verification (`"verified": true, "findings": []`) is refused by
    the tables, which recompute the verdict instead of trusting the file."""
    from reactlab.analysis import tables

    trace, verified = _one_run(tmp_path, toolbox)
    tables.build([(str(trace), str(verified))], FIGURE, tmp_path / "ok")
    record = json.loads(verified.read_text())
    assert record["verified"] is False
    verified.write_text(json.dumps({**record, "verified": True, "findings": []}))
    with pytest.raises(TraceError, match="'verified' differs from verifying the trace again"):
        tables.build([(str(trace), str(verified))], FIGURE, tmp_path / "out")


def test_item10_truncated_verification_is_a_clear_error(tmp_path: Path, toolbox) -> None:
    """Item 10: a truncated verification file gives a TraceError naming the file and the
    repair, not a raw JSONDecodeError."""
    from reactlab.analysis import tables

    trace, verified = _one_run(tmp_path, toolbox)
    verified.write_bytes(verified.read_bytes()[:30])
    with pytest.raises(TraceError) as err:
        tables.build([(str(trace), str(verified))], FIGURE, tmp_path / "out")
    assert f"{verified}: cannot read the verification" in str(err.value)
    assert "snakemake" in str(err.value)


def test_item11_figure_refuses_an_edited_table(tmp_path: Path, toolbox) -> None:
    """Item 11: a table edited after publication fails its checksum; the figure job
    refuses to draw from it."""
    from reactlab.analysis import figures, tables

    trace, verified = _one_run(tmp_path, toolbox)
    written = tables.build([(str(trace), str(verified))], FIGURE, tmp_path / "t")
    figures.check_source(written["runs"])
    written["runs"].write_text(written["runs"].read_text().replace("anthropic", "x"))
    with pytest.raises(TraceError, match=r"runs\.csv: checksum mismatch"):
        figures.check_source(written["runs"])


@pytest.mark.e2e
def test_item11_edited_table_is_rebuilt_and_figures_redrawn(copy: Path) -> None:
    """Item 11: an edited table is replaced by the one the traces give, and the figures
    drawn from it are redrawn, on a plain rerun."""
    before = snapshot(copy)
    runs = copy / "results" / "tables" / "runs.csv"
    runs.write_text(runs.read_text().replace("True", "False"))
    proc = snakemake(copy)
    assert proc.returncode == 0, out(proc)[-3000:]
    assert "results/tables/runs.csv: checksum mismatch" in out(proc)
    assert "figure_outcomes" in out(proc)
    assert snapshot(copy) == before


# ------------------------------------------------------------------ 12, 13


@pytest.mark.e2e
def test_item12_second_run_while_one_is_live_is_told_so(copy: Path) -> None:
    """Item 12: while another run holds the folder (its flock), a second run stops with
    "another run is active in this folder", not advice to use --rerun-incomplete, and
    touches nothing."""
    (copy / "results" / "tables" / "runs.csv").unlink()  # work a run would do
    with open(copy / ".snakemake" / "reactlab.flock", "a+") as live:
        fcntl.flock(live, fcntl.LOCK_EX | fcntl.LOCK_NB)
        live.truncate(0)
        live.write("4242\n")
        live.flush()
        proc = snakemake(copy)
    assert proc.returncode != 0
    assert "another run is active in this folder" in out(proc), out(proc)[-2000:]
    assert "process 4242" in out(proc)
    assert "--rerun-incomplete" not in out(proc)
    assert not (copy / "results" / "tables" / "runs.csv").exists()


@pytest.mark.e2e
def test_item13_stray_files_are_reported(copy: Path) -> None:
    """Item 13: a file under results/traces that belongs to no run is reported."""
    stray = copy / "results" / "traces" / "variacion_busi" / "anthropic" / "viejo.jsonl"
    shutil.copy(copy / "results" / "traces" / f"{RUNS[0]}.jsonl", stray)
    (copy / "results" / "traces" / "notes.txt").write_text("mine")
    proc = snakemake(copy, "-n")
    assert proc.returncode == 0, out(proc)[-2000:]
    assert "2 file(s) under results/ belong to no run of the config" in out(proc)
    assert "viejo.jsonl" in out(proc) and "notes.txt" in out(proc)
    assert stray.exists()


@pytest.mark.e2e
def test_item13_full_disk_is_named_before_any_job(fresh: Path) -> None:
    """Item 13: with less free space than a run needs, the run stops saying "no space
    left on device (ENOSPC)", not "ensure write permissions" (threshold raised by the
    environment variable, as a full disk cannot be made without root)."""
    proc = snakemake(fresh, "-n", env={"REACTLAB_MIN_FREE_BYTES": str(2**62)})
    assert proc.returncode != 0
    assert "no space left on device (ENOSPC)" in out(proc), out(proc)[-2000:]
    assert "write permissions" not in out(proc)


def test_item13_enospc_in_a_job_is_named(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path, toolbox) -> None:
    """Item 13: a job that hits a full disk says ENOSPC and exits 2 (no traceback)."""
    from reactlab import cli
    from reactlab.core import io

    path, _ = _one_run(tmp_path, toolbox)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.json"))

    monkeypatch.setattr(io, "write_json_atomic", full)  # what `reactlab verify` writes with
    assert cli.main(["verify", "--trace", str(path), "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "no space left on device (ENOSPC) writing" in err and "x.json" in err


def test_item13_disk_full_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 13: the parse-time check says ENOSPC below the reserve, nothing above."""
    from reactlab.analysis import recovery

    usage = shutil.disk_usage(".")
    monkeypatch.setattr(recovery.shutil, "disk_usage",
                        lambda _: usage._replace(free=1000))
    assert "no space left on device (ENOSPC): 1,000 bytes free" in recovery.disk_full(".")
    monkeypatch.setattr(recovery.shutil, "disk_usage",
                        lambda _: usage._replace(free=recovery.MIN_FREE))
    assert recovery.disk_full(".") is None
