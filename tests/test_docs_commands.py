"""The docs are executable: every shell command README.md and docs/*.md give is in
:data:`TABLE`, and the cheap and slow ones are run as the docs say, with the effect the
docs promise checked.

How a command is found is :mod:`tests.doc_commands` (fenced ``sh``/``bash``/``console``
blocks, the command lines of plain blocks, and inline code spans that read as a
command). Every command found must be in the table and every entry of the table must be
found, so a new command in the docs fails here until it is classified:

* ``cheap``: run in every ``make test``, in a temporary copy of the repository made from
  ``git ls-files`` (``reactlab`` commands in this process, which is what the command
  does without an interpreter's start; the others by bash, with this environment first
  on the PATH); its runner checks the exit status and what the docs say it produces or
  prints;
* ``slow``: the same, marked ``slow`` (``make test`` runs them too): the ones that need a
  finished default run share one (:func:`tests.doc_commands.finished_default_run`, built
  by the README's own ``make run``), and copy it before changing it;
* ``not_run``: with the reason (a live API key, a SLURM cluster, an hour of CPU, a test of
  this suite already, a synopsis with placeholders whose concrete form is run).

Every command, whatever its class, is also checked for what it names
(:func:`tests.doc_commands.problems`): the program or module, the CLI subcommand and its
options, the make target (``make -n``), overlays, profiles, test files, markers.

The other tests here pin the facts the docs state (counts, extras, providers, the
report's front page, ``serve --help``) and the fixes of the newcomer's report: the
viewer's scale tool on trial traces, a closed pipe, what ``recover`` says.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import dataclasses
import io
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from tests.conftest import ROOT, overlay_stacks
from tests.doc_commands import (
    Ran,
    copy_checkout,
    copy_run,
    extract,
    finished_default_run,
    in_process,
    problems,
    shell,
    subcommands,
    using_default_run,
)
from tests.test_architecture import checks_directly


class Entry(NamedTuple):
    kind: str  # cheap, slow or not_run
    what: str  # the runner (cheap, slow) or the reason (not_run)


def cheap(runner: str) -> Entry:
    return Entry("cheap", runner)


def slow(runner: str) -> Entry:
    return Entry("slow", runner)


def not_run(reason: str) -> Entry:
    return Entry("not_run", reason)


SUITE = "a test of this suite: `make test` runs it"
SYNOPSIS = "a synopsis with placeholders: its program and options are checked, {}"
OWN_SERVER = ("starts a server that runs until stopped; tests/test_server.py drives the same "
              "server on a free port")
SHORT_FORM = "the Makefile's short form of `{}`, classified (and not run) below"
PLUGIN_DOC = ("run as written, in this order, by tests/test_plugin.py (e2e: a checkout copy "
              "whose .venv keeps the install apart from the shared environment)")
LIVE = "needs live API keys and buys real API calls; tests/test_live.py covers the path offline"

#: Every command of the docs, by its text (whitespace collapsed).
TABLE: dict[str, Entry] = {
    # --- README and docs/testing.md: the two commands, the conda route, the other targets
    "make run": slow("default_run"),
    "make run CORES=2": slow("default_run"),
    "make test": not_run(SUITE + " (it is this suite, with ruff and mypy)"),
    "make test-full": not_run("the tests marked `full` of this suite: .ci/run runs them "
                              "after make test"),
    ".venv/bin/python -m reactlab.mcp.relay --log CALLS.jsonl -- COMMAND ARG...":
        not_run("a template (CALLS.jsonl, COMMAND); tests/test_mcp_relay.py runs the relay "
                "around the project's server"),
    "make clean": cheap("make_clean"),
    # --- docs/testing.md: the Makefile's short forms of commands the docs give in full
    "make recover": cheap("recover"),
    "make exports": slow("exports"),
    "make env-llama": not_run(SHORT_FORM.format(
        ".venv/bin/python -m pip install -e '.[llama]'")),
    "make bench": not_run(SHORT_FORM.format(".venv/bin/reactlab bench --cores 4")),
    "make bench-plan": not_run(SHORT_FORM.format(
        ".venv/bin/python -m reactlab.dev.plan_bench --repeat 3 --cores 4")),
    "make golden": not_run(SHORT_FORM.format(
        ".venv/bin/pytest tests/test_pipeline.py --regen-golden")),
    "make bench-bfcl": not_run("the whole BFCL suite on the local model: half an hour"),
    "make distclean": not_run("removes the generated data and the converted model besides "
                              "what `make clean` removes, which is run cheap"),
    ".venv/bin/pytest tests/test_pipeline.py --regen-golden":
        not_run("rewrites tests/golden/ (explicit, review the diff); "
                "tests/test_pipeline.py compares with it in every make test"),
    ".venv/bin/reactlab bench --cores 4":
        not_run("several full pipeline runs, minutes of CPU; a measurement"),
    ".venv/bin/python -m reactlab.dev.plan_bench --repeat 3 --cores 4":
        not_run("ten minutes of planning and building; a measurement"),
    "make env": not_run("installs the environment this test runs in"),
    # --- docs/plugins.md: the example plugin package (examples/plugin)
    ".venv/bin/python -m pip install -e examples/plugin": not_run(PLUGIN_DOC),
    ".venv/bin/reactlab check --configfile examples/plugin/config.yaml": not_run(PLUGIN_DOC),
    ".venv/bin/snakemake --cores 2 --configfile config.yaml examples/plugin/config.yaml":
        not_run(PLUGIN_DOC),
    ".venv/bin/snakemake --cores 2 all exports --configfile config.yaml "
    "examples/plugin/config.yaml": not_run(PLUGIN_DOC),
    # --- docs/mcp.md: a task's tools from an MCP server
    ".venv/bin/reactlab run --spec ... --tools-recording PATH":
        not_run(SYNOPSIS.format("and tests/test_mcp.py records and replays runs through "
                                "the same run_job")),
    ".venv/bin/reactlab bench --mcp":
        not_run("a measurement (this machine's timings); "
                "tests/test_mcp.py drives the same tool source"),
    ".venv/bin/reactlab bench --mcp --calls 500":
        not_run("the same measurement with more calls"),
    ".venv/bin/reactlab bench --mcp --pipeline --cores 2 --repeat 2":
        not_run("a measurement (minutes): four runs of the simulated matrix"),
    "conda env create -f environment.yml && conda activate reactlab":
        not_run("needs conda and the network; tests/test_packaging.py checks that "
                "environment.yml has the pins of pyproject.toml"),
    ".venv/bin/snakemake --cores 4": slow("rerun_is_noop"),
    ".venv/bin/snakemake --cores 2": slow("rerun_is_noop"),
    ".venv/bin/pytest -s": not_run(SUITE),
    # --- docs/configuration.md and docs/pipeline.md: configuration, the lesson overlay,
    # reading the results
    "REACTLAB_REPLACE_RESULTS=1 .venv/bin/snakemake --cores 4 --configfile "
    "workflow/configs/lesson.yaml":
        slow("lesson"),
    ".venv/bin/reactlab check": cheap("check"),
    ".venv/bin/reactlab check --list": cheap("check_list_examples"),
    ".venv/bin/reactlab check --list | head": cheap("check_list_head"),
    ".venv/bin/reactlab check --configfile workflow/configs/lesson.yaml": cheap("check"),
    ".venv/bin/reactlab check --configfile OVERLAY": cheap("check_every_overlay"),
    ".venv/bin/snakemake --report results/report.html": slow("report"),
    ".venv/bin/reactlab summary": slow("summary"),
    ".venv/bin/reactlab show "
    "results/traces/cierre_acme/openai/cierre_inventado.jsonl": cheap("show"),
    ".venv/bin/reactlab show": not_run("names the command; its full form "
                                       "(`... show results/traces/...`) is run cheap"),
    ".venv/bin/reactlab serve": not_run(OWN_SERVER),
    "curl -s http://127.0.0.1:8000/v1/models":
        not_run("asks the server above, which is not running here; tests/test_server.py "
                "checks GET /v1/models"),
    # --- docs/exports.md
    ".venv/bin/reactlab export inspect": slow("export"),
    ".venv/bin/reactlab export otel": cheap("export_otel"),
    ".venv/bin/snakemake --cores 4 exports": slow("exports"),
    ".venv/bin/snakemake --cores 4 exports --logger reactlab": slow("exports"),
    ".venv/bin/snakemake --cores 4 all exports": slow("exports"),
    ".venv/bin/inspect view --log-dir results/inspect --host 127.0.0.1 --port 7575":
        not_run("a web server for a person's browser; tests/test_exports_browser.py looks "
                "at the logs in `inspect view` with chromium"),
    ".venv/bin/pytest tests/test_exports.py --regen-golden":
        not_run("rewrites tests/golden/exports (review the diff); tests/test_exports.py "
                "compares with it"),
    # --- docs/workflow.md
    ".venv/bin/snakemake -n": cheap("dry_run"),
    ".venv/bin/snakemake --lint":
        not_run("tests/test_workflow_lint.py runs it in every make test"),
    ".venv/bin/snakemake --lint json":
        not_run("Snakemake 9.27's command line prints text for it; "
                "tests/test_workflow_lint.py asks the API for the JSON"),
    ".venv/bin/snakemake --unlock":
        not_run("only after a killed run without the default profile "
                "(Snakemake's own advice); nothing to unlock here"),
    ".venv/bin/reactlab recover": cheap("recover"),
    ".venv/bin/reactlab bench --options":
        not_run("times a fresh Snakemake per job: over 27 minutes"),
    ".venv/bin/reactlab bench --cores 4 --repeat 3":
        not_run("the benchmark (`.venv/bin/reactlab bench --cores 4`), three times: "
                "a measurement of minutes"),
    ".venv/bin/reactlab bench --cores 4 [--repeat N] [--options]":
        not_run(SYNOPSIS.format("its concrete forms are measurements (not run)")),
    ".venv/bin/python -m reactlab.dev.matrixgen N":
        not_run(SYNOPSIS.format("tests/test_dag_scaling.py runs the generator")),
    ".venv/bin/python -m reactlab.dev.plan_bench [--repeat 3] [--cores 2] [--make-run] "
    "[--workflow CHECKOUT]": not_run(SYNOPSIS.format("its forms are measurements")),
    ".venv/bin/python -m reactlab.dev.plan_bench --only none --only 10k":
        not_run("builds a 10,000-run suite: minutes; a measurement"),
    ".venv/bin/python -m reactlab.dev.plan_bench --make-run":
        not_run("four clean default runs: a quarter of an hour; a measurement"),
    ".venv/bin/python -m reactlab.dev.poisoning":
        not_run("a test of this suite already: tests/test_mcp_poisoning.py runs the same "
                "54 runs in process (reactlab.dev.poisoning.run_all) and checks the docs' "
                "table"),
    ".venv/bin/snakemake --cores 2 --configfile workflow/configs/mcp_poisoning.yaml":
        not_run("the default suites with the 54 poisoning runs; tests/test_mcp_poisoning.py "
                "(full) runs this overlay through Snakemake and checks its table against "
                "the in-process one and the docs'"),
    ".venv/bin/python -m reactlab.dev.local_bench":
        not_run("loads the real model and times it: a measurement"),
    ".venv/bin/python -m pip install -e '.[llama]'":
        not_run("installs the optional llama.cpp engine (a compile without pip's cached "
                "wheel); tests/test_llama_engine.py checks the extra's pin"),
    ".venv/bin/python -m reactlab.dev.engine_bench --threads 1 --bfcl 1":
        not_run("runs the real model on both engines and times them: a measurement"),
    ".venv/bin/python -m reactlab.dev.engine_bench --compare local openai":
        slow("engine_compare"),
    ".venv/bin/python -m reactlab.dev.engine_bench --threads 1 --bfcl 1 --decoding forced "
    "--json docs/results/llama_decoding.json":
        not_run("runs the real model on llama.cpp in a decoding mode with each grammar "
                "backend and times them: a measurement"),
    ".venv/bin/python -m reactlab.dev.llama_serve serve --port 8012":
        not_run("a model server that runs until stopped; tests/test_llama_serve.py starts "
                "it on a free port (full)"),
    "REACTLAB_SERVE_KEY=local .venv/bin/snakemake --cores 1 --configfile "
    "workflow/configs/llama_serve.yaml":
        not_run("needs the llama.cpp server above running; tests/test_llama_serve.py runs "
                "the overlay's backend against it (full)"),
    ".venv/bin/snakemake --cores 1 --configfile workflow/configs/llama_serve.yaml "
    "workflow/configs/replay.yaml":
        not_run("replays the recordings of the run above; tests/test_llama_serve.py "
                "replays what it recorded (full)"),
    ".venv/bin/python -m reactlab.dev.llama_serve bench --per-category 4 --threads 1 "
    "--rounds 3 --json docs/results/llama_serve.json":
        not_run("a BFCL shard on the in-process engine and through the server, timed: a "
                "measurement of minutes"),
    # --- docs/agents.md
    ".venv/bin/snakemake --cores 2 --configfile workflow/configs/agents_all.yaml --directory "
    "results-agents -- results/tables/agents.csv":
        not_run("651 runs, minutes on 2 cores; tests/test_agents_all.py runs a slice "
                "of it in process and checks the whole run's table when its folder exists"),
    ".venv/bin/python -m reactlab.dev.agents_bench --faults":
        not_run("times every framework's fault runs (Inspect's own backoff: seconds each): "
                "a measurement"),
    ".venv/bin/python -m reactlab.dev.agents_bench [--faults] [--pipeline]":
        not_run(SYNOPSIS.format("its forms are measurements (minutes; `--pipeline` runs the "
                                "simulated matrix twice)")),
    # --- docs/viewer.md
    ".venv/bin/python -m reactlab.dev.viewer_scale 5000 --templates results/traces --out "
    "/tmp/big --viewer /tmp/big/viewer": slow("viewer_scale"),
    ".venv/bin/pytest -m slow tests/test_viewer_scale.py -s": not_run(SUITE),
    ".venv/bin/reactlab viewer --traces … --verified … [--suite-traces … --suite-verified …] "
    "[--suite-tables results/tables/bfcl.csv …] --out-dir DIR":
        not_run(SYNOPSIS.format("the rule `viewer` runs the same function in every "
                                "pipeline test")),
    ".venv/bin/reactlab figure --kind":
        not_run("names an option; the figure rules run the same function in every "
                "pipeline test"),
    # --- docs/local-models.md
    ".venv/bin/python -m reactlab.dev.decoding_bench table results/traces":
        slow("decoding_table"),
    ".venv/bin/python -m reactlab.dev.decoding_bench":
        not_run("runs the real model in every decoding mode: a measurement of minutes"),
    # --- docs/simulators.md
    "OPENAI_API_KEY=... ANTHROPIC_API_KEY=... .venv/bin/snakemake --cores 4 --configfile "
    "workflow/configs/live.yaml --resources openai_slots=2 anthropic_slots=2": not_run(LIVE),
    ".venv/bin/snakemake --cores 4 --configfile workflow/configs/replay.yaml":
        not_run("needs the recordings of a live run (results/recordings/); "
                "tests/test_live.py replays recorded exchanges"),
    ".venv/bin/python -m reactlab.dev.serving prepare --model "
    "data/models/SmolLM2-135M-Instruct --out "
    "data/models/SmolLM2-135M-Instruct-tools":
        not_run("one step of the transformers-serve walk-through, which "
                "tests/test_transformers_serve.py runs (slow)"),
    ".venv/bin/python -m reactlab.dev.serving serve --model "
    "data/models/SmolLM2-135M-Instruct-tools --port 8011":
        not_run("a model server that runs until stopped; "
                "tests/test_transformers_serve.py starts it on a free port"),
    "REACTLAB_SERVE_KEY=local .venv/bin/snakemake --cores 1 --configfile "
    "workflow/configs/transformers_serve.yaml":
        not_run("needs the `transformers serve` server above running; "
                "tests/test_transformers_serve.py runs the same overlay against it"),
    ".venv/bin/snakemake --cores 1 --configfile workflow/configs/transformers_serve.yaml "
    "workflow/configs/replay.yaml":
        not_run("replays the recordings of the run above; tests/test_transformers_serve.py "
                "replays its kept recording"),
    ".venv/bin/pytest -m slow tests/test_clients.py": not_run(SUITE),
    "REACTLAB_WRITE_CLIENTS_TABLE=1 .venv/bin/pytest -m slow tests/test_clients.py":
        not_run("rewrites the clients table of docs/simulators.md from the same test"),
    # --- docs/cluster.md
    "PYTHONPATH=.venv/cluster-plugins .venv/bin/snakemake --workflow-profile "
    "workflow/profiles/slurm": not_run("needs a SLURM cluster; tests/test_slurm_cluster.py "
                                       "brings one up and runs the profile"),
    "PYTHONPATH=.venv/cluster-plugins .venv/bin/snakemake --workflow-profile "
    "workflow/profiles/slurm all":
        not_run("needs a SLURM cluster; tests/test_slurm_cluster.py brings one up"),
    ".venv/bin/python -m tests.cluster.slurm_cluster up [--accounting] [--dir DIR]":
        not_run(SYNOPSIS.format("tests/test_slurm_cluster.py brings the cluster up")),
    # --- docs/suites.md
    ".venv/bin/snakemake --cores 2 results/tables/bfcl.csv": slow("bfcl_table"),
    ".venv/bin/snakemake -n --configfile workflow/configs/agentdojo.yaml": slow("dry_run"),
    ".venv/bin/snakemake --cores 2 --configfile workflow/configs/bfcl_apis.yaml -- "
    "results/tables/bfcl.csv":
        not_run("3,720 runs of the oracle on the three simulated APIs: about 40 s, "
                "measured in docs/suites.md's goals table"),
    ".venv/bin/snakemake --cores 4 --configfile workflow/configs/bfcl.yaml":
        not_run("the whole BFCL suite under every decoding mode: hours on a CPU"),
    ".venv/bin/snakemake --cores 4 --configfile workflow/configs/bfcl.yaml "
    "workflow/configs/bfcl_bf16.yaml -- results/tables/bfcl.csv":
        not_run("1,240 cases on the local model: about 15 minutes on 2 cores"),
    ".venv/bin/snakemake --cores 4 --configfile workflow/configs/bfcl.yaml "
    "workflow/configs/bfcl_llama.yaml workflow/configs/bfcl_llama_slice.yaml -- "
    "results/tables/bfcl.csv":
        not_run("200 cases on llama.cpp: most of half an hour on 2 shared cores, measured "
                "in docs/local-models.md (docs/results/bfcl_llama.json)"),
    ".venv/bin/snakemake --cores 4 --configfile workflow/configs/bfcl.yaml "
    "workflow/configs/bfcl_bf16.yaml workflow/configs/bfcl_llama.yaml "
    "workflow/configs/bfcl_engines.yaml -- results/tables/bfcl.csv":
        not_run("2,480 cases on the two local engines: 53 minutes on 2 cores, measured "
                "in docs/local-models.md (docs/results/bfcl_engines.json)"),
    ".venv/bin/python -m reactlab.dev.engine_bench --compare smollm2_bf16 smollm2_llama "
    "--json docs/results/bfcl_engines.json --cases docs/results/bfcl_engines_cases.csv":
        not_run("reads the finished run above; the same command on the default run's "
                "slice (--compare local openai) is run (slow)"),
    ".venv/bin/python -m reactlab.dev.engine_bench --floor 402341 88868 --threads 2 "
    "--prompt 324 --json docs/results/llama_floor.json":
        not_run("the counts of the run above, a measurement of llama.cpp's rates (about a "
                "minute and a half); tests/test_llama_engine.py runs a small one (full)"),
    ".venv/bin/snakemake --cores 4 --configfile workflow/configs/bfcl.yaml "
    "workflow/configs/bfcl_free_forced.yaml -- results/tables/bfcl.csv":
        not_run("1,240 cases on the local model in two modes: about an hour"),
    ".venv/bin/snakemake --cores 2 --configfile workflow/configs/agentdojo.yaml -- "
    "results/tables/agentdojo.csv": not_run("7,592 AgentDojo runs: many minutes"),
    ".venv/bin/python -m reactlab.dev.serving serve --model "
    "data/models/SmolLM2-135M-Instruct-tools --port 8011 --dtype bfloat16 --threads 2 "
    "--continuous-batching --cb-batch-tokens 512":
        not_run("a model server that runs until stopped; tests/test_bfcl_serve.py starts "
                "it (slow) with the same options on a free port"),
    "REACTLAB_SERVE_KEY=local .venv/bin/snakemake --cores 2 --configfile "
    "workflow/configs/bfcl_serve.yaml -- results/tables/bfcl.csv":
        not_run("needs the server above running, and 1,240 cases through it: most of an "
                "hour on this CPU; tests/test_bfcl_serve.py runs 10 cases of the overlay "
                "against it (slow)"),
    ".venv/bin/snakemake --cores 2 --configfile workflow/configs/bfcl_serve.yaml "
    "workflow/configs/replay.yaml -- results/tables/bfcl.csv":
        not_run("replays the recordings of the run above; tests/test_bfcl_serve.py "
                "replays its kept slice in every make test"),
    ".venv/bin/python -m reactlab.dev.suite_bench --per-category 8 --batch 8 --decoding free":
        not_run("the local model on 40 cases twice: a measurement of minutes"),
    ".venv/bin/python -m reactlab.suites.shard_job SPECS.json":
        not_run(SYNOPSIS.format("the shard rules run it in every pipeline test")),
    ".venv/bin/python -m reactlab.suites.agentdojo":
        not_run("the whole AgentDojo suite through the harness: many minutes"),
    ".venv/bin/python -m reactlab.suites.agentdojo [--suites …] [--limit N] [--out DIR]":
        not_run(SYNOPSIS.format("tests/test_agentdojo.py runs the same functions")),
    # --- docs/mcp.md
    ".venv/bin/reactlab mcp": cheap("mcp_stdio"),
    ".venv/bin/reactlab mcp --task variacion_busi_alto": cheap("mcp_stdio"),
    ".venv/bin/reactlab mcp --transport http --port 8001":
        not_run("a server that runs until stopped; tests/test_mcp_server.py drives the same "
                "command on a free port (--port 0) with the official client"),
    "sh tests/setup_mcp_conformance.sh":
        not_run("installs the npm conformance suite (seconds to a minute, from the npm "
                "registry); tests/test_mcp_conformance.py runs it first (slow)"),
}


# ------------------------------------------------------------------ the table and the docs

def test_every_command_of_the_docs_is_classified_and_every_entry_is_in_the_docs() -> None:
    found = extract()
    missing = {text: where for text, where in found.items() if text not in TABLE}
    stale = sorted(set(TABLE) - set(found))
    assert not missing, (
        "commands in the docs that tests/test_docs_commands.py does not classify (add each "
        "to TABLE as cheap(runner), slow(runner) or not_run(reason)):\n"
        + "\n".join(f"  {text!r}  ({', '.join(where)})" for text, where in missing.items()))
    assert not stale, ("TABLE names commands the docs no longer give (remove them):\n"
                       + "\n".join(f"  {t!r}" for t in stale))


def test_every_entry_is_well_formed() -> None:
    for text, entry in TABLE.items():
        assert entry.kind in {"cheap", "slow", "not_run"}, text
        if entry.kind == "not_run":
            assert len(entry.what) > 20, f"{text!r}: say why it is not run"
        else:
            assert entry.what in RUNNERS, f"{text!r}: no runner {entry.what!r}"


def test_every_command_names_what_exists() -> None:
    subs = subcommands()
    bad = {text: p for text in extract() if (p := problems(text, subs))}
    assert not bad, "\n".join(f"{t!r}: {'; '.join(p)}" for t, p in bad.items())


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository (``git ls-files``), shared by the read-only commands.
    Its suite plan is made once here, in this process (which imports agentdojo for other
    tests anyway), so that AgentDojo's planning index is cached in it as after a user's
    first run, and the commands run in a subprocess do not each import agentdojo."""
    from reactlab import config
    from reactlab.suites.plan import plan

    work = copy_checkout(tmp_path_factory.mktemp("docs-checkout"))
    with contextlib.chdir(work):
        plan(config.load("config.yaml").raw)
    return work


