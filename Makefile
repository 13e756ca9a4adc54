# The two commands of the README: `make run` (the main job) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STORE ?= ./store

.PHONY: run tour test lint bench fuzz clean-store screenshots

# setup.py and the C source too: `pip install -e .` compiles the store's hot path
# (broker_core/store/codec/_hotpath.c) in place; without a compiler the pure-Python twin is used.
$(BIN)/mqadmin: pyproject.toml setup.py broker_core/store/codec/_hotpath.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(BIN)/mqadmin

# The main job in the foreground: name server 127.0.0.1:9876 + broker 127.0.0.1:10911 on $(STORE).
run: $(BIN)/mqadmin
	@echo "mqbroker on $(STORE): name server 127.0.0.1:9876, broker 127.0.0.1:10911 (Ctrl-C stops it cleanly)."
	@echo "In another shell:  . .venv/bin/activate && mqadmin clusterList -n 127.0.0.1:9876"
	$(BIN)/python -m broker_core.mqbroker --store $(STORE)

# The embedded tour: mqadmin commands on $(STORE) in-process (no broker running on that store).
tour: $(BIN)/mqadmin
	$(BIN)/python -m broker_core.tour --store $(STORE)

# Two workers, each taking whole test files (most tests wait on real servers, not the CPU); a plain
# `pytest tests/...` still runs in one process.
test: $(BIN)/mqadmin
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# Bounded atheris runs of the decoders (record, properties, SQL92, remoting); FUZZ_RUNS per target.
FUZZ_RUNS ?= 300000
fuzz: $(BIN)/mqadmin
	for t in record properties sql92 remoting; do $(BIN)/python tests/fuzz/fuzz_targets.py $$t -runs=$(FUZZ_RUNS) || exit 1; done

lint: $(BIN)/mqadmin
	$(BIN)/ruff check .

bench: $(BIN)/mqadmin
	$(BIN)/python bench/store_append.py
	$(BIN)/python bench/timers.py
	$(BIN)/python bench/rebuild.py
	$(BIN)/python bench/recovery.py
	$(BIN)/python bench/query.py
	$(BIN)/python bench/search.py
	$(BIN)/python bench/batch_model.py
	@command -v redis-server >/dev/null || { echo "bench/remoting.py needs redis-server (apt-get install redis-server)"; exit 1; }
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/remoting.py

# The README's dashboard screenshots (needs rsvg-convert: apt-get install librsvg2-bin).
screenshots: $(BIN)/mqadmin
	$(BIN)/python tests/tui/make_screenshots.py

clean-store:
	rm -rf $(STORE)
