# Two commands do all set-up on a fresh machine (Python 3.11 and pip): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/fleet demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/emulator.py
	$(BIN)/python bench/nightly.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