@pytest.fixture(scope="module")
def dry_run(checkout: Path) -> Ran:
    """``snakemake -n`` of the default config in the copy, run once."""
    return shell("snakemake -n", checkout, timeout=300)


@pytest.fixture
def scratch(tmp_path: Path, checkout: Path, dry_run: Ran) -> Path:
    """A private copy to change (with the caches the checkout's dry run left)."""
    return copy_checkout(tmp_path / "work", caches_from=checkout)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default pipeline, run by the README's `make run` (shared, built once)."""
    work, ran = finished_default_run(tmp_path_factory.getbasetemp())
    assert ran.rc == 0, ran.why()
    return work


def some_runs(work: Path, toolbox: Any, keys: list[str]) -> list[Path]:
    """The runs ``keys`` of ``work``'s config, traced and verified in process into
    ``work/results`` (the pipeline's layout)."""
    from reactlab import config
    from tests.conftest import run_specs

    cfg = config.load(work / "config.yaml")
    specs = [cfg.run(*key.split("/")) for key in keys]
    return [r.trace for r in run_specs(specs, toolbox, work / "results", verified=True)]


# ------------------------------------------------------------------ the runners

def run_check(command: str, request: pytest.FixtureRequest) -> None:
    from reactlab import config

    checkout = request.getfixturevalue("checkout")
    ran = in_process(command, checkout)
    assert ran.rc == 0, ran.why()
    overlays = [w for w in command.split() if w.startswith("workflow/configs/")]
    n = len(config.load(checkout / "config.yaml", [checkout / o for o in overlays]).runs)
    assert f"config.yaml: valid; {n} runs" in ran.err, ran.why()


