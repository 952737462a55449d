# One command to start, one to test; both set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BROKERS ?= 3

.PHONY: run test lint format venv clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed; set PYTHON=python3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

## make run: start a local cluster of $(BROKERS) brokers (Ctrl-C stops it)
run: $(STAMP)
	$(BIN)/purgatory cluster --brokers $(BROKERS) --log-format console

## make test: the whole suite (unit, integration, real processes)
test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
