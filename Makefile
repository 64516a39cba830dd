# Countersign's developer commands. `make test` is what CI runs.
GO ?= go
PKGS := ./...
FUZZTIME ?= 20s

# Recipes run in bash with pipefail, so that a test piped through tee still
# fails the target.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

# TESTLOG holds each go test run's output, which slowest reads.
TESTLOG := .testlog

.PHONY: test test-race test-pg-restart test-python test-schemathesis fuzz-schemathesis schemathesis-env schemathesis-lock test-mcp-python mcp-python-env mcp-python-lock chaos test-short lint fmt vet staticcheck bench fuzz fuzz-smoke fuzz-run quickstart clients-deps web-deps services python-env python-lock slowest build install release test-release

## test: every test, with the race detector (what .ci/run calls): first the
## services and the Python environment, then lint, the Go suite, the
## PostgreSQL restarts, the Python tests, Schemathesis' short run, the MCP
## Python SDK client's tests, the fuzz smoke run and the release build of
## this machine's platform; last, the ten slowest packages.
test: services python-env
	@rm -rf $(TESTLOG) && mkdir -p $(TESTLOG)
	@$(MAKE) --no-print-directory lint test-race test-pg-restart test-python test-schemathesis test-mcp-python fuzz-smoke test-release
	@$(MAKE) --no-print-directory slowest

## services: installs (as root, from Debian's packages) and starts what the
## tests need beyond the toolchains: PostgreSQL 15 on 127.0.0.1:5432 with
## trust for loopback and the database test, Chromium and promtool
## (.ci/services). Idempotent: a running server is left alone.
services:
	@bash .ci/services

## python-env: the virtual environment .venv that every Python test runs in,
## from clients/python/requirements.lock with hashes (.ci/python-env);
## rebuilt only when the lock changes.
python-env:
	@bash .ci/python-env

## python-lock: compiles clients/python/requirements.in into the lock, with
## every package's hashes, by pip-tools in a throwaway environment.
PIP_TOOLS_VERSION ?= 7.6.2
python-lock:
	$(call pip-compile,clients/python)

# pip-compile DIR compiles DIR/requirements.in into DIR/requirements.lock,
# with every package's hashes, by pip-tools in a throwaway environment.
define pip-compile
	@d=$$(mktemp -d) && python3 -m venv $$d && $$d/bin/pip install -q pip-tools==$(PIP_TOOLS_VERSION) && \
	cd $(1) && $$d/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	  --no-emit-index-url --no-emit-find-links --output-file requirements.lock requirements.in; \
	rc=$$?; rm -rf $$d; exit $$rc
endef

## schemathesis-env: .venv-schemathesis, Schemathesis' own environment, from
## test/schemathesis/requirements.lock with hashes, as python-env builds
## .venv (ADR 0044: a lock of its own, apart from the client's).
schemathesis-env:
	@bash .ci/python-env test/schemathesis/requirements.lock .venv-schemathesis

## schemathesis-lock: compiles test/schemathesis/requirements.in into its
## lock, as python-lock does the client's.
schemathesis-lock:
	$(call pip-compile,test/schemathesis)

## test-schemathesis: Schemathesis fuzzes the API of a real countersign
## serve from its /openapi.json, short (test/schemathesis,
## docs/api-testing.md): three credentials, 10 examples an operation, at
## most a minute each, a fixed seed. Without python3 3.10+ it skips, except
## in CI, where that is an error.
test-schemathesis:
	$(call schemathesis-run,short)

## fuzz-schemathesis: the same, long (500 examples, ten minutes a
## credential); part of make fuzz.
fuzz-schemathesis:
	$(call schemathesis-run,long)

define schemathesis-run
	@mkdir -p $(TESTLOG)
	@if command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then \
	  bash .ci/python-env test/schemathesis/requirements.lock .venv-schemathesis && \
	  CS_SCHEMATHESIS=$(1) $(GO) test -count=1 -timeout 60m -v -run '^TestSchemathesis$$' ./test/schemathesis/ 2>&1 | tee $(TESTLOG)/schemathesis.log; \
	elif [ -n "$$CI" ]; then \
	  echo "python3 3.10+ is missing: test/schemathesis needs it"; exit 1; \
	else \
	  echo "python3 3.10+ not found: skipping Schemathesis (test/schemathesis)"; \
	fi
endef

## mcp-python-env: .venv-mcp-python, the environment of the MCP Python
## SDK client's tests (test/mcppython), from its requirements.lock with
## hashes, as python-env builds .venv (a lock of its own, ADR 0044).
mcp-python-env:
	@bash .ci/python-env test/mcppython/requirements.lock .venv-mcp-python

