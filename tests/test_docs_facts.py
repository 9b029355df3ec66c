"""The facts README.md and docs/*.md state, computed: a stale number or a missing entry is
a failing test, and its message gives the value to write.

* the README's shape: at most 150 lines, a link to every page of ``docs/``, the committed
  copy of the pipeline's figure it embeds;
* links between the pages, anchors included, resolve;
* every command has the one spelling the README states (``make run`` / ``make test`` /
  ``make env``, everything else a program of ``.venv/bin``);
* the overlays the docs list are the files of ``workflow/configs/``;
* the counts of the default run (runs, tables, figures, shards, recordings, ``run_mcp``
  jobs) are those of ``config.yaml`` and of ``.venv/bin/snakemake -n`` in a copy of the
  repository (a dry run: seconds).

The commands themselves are run (or listed with the reason they are not) by
``tests/test_docs_commands.py``.
"""

from __future__ import annotations

import re
import struct
import subprocess
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import ROOT
from tests.doc_commands import ASSIGNMENT, copy_checkout, doc_files, extract, shell

README = ROOT / "README.md"
README_MAX_LINES = 150
#: The make targets every page may give: the two main commands and the environment's;
#: docs/testing.md, the page of the Makefile, may name any target.
MAKE_TARGETS = frozenset({"run", "test", "env", "test-full", "clean"})
MAKEFILE_PAGE = "docs/testing.md"
#: Programs that are not the project's and have no `.venv/bin` spelling.
OTHER_PROGRAMS = frozenset({"conda", "curl", "sh", "head"})
NUMBER_WORDS = {w: i for i, w in enumerate(["zero", "one", "two", "three", "four", "five",
                                             "six", "seven", "eight", "nine", "ten"])}


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def flat(path: Path) -> str:
    """The page with its whitespace collapsed (a phrase may break across lines)."""
    return " ".join(text(path).split())


# ------------------------------------------------------------------ the README's shape

def test_readme_has_at_most_150_lines() -> None:
    lines = text(README).splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to a "
        "page of docs/ and link it")


def test_readme_links_every_docs_page() -> None:
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)", text(README)))
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), "pages of docs/ the README does not link"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path}: not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def readme_figure() -> Path:
    """The committed copy of the pipeline's cumulative-token figure the README embeds."""
    (src,) = re.findall(r"!\[[^\]]*\]\(([^)]*cumulative_tokens\.png)\)", text(README))
    return ROOT / src


def test_readme_embeds_a_committed_copy_of_the_figure() -> None:
    path = readme_figure()
    width, height = png_size(path)
    assert width > 0 and height > 0
    rel = path.relative_to(ROOT).as_posix()
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", rel], cwd=ROOT,
                             capture_output=True, check=False)
    assert tracked.returncode == 0, f"{rel} is not committed (results/ is git-ignored)"


def test_readme_figure_has_the_size_of_the_pipelines(tmp_path: Path) -> None:
    """The committed copy has the pixel size of the figure the pipeline draws from the
    default run's table (tests/golden/, the default run's tables), with the same
    function and the config's ``figure`` section: a copy of another figure, or of an
    older layout, fails."""
    from reactlab import config
    from reactlab.analysis import outputs

    drawn = outputs.FIGURES["cumulative_tokens"].draw(
        ROOT / "tests/golden/cumulative_tokens.csv", tmp_path / "cumulative_tokens.png",
        config.load(ROOT / "config.yaml").raw["figure"])
    assert png_size(readme_figure()) == png_size(drawn)


# ------------------------------------------------------------------ links

def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    s = heading.strip().lower().replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: Counter[str] = Counter()
    out = set()
    in_fence = False
    for line in text(path).splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            base = slug(m.group(1))
            out.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return out


