# Two commands do all set-up on a fresh machine (Python 3.11 and pip): `make demo` and `make test`.
# Both install requirements.lock, the exact versions the tests passed with, through uv (seconds instead of pip's
# minutes); pyproject.toml keeps the ranges for those who embed the package. `make lock` re-resolves the lock.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV = $(BIN)/uv
export UV_PYTHON_DOWNLOADS := never

.PHONY: demo test coverage lint bench install lock clean

# The libraries are installed compiled (--compile-bytecode): where PYTHONDONTWRITEBYTECODE is set, as on this
# project's machines, Python never caches what it compiles, and every process (each Prefect server, worker, flow
# run and `fleet` command) would compile Prefect, pandas and matplotlib from source again: 40% of a start's CPU.
$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet "$$(grep -m1 '^uv==' requirements.lock | cut -d' ' -f1)"
	$(UV) pip install --quiet --python $(BIN)/python --require-hashes --compile-bytecode -r requirements.lock
	$(UV) pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

lock: $(STAMP)
	$(UV) pip compile --quiet pyproject.toml --extra dev --universal --python-version 3.11 --generate-hashes \
		-o requirements.lock

demo: $(STAMP)
	$(BIN)/fleet demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The suite side by side in TEST_WORKERS processes (pytest-xdist): most tests wait on sockets, servers and Chromium
# rather than compute, so more workers than the 2 cores pays; worksteal evens out the shares, and the tests marked
# `long` lead them (tests/conftest.py). The order is new every run (pytest-randomly prints its seed:
# PYTEST_ARGS=--randomly-seed=N replays it, PYTEST_ARGS="-p no:randomly" turns it off). `make coverage` is the same
# run with line and branch coverage printed per package: tracing doubles the tests' own CPU time, so `make test`
# leaves it out to stay within 8 minutes on 2 cores. Six workers: on 2 cores, at de22126 (1,095 tests), one run
# each in one evening, the suite took 432 s of pytest with 5 workers, 413 s with 6 and 449 s with 7 (7 also failed
# the demo's same-numbers test: its night met the gateway under the load); each worker's Prefect database no
# longer migrates, so a harness costs less than when 5 beat 6 (452 s against 504 s, 2026-11-28).
TEST_WORKERS ?= 6
PYTEST_ARGS ?=
PYTEST_SIDE_BY_SIDE = $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal
SOURCES := cli dashboard deployments emulator fleet flows guard orchestration reporting tasks vulnfeed tests
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m compileall -q -j 0 $(SOURCES)  # the project's own modules, compiled once for every process
	$(PYTEST_SIDE_BY_SIDE) $(PYTEST_ARGS)

coverage: $(STAMP)
	$(PYTEST_SIDE_BY_SIDE) --cov --cov-report= $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/emulator.py
	$(BIN)/python bench/nightly.py
	$(BIN)/python bench/wire.py

# Everything the commands above made in the checkout (the venv, caches, the demo's output and state, benchmark
# results), each named as it goes; a .env and anything else you made stay.
clean:
	@for path in $(VENV) .pytest_cache .ruff_cache .hypothesis .coverage .coverage.* *.egg-info build dist demo-output bench/results \
		$$(find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print); do \
		if [ -e "$$path" ]; then rm -rf "$$path" && echo "removed $$path"; fi; \
	done
