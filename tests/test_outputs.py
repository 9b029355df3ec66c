"""The registry of tables and figures (reactlab.analysis.outputs): what the rules and the
CLI read agrees with what the code writes and draws."""

from __future__ import annotations

from pathlib import Path

import pytest

from reactlab.analysis import outputs
from reactlab.core.errors import UsageError
from reactlab.suites.registry import figures as benchmark_figures
from tests.conftest import ROOT
from tests.test_damage import FIGURE, _one_run


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, toolbox) -> dict[str, Path]:
    from reactlab.analysis import tables

    tmp = tmp_path_factory.mktemp("outputs")
    trace, verified = _one_run(tmp, toolbox)
    return tables.build([(str(trace), str(verified))], FIGURE, tmp / "tables",
                        latex=[t.name for t in outputs.TABLES if t.latex])


def test_the_registry_lists_the_tables_build_writes(built: dict[str, Path]) -> None:
    key = [t.name for t in outputs.TABLES if t.latex]
    assert list(built) == [t.name for t in outputs.TABLES] + [f"{n}.tex" for n in key]
    assert outputs.table_paths() == [f"results/tables/{Path(p).name}" for p in built.values()]


def test_each_key_table_is_its_csv_in_booktabs_latex(built: dict[str, Path]) -> None:
    """Issue 41, item 5: the LaTeX twin of a key table holds the CSV's header and cells
    (escaped, empty as --) between booktabs rules, and is in the tables' manifest."""

    from reactlab.trace.integrity import MANIFEST

    manifest = (built["runs"].parent / MANIFEST).read_text(encoding="utf-8")
    for table in (t for t in outputs.TABLES if t.latex):
        assert f"{table.name}.tex" in manifest, table.name
        assert_latex_twin(built[table.name], built[f"{table.name}.tex"])


def assert_latex_twin(csv_path: Path, tex_path: Path) -> None:
    """``tex_path`` holds the CSV's header and cells (a decimal with four decimals,
    escaped, empty as --) between booktabs rules, after a comment naming the CSV."""
    import csv

    tex = tex_path.read_text(encoding="utf-8")
    assert tex.startswith(f"% results/tables/{csv_path.name}"), tex_path
    lines = tex.splitlines()
    body = lines[lines.index("\\midrule") + 1:lines.index("\\bottomrule")]
    head = lines[lines.index("\\toprule") + 1]
    with csv_path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))

    def cell(text: str) -> str:
        try:
            return f"{float(text):.4f}" if "." in text else text
        except ValueError:
            return text

    def latex_row(row: list[str]) -> str:
        return " & ".join(cell(c).replace("_", "\\_").replace("&", "\\&") or "--"
                          for c in row) + " \\\\"

    assert head == latex_row(rows[0]), tex_path
    assert body == [latex_row(r) for r in rows[1:]], tex_path


def test_a_benchmark_table_gets_its_latex_twin_but_a_per_case_one(tmp_path: Path) -> None:
    """Issue 41: the suite tables' LaTeX twins (suites.shards.write_latex, called by the
    suite table jobs), from the goldens' bfcl.csv and agentdojo.csv, cell for cell; the
    per-case table gets none; a column of numbers is right-aligned."""
    import shutil

    from reactlab.suites.shards import write_latex

    written = {}
    for name in ("bfcl", "bfcl_cases", "agentdojo"):
        written[name] = tmp_path / f"{name}.csv"
        shutil.copy(ROOT / "tests" / "golden" / f"{name}.csv", written[name])
    assert [p.name for p in write_latex(written)] == ["agentdojo.tex", "bfcl.tex"]
    assert not (tmp_path / "bfcl_cases.tex").exists()
    for name in ("bfcl", "agentdojo"):
        assert_latex_twin(written[name], tmp_path / f"{name}.tex")
    tabular = (tmp_path / "bfcl.tex").read_text(encoding="utf-8").splitlines()[1]
    # source suite backend scenario category: text; cases correct accuracy: numbers;
    # ci_low ci_high: empty in every row (scripted backends: no interval); error_types:
    # text; project_correct, agreement: numbers
    assert tabular == "\\begin{tabular}{lllllrrrlllrr}", tabular


def test_every_figure_is_drawn_through_the_registry(built: dict[str, Path],
                                                    tmp_path: Path) -> None:
    for kind, figure in outputs.FIGURES.items():
        assert figure.source in built, kind
        png = outputs.draw(kind, built[figure.source], tmp_path / f"{kind}.png", FIGURE)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", kind
        assert b"<svg" in png.with_suffix(".svg").read_bytes()[:2000], kind
    with pytest.raises(UsageError, match="unknown figure kind 'pie'"):
        outputs.draw("pie", built["runs"], tmp_path / "pie.png", FIGURE)


