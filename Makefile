# The two commands of the README: `make run` (the pipeline) and `make test` (the tests).
# Both create the virtual environment in .venv on first use (Python 3.11 + pinned deps).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CORES  ?= 4

.PHONY: env run test lint bench golden clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

env: $(STAMP)

run: env
	$(BIN)/snakemake --cores $(CORES)

lint: env
	$(BIN)/ruff check .

test: lint
	$(BIN)/pytest

bench: env
	$(BIN)/python -m reactlab bench --cores $(CORES)

# Rewrite tests/golden/ from a fresh pipeline run. Explicit on purpose: review the diff.
golden: env
	$(BIN)/pytest tests/test_pipeline.py --regen-golden

clean:
	rm -rf results/traces results/verified results/tables results/figures results/logs .snakemake
