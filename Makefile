# Countersign's developer commands. `make test` is what CI runs.
GO ?= go
PKGS := ./...
FUZZTIME ?= 20s

.PHONY: test test-race test-pg-restart test-python chaos test-short lint fmt vet staticcheck bench fuzz fuzz-smoke fuzz-run quickstart clients-deps web-deps

## test: every test, with the race detector (what .ci/run calls).
test: lint test-race test-pg-restart test-python fuzz-smoke

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
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list $(PKGS) | grep -v -e /test/crash -e /test/chaos)
	$(GO) test -count=1 -timeout 30m ./test/crash/
	$(GO) test -race -count=1 -timeout 10m ./test/chaos/

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
	CS_CRASH_PG_RESTART=1 $(GO) test -count=1 -run '^TestPostgreSQLRestart$$' ./test/crash/
	CS_CHAOS_PG_RESTART=1 $(GO) test -count=1 -timeout 10m -run '^TestChaosPostgreSQLRestart$$' ./test/chaos/

## chaos: the chaos suite's full run (test/chaos, docs/reliability.md):
## 3,000 approved calls per store under kills, stops and partitions, then
## on PostgreSQL with two restarts of the shared server (run it alone).
chaos:
	CS_CHAOS_FULL=1 $(GO) test -count=1 -timeout 60m -v -run '^TestChaos(SQLite|PostgreSQL)$$' ./test/chaos/
	CS_CHAOS_FULL=1 CS_CHAOS_PG_RESTART=1 $(GO) test -count=1 -timeout 60m -v -run '^TestChaosPostgreSQLRestart$$' ./test/chaos/

## test-python: the Python client's unittest suite (clients/python), which
## builds ./cmd/countersign and serves it. Without python3 3.10+ it skips,
## except in CI, where that is an error.
test-python:
	@if command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then \
	  cd clients/python && python3 -m unittest discover -s tests -v; \
	elif [ -n "$$CI" ]; then \
	  echo "python3 3.10+ is missing: clients/python's tests need it"; exit 1; \
	else \
	  echo "python3 3.10+ not found: skipping the Python client's tests (clients/python)"; \
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

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZRUN=$(FUZZTIME)

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

## quickstart: the in-process walk through the three modes on SQLite.
quickstart:
	$(GO) run ./examples/quickstart
