"""The lesson's table and token series, reproduced to the token (tools not sent, 6 steps)."""

from __future__ import annotations

import pytest

from reactlab import config, trace
from reactlab.runner import run_to_trace

LESSON_TABLE = [
    ("correcto", "openai", 3, 3, 0, 630),
    ("correcto", "anthropic", 3, 3, 0, 643),
    ("herramienta_equivocada", "openai", 2, 1, 0, 221),
    ("herramienta_equivocada", "anthropic", 2, 1, 0, 235),
    ("argumentos_inventados", "openai", 4, 4, 1, 1065),
    ("argumentos_inventados", "anthropic", 4, 4, 1, 1101),
    ("bucle", "openai", 6, 6, 5, 1643),
    ("bucle", "anthropic", 6, 6, 5, 1763),
]
ANSWER = "El cierre de BUSI varió un 6.45 % entre 2024-03-15 y 2024-03-22."
LESSON_ANSWERS = {"correcto": ANSWER, "argumentos_inventados": ANSWER, "bucle": None,
                  "herramienta_equivocada": "BUSI subió por la oferta de compra de un fondo."}


@pytest.fixture(scope="module")
def lesson_config() -> config.Config:
    from tests.conftest import ROOT

    # the shipped overlay, as `snakemake --configfile workflow/configs/lesson.yaml` runs it
    cfg = config.load(ROOT / "config.yaml", [ROOT / "workflow" / "configs" / "lesson.yaml"])
    assert cfg.raw["agent"]["max_steps"] == 6 and cfg.raw["agent"]["send_tools"] is False
    return cfg


@pytest.mark.parametrize("row", LESSON_TABLE, ids=lambda r: f"{r[0]}-{r[1]}")
def test_lesson_table_to_the_token(row, lesson_config, toolbox, tmp_path):
    scenario, backend, steps, calls, errors, tokens = row
    spec = lesson_config.run("variacion_busi", backend, scenario)
    end = run_to_trace(spec, toolbox, tmp_path / "t.jsonl")
    assert (end["steps"], end["calls"], end["errors"], end["tokens_sent"]) == (
        steps, calls, errors, tokens)
    assert end["answer"] == LESSON_ANSWERS[scenario]
    tr = trace.read(tmp_path / "t.jsonl")
    assert sum(r.tokens_sent for r in tr.requests()) == tokens


def test_loop_series_without_limit(lesson_config, toolbox, tmp_path):
    spec = lesson_config.run("variacion_busi", "anthropic", "bucle_sin_limite")
    assert spec.script.model == "bucle"  # the simulated model is the lesson's `bucle`
    run_to_trace(spec, toolbox, tmp_path / "loop.jsonl")
    sent = [r.tokens_sent for r in trace.read(tmp_path / "loop.jsonl").requests()]
    assert len(sent) == 30
    assert sent[:6] == [53, 160, 251, 342, 433, 524]
    assert sent[24:30] == [2253, 2344, 2435, 2526, 2617, 2708]
    cumulative = [sum(sent[:i]) for i in (6, 12, 30)]
    assert cumulative == [1763, 6818, 41639]


def test_tools_sent_by_default_cost_more(raw_config, toolbox, tmp_path):
    cfg = config.parse(raw_config)
    assert cfg.raw["agent"]["send_tools"] is True
    end = run_to_trace(cfg.run("variacion_busi", "openai", "correcto"), toolbox,
                       tmp_path / "t.jsonl")
    assert end["answer"] == ANSWER
    assert end["tokens_sent"] > 630


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_tool_definitions_cost_a_constant_per_request(backend, raw_config, lesson_config,
                                                      toolbox, tmp_path):
    """The default run (tools sent) differs from the lesson's by the same amount per request.

    This ties the default configuration's own numbers (and so the golden tables) back to
    the lesson's: only the tool definitions were added to every request body.
    """
    default = config.parse(raw_config)
    series = {}
    for name, cfg in (("lesson", lesson_config), ("default", default)):
        spec = cfg.run("variacion_busi", backend, "bucle_sin_limite")
        run_to_trace(spec, toolbox, tmp_path / f"{name}.jsonl")
        series[name] = [r.tokens_sent for r in
                        trace.read(tmp_path / f"{name}.jsonl").requests()]
    deltas = {d - lesson for d, lesson in zip(series["default"], series["lesson"], strict=True)}
    assert len(deltas) == 1 and deltas.pop() > 0


@pytest.mark.e2e
def test_the_lesson_overlay_reproduces_the_table_through_the_pipeline(tmp_path):
    """The README's lesson command, in a folder of its own (`--directory`, as the overlay's
    comment says): `reactlab check` accepts the overlay, the pipeline finishes, and its own
    runs table holds the lesson's table, row for row."""
    import csv
    import subprocess
    import sys

    from reactlab import cli
    from tests.conftest import ROOT

    overlay = str(ROOT / "workflow" / "configs" / "lesson.yaml")
    assert cli.main(["check", "--config", str(ROOT / "config.yaml"),
                     "--configfile", overlay]) == 0
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", overlay,
         "--directory", str(tmp_path / "results-lesson"),
         "--", "results/tables/runs.csv"],  # the whole overlay: tests/test_docs_commands.py
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(tmp_path / "results-lesson" / "results" / "tables" / "runs.csv",
              encoding="utf-8") as f:
        rows = {(r["scenario"], r["backend"]): r for r in csv.DictReader(f)}
    for scenario, backend, steps, calls, errors, tokens in LESSON_TABLE:
        row = rows[(scenario, backend)]
        assert (int(row["steps"]), int(row["calls"]), int(row["errors"]),
                int(row["tokens_sent"])) == (steps, calls, errors, tokens), row
    loop = rows[("bucle_sin_limite", "anthropic")]
    assert (int(loop["steps"]), int(loop["tokens_sent"])) == (30, 41639)
    assert not (ROOT / "results-lesson").exists()
