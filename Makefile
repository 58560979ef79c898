# Two commands: `make run` serves the embedded default with a seeded demo; `make test` runs the
# whole suite against SQLite and PostgreSQL. Both set up everything they need first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
export FIRSTLUME_DATA_DIR ?= $(CURDIR)/.firstlume

.PHONY: run test install frontend check lint typecheck schema protocol-doc bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The web UI: npm ci when node_modules is missing or package-lock.json is newer, then a build
# (operations checked against schema.graphql, tsc, vite) into backend/firstlume/static/.
frontend/node_modules/.installed: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

frontend: frontend/node_modules/.installed
	cd frontend && npm run build

run: install frontend
	scripts/ensure-sandbox.sh
	$(BIN)/firstlume migrate
	@echo "Paste these exports into your shell (the demo token is new each time):"
	@$(BIN)/firstlume demo --host $(HOST) --port $(PORT)
	FIRSTLUME_LOG_FORMAT=text $(BIN)/firstlume serve --host $(HOST) --port $(PORT)

test: install frontend
	scripts/ensure-test-services.sh
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check backend tests bench
	$(BIN)/ruff format --check backend tests bench
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy

check: lint typecheck

schema: install
	$(BIN)/firstlume export-schema schema.graphql

# The executor protocol's message tables in docs/executor-protocol.md, from its models.
protocol-doc: install
	$(BIN)/python scripts/protocol_doc.py docs/executor-protocol.md

bench: install
	$(BIN)/python bench/bench_apply.py postgresql --repeat=5
	$(BIN)/python bench/bench_apply.py sqlite --repeat=5
	$(BIN)/python bench/bench_changes.py
	$(BIN)/python bench/bench_reads.py postgresql
	$(BIN)/python bench/bench_logs.py
	$(BIN)/python bench/bench_http.py postgresql
	$(BIN)/python bench/bench_scheduler.py sqlite
	$(BIN)/python bench/bench_scheduler.py postgresql

clean:
	rm -rf $(VENV) .firstlume