## mcp-python-lock: compiles test/mcppython/requirements.in into its lock,
## as python-lock does the client's.
mcp-python-lock:
	$(call pip-compile,test/mcppython)

## test-mcp-python: the unmodified MCP Python SDK client (mcp 2.3.0) against
## the MCP gateway of a real countersign serve and countersign mcp, with the
## reference memory and filesystem servers from test/mcp's node_modules
## behind it, on SQLite and PostgreSQL (test/mcppython, docs/mcp.md); the
## test runs npm ci in test/mcp when its node_modules is stale. Without
## python3 3.10+ it skips, except in CI, where that is an error.
test-mcp-python:
	@mkdir -p $(TESTLOG)
	@if command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then \
	  bash .ci/python-env test/mcppython/requirements.lock .venv-mcp-python && \
	  CS_MCP_PYTHON=1 $(GO) test -count=1 -timeout 20m -v -run '^TestPythonSDKClient$$' ./test/mcppython/ 2>&1 | tee $(TESTLOG)/mcp-python.log; \
	elif [ -n "$$CI" ]; then \
	  echo "python3 3.10+ is missing: test/mcppython needs it"; exit 1; \
	else \
	  echo "python3 3.10+ not found: skipping the MCP Python SDK tests (test/mcppython)"; \
	fi

## slowest: the ten slowest packages of the last make test (from TESTLOG).
slowest:
	@echo "The ten slowest packages of this run (seconds):"
	@cat $(TESTLOG)/*.log 2>/dev/null | awk -F'\t' '($$1 ~ /^(ok|FAIL) *$$/) && $$3 ~ /s$$/ {t=$$3; sub(/s.*/, "", t); printf "%9.1f  %s\n", t, $$2}' | sort -rn | head -10

## test-race: go test -race over every package, then the crash tests and
## the chaos suite's small run, each on its own.
## The crash tests re-execute the test binary as worker processes and judge
## what survives SIGKILL; they run without the race detector, which would
## only slow the processes down (the worker's code is raced in its own tests).
## The chaos suite runs the countersign binary, built without the race
## detector, as serve and 3 workers; its own process (the backend, the
## clients, the fault injector) is raced. It runs alone so that its faults'
## timing is not the other packages'.
test-race: clients-deps web-deps
	@mkdir -p $(TESTLOG)
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list $(PKGS) | grep -v -e /test/crash -e /test/chaos) 2>&1 | tee $(TESTLOG)/race.log
	$(GO) test -count=1 -timeout 30m ./test/crash/ 2>&1 | tee $(TESTLOG)/crash.log
	$(GO) test -race -count=1 -timeout 10m ./test/chaos/ 2>&1 | tee $(TESTLOG)/chaos.log
	@# Stack sizes are measured without the race detector, which enlarges frames.
	$(GO) test -count=1 -run '^TestBlockedWaiterStack$$' . 2>&1 | tee $(TESTLOG)/stacks.log

# npm-ci DIR installs DIR's npm packages exactly as its package-lock.json pins
# them. In CI a missing npm is an error; elsewhere the tests that need them
# skip.
define npm-ci
	@if command -v npm >/dev/null 2>&1; then \
	  cd $(1) && npm ci --ignore-scripts --no-audit --no-fund; \
	elif [ -n "$$CI" ]; then \
	  echo "npm is missing: $(1) needs Node.js 20 and npm"; exit 1; \
	else \
	  echo "npm not found: the tests that need $(1) will skip"; \
	fi
endef

## clients-deps: the npm packages test/clients drives (linters, type
## generator, tsc, eventsource), the TypeScript client's, @countersign/langgraph's and
## @countersign/openai-agents', the AG-UI client
## test/agui runs, and the MCP servers, SDK and inspector test/mcp runs.
clients-deps:
	$(call npm-ci,test/clients)
	$(call npm-ci,clients/typescript)
	$(call npm-ci,clients/typescript/langgraph)
	$(call npm-ci,clients/typescript/openai-agents)
	$(call npm-ci,test/agui)
	$(call npm-ci,test/mcp)

## web-deps: axe-core, which the inbox's accessibility test injects into
## Chromium.
web-deps:
	$(call npm-ci,web/testdata/axe)

## test-pg-restart: restarts the shared PostgreSQL server under running
## workers (test/crash), and under the chaos suite's cluster (test/chaos).
## It runs alone, after every other package, since a restart drops every
## connection to the server.
test-pg-restart:
	@mkdir -p $(TESTLOG)
	CS_CRASH_PG_RESTART=1 $(GO) test -count=1 -run '^TestPostgreSQLRestart$$' ./test/crash/ 2>&1 | tee $(TESTLOG)/crash-pg-restart.log
	CS_CHAOS_PG_RESTART=1 $(GO) test -count=1 -timeout 10m -run '^TestChaosPostgreSQLRestart$$' ./test/chaos/ 2>&1 | tee $(TESTLOG)/chaos-pg-restart.log

