# gpuledger: `make demo` sets everything up and runs the whole pipeline on a simulated cluster;
# `make test` runs the linters and the test suite. Both create ./.venv on first use.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LAKE   ?= lake
PORT   ?= 8501
STAMP  := $(VENV)/.installed-stamp
# pytest-xdist workers for `make test` (tests/conftest.py says which tests share one)
TEST_WORKERS ?= 2

.PHONY: install system-deps demo test lint format bench clean

# Debian packages for the real services the tests start (Prometheus, Slurm, Chromium …).
system-deps:
	bash .ci/install-deps.sh

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dashboard,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/gpuledger demo --lake $(LAKE) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: system-deps lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/gpuledger bench

clean:
	rm -rf $(VENV) $(LAKE) .pytest_cache .mypy_cache .ruff_cache *.egg-info