def test_every_table_and_figure_has_its_caption() -> None:
    every = [*outputs.FIGURES.values(), *benchmark_figures().values()]
    pages = [t.caption for t in outputs.TABLES] + [f.caption for f in every]
    assert [p for p in pages if not (ROOT / "workflow" / "report" / f"{p}.rst").is_file()] == []


def test_the_cli_offers_the_registrys_figures(built: dict[str, Path], tmp_path: Path) -> None:
    from reactlab import cli

    parser = cli.build_parser()
    figure = next(a for a in parser._subparsers._group_actions[0].choices["figure"]._actions
                  if a.dest == "kind")
    assert all(kind in figure.help for kind in outputs.FIGURES)
    out = tmp_path / "o.png"
    assert cli.main(["figure", "--kind", "outcomes", "--table", str(built["runs"]),
                     "--out", str(out)]) == 0
    assert out.is_file()
    with pytest.raises(UsageError, match=r"unknown figure kind 'pie'.*bfcl_accuracy"):
        outputs.figure_entry("pie", benchmark_figures().values())


def test_suite_figures_are_drawn_from_their_tables(tmp_path: Path) -> None:
    from reactlab.suites.bfcl_tables import build_bfcl
    from tests.conftest import run_suite_shards
    from tests.test_suites import suite_config

    tables = build_bfcl(run_suite_shards(suite_config(sample=1), tmp_path / "r"), tmp_path / "t")
    suite = benchmark_figures().values()
    assert [f.kind for f in outputs.suite_figures([str(tables["bfcl"])], suite)] == [
        "bfcl_accuracy"]
    assert outputs.suite_figures(["results/tables/runs.csv"], suite) == []
    png = outputs.draw("bfcl_accuracy", tables["bfcl"], tmp_path / "b.png", {}, suite)
    again = outputs.draw("bfcl_accuracy", tables["bfcl"], tmp_path / "c.png", {}, suite)
    assert png.read_bytes() == again.read_bytes()
    assert png.with_suffix(".svg").read_bytes() == again.with_suffix(".svg").read_bytes()


def test_success_rates_pool_tasks_so_the_figure_does_not_grow_with_them(tmp_path: Path
                                                                         ) -> None:
    import csv

    from reactlab.analysis.trial_figures import pooled, success_rates
    from tests.test_viewer_browser import _png_size

    def summary(n_tasks: int) -> Path:
        path = tmp_path / f"summary_{n_tasks}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["task", "backend", "scenario", "agent", "deterministic", "n",
                        "successes"])
            for t in range(n_tasks):
                for b in ("openai", "local"):
                    for s in ("correcto", "bucle"):
                        w.writerow([f"t{t:04d}", b, s, "lesson", False, 3,
                                    (t + len(b) + len(s)) % 4])
        return path

    small, large = summary(3), summary(1500)
    groups = pooled(large)
    assert sorted(groups) == [(b, "lesson", s) for b in ("local", "openai")
                              for s in ("bucle", "correcto")]
    pool = groups[("openai", "lesson", "bucle")]
    assert (pool.successes, pool.n) == (sum((t + 6 + 5) % 4 for t in range(1500)), 3 * 1500)
    assert pool.interval and not pool.deterministic
    a = success_rates(small, tmp_path / "small.png")
    b = success_rates(large, tmp_path / "large.png")
    assert _png_size(a.read_bytes()) == _png_size(b.read_bytes())


def test_a_damaged_suite_figure_or_one_without_its_table_is_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reactlab import jobs
    from reactlab.suites.bfcl_tables import build_bfcl
    from tests.conftest import run_suite_shards
    from tests.test_suites import suite_config

    cases = run_suite_shards(suite_config(sample=1), tmp_path / "r")
    table = build_bfcl(cases, tmp_path / "t")["bfcl"]
    monkeypatch.chdir(tmp_path)  # the figure's own paths: results/figures/...
    figure = benchmark_figures()["bfcl_accuracy"]
    png = Path(figure.paths[0])
    tables = str(table.parent)

    def draw() -> None:
        outputs.draw("bfcl_accuracy", table, png, {}, [figure])

    draw()
    assert jobs.remove_damaged_figures([figure], tables) == []
    assert png.is_file()  # intact: kept
    png.write_bytes(png.read_bytes() + b"edited")
    assert "the figure will be redrawn" in jobs.remove_damaged_figures([figure], tables,
                                                                       apply=False)[0]
    assert png.exists()  # a dry run removes nothing
    assert "the figure will be redrawn" in jobs.remove_damaged_figures([figure], tables)[0]
    assert not png.exists() and not png.with_suffix(".svg").exists()
    draw()
    assert "will be rebuilt" in jobs.remove_damaged_figures(
        [figure], str(tmp_path / "elsewhere"))[0]
    assert not png.exists()


