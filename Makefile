# Two set-up commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run demo test lint typecheck contracts unit binaries native bench docs perf-docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[sim,ray]' --group dev
	touch $(STAMP)

run: $(STAMP) native
	$(BIN)/llmscaler simulate --out out

# The controller scaling emulated vLLM pods, no cluster needed: on the real control plane once
# `make binaries` has built it, on the fake kube-apiserver otherwise (docs/demo.md); options:
# make demo DEMO_ARGS='--duration 3m --no-prometheus'.
demo: $(STAMP)
	$(BIN)/llmscaler demo $(DEMO_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

# Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl), etcd, Prometheus 3
# and helm, built with Go from the modules pinned under tools/ into a cache outside the work tree
# (~/.cache/llmscaler/tools, or $$LLMSCALER_TOOLS_CACHE), once per version; docs/contributing.md.
binaries: $(STAMP)
	$(BIN)/python -m llmscaler.devcluster.binaries build

# The simulator's replica engine compiled with mypyc (a C compiler and the interpreter's headers)
# into a cache outside the work tree (~/.cache/llmscaler/native, or $$LLMSCALER_NATIVE_CACHE),
# once per change to its sources; where it cannot be built, the simulator runs it from source,
# about 1.7 times slower, with the same results (docs/simulator.md).
native: $(STAMP)
	-$(BIN)/python -m llmscaler.sim.native.build --quiet

# One worker per core: the suite is CPU-bound and its tests share no ports or files.
unit: $(STAMP) binaries native
	$(BIN)/pytest -n auto

test: lint typecheck contracts unit

bench: $(STAMP) native
	$(BIN)/python bench/decide.py
	$(BIN)/python bench/simulate.py
	$(BIN)/python bench/metrics.py
	$(BIN)/python bench/cycle.py
	$(BIN)/python bench/from_zero.py
	$(BIN)/python bench/informer.py
	$(BIN)/python bench/policy.py

# Figures quoted in the README and docs, regenerated from runs (the tests check they are current).
docs: $(STAMP) native
	$(BIN)/python bench/readme.py
	$(BIN)/python bench/fidelity.py --write-docs
	$(BIN)/python bench/peers.py --write-docs
	$(BIN)/python bench/policy.py --write-docs
	$(BIN)/python bench/ablations.py --write-docs
	$(BIN)/python bench/knee.py --write-docs

# The benchmarks' figures in docs/performance.md, from runs on this machine (about half an hour,
# most of it the real control plane's runs; bench/instructions.py needs valgrind and the real
# runs `make binaries`: without them nothing runs), and the cold build time of
# `make binaries` in docs/contributing.md (as long as that build: over twenty minutes).
perf-docs: $(STAMP) native
	$(BIN)/python bench/perfdocs.py --write-docs
	$(BIN)/python bench/binaries.py --write-docs

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