def test_links_between_pages_resolve() -> None:
    """Every relative link or image of README.md and docs/*.md names a file of the
    repository and, with ``#anchor``, a heading of it."""
    bad = []
    for page in doc_files():
        body = re.sub(r"^```.*?^```", "", text(page), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", body):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                bad.append(f"{page.name}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{page.name}: {target}: no such heading")
    assert bad == []


# ------------------------------------------------------------------ one spelling

def spelling_problems(command: str, where: list[str]) -> list[str]:
    out = []
    for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", command):
        words = part.split()
        while words and (ASSIGNMENT.match(words[0]) or words[0] == "time"):
            words = words[1:]
        if not words:
            continue
        prog, args = words[0], words[1:]
        if prog == "make":
            pages = {w.split(":")[0] for w in where}
            if args and args[0] not in MAKE_TARGETS and pages != {MAKEFILE_PAGE}:
                out.append(f"`make {args[0]}` outside {MAKEFILE_PAGE}: give the command "
                           "it runs")
        elif prog == ".venv/bin/python":
            if args[:2] == ["-m", "reactlab"]:
                out.append("`.venv/bin/python -m reactlab`: write `.venv/bin/reactlab`")
        elif not prog.startswith(".venv/bin/") and prog not in OTHER_PROGRAMS:
            out.append(f"`{prog}`: write `.venv/bin/{prog.removeprefix('python3')}` "
                       "(the environment `make env` creates)")
    return out


def test_every_command_has_the_one_spelling() -> None:
    bad = {c: (p, w) for c, w in extract().items() if (p := spelling_problems(c, w))}
    assert not bad, "\n".join(f"{c!r} ({', '.join(w)}): {'; '.join(p)}"
                              for c, (p, w) in bad.items())


# ------------------------------------------------------------------ overlays

def test_overlay_table_names_every_overlay() -> None:
    page = text(ROOT / "docs/configuration.md")
    section = page[page.index("## Overlays"):]
    listed = re.findall(r"^\| `([\w-]+\.yaml)` \|", section, re.M)
    shipped = sorted(p.name for p in (ROOT / "workflow/configs").glob("*.yaml"))
    assert sorted(listed) == shipped
    assert len(set(listed)) == len(listed), "an overlay listed twice"


#: Every ```yaml block of docs/, by (page, line of its fence): ``overlay`` (given as it
#: stands to ``--configfile``: merged into config.yaml, lists replaced), ``edit`` (added
#: to config.yaml's own sections, as its page says: mappings merged, its matrix blocks
#: appended to the matrix) or ``plugin`` (a part of examples/plugin/config.yaml, the
#: overlay tests/test_plugin.py runs with the example plugin installed).
YAML_BLOCKS = {
    ("agents.md", "agents:"): "overlay",
    ("configuration.md", "scenarios:"): "edit",
    ("configuration.md", "tasks:"): "edit",
    ("local-models.md", "backends:"): "edit",
    ("mcp.md", "mcp_servers:"): "overlay",
    ("plugins.md", "agents:"): "plugin",
    ("plugins.md", "backends:"): "plugin",
    ("plugins.md", "suites:"): "plugin",
    ("plugins.md", "tool_sources:"): "plugin",
    ("simulators.md", "backends:"): "overlay",
    ("statistics.md", "matrix:"): "edit",
    ("suites.md", "suites:"): "overlay",
}


def yaml_blocks() -> list[tuple[str, str, str]]:
    """(page, first line, text) of every ```yaml block under docs/."""
    out = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for m in re.finditer(r"^```yaml\n(.*?)^```", text(page), re.S | re.M):
            out.append((page.name, m.group(1).split("\n", 1)[0].split("#")[0].strip(),
                        m.group(1)))
    return out


def test_every_config_snippet_of_the_docs_is_valid_as_its_page_uses_it() -> None:
    """Issue 41, item 4: an overlay block is valid given as it stands to `--configfile`
    (its `matrix:` replaces the default's, so it must be a whole matrix, figure included);
    an edit block is valid added to config.yaml's sections; a plugin block is the example
    plugin's overlay's, word for word."""
    import yaml

    from reactlab import config

    base = config.load_yaml(ROOT / "config.yaml")
    plugin = text(ROOT / "examples/plugin/config.yaml")
    blocks = yaml_blocks()
    assert {(page, first) for page, first, _ in blocks} == set(YAML_BLOCKS)
    for page, first, block in blocks:
        kind = YAML_BLOCKS[page, first]
        where = f"docs/{page}, block {first}"
        if kind == "plugin":
            assert block in plugin, where
            continue
        snippet = yaml.safe_load(block)
        if kind == "overlay":
            raw = config.merge(base, snippet)
        else:
            raw = config.merge(base, {k: v for k, v in snippet.items() if k != "matrix"})
            raw["matrix"] = [*base["matrix"], *snippet.get("matrix", [])]
        try:
            config.parse(raw)
        except config.ConfigError as exc:
            pytest.fail(f"{where} ({kind}): {exc}")


def test_check_says_what_an_overlay_replaces_merges_and_removes(capsys) -> None:
    """`reactlab check --configfile` names each key an overlay replaces or merges and the
    runs it adds and removes against config.yaml (docs/configuration.md, "Overlays")."""
    from reactlab import cli, config

    overlay = ROOT / "workflow/configs/lesson.yaml"
    assert cli.main(["check", "--config", str(ROOT / "config.yaml"),
                     "--configfile", str(overlay)]) == 0
    err = capsys.readouterr().err
    base = {r.key for r in config.load(ROOT / "config.yaml").runs}
    merged = {r.key for r in config.load(ROOT / "config.yaml", [overlay]).runs}
    n_blocks = len(config.load_yaml(overlay)["matrix"])
    assert f"    matrix: replaced ({len(config.load_yaml(ROOT / 'config.yaml')['matrix'])} " \
           f"items -> {n_blocks} item" in err, err
    assert "    agent: merged (changes send_tools)" in err, err
    assert (f"  runs: {len(base & merged)} kept, {len(merged - base)} added, "
            f"{len(base - merged)} removed") in err, err


# ------------------------------------------------------------------ counts of the default run

class Plan(NamedTuple):
    """What ``.venv/bin/snakemake -n`` plans in a clean copy of the repository."""

    jobs: dict[str, int]  # rule -> jobs, and "total"
    paths: set[str]  # every results/... path it names

    def count(self, pattern: str) -> int:
        return sum(bool(re.fullmatch(pattern, p)) for p in self.paths)


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    work = copy_checkout(tmp_path_factory.mktemp("docs-facts"))
    ran = shell(".venv/bin/snakemake -n", work, timeout=300)
    assert ran.rc == 0, ran.why()
    stats = ran.out[ran.out.index("Job stats:"):]
    jobs = {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", stats, re.M)}
    jobs["total"] = int(re.findall(r"^total\s+(\d+)$", ran.out, re.M)[0])
    paths = set(re.findall(r"results/[^\s,;]+", ran.out))
    return Plan(jobs, paths)


def readme_results_table() -> dict[str, str]:
    """The README's table of ``results/``: folder -> its count cell."""
    readme = text(README)
    section = readme[readme.index("## What appears under `results/`"):]
    section = section[:section.index("\n## ", 1)]
    return dict(re.findall(r"^\| `results/(\w+)/` \|.*\| ([^|]+) \|$", section, re.M))


def test_readme_names_every_folder_the_pipeline_writes(plan: Plan) -> None:
    folders = {p.split("/")[1] for p in plan.paths}
    assert set(readme_results_table()) == folders


def expected_counts(plan: Plan) -> dict[str, int]:
    from reactlab import config

    runs = len(config.load(ROOT / "config.yaml").runs)
    counts = {
        "traces": plan.count(r"results/traces/.+\.jsonl"),
        "verified": plan.count(r"results/verified/.+\.json"),
        "tables": plan.count(r"results/tables/\w+\.csv"),
        "figures": plan.count(r"results/figures/\w+\.png"),
        "suites": plan.jobs.get("suite_run", 0),
        "recordings": plan.count(r"results/recordings/.+\.jsonl"),
    }
    assert counts["traces"] == counts["verified"] == runs, (counts, runs)
    assert counts["recordings"] == plan.jobs.get("run_mcp", 0)
    return counts


def test_readme_counts_are_the_default_runs(plan: Plan) -> None:
    table = readme_results_table()
    stated = {k: int(re.match(r"\d+", v.strip()).group()) for k, v in table.items()
              if re.match(r"\d+", v.strip())}
    expected = expected_counts(plan)
    assert stated == expected, f"README.md's results/ table: write {expected}"


def test_pipeline_page_names_every_latex_table() -> None:
    from reactlab.analysis import outputs

    page = flat(ROOT / "docs/pipeline.md")
    tables = page[page.index("**Tables**"):page.index("**Figures**")]
    assert set(re.findall(r"`(\w+)\.tex`", tables)) == \
        {t.name for t in outputs.TABLES if t.latex}


def test_pipeline_page_names_every_table_and_figure(plan: Plan) -> None:
    from reactlab.analysis import outputs

    page = flat(ROOT / "docs/pipeline.md")
    tables = page[page.index("**Tables**"):page.index("**Figures**")]
    figures = page[page.index("**Figures**"):page.index("**Viewer**")]
    planned = {p.split("/")[-1] for p in plan.paths if re.fullmatch(r"results/tables/\w+\.csv", p)}
    assert set(re.findall(r"`(\w+\.csv)`", tables)) == planned
    named = set(re.findall(r"`(\w+)`", figures)) - {"png", "svg"}
    from reactlab.suites.registry import figures as benchmark_figures

    assert named == set(outputs.FIGURES) | set(benchmark_figures())
    (word,) = re.findall(r"same bytes\): (\w+) of them", figures)
    assert NUMBER_WORDS[word] == len(outputs.FIGURES), \
        f"write {len(outputs.FIGURES)} figures of the lesson's tables"


def test_mcp_counts_are_the_default_runs(plan: Plan) -> None:
    run_mcp = plan.jobs.get("run_mcp", 0)
    (stated,) = re.findall(r"(\d+) `run_mcp` jobs", flat(ROOT / "docs/mcp.md"))
    assert int(stated) == run_mcp, f"docs/mcp.md: write {run_mcp} `run_mcp` jobs"
    (stated,) = re.findall(r"the MCP slice \((\d+) runs", flat(ROOT / "docs/cluster.md"))
    assert int(stated) == run_mcp, f"docs/cluster.md: write {run_mcp} runs"


def test_workflow_page_counts_the_default_jobs(plan: Plan) -> None:
    """docs/workflow.md's breakdown of the default run's jobs."""
    from reactlab import config

    runs = config.load(ROOT / "config.yaml").runs
    (found,) = re.findall(
        r"clean folder: (\d+) runs — (\d+) of them agent frameworks' \(docs/agents\.md\), "
        r"(\d+) with their tools from an MCP server \(docs/mcp\.md\) —, (\d+) verifications, "
        r"(\d+) suite shard jobs .*?, (\d+) table jobs, (\d+) figures",
        flat(ROOT / "docs/workflow.md"))
    jobs = plan.jobs
    expected = (len(runs), sum(r.framework is not None for r in runs),
                sum(bool(r.mcp) for r in runs), jobs["verify"],
                jobs.get("suite_run", 0) + jobs.get("suite_verify", 0),
                sum(n for rule, n in jobs.items() if rule == "tables"
                    or rule.startswith("suite_tables_")),
                sum(n for rule, n in jobs.items() if rule.startswith("figure_")))
    assert tuple(map(int, found)) == expected, f"docs/workflow.md: write {expected}"


def test_suites_page_counts_the_default_bfcl_slice(plan: Plan) -> None:
    from reactlab import config

    bfcl = config.load(ROOT / "config.yaml").raw["suites"]["bfcl"]
    (found,) = re.findall(r"\((\d+) cases × (\d+) scripted policies on the local scripted "
                          r"backend and the Responses API simulator = (\d+) runs in (\d+) "
                          r"shards",
                          flat(ROOT / "docs/suites.md"))
    cases = bfcl["sample"] * len(bfcl["categories"])
    expected = (cases, len(bfcl["policies"]),
                cases * len(bfcl["policies"]) * len(bfcl["backends"]),
                plan.count(r"results/suites/bfcl/shards/.+\.traces\.json"))
    assert bfcl["backends"] == ["local", "openai"], "the page names these two backends"
    assert tuple(map(int, found)) == expected, f"docs/suites.md: write {expected}"


def test_agents_page_counts_the_agents_all_overlay() -> None:
    from reactlab import config

    runs = config.load(ROOT / "config.yaml", [ROOT / "workflow/configs/agents_all.yaml"]).runs
    framework = [r for r in runs if r.framework is not None]
    page = flat(ROOT / "docs/agents.md")
    ((scenarios, tasks, total),) = re.findall(
        r"\((\d+) scenarios on their (\w+) tasks, the SQL tasks of docs/mcp\.md included: "
        r"(\d+) runs\)", page)
    expected = (len({r.scenario for r in framework}), len({r.task for r in framework}),
                len(runs))
    assert (int(scenarios), NUMBER_WORDS[tasks], int(total)) == expected, \
        f"docs/agents.md: write {expected}"
    ((more, measured),) = re.findall(r"(\d+) runs more, not measured.*?: (\d+) runs \(", page)
    assert int(measured) + int(more) == len(runs), "the measured runs and those added since"


def test_statistics_page_counts_the_default_trials() -> None:
    """docs/statistics.md: the sampled backend's trials and tasks, and the forced-decoding
    runs, of the default config."""
    from reactlab import config

    runs = config.load(ROOT / "config.yaml").runs
    trials = [r for r in runs if r.trial]
    forced = [r for r in runs if r.backend_config.mode == "model"
              and getattr(r.backend_config, "decoding", None) == "forced"]
    ((n_trials, n_tasks, n_forced),) = re.findall(
        r"for (\w+) trials on the (\w+) lesson tasks?.*? the (\w+) forced-decoding runs?",
        flat(ROOT / "docs/statistics.md"))
    expected = (len({r.trial for r in trials}), len({r.task for r in trials}), len(forced))
    assert (NUMBER_WORDS[n_trials], NUMBER_WORDS[n_tasks], NUMBER_WORDS[n_forced]) == \
        expected, f"docs/statistics.md: write {expected}"


def test_readme_gives_the_default_runs_job_count(plan: Plan) -> None:
    """The README's `make run` line names the number of jobs the default run plans."""
    (stated,) = re.findall(r"default run's (\d+) jobs", flat(ROOT / "README.md"))
    assert int(stated) == plan.jobs["total"], f"README.md: write {plan.jobs['total']} jobs"
