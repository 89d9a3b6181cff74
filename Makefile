# Quick start: `make demo` (set up + train/evaluate on digits), `make test` (set up + test suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test pytest lint typecheck test-slow test-all bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/specrage train --dataset digits --out runs/digits-demo

# The test command (README, CI): lint, format, types and the docs build, then the test suite.
test: lint typecheck docs pytest

# Two pytest-xdist workers (a test file stays on one worker, so its module fixtures are built once).
PYTEST_WORKERS ?= 2
pytest: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=15

lint: $(STAMP)
	$(BIN)/ruff check specrage_jax tests experiments docs/build.py
	$(BIN)/ruff format --check specrage_jax tests experiments docs/build.py

typecheck: $(STAMP)
	$(BIN)/mypy

test-slow: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q -m slow -n $(PYTEST_WORKERS) --dist loadfile

bench: $(STAMP)
	$(BIN)/python experiments/bench_steps.py --json runs/bench_steps.json

clean:
	rm -rf $(VENV) runs .pytest_cache

# The user guide (docs/*.md) and the API reference (pdoc, every module of specrage_jax) into
# docs/_build; open docs/_build/index.html. pdoc's warnings are errors (docs/build.py lists them).
.PHONY: docs
docs: $(STAMP)
	$(BIN)/python docs/build.py --out docs/_build
