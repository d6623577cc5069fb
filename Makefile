# The two commands a new machine needs: `make demo` and `make test`.
# Each creates the virtualenv and installs what it needs from this repository's own files.

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
MODEL_STAMP := $(VENV)/.installed-model
AD_DIR := deploy/agent-device
AD_STAMP := $(AD_DIR)/node_modules/.installed

.PHONY: demo test lint unit fleet install dev model agent-device linux-target observability-tools netns-tools browser bench clean

# Three installs, each only what its targets need: the package (the demo), the test and lint
# tools (`make unit`, `make lint`), and the model server with its model (`make test` only: it
# compiles llama.cpp the first time).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(DEV_STAMP)

$(MODEL_STAMP): $(DEV_STAMP)
	$(BIN)/pip install --quiet -e ".[dev,model]"
	touch $(MODEL_STAMP)

install: $(STAMP)
dev: $(DEV_STAMP)
model: $(MODEL_STAMP)

$(AD_STAMP): $(AD_DIR)/package.json $(AD_DIR)/package-lock.json
	cd $(AD_DIR) && npm ci --no-audit --no-fund --engine-strict=false
	touch $(AD_STAMP)

agent-device: $(AD_STAMP)

# The Linux desktop target's stack (Xvfb, D-Bus, AT-SPI, GTK3): Debian packages, needs root.
linux-target:
	bash scripts/setup-linux-target.sh

# Prometheus + promtool, docker-compose (config validation only) and redis-server: Debian,
# needs root; none of them is started or enabled as a service (scripts/apt-ensure.sh).
observability-tools:
	bash scripts/setup-observability.sh

# iproute2 (`ip`) for the partition tests' network namespaces: Debian, needs root.
netns-tools:
	bash scripts/setup-netns.sh

# Debian's chromium, which the suite tests open the HTML report in (Playwright, no download).
browser:
	bash scripts/setup-browser.sh

# Flags go through ARGS: make demo ARGS="--runs 20 --devices 6"
demo: install
	$(BIN)/goalfleet demo $(ARGS)

lint: dev
	$(BIN)/ruff check workers scheduler tests bench scripts
	$(BIN)/ruff format --check workers scheduler tests bench scripts
	$(BIN)/python scripts/build_eval_corpus.py --check
	$(BIN)/mypy
	$(BIN)/lint-imports

# The fast tests: tests/unit without those marked slow (the quick benchmarks, real outages waited
# out, the commands started as whole processes), without the plugins no unit test uses, on
# every core (pytest-xdist; each unit test module starts its own redis-server on a free port;
# worksteal: an idle worker takes queued tests from a busy one);
# `make test` runs everything.
unit: dev
	$(BIN)/pytest tests/unit -m "not slow" -q -p no:schemathesis -p no:anyio -n auto --dist worksteal

fleet: dev
	$(BIN)/pytest -m fleet -q

# Everything: lint, types, layering, and every test (a skip fails under CI=true).
test: model agent-device linux-target observability-tools netns-tools browser lint
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

clean:
	rm -rf $(VENV) $(AD_DIR)/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis \
		.import_linter_cache *.egg-info