def run_check_every_overlay(command: str, request: pytest.FixtureRequest) -> None:
    """The synopsis with each overlay of workflow/configs/, on the overlays it goes on
    (after one --configfile, in order: Snakemake reads the option given twice as the last
    alone, and both refuse that form)."""
    checkout = request.getfixturevalue("checkout")
    for stack in overlay_stacks():
        concrete = command.replace("--configfile OVERLAY", "--configfile " + " ".join(
            o.relative_to(ROOT).as_posix() for o in stack))
        ran = in_process(concrete, checkout)
        assert ran.rc == 0, f"{concrete}\n{ran.why()}"
        assert "valid;" in ran.err, ran.why()


def run_check_list_examples(command: str, request: pytest.FixtureRequest) -> None:
    """What docs/configuration.md says to run after adding its scenario and its task: the new runs
    are listed."""
    merged = request.getfixturevalue("readme_merged")
    ran = in_process(command, merged.work)
    assert ran.rc == 0, ran.why()
    listed = set(ran.out.split())
    assert set(merged.new_keys) <= listed, ran.why()


def run_check_list_head(command: str, request: pytest.FixtureRequest) -> None:
    checkout = request.getfixturevalue("checkout")
    ran = shell(command, checkout, timeout=120)
    assert ran.rc == 0, ran.why()
    assert len(ran.out.splitlines()) == 10, ran.why()
    assert all(line.count("/") >= 2 for line in ran.out.splitlines()), ran.why()
    assert "Traceback" not in ran.err and "BrokenPipeError" not in ran.err, ran.why()


