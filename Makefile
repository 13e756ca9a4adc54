# The two commands of the README: `make run` (the main job) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STORE ?= ./store

.PHONY: run test lint bench clean-store

$(BIN)/mqadmin: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(BIN)/mqadmin

run: $(BIN)/mqadmin
	$(BIN)/python -m broker_core.tour --store $(STORE)

test: $(BIN)/mqadmin
	$(BIN)/python -m pytest -q

lint: $(BIN)/mqadmin
	$(BIN)/ruff check .

bench: $(BIN)/mqadmin
	$(BIN)/python bench/store_append.py
	$(BIN)/python bench/timers.py
	$(BIN)/python bench/rebuild.py

clean-store:
	rm -rf $(STORE)
