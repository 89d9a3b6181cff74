# Quick start: `make demo` (set up + train/evaluate on digits), `make test` (set up + test suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-slow test-all bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/specrage train --dataset digits --out runs/digits-demo

test: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q

test-slow: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python experiments/bench_steps.py --json runs/bench_steps.json

clean:
	rm -rf $(VENV) runs .pytest_cache
