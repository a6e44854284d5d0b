# Entry points; the scripts in scripts/ do the work (see their headers).
SHELL := /bin/bash
.DEFAULT_GOAL := test
VENV := .venv
# only the ones that exist: a fresh clone has no empty directories
LINT_PATHS := $(wildcard scheduler api drover harness tests pipelines migrations bench chaos scripts)

.PHONY: test setup services-up services-down services-status lint demo chaos bench clean

## test: setup, services up (down again at the end), ruff, mypy, import contract, compose file,
##       pytest
test:
	scripts/test.sh

## setup: create .venv if missing and install the project when pyproject.toml changed
setup:
	scripts/setup.sh

## services-up / services-down / services-status: the real services the tests use (loopback)
services-up: setup
	scripts/services.sh up

services-down:
	scripts/services.sh down

services-status:
	scripts/services.sh status

## lint: ruff, mypy and the import contract (layers, no circles: [tool.importlinter] in
##       pyproject.toml)
lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo

## demo: the local demo (one node, SQLite, Spark local mode, a sample pipeline)
demo: setup
	scripts/demo.sh

## bench: the benchmark suite; writes bench/results/latest.json and latest.md (~25 min on 2
##        cores; BENCH_QUICK=1: a ~5 min subset). Starts the services unless the environment
##        names them (scripts/bench.sh)
bench:
	scripts/bench.sh

## chaos: a chaos run of DURATION seconds of faults (default 600) against a private deployment;
##        prints the checker's summary, exits non-zero on a violation (history in var/chaos/).
##        MODE=spark: on two private real Spark standalone clusters (SEED=n reproduces a run)
DURATION ?= 600
MODE ?= sim
SEED ?=
chaos: setup
	scripts/services.sh install
	RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 $(VENV)/bin/python -m chaos.run --duration $(DURATION) \
		--history var/chaos/history$(if $(filter spark,$(MODE)),-spark).jsonl \
		$(if $(filter spark,$(MODE)),--spark) \
		$(if $(SEED),--seed $(SEED))

## clean: stop the services started here, remove var/ and caches (keeps .venv)
clean:
	-scripts/services.sh down
	rm -rf var .pytest_cache .mypy_cache .ruff_cache .hypothesis spark-warehouse metastore_db derby.log
	find . -path ./.venv -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
