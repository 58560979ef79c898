# Two commands: `make run` serves the embedded default with a seeded demo; `make test` runs the
# house checks (`make check`) and then the whole suite against SQLite and PostgreSQL, end-to-end
# tests included. Both set up everything they need first. `make test-fast` is the inner loop.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# `make run TLS=1`: HTTPS with a local CA under the data dir (the Terraform CLI speaks only HTTPS)
TLS ?=
export FIRSTLUME_DATA_DIR ?= $(CURDIR)/.firstlume

.PHONY: run test test-fast install frontend check lint typecheck imports schema-check chart schema protocol-doc bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The web UI: npm ci when node_modules is missing or package.json or package-lock.json is newer
# (the overrides that pin Node 20 releases are in package.json), then a build (operations checked
# against schema.graphql, tsc, vite) into backend/firstlume/static/ when a source of it changed
# since the last one (so `make run` and the tests serve one build). The files graphql-codegen
# writes are outputs of the build, never its inputs: the build rewrites them, so as inputs they
# would be newer than index.html after every build and rebuild it at every `make run`.
UI_BUILT := backend/firstlume/static/index.html
UI_GENERATED := frontend/src/graphql/generated.ts frontend/src/graphql/schema.ts
UI_SOURCES := $(filter-out $(UI_GENERATED),$(shell find frontend/src -type f)) \
	frontend/index.html frontend/package.json frontend/codegen.ts frontend/tsconfig.json \
	frontend/vite.config.ts schema.graphql

frontend/node_modules/.installed: frontend/package-lock.json frontend/package.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

$(UI_BUILT): frontend/node_modules/.installed $(UI_SOURCES)
	cd frontend && npm run build

frontend: $(UI_BUILT)

run: install frontend
	scripts/ensure-sandbox.sh
	$(BIN)/firstlume migrate
	@echo "Paste these exports into your shell (the demo token is the same each time: .firstlume/demo-token):"
	@$(BIN)/firstlume demo --host $(HOST) --port $(PORT) $(if $(filter 1,$(TLS)),--tls)
	FIRSTLUME_LOG_FORMAT=text $(BIN)/firstlume serve --host $(HOST) --port $(PORT) $(if $(filter 1,$(TLS)),--tls-local)

# pytest-xdist workers for `make test`: the tests mostly wait on servers, executors, terraform
# and the browser, so on 2 cores more workers than cores measure best (README: Testing).
WORKERS ?= 4

test: install frontend check
	scripts/ensure-test-services.sh
	$(BIN)/pytest -n $(WORKERS)

# The inner loop: domain, services and the API in process; nothing under tests/e2e/ (servers,
# executors, terraform, the browser, other processes). Property tests and fuzzers draw a tenth of
# their examples (tests/support/examples.py); `make test` draws them all.
test-fast: install
	scripts/ensure-test-services.sh
	FIRSTLUME_TEST_EXAMPLES=quick $(BIN)/pytest -n $(WORKERS) -m "not e2e"

# The house checks, each its own step: lint and format, types, the layers' import contracts,
# schema.graphql up to date, the web UI built (codegen against schema.graphql, tsc), the Helm
# chart rendered and linted.
check: lint typecheck imports schema-check frontend chart

lint: install
	$(BIN)/ruff check backend tests bench scripts
	$(BIN)/ruff format --check backend tests bench scripts

typecheck: install
	$(BIN)/mypy

imports: install
	$(BIN)/lint-imports --no-cache

schema-check: install
	@exported=$$(mktemp) && trap 'rm -f "$$exported"' EXIT && \
	$(BIN)/firstlume export-schema "$$exported" >/dev/null && \
	if ! cmp -s "$$exported" schema.graphql; then \
		echo "schema.graphql is stale: run \`make schema\` and commit the result" >&2; exit 1; \
	fi

chart: install
	$(BIN)/python scripts/check_chart.py

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
	$(BIN)/python bench/bench_policies.py 10000 20
	$(BIN)/python bench/bench_first_load.py
	$(BIN)/python bench/fleet.py

clean:
	rm -rf $(VENV) .firstlume