def run_dry_run(command: str, request: pytest.FixtureRequest) -> None:
    if command == "snakemake -n":
        ran = request.getfixturevalue("dry_run")
    else:
        ran = shell(command, request.getfixturevalue("checkout"), timeout=600)
    assert ran.rc == 0, ran.why()
    assert "This was a dry-run" in ran.out + ran.err, ran.why()
    assert re.search(r"^total\s+\d+$", ran.out, re.M), ran.why()


def run_show(command: str, request: pytest.FixtureRequest) -> None:
    from reactlab import trace

    work = request.getfixturevalue("scratch")
    (path,) = some_runs(work, request.getfixturevalue("toolbox"),
                        ["cierre_acme/openai/cierre_inventado"])
    assert path.relative_to(work).as_posix() in command
    ran = in_process(command, work)
    assert ran.rc == 0, ran.why()
    tr = trace.read(path)
    assert tr.header.spec["question"] in ran.out, ran.why()
    assert str(tr.end.answer) in ran.out, ran.why()


def run_summary(command: str, request: pytest.FixtureRequest) -> None:
    """The terminal's counts of the default run: its total line is the tables' rows
    (every run: trials.csv; one draw: runs.csv; lesson loop: summary_by_backend.csv)."""
    work = request.getfixturevalue("default_run")
    ran = in_process(command, work)
    assert ran.rc == 0, ran.why()

    def rows(name: str) -> list[dict[str, str]]:
        with open(work / "results/tables" / f"{name}.csv", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))

    total = [line.split()[1:] for line in ran.out.splitlines() if line.startswith("all ")]
    assert total == [[str(len(rows("trials"))), str(len(rows("runs"))),
                      str(sum(int(r["runs"]) for r in rows("summary_by_backend")))]], ran.why()


