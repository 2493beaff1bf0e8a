# onsale: the two commands a newcomer needs are `make demo` and `make test`.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SERVICES := . .services/env

.PHONY: venv up down test test-fast test-unit test-all lint type fmt check hooks demo demo-retail \
	migrate clean locust-burst locust-flow bench bench-guard openapi screenshots chaos

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

up:
	bash .ci/services.sh up

down:
	bash .ci/services.sh down

## The whole test suite against real Redis and PostgreSQL (started privately when none answers),
## with the coverage of the product code run in the test processes (the stack's own processes,
## served over HTTP in the end-to-end tests, are not counted: the figure is a lower bound).
## Two pytest-xdist workers, a test file per worker at a time (a module's fixtures stay in one
## process; PYTEST_WORKERS=0 runs it in one process); then, alone: the browser tests (a page's
## timing on two shared cores) and the OpenAPI fuzzing module (xdist does not schedule
## schemathesis's generated tests). A run in which a collected test never reported fails
## (tests/conftest.py). Every part runs even when an earlier one failed; then one table of the
## parts (.reports/*.xml) and a closing line with how many tests ran, passed and failed.
PYTEST_WORKERS ?= 2
ALONE := tests/browser tests/integration/test_openapi.py
test: venv up
	@rm -rf .reports; mkdir -p .reports; status=0; \
	$(SERVICES) && $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --cov --cov-report= \
		--junitxml=.reports/suite.xml $(addprefix --ignore=,$(ALONE)) || status=1; \
	$(SERVICES) && $(BIN)/pytest --cov --cov-append --cov-report=term \
		--junitxml=.reports/alone.xml $(ALONE) || status=1; \
	$(BIN)/python .ci/summary.py .reports/suite.xml .reports/alone.xml || status=1; \
	exit $$status

## Fast loop: every test that needs no server (unit tests and every script test on fakeredis),
## collected from the folders that hold them (tests/unit/test_fast_loop.py: every other module
## is left out by its own marks).
FAST := -m "not redis and not postgres and not slow" -n 2 tests/unit tests/lua tests/property
# Two workers, and the test modules' compiled (assertion-rewritten) form kept between runs.
test-fast: venv
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest $(FAST) -q

test-unit: test-fast

test-all: check test

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

type: venv
	$(BIN)/mypy

check: lint type

## Install the git pre-commit hooks (ruff format, ruff, mypy; .pre-commit-config.yaml).
hooks: venv
	$(BIN)/pre-commit install

fmt: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## The main job: a scripted T0 burst against the engine, with a summary table.
demo: venv up
	$(SERVICES) && $(BIN)/python -m loadtest.demo.main

## The retail run of the demo: a stock event (bicycle parts at an East and a West warehouse),
## shoppers' carts paid late or not at all, stock corrections mid-sale, the same invariant checks.
demo-retail: venv up
	$(SERVICES) && $(BIN)/python -m loadtest.demo.main --retail

## The chaos run (docs/reliability.md): a T0 burst and a purchase flow while the API, the worker,
## the ledger writer, Redis and PostgreSQL are killed and restarted on a seeded schedule (about
## 5.5 minutes, 110 faults; its own servers on spare ports). E.g. `make chaos CHAOS_ARGS="--cluster"`.
CHAOS_ARGS ?=
chaos: venv
	$(BIN)/onsale chaos --seed 1 $(CHAOS_ARGS)

## Locust scenarios, headless (CSV and HTML in reports/locust/), then the invariant check;
## e.g. `make locust-flow LOCUST_ARGS="--users 100 --run-time 30s"`.
LOCUST_ARGS ?=
locust-burst: venv up
	$(SERVICES) && $(BIN)/python -m loadtest.locust.main --scenario burst --users 2000 --seats 80 $(LOCUST_ARGS)

locust-flow: venv up
	$(SERVICES) && $(BIN)/python -m loadtest.locust.main --scenario flow --users 300 --seats 80 \
		--spawn-rate 50 --run-time 60s $(LOCUST_ARGS)

## Every benchmark of docs/benchmarks.md, one after the other (about 7 minutes; needs wrk).
bench: venv up
	$(SERVICES) && $(BIN)/python -m loadtest.bench.main $(BENCH_ARGS)

## The claim path's cost against the bare claim's in the same run, held to the ratios checked in
## (loadtest/bench/bench_guard.json): 20,000 claims of each in process on a private Redis at
## appendfsync always, three fresh servers; fails when a ratio is 15% over.
bench-guard: venv
	$(BIN)/python -m loadtest.bench.guard $(GUARD_ARGS)

## Screenshots of the buyer's page and the ops dashboard (docs/screenshots/), taken in headless
## Chromium (Debian's, installed by `make up`) from the whole stack with a sale in motion.
screenshots: venv up
	$(SERVICES) && $(BIN)/python -m tests.browser.screenshots docs/screenshots

## The OpenAPI document, written to docs/openapi.json (a unit test fails while it is stale).
openapi: venv
	$(BIN)/python -m api.openapi docs/openapi.json

## Apply the ledger migrations to ONSALE_PG_DSN (the local server by default).
migrate: venv up
	$(SERVICES) && $(BIN)/onsale migrate

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .reports
