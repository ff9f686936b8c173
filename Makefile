# Ax3l: `make help` lists the targets.
SHELL := /bin/bash
PYTEST_ARGS ?=
# `make test`'s pytest-xdist workers (one module per worker at a time); TEST_WORKERS=0 runs in one
# process.
TEST_WORKERS ?= 2
export UV_PYTHON ?= 3.11
AX3L_CACHE_DIR ?= $(HOME)/.cache/ax3l
# uv: the one on PATH, else the project's own copy, which `make uv` installs without pip (Debian
# 12's system Python has none, and PEP 668 refuses it): scripts/install-uv.sh.
UV_HOME := $(AX3L_CACHE_DIR)/uv-$(shell scripts/install-uv.sh --version)
UV ?= $(or $(shell command -v uv 2>/dev/null),$(UV_HOME)/uv)
export PATH := $(UV_HOME):$(PATH)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "} {printf "  %-12s %s\n", $$1, $$2}'

.PHONY: uv
uv: ## install uv when missing (into $AX3L_CACHE_DIR/uv-<version>, no pip needed)
	@command -v $(UV) >/dev/null 2>&1 || scripts/install-uv.sh $(UV_HOME)

# The dev tools, and optuna-dashboard (the extra ax3l-shared[dashboard]) for the test that opens
# an exported study in it.
.PHONY: install
install: uv ## install every package and the dev tools into .venv (from uv.lock)
	$(UV) sync --frozen --all-packages --extra dashboard

# A node of a Ray cluster (docs/scaling.md, "Comparisons on a Ray cluster"): every package with Ray,
# ax3l-compare's optional extra.
.PHONY: install-ray
install-ray: uv ## install every package and Ray (ax3l-compare's extra) into .venv, for a Ray node
	$(UV) sync --frozen --all-packages --extra dashboard --extra ray

# What running needs, without the test tools (pytest, playwright, mypy, hypothesis, ruff);
# --inexact keeps them when `make install` or `make test` put them there.
.PHONY: install-run
install-run: uv ## install what the stack needs to run, no test tools (make run's install)
	$(UV) sync --frozen --no-dev --inexact

.PHONY: db-start
db-start: ## start the private MariaDB (installs mariadb-server when missing)
	scripts/mariadb.sh start

.PHONY: db-stop
db-stop: ## stop the private MariaDB
	scripts/mariadb.sh stop

.PHONY: schema
schema: install db-start ## create or check Ax3l's tables in the private MariaDB
	set -a; . .run/db.env; set +a; $(UV) run --frozen ax3l-db create

.PHONY: system-deps
system-deps: ## install the Debian packages the tests need (MariaDB, Chromium, docker-compose)
	scripts/install-system-deps.sh

.PHONY: test
test: system-deps install db-start ## run every test suite against a real MariaDB
	$(UV) run --frozen pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

.PHONY: llm-start
llm-start: ## build (once, cached in $AX3L_CACHE_DIR, ~/.cache/ax3l) and start a real llama-server with a tiny model on :27770
	scripts/llama-server.sh start

.PHONY: llm-stop
llm-stop: ## stop that llama-server
	scripts/llama-server.sh stop

.PHONY: test-llm
test-llm: system-deps install db-start llm-start ## the real-model tier: the stack against the real llama-server
	AX3L_TEST_LLM_URL=http://127.0.0.1:$${AX3L_LLAMA_PORT:-27770} $(UV) run --frozen pytest tests/llm -s $(PYTEST_ARGS)

.PHONY: test-long
test-long: system-deps install db-start ## the minute-long statistical and multi-host tests and the slower restart tests (-m long; about 11 min)
	$(UV) run --frozen pytest -m long $(PYTEST_ARGS)

.PHONY: test-hostile
test-hostile: system-deps install db-start ## the adversarial tier: the security review's attacks at the running parts (-m hostile; about 1.5 min)
	$(UV) run --frozen pytest tests/hostile -m hostile $(PYTEST_ARGS)

.PHONY: test-chaos
test-chaos: install ## the chaos test: the whole stack kill -9'd and frozen at random (about 6 min; AX3L_CHAOS_SEED, AX3L_CHAOS_KILLS, AX3L_CHAOS_FREEZES)
	$(UV) run --frozen pytest tests/chaos -m chaos -s $(PYTEST_ARGS)

.PHONY: test-compose
test-compose: system-deps install ## docker compose up for real: images built, started, crashed, resumed (root; starts dockerd)
	AX3L_TEST_COMPOSE=1 $(UV) run --frozen pytest tests/compose -s $(PYTEST_ARGS)

# Ray is ax3l-compare's optional extra: the tier installs it into an environment of its own
# (.run/venv-ray, from uv.lock and uv's cache), so .venv and `make run` never have it.
.PHONY: test-ray
test-ray: uv db-start ## ax3l-compare --ray on a real Ray cluster of 3 local nodes (Ray in .run/venv-ray; a few min)
	UV_PROJECT_ENVIRONMENT=.run/venv-ray $(UV) sync --frozen --all-packages --extra ray
	AX3L_TEST_RAY=1 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 UV_PROJECT_ENVIRONMENT=.run/venv-ray \
		$(UV) run --frozen --no-sync pytest tests/ray -s $(PYTEST_ARGS)

# The same commands as .pre-commit-config.yaml's hooks; the rules and their reasons are in
# pyproject.toml (mypy: strict on the packages, lenient on tests, scripts and bench).
.PHONY: lint
lint: install ## ruff (lint and format check) and mypy (strict on the packages, lenient on tests)
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen mypy shared/src services/*/src testing/src
	$(UV) run --frozen mypy shared/tests services/*/tests tests scripts bench

# MkDocs and the Material theme live in an environment of their own (.run/venv-docs, the uv group
# `docs`), so `make install` and `make test` never install them; --strict fails the build on a
# broken link or anchor (mkdocs.yml's `validation`).
.PHONY: docs
docs: uv ## build the documentation site (docs/) into site/; a broken link or anchor fails it
	UV_PROJECT_ENVIRONMENT=.run/venv-docs $(UV) sync --frozen --only-group docs
	NO_MKDOCS_2_WARNING=1 .run/venv-docs/bin/mkdocs build --strict

.PHONY: settings-doc
settings-doc: install ## write docs/settings.md from the settings classes (a test fails when it is stale)
	$(UV) run --frozen python scripts/settings_doc.py

.PHONY: bench
bench: install db-start ## run the benchmarks under bench/ (prints figures; the soak: make soak)
	@for b in bench/bench_*.py; do [ "$$b" = bench/bench_soak.py ] && continue; echo "== $$b"; $(UV) run --frozen python $$b || exit 1; done

.PHONY: soak
soak: install ## the soak bench: 5,000 steps, flat step time, memory and prompt size (SOAK_ARGS=--steps 1000)
	$(UV) run --frozen python bench/bench_soak.py $(SOAK_ARGS)

.PHONY: run
run: install-run db-start ## the whole stack as local processes in the foreground (Ctrl-C stops it)
	$(UV) run --frozen --no-sync python scripts/stack.py run

.PHONY: start
start: install-run db-start ## the whole stack in the background, supervised (idempotent)
	$(UV) run --frozen --no-sync python scripts/stack.py start

.PHONY: status
status: ## each service: running or not, pid, restarts, health; the orchestrator's phase
	@$(UV) run --frozen --no-sync python scripts/stack.py status

.PHONY: stop
stop: ## stop the background stack (its supervisor and services) and the private MariaDB
	-$(UV) run --frozen --no-sync python scripts/stack.py stop
	scripts/mariadb.sh stop