OTEL_RUNS = ["variacion_busi/openai/correcto", "cierre_acme/anthropic/ticker_inexistente"]


def run_export_otel(command: str, request: pytest.FixtureRequest) -> None:
    work = request.getfixturevalue("scratch")
    some_runs(work, request.getfixturevalue("toolbox"), OTEL_RUNS)
    ran = in_process(command, work)
    assert ran.rc == 0, ran.why()
    for key in OTEL_RUNS:  # the docs: results/otel/{task}/{backend}/{scenario}.jsonl
        assert (work / "results" / "otel" / f"{key}.jsonl").is_file(), ran.why()


def run_recover(command: str, request: pytest.FixtureRequest) -> None:
    work = request.getfixturevalue("scratch")
    some_runs(work, request.getfixturevalue("toolbox"), OTEL_RUNS)
    before = sorted(p for p in (work / "results").rglob("*") if p.is_file())
    run = shell if command.startswith("make ") else in_process
    ran = run(command, work)
    assert ran.rc == 0, ran.why()
    assert "the folder is intact, nothing was removed" in ran.err, ran.why()
    assert sorted(p for p in (work / "results").rglob("*") if p.is_file()) == before


def run_make_clean(command: str, request: pytest.FixtureRequest) -> None:
    work = request.getfixturevalue("scratch")
    outputs = ["results/traces", "results/verified", "results/tables", "results/figures",
               "results/logs", ".snakemake", "results/inspect", "results/otel",
               "results/benchmarks", "results/viewer", "results/suites"]
    for folder in [*outputs, "data/generated", "data/models", "results/recordings"]:
        (work / folder).mkdir(parents=True, exist_ok=True)
        (work / folder / "x").write_text("x", encoding="utf-8")
    ran = shell(command, work, timeout=60)
    assert ran.rc == 0, ran.why()
    assert not any((work / f).exists() for f in outputs), ran.why()
    assert (work / "data/generated/x").exists() and (work / "data/models/x").exists()
    assert (work / "results/recordings/x").exists()  # a live run's paid calls stay


def run_default_run(command: str, request: pytest.FixtureRequest) -> None:
    """`make run` built the shared run: every table, figure, trace and the viewer."""
    from reactlab import config
    from reactlab.analysis import outputs

    work = request.getfixturevalue("default_run")
    for path in [*outputs.table_paths(), *outputs.figure_paths(),
                 "results/tables/bfcl.csv", "results/tables/agentdojo.csv",
                 "results/viewer/index.html"]:
        assert (work / path).is_file(), path
    for spec in config.load(work / "config.yaml").runs:
        assert (work / "results" / "traces" / f"{spec.key}.jsonl").is_file(), spec.key


def run_rerun_is_noop(command: str, request: pytest.FixtureRequest) -> None:
    """On a finished run (README: "a second `make run` does nothing")."""
    ran = shell(command, request.getfixturevalue("default_run"), timeout=600)
    assert ran.rc == 0, ran.why()
    assert "Nothing to be done" in ran.out + ran.err, ran.why()


def run_report(command: str, request: pytest.FixtureRequest) -> None:
    work = request.getfixturevalue("default_run")
    ran = shell(command, work, timeout=900)
    assert ran.rc == 0, ran.why()
    html = (work / "results" / "report.html").read_text(encoding="utf-8", errors="replace")
    assert "Chat Completions" in " ".join(html.split())  # its front page (workflow.rst)


def run_exports(command: str, request: pytest.FixtureRequest) -> None:
    work = request.getfixturevalue("default_run")
    ran = shell(command, work, timeout=900)
    assert ran.rc == 0, ran.why()
    assert list((work / "results" / "inspect").glob("*.json")), ran.why()
    assert list((work / "results" / "otel").rglob("*.jsonl")), ran.why()


def run_export(command: str, request: pytest.FixtureRequest) -> None:
    work = copy_run(request.getfixturevalue("default_run"),
                    request.getfixturevalue("tmp_path") / "run")
    ran = in_process(command, work)
    assert ran.rc == 0, ran.why()
    assert list((work / "results" / "inspect").glob("2000-01-01T00-00-00+00-00_*.json"))


def run_viewer_scale(command: str, request: pytest.FixtureRequest) -> None:
    """The docs' reproduction on the default run's traces, trials among them."""
    work = request.getfixturevalue("default_run")
    big = request.getfixturevalue("tmp_path") / "big"
    ran = shell(command.replace("/tmp/big", str(big)), work, timeout=900)
    assert ran.rc == 0, ran.why()
    traces = list((big / "traces").rglob("*.jsonl"))
    assert len(traces) == 5000, ran.why()
    assert any(t.name == "t3.jsonl" for t in traces)
    assert (big / "viewer" / "index.html").is_file()


def lesson_table() -> dict[tuple[str, str], list[int]]:
    """docs/pipeline.md's table of the lesson: (scenario, backend) -> steps, calls,
    errors, tokens."""
    page = (ROOT / "docs/pipeline.md").read_text(encoding="utf-8")
    section = page[page.index("## The lesson's table"):page.index("and the loop on")]
    return {(m[0], m[1]): [int(x) for x in m[2:]] for m in re.findall(
        r"^\| (\w+) \| (\w+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", section, re.M)}


def run_lesson(command: str, request: pytest.FixtureRequest) -> None:
    """After `make run`, as docs/pipeline.md says: exit 0, the tables built, and runs.csv
    holds its table of the lesson."""
    from reactlab.analysis import outputs

    work = copy_run(request.getfixturevalue("default_run"),
                    request.getfixturevalue("tmp_path") / "lesson")
    # without the variable: refused before any job, the default's results untouched
    # (reactlab.analysis.stamp; docs/configuration.md, "Overlays")
    before = (work / "results/tables/runs.csv").read_bytes()
    refused = shell(command.removeprefix("REACTLAB_REPLACE_RESULTS=1 "), work, timeout=300)
    assert refused.rc != 0 and "REACTLAB_REPLACE_RESULTS=1" in refused.err, refused.why()
    assert "holds the results of config.yaml" in refused.err, refused.why()
    assert (work / "results/tables/runs.csv").read_bytes() == before
    ran = shell(command, work, timeout=1800)
    assert ran.rc == 0, ran.why()
    for path in outputs.table_paths():
        assert (work / path).is_file(), path
    with open(work / "results/tables/runs.csv", encoding="utf-8") as fh:
        rows = {(r["scenario"], r["backend"]): [int(r[k]) for k in
                                                ("steps", "calls", "errors", "tokens_sent")]
                for r in csv.DictReader(fh) if r["task"] == "variacion_busi"}
    expected = lesson_table()
    assert len(expected) == 8
    assert {k: rows.get(k) for k in expected} == expected


