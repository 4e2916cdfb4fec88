# Two set-up commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck contracts unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[sim]' --group dev
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/llmscaler simulate --out out

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck contracts unit

bench: $(STAMP)
	$(BIN)/python bench/decide.py
	$(BIN)/python bench/simulate.py
	$(BIN)/python bench/metrics.py
	$(BIN)/python bench/cycle.py
	$(BIN)/python bench/from_zero.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