## chaos: the chaos suite's full run (test/chaos, docs/reliability.md):
## 3,000 approved calls per store under kills, stops and partitions, then
## on PostgreSQL with two restarts of the shared server (run it alone).
chaos:
	CS_CHAOS_FULL=1 $(GO) test -count=1 -timeout 60m -v -run '^TestChaos(SQLite|PostgreSQL)$$' ./test/chaos/
	CS_CHAOS_FULL=1 CS_CHAOS_PG_RESTART=1 $(GO) test -count=1 -timeout 60m -v -run '^TestChaosPostgreSQLRestart$$' ./test/chaos/

## test-python: the Python tests, by pytest in .venv: the client's
## (clients/python/tests) and countersign-langgraph's
## (clients/python/langgraph/tests, on SQLite and PostgreSQL); they build
## ./cmd/countersign and serve it. Without python3 3.10+ they skip, except
## in CI, where that is an error.
test-python:
	@if command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then \
	  bash .ci/python-env && cd clients/python && ../../.venv/bin/python -m pytest -p no:cacheprovider --timeout 600 -v tests */tests; \
	elif [ -n "$$CI" ]; then \
	  echo "python3 3.10+ is missing: clients/python's tests need it"; exit 1; \
	else \
	  echo "python3 3.10+ not found: skipping the Python tests (clients/python)"; \
	fi

## test-short: a quick run without the race detector.
test-short:
	$(GO) test -count=1 -short $(PKGS)

## lint: gofmt, go vet and staticcheck (of bench/river too).
lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# bench/river is a module of its own (the peer, River), so that the main
# module never depends on it; it is vetted and checked on its own.
RIVER_DIR := bench/river

vet:
	$(GO) vet $(PKGS)
	cd $(RIVER_DIR) && $(GO) vet ./...

# staticcheck is fetched through the module proxy at a pinned version.
STATICCHECK_VERSION ?= v0.8.2
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	cd $(RIVER_DIR) && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## bench: the hot-path benchmarks (compare commits with benchstat).
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=6 $(PKGS)

## fuzz: run every fuzz target for FUZZTIME each, then Schemathesis' long
## run (fuzz-schemathesis).
fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZRUN=$(FUZZTIME)
	@$(MAKE) --no-print-directory fuzz-schemathesis

## fuzz-smoke: fuzz every target briefly (FUZZSMOKE each), starting from its
## committed seed corpus (testdata/fuzz/FuzzXxx, which plain go test also
## runs as unit tests). Part of make test. -fuzz builds every dependency
## with coverage instrumentation: about 10 minutes on a cold build cache on
## the 2-core development machine, about 2 once it is warm.
FUZZSMOKE ?= 2s
fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz-run FUZZRUN=$(FUZZSMOKE)

# fuzz-run runs each fuzz target for FUZZRUN (test/fuzzcorpus/fuzz.sh says
# how it finds them, and what it makes of the Go 1.26 fuzzer's deadline race).
fuzz-run:
	@GO=$(GO) bash test/fuzzcorpus/fuzz.sh $(FUZZRUN)

## build: the countersign binary (server and CLI) into bin/.
build:
	$(GO) build -o bin/countersign ./cmd/countersign

## release: static binaries (CGO_ENABLED=0) for RELEASE_PLATFORMS, each
## packed with LICENSE, README.md and CHANGELOG.md into
## dist/countersign_<version>_<os>_<arch>.tar.gz beside its CycloneDX bill of
## materials (.cdx.json), and dist/SHA256SUMS (internal/release). VERSION
## defaults to git describe; SOURCE_DATE_EPOCH fixes the build date.
RELEASE_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
VERSION ?=
release:
	@rm -rf dist
	$(GO) run ./internal/release -out dist -platforms $(RELEASE_PLATFORMS) $(if $(VERSION),-version $(VERSION))

## test-release: the release build of this machine's platform, checked as a
## user downloads it (static, stamped, summed, with its bill of materials):
## internal/release's TestRelease. Part of make test.
test-release:
	COUNTERSIGN_RELEASE_TEST=1 $(GO) test -count=1 -run 'TestRelease' ./internal/release

## install: the countersign binary into $(go env GOPATH)/bin (on PATH, the
## README's CLI commands work as printed).
install:
	$(GO) install ./cmd/countersign

## quickstart: the in-process walk through the three modes on SQLite.
quickstart:
	$(GO) run ./examples/quickstart