def run_bfcl_table(command: str, request: pytest.FixtureRequest) -> None:
    work = request.getfixturevalue("default_run")
    ran = shell(command, work, timeout=600)
    assert ran.rc == 0, ran.why()
    assert (work / "results" / "tables" / "bfcl.csv").is_file()


def run_engine_compare(command: str, request: pytest.FixtureRequest) -> None:
    """``engine_bench --compare`` on the default run's BFCL slice (the scripted policies
    on ``local``, as text, and on the ``openai`` simulator, as native calls): every case
    of both is compared, its counts are bfcl.csv's, each backend's shards are its logs,
    and the same policy makes the same calls (but for dotted names, which OpenAI's function
    names cannot hold) with the same verdict on both."""
    import csv

    work = request.getfixturevalue("default_run")
    built = shell(".venv/bin/snakemake --cores 2 results/tables/bfcl.csv", work, timeout=600)
    assert built.rc == 0, built.why()
    ran = shell(command, work, timeout=300)
    assert ran.rc == 0, ran.why()
    summary = json.loads(ran.out.splitlines()[-1])
    with open(work / "results/tables/bfcl.csv", encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    logs = work / "results/logs/suites/bfcl"
    for backend in ("local", "openai"):
        # a backend's measured rows per scenario (policy); "all" sums its categories
        rows = [r for r in table if r["source"] == "measured" and r["backend"] == backend
                and r["category"] == "all"]
        got = summary["backends"][backend]
        assert summary["cases"] == sum(int(r["cases"]) for r in rows) > 0
        assert got["correct"] == sum(int(r["correct"]) for r in rows)
        assert got["shards"] == len(list(logs.glob(f"bfcl__{backend}__*.run.log"))) > 0
        assert got["shard_s"] > 0  # scripted policies: no tokens generated
    assert summary["same_verdict"] == summary["cases"], summary
    assert sum(c["cases"] for c in summary["categories"].values()) == summary["cases"]
    # the calls, recomputed from the traces: the same but for the names' dots, which an
    # OpenAI function name cannot hold (the simulator's call names `a_b` for `a.b`)
    with open(work / "results/tables/bfcl_cases.csv", encoding="utf-8", newline="") as fh:
        traces: dict[tuple[str, ...], dict[str, str]] = {}
        for r in csv.DictReader(fh):
            key = (r["scenario"], r["category"], r["case"])
            traces.setdefault(key, {})[r["backend"]] = r["trace"]

    def calls(path: str) -> list[tuple[str, Any]]:
        lines = (work / path).read_text(encoding="utf-8").splitlines()
        return [(r["name"], r["arguments"]) for r in map(json.loads, lines)
                if r.get("type") == "tool_call"]

    same = 0
    for key, t in traces.items():
        a, b = calls(t["local"]), calls(t["openai"])
        assert [(n.replace(".", "_"), x) for n, x in a] == b, key
        same += a == b
    assert len(traces) == summary["cases"] and summary["same_calls"] == same < len(traces)


def run_decoding_table(command: str, request: pytest.FixtureRequest) -> None:
    ran = shell(command, request.getfixturevalue("default_run"), timeout=300)
    assert ran.rc == 0, ran.why()
    assert "| smollm2_forced |" in ran.out, ran.why()


def run_mcp_stdio(command: str, request: pytest.FixtureRequest) -> None:
    """The stdio server in a copy of the project, as the docs start it: a client's
    handshake and listing are answered on stdout, JSON-RPC only, with the tools the docs
    promise (the lesson's four, or the task's) as the model reads them (less what the server
    adds for MCP clients: tests/test_mcp_server.py); closing stdin ends it with status 0."""
    import os
    from types import SimpleNamespace

    from reactlab import config
    from reactlab.backends import tool_definitions
    from reactlab.tools import TOOLS
    from tests.test_mcp_server import Lines, as_the_model_reads

    checkout = request.getfixturevalue("checkout")
    words = command.split()
    names = (tuple(config.load(checkout / "config.yaml").raw["tasks"][
        words[words.index("--task") + 1]]["tools"]) if "--task" in words else tuple(TOOLS))
    hello = {"protocolVersion": "2025-11-25", "capabilities": {},
             "clientInfo": {"name": "docs", "version": "1"}}
    script = "".join(json.dumps(m) + "\n" for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(["bash", "-c", command], cwd=checkout, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        proc.stdin.write(script)
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        replies = [json.loads(out.next(deadline)) for _ in range(2)]
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, "".join(err.all())
    assert len(out.all()) == 2, f"more than the two replies on stdout: {out.text()}"
    listed = next(r for r in replies if r["id"] == 2)["result"]["tools"]
    assert [(t["name"], t["description"], as_the_model_reads(t["inputSchema"]))
            for t in listed] == \
        tool_definitions(SimpleNamespace(tools=names, tool_schemas=None))
    assert f"serving {len(names)} tools: {', '.join(names)}" in "".join(err.all())


RUNNERS: dict[str, Callable[[str, pytest.FixtureRequest], None]] = {
    name.removeprefix("run_"): fn for name, fn in list(globals().items())
    if name.startswith("run_") and callable(fn)}


def check_command(command: str, request: pytest.FixtureRequest) -> None:
    """Run a command of the docs through its runner, which checks the exit status and
    what the docs say the command does (every runner asserts:
    test_every_runner_checks)."""
    RUNNERS[TABLE[command].what](command, request)


def test_every_runner_checks() -> None:
    """What check_command's name promises: each runner's own body asserts."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    runners = {n.name.removeprefix("run_"): n for n in tree.body
               if isinstance(n, ast.FunctionDef) and n.name.startswith("run_")}
    assert sorted(runners) == sorted(RUNNERS)
    assert [name for name, fn in runners.items() if not checks_directly(fn)] == []


@pytest.mark.parametrize("command", sorted(c for c, e in TABLE.items() if e.kind == "cheap"),
                         ids=str)
def test_cheap_command(command: str, request: pytest.FixtureRequest) -> None:
    check_command(command, request)


@pytest.mark.slow
@pytest.mark.e2e  # most run in the finished default run: `make test-full`
@pytest.mark.parametrize("command", [c for c, e in TABLE.items() if e.kind == "slow"],
                         ids=str)
def test_slow_command(command: str, request: pytest.FixtureRequest) -> None:
    with using_default_run():  # one test at a time in the shared default run
        check_command(command, request)


# ------------------------------------------------------------------ configuration.md's examples

CONFIGURATION = ROOT / "docs" / "configuration.md"

def yaml_blocks(text: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```", text, re.S | re.M)


def readme_example(top_key: str, entry: str) -> str:
    """docs/configuration.md's YAML example whose ``top_key`` section holds ``entry``."""
    page = CONFIGURATION.read_text(encoding="utf-8")
    (block,) = [b for b in yaml_blocks(page)
                if entry in (yaml.safe_load(b) or {}).get(top_key, {})]
    return block


class Merged(NamedTuple):
    work: Path
    new_keys: list[str]


def merge_example(raw: dict[str, Any], example: dict[str, Any]) -> None:
    """As docs/configuration.md says: the entries of a section go into the existing section, the
    blocks of `matrix:` at the end of the existing list."""
    for key, value in example.items():
        if isinstance(value, list):
            raw[key].extend(value)
        else:
            clash = set(value) & set(raw[key])
            assert not clash, f"the example's {key} {sorted(clash)} exist already"
            raw[key].update(value)


@pytest.fixture(scope="module")
def readme_merged(tmp_path_factory: pytest.TempPathFactory, checkout: Path,
                  dry_run: Ran) -> Merged:
    """A copy whose config.yaml has docs/configuration.md's scenario and task examples merged in
    (with the caches the checkout's dry run left)."""
    from reactlab import config

    work = copy_checkout(tmp_path_factory.mktemp("readme-examples"), caches_from=checkout)
    raw = config.load_yaml(work / "config.yaml")
    before = {r.key for r in config.load(work / "config.yaml").runs}
    for block in (readme_example("scenarios", "doble_consulta"),
                  readme_example("tasks", "variacion_alba")):
        merge_example(raw, yaml.safe_load(block))
    (work / "config.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True,
                                                     sort_keys=False), encoding="utf-8")
    new = sorted({r.key for r in config.load(work / "config.yaml").runs} - before)
    return Merged(work, new)


def test_example_scenario_pasted_as_new_sections_is_refused_as_the_docs_say(
        scratch: Path) -> None:
    cfg = scratch / "config.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8") + "\n"
                   + readme_example("scenarios", "doble_consulta"), encoding="utf-8")
    ran = in_process("reactlab check", scratch)
    assert ran.rc == 2 and "duplicate key 'scenarios'" in ran.err, ran.why()
    assert "duplicate key 'scenarios'" in CONFIGURATION.read_text(encoding="utf-8")


