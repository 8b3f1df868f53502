# gpuledger: `make demo` sets everything up and runs the whole pipeline on a simulated cluster;
# `make check` is the two-minute loop (linters + every test that needs no external service, no
# root); `make test` installs the services, runs the linters, builds the docs site (strict) and
# runs the whole suite (CI). All create ./.venv on first use.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LAKE   ?= lake
PORT   ?= 8501
STAMP  := $(VENV)/.installed-stamp
# pytest-xdist workers for `make test` and `make check` (tests/conftest.py says which tests
# share one)
TEST_WORKERS ?= 2
# `make check` leaves out the tests that start a real program (`live`: Slurm, Prometheus,
# Chromium, Java) and the long end-to-end runs (`slow`); `make test` runs them all.
CHECK_MARKERS ?= not live and not slow
# The test runs keep Python's bytecode caches (__pycache__, git-ignored) even where the
# environment sets PYTHONDONTWRITEBYTECODE: without them every run compiles every module and
# pytest re-rewrites every test module's asserts, in each worker (collection: 9 -> 4 CPU-s a
# process).
KEEP_PYC := PYTHONDONTWRITEBYTECODE=
# The tests' scratch files (pytest's tmp_path lakes, DuckDB's spill, temp files) go to a RAM disk
# where the machine has one with room: every landing fsyncs its file, and on this 2-core
# machine's disk that was a fifth of `make check`'s tests (the same tests one after the other:
# 162 s on the disk, 132 s on the RAM disk). `make check` asks for 2 GiB free on /dev/shm,
# `make test` (the services' data, the long runs' lakes) for 8 GiB. The folder is the caller's
# own (mode 700, not a link): one another user made first under its name is not used.
# Elsewhere, or with SCRATCH= / TEST_SCRATCH= on the command line: the system's temp folder.
scratch = $(shell d=/dev/shm/gpuledger-tests-$$(id -u); \
	[ "$$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $$4}')" -ge $(1) ] 2>/dev/null \
	&& mkdir -p -m 700 $$d && [ -O $$d ] && [ ! -L $$d ] && chmod 700 $$d && echo $$d)
SCRATCH ?= $(call scratch,2097152)
TEST_SCRATCH ?= $(call scratch,8388608)

.PHONY: install system-deps demo check check-tests test lint docs format bench clean

# Debian packages for the real services the tests start (Prometheus, Slurm, Chromium …).
system-deps:
	bash .ci/install-deps.sh

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dashboard,dev,serve]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/gpuledger demo --lake $(LAKE) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(MAKE) docs

# The docs site (mkdocs + Material) into site/; --strict fails on a broken link or a page
# missing from the nav. The CLI and configuration references are generated at build time.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Lint and tests side by side: mypy (incremental, .mypy_cache) fills the workers' idle moments.
check: $(STAMP)
	$(MAKE) --no-print-directory --output-sync=target -j2 lint check-tests

check-tests: $(STAMP)
	$(KEEP_PYC) $(if $(SCRATCH),TMPDIR=$(SCRATCH)) HYPOTHESIS_PROFILE=check $(BIN)/python -m pytest -n $(TEST_WORKERS) -m "$(CHECK_MARKERS)"

# A live test that skips (its service is missing or cannot start) fails here.
test: system-deps lint
	$(KEEP_PYC) $(if $(TEST_SCRATCH),TMPDIR=$(TEST_SCRATCH)) GPULEDGER_REQUIRE_LIVE=1 \
		$(BIN)/python -m pytest -n $(TEST_WORKERS)

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/gpuledger bench

clean:
	rm -rf $(VENV) $(LAKE) site .pytest_cache .mypy_cache .ruff_cache *.egg-info
