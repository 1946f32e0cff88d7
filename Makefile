# ctgraph: shortcuts. `make run` and `make test` work on a fresh machine with Python 3.11+.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test test-all test-fast test-slow test-gpu bench lint golden clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,plot]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)           ## build the seed example (160x192x4096, 16x16x8 tiles, 32 WGs), run it, write dumps to out/
	$(PY) examples/seed_example.py --out out

test: $(STAMP)          ## the fast loop: lint, type-check, and the tests that need no GPU but the slow sweeps
	$(PY) -m ruff check ctgraph lowering tests examples
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n 2 -q -m "not slow" tests

test-all: $(STAMP)      ## lint, type-check, and every test, the slow sweeps included (GPU tests skip with a reason)
	$(PY) -m ruff check ctgraph lowering tests examples
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n 2 -q tests

test-fast: $(STAMP)     ## the fast tests alone (no lint)
	$(PY) -m pytest -n 2 -q -m "not slow" tests

test-slow: $(STAMP)     ## the slow sweeps alone: what test-all adds to test
	$(PY) -m pytest -n 2 -q -m slow tests

lint: $(STAMP)
	$(PY) -m ruff check ctgraph lowering tests examples
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

golden: $(STAMP)        ## regenerate the golden files under tests/golden/ (review the diff!)
	$(PY) -m tests.golden.regenerate

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache .mypy_cache

bench: $(STAMP)         ## on a GPU machine: time the transforms against cuBLAS (the anchors: ctgraph/data/shapes/anchors.csv)
	$(PY) -m ctgraph bench --out out/bench

test-gpu: $(STAMP)      ## on a GPU machine: the gpu-marked tests
	$(PY) -m pytest -q -m gpu tests/gpu