def test_example_scenario_and_task_merge_check_plan_and_verify(
        readme_merged: Merged, toolbox: Any) -> None:
    """docs/configuration.md's two examples merged as it says: `reactlab check` and `snakemake -n`
    accept them, they add four runs, and those runs, run, are verified."""
    from reactlab import config
    from tests.conftest import run_specs

    work, new = readme_merged
    assert new == sorted(["variacion_busi/openai/doble_consulta",
                          "variacion_busi/anthropic/doble_consulta",
                          "variacion_alba/openai/correcto",
                          "variacion_alba/anthropic/correcto"])
    ran = in_process("reactlab check", work)
    assert ran.rc == 0, ran.why()
    plan = shell("snakemake -n", work, timeout=300)
    assert plan.rc == 0, plan.why()
    for key in new:
        assert f"results/traces/{key}.jsonl" in plan.out, key
    cfg = config.load(work / "config.yaml")
    for done in run_specs([cfg.run(*k.split("/")) for k in new], toolbox, work / "results",
                          verified=True):
        assert done.verified is not None
        record = json.loads(done.verified.read_text(encoding="utf-8"))
        assert record["verified"] is True, (done.spec.key, record["findings"])


# ------------------------------------------------------------------ facts the docs state

def test_docs_count_the_default_runs_and_jobs_of_today(dry_run: Ran) -> None:
    """docs/workflow.md and docs/statistics.md: the default config's runs (simulated or
    scripted, real-model) and the jobs of `snakemake -n` in a clean folder."""
    from reactlab import config

    assert dry_run.rc == 0, dry_run.why()
    runs = config.load(ROOT / "config.yaml").runs
    model = sum(r.backend_config.mode == "model" for r in runs)
    offline = sum(r.backend_config.mode in ("simulated", "scripted") for r in runs)
    jobs = re.findall(r"^total\s+(\d+)$", dry_run.out, re.M)[-1]
    stated = (len(runs), offline, model, int(jobs))
    for doc in ("docs/workflow.md", "docs/statistics.md"):
        text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
        found = re.findall(r"(\d+) runs \((\d+) simulated or scripted, (\d+) real-model\) "
                           r"and (\d+) jobs", text)
        assert found, f"{doc} does not state the default config's runs and jobs"
        for numbers in found:
            assert tuple(map(int, numbers)) == stated, (doc, numbers, stated)


def test_prompt_injection_rows_count_what_the_golden_tables_hold() -> None:
    text = " ".join((ROOT / "docs/prompt-injection.md").read_text(encoding="utf-8").split())
    (named, per_row), = re.findall(r"identical on ([\w, ]+?); (\d+) runs per row", text)
    with open(ROOT / "tests/golden/runs.csv", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["scenario"].startswith("inyeccion_")]
    backends = set(re.split(r",\s*|\s+and\s+", named))
    assert backends == {r["backend"] for r in rows}
    for scenario in {r["scenario"] for r in rows}:
        assert sum(r["scenario"] == scenario for r in rows) == int(per_row), scenario


def test_make_env_extras_in_the_docs_are_the_makefiles() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (installed,) = re.findall(r'pip install --quiet -e "\.\[([\w,]+)\]"', makefile)
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = " ".join(doc.read_text(encoding="utf-8").split())
        for extras in re.findall(r'`make env` installs[^`]*`pip install -e "\.\[([\w,]+)\]"`',
                                 text):
            assert extras == installed, (doc.name, extras, installed)


def builtin_providers() -> set[str]:
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    return {*schema["$defs"]["http_provider"]["enum"],
            *schema["$defs"]["inprocess_provider"]["enum"]}


def test_config_table_lists_every_provider() -> None:
    page = CONFIGURATION.read_text(encoding="utf-8")
    (row,) = [line for line in page.splitlines() if line.startswith("| `backends` |")]
    assert {p for p in builtin_providers() if f"`{p}`" not in row} == set(), row


#: What the docs call each built-in wire API (a new one must be named here, and then in
#: the report's front page and in `serve --help`).
API_NAMES = {"openai_responses": "Responses", "openai_chat": "Chat Completions",
             "anthropic_messages": "Messages"}


def builtin_apis() -> dict[str, Any]:
    from reactlab.simulate.apis import apis

    return {n: a for n, a in apis().items() if a.simulator.startswith("reactlab.simulate.")}


def test_report_front_page_names_every_wire_api() -> None:
    assert set(API_NAMES) == set(builtin_apis())
    text = " ".join((ROOT / "workflow/report/workflow.rst").read_text(encoding="utf-8")
                    .split())
    assert [n for n in API_NAMES.values() if n not in text] == []