AGENTDOJO_CSV = """entry,suite,backend,policy,defence,pairs,utility,utility_low,utility_high,\
attack_success_rate,asr_low,asr_high,baseline_utility,baseline_attack_success_rate
agentdojo,banking,scripted,obeys,none,144,0.8,0.73,0.86,0.3194,0.2482,0.4002,0.8,0.3194
agentdojo,banking,scripted,obeys,delimit,144,0.9,0.84,0.94,0.1,0.06,0.16,0.8,0.3194
agentdojo,slack,scripted,ground_truth,none,105,1.0,0.96,1.0,0.0,0.0,0.035,1.0,0.0
"""


def test_the_agentdojo_figure_reads_agentdojo_csv(tmp_path: Path) -> None:
    from reactlab.core.errors import TraceError

    table = tmp_path / "agentdojo.csv"
    table.write_text(AGENTDOJO_CSV, encoding="utf-8")
    suite = benchmark_figures().values()
    assert [f.kind for f in outputs.suite_figures([str(table)], suite)] == ["agentdojo_rates"]
    a = outputs.draw("agentdojo_rates", table, tmp_path / "a.png", {}, suite)
    b = outputs.draw("agentdojo_rates", table, tmp_path / "b.png", {}, suite)
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table.write_text(AGENTDOJO_CSV.replace("asr_high", "asr_top"), encoding="utf-8")
    with pytest.raises(TraceError, match="no column asr_high"):
        outputs.draw("agentdojo_rates", table, tmp_path / "c.png", {}, suite)


def test_every_caption_names_its_configuration_and_a_computed_n() -> None:
    """Issue 41: each caption of workflow/report (a template the report renders with the
    job's params and the config, as Snakemake does: jinja2, then docutils) shows the
    config files, the results stamp's fingerprint and its n from the rules' ``caption``
    param (analysis.stamp.caption); the n of the default config's plan
    (views.counts.planned) is the one its tables hold (the goldens' trials.csv)."""
    import re
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment

    from reactlab import config
    from reactlab.analysis import stamp
    from reactlab.config import load_yaml
    from reactlab.views.counts import SELECTIONS, count, planned, table_rows

    counts = planned(config.load(ROOT / "config.yaml").runs)
    rows = table_rows(ROOT / "tests" / "golden" / "trials.csv")
    assert counts == {s: sum(c[s] for c in count(rows, "backend").values())
                      for s in SELECTIONS}
    # distinct numbers, so that each caption's n shows which count it took
    n = {"runs": 1001, "one_draw": 1002, "lesson_loop": 1003}
    made = stamp.stamp(["config.yaml", "workflow/configs/replay.yaml"], ["a/b/c"], [])
    shown = stamp.caption(made, {**n, "cases": {"bfcl": 1004, "agentdojo": 1005}})
    assert shown["fingerprint"] == made["fingerprint"] == stamp.fingerprint(made)
    job = SimpleNamespace(params=SimpleNamespace(caption=shown),
                          config=load_yaml(ROOT / "config.yaml"))
    env = Environment(trim_blocks=True, lstrip_blocks=True)
    captions = sorted((ROOT / "workflow" / "report").glob("*.rst"))
    for path in captions:
        if path.stem == "workflow":  # the report's front page, not a result's caption
            continue
        text = env.from_string(path.read_text(encoding="utf-8")).render(snakemake=job)
        html = publish_parts(text, writer="html",
                             settings_overrides={"report_level": 2})["body"]
        assert "system-message" not in html, path.name  # docutils: no error, no warning
        shown_text = re.sub(r"<[^>]+>", "", html)
        assert "config.yaml + workflow/configs/replay.yaml" in shown_text, path.name
        assert f"results stamp {made['fingerprint']}" in shown_text, path.name
        said = {int(m) for m in re.findall(r"\b(\d{3,4}) ", shown_text)}
        assert said & {*n.values(), 1004, 1005}, (path.name, said)
        assert "{{" not in shown_text and "{%" not in shown_text, path.name