def test_serve_help_names_every_wire_api_and_route() -> None:
    ran = in_process("reactlab serve --help", ROOT)
    assert ran.rc == 0, ran.why()
    text = " ".join(ran.out.split())
    for name, api in builtin_apis().items():
        assert API_NAMES[name] in text, name
        assert all(route in text for route in api.routes), (name, api.routes)


def test_workflow_doc_says_what_real_model_runs_call() -> None:
    rules = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "workflow/rules").glob("*"))
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = " ".join(doc.read_text(encoding="utf-8").split())
        if re.search(r"calls? `shell\(\)`", text):
            assert "shell(" in rules, f"{doc.name} says a rule calls shell(); none does"


# ------------------------------------------------------------------ the fixes

class _ClosedPipe(io.TextIOBase):
    """A standard output whose reader went away."""

    def write(self, s: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


PRINTING = [["--help"], *([sub, "--help"] for sub in sorted(subcommands())),
            ["check", "--list"],
            ["show", "tests/golden/exports/input/traces/variacion_busi/openai/correcto.jsonl"]]


@pytest.mark.parametrize("argv", PRINTING, ids=" ".join)
def test_a_closed_pipe_ends_a_printing_command_quietly(argv: list[str]) -> None:
    from reactlab.cli import main

    err = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(_ClosedPipe()), \
            contextlib.redirect_stderr(err):
        rc = main(argv)
    assert rc == 141
    assert "Traceback" not in err.getvalue()


def test_check_list_into_a_closed_pipe_leaves_no_traceback() -> None:
    """`reactlab check --list | head` where head has gone before the keys are written."""
    proc = subprocess.Popen([sys.executable, "-m", "reactlab", "check", "--list"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert "valid;" in err


def test_recover_says_intact_or_what_it_removed(scratch: Path, toolbox: Any) -> None:
    (path, _) = some_runs(scratch, toolbox, OTEL_RUNS)
    ran = in_process("reactlab recover", scratch)
    assert "the folder is intact, nothing was removed" in ran.err, ran.why()
    assert "rebuilds" not in ran.err
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n")  # a damaged trace: it and its verification go
    ran = in_process("reactlab recover", scratch)
    assert ran.rc == 0, ran.why()
    assert "removed 2 file(s)" in ran.err and "the next run rebuilds them" in ran.err, \
        ran.why()
    assert not path.exists()


def test_viewer_scale_clones_trial_traces_as_trials(toolbox: Any, tmp_path: Path) -> None:
    """The default run's traces include trials (`…/react/t1.jsonl`, `t2`, ...): each clone
    keeps its trial, so the clones are distinct runs and the viewer builds."""
    from reactlab import config
    from reactlab.dev.viewer_scale import clone_runs
    from reactlab.views import html
    from tests.conftest import run_specs

    base = config.load(ROOT / "config.yaml").run("variacion_busi", "openai", "correcto")
    specs = [dataclasses.replace(base, trial=i) for i in (1, 2, 3)]
    templates = [r.trace for r in run_specs(specs, toolbox, tmp_path / "templates")]
    assert templates[0].as_posix().endswith("variacion_busi/openai/correcto/t1.jsonl")
    pairs = clone_runs(templates, 6, tmp_path / "big")
    assert len({t for t, _ in pairs}) == 6
    assert Path(pairs[4][0]).as_posix().endswith("variacion_busi_0001/openai/correcto/t2.jsonl")
    written = html.build(pairs, tmp_path / "viewer")
    assert len(written) == 7  # the index and six run pages


def _tagged(tag: str) -> list[int]:
    """The processes whose environment holds ``tag`` (``NAME=value``): the ones a host
    started with it and every descendant, orphans included (they keep the variable)."""
    import os

    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError), open(f"/proc/{entry.name}/environ", "rb") as fh:
            if tag.encode() in fh.read().split(b"\0"):
                found.append(int(entry.name))
    return found


def test_the_mcp_host_recipe_runs_as_written_and_leaves_no_process(
        checkout: Path, tmp_path: Path, data_files: tuple[Path, Path], toolbox: Any) -> None:
    """docs/mcp.md's JSON host config, as written (its `/path/to/reactlab` this checkout's
    copy), launched by the SDK's own stdio client as a host launches it, in a project
    whose config.yaml lists that very server as docs/mcp.md's config entry writes it, a
    task in the matrix on it. `reactlab mcp` reads the tasks and data it serves and plans
    no server: one process while the session lasts (it once planned the config and
    started itself again, without end), none once the host has closed."""
    import os
    import uuid

    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from reactlab.config import GENERATED_DATA
    from tests.test_mcp_server import check_listing, in_process

    page = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    recipe = re.search(r"```json\n(.*?)```", page, re.S)
    config_entry = re.search(
        r"`(\{command: python, args: \[-m, reactlab, mcp,\s+--lesson-schemas\],\s+"
        r"results: lesson\})`", page)
    assert recipe and config_entry, "docs/mcp.md's host recipe and config entry"
    host = json.loads(recipe.group(1))
    entry = yaml.safe_load(" ".join(config_entry.group(1).split()))
    project = tmp_path / "reactlab"
    shutil.copytree(checkout, project, symlinks=True, copy_function=os.link)
    raw = yaml.safe_load((checkout / "config.yaml").read_text(encoding="utf-8"))
    raw["mcp_servers"]["reactlab"] = entry
    raw["tasks"]["variacion_mcp"] = {**raw["tasks"]["variacion_busi"], "mcp_server": "reactlab"}
    raw["matrix"].append({"tasks": ["variacion_mcp"], "backends": ["openai"],
                          "scenarios": ["correcto"]})
    (project / "config.yaml").unlink()  # a hard link to the shared checkout's
    (project / "config.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True),
                                         encoding="utf-8")
    (project / "data" / "generated").mkdir(parents=True, exist_ok=True)
    for kind, src in zip(("prices", "news"), data_files, strict=True):
        shutil.copyfile(src, project / "data" / "generated" / GENERATED_DATA[kind])
    (server,) = json.loads(json.dumps(host).replace("/path/to/reactlab", str(project)))[
        "mcpServers"].values()
    tag = f"REACTLAB_TEST_HOST={uuid.uuid4().hex}"
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           tag.split("=")[0]: tag.split("=")[1],
           **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}
    params = StdioServerParameters(command=server["command"], args=server["args"],
                                   cwd=server["cwd"], env=env)

    async def session() -> list[int]:
        with open(tmp_path / "stderr", "w", encoding="utf-8") as errlog, \
                anyio.fail_after(60):
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                check_listing((await client.list_tools()).tools)
                result = await client.call_tool("calculadora", {"expresion": "7/2"})
                assert (result.content[0].text, result.is_error) == in_process(
                    toolbox, "calculadora", {"expresion": "7/2"})
                return _tagged(tag)

    try:
        during = anyio.run(session)
        deadline = time.monotonic() + 15
        while _tagged(tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _tagged(tag)
    finally:
        for pid in _tagged(tag):  # what a failure left: this test's processes only
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
    log = (tmp_path / "stderr").read_text(encoding="utf-8")
    assert len(during) == 1, (during, log)
    assert left == [], log
    assert "Traceback" not in log, log
