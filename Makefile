# paylab — `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

SQLC_VERSION := v1.31.1
TOOLS        ?= $(HOME)/.cache/paylab/bin
SQLC         := $(TOOLS)/sqlc-$(SQLC_VERSION)
MAILPIT_VERSION := v1.33.1
MAILPIT      := $(TOOLS)/mailpit-$(MAILPIT_VERSION)
STATICCHECK_VERSION := v0.8.2
STATICCHECK  := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
GOVULNCHECK_VERSION := v1.9.0
GOVULNCHECK  := $(TOOLS)/govulncheck-$(GOVULNCHECK_VERSION)
# The Go vulnerability database, as the golang.org/x/vulndb module holds it on
# that date (fetched through the module proxy, indexed once); VULNDB=https://vuln.go.dev
# checks against the live database instead.
VULNDB_VERSION := v0.0.0-20261105234957-e22db6528018
VULNDB_DIR   := $(TOOLS)/vulndb-$(VULNDB_VERSION)
VULNDB       ?= file://$(VULNDB_DIR)
STACK        := scripts/stack.sh
GO_TEST_FLAGS ?= -race -count=1 -timeout 25m
# go.mod's toolchain line (a patch release with the standard library's
# security fixes) is honoured even where the go command defaults to the local
# toolchain; the go command fetches it from the module proxy once.
export GOTOOLCHAIN ?= auto
# The libraries and the example are modules of their own; the root module's
# ./... does not reach them, so every check runs in each of MODULES too.
# Each module builds from its own go.mod (a replace points at the local
# libraries), as a clean clone, CI and the Docker image do: go.work is for
# editors and ad-hoc commands, and make does not use it.
MODULES      := pkg/outbox pkg/inbox examples/shop
export GOWORK := off

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

## ---- local stack (no Docker needed) ----

.PHONY: env-up env-down env-status env pg-start pg-stop kafka-start kafka-stop
env-up: ## start PostgreSQL and Kafka on 127.0.0.1 (KAFKA_NODES=3: a cluster of three brokers, TLS + SASL/SCRAM + ACLs; a no-op when running)
	@$(STACK) up

env-down: ## stop the PostgreSQL and Kafka that env-up started
	@$(STACK) down

env-status: ## report PostgreSQL and Kafka
	@$(STACK) status

env: ## print the connection settings as export lines
	@$(STACK) env

pg-start: ## start PostgreSQL alone
	@$(STACK) up pg
pg-stop: ## stop PostgreSQL alone
	@$(STACK) down pg
kafka-start: ## start Kafka alone
	@$(STACK) up kafka
kafka-stop: ## stop Kafka alone
	@$(STACK) down kafka

# PG_NODES=3 (env-up, env-status, env, pg-start): PostgreSQL as a Patroni
# cluster of three members on 127.0.0.1:55441-55443 with etcd (scripts/pgha.sh),
# synchronous replication unless PG_SYNC=off; env-down stops it too.
.PHONY: pg-ha-start
pg-ha-start: ## start PostgreSQL alone as a Patroni cluster of three, as env-up PG_NODES=3 does (PG_SYNC=off: asynchronous)
	@PG_NODES=3 $(STACK) up pg

.PHONY: migrate
migrate: env-up ## create the databases and roles, apply migrations, create topics
	@go run ./cmd/paylab init

## ---- run ----

.PHONY: dev
dev: env-up ## migrate, then run the orders API on 127.0.0.1:8080 (admin :9080) against the local stack
	@go run ./cmd/paylab init
	@go run ./services/orders serve

.PHONY: console
console: build $(MAILPIT) ## the console on http://127.0.0.1:8090: private servers, the services, the flow and its fault toggles (Ctrl-C stops it)
	@bin/paylab console

## ---- code ----

# go-tool builds one Go command at a pinned version into $(TOOLS), once.
define go-tool
	@echo "building $(1) (once; cached in $(TOOLS))"
	@mkdir -p $(TOOLS)
	@tmp=$$(mktemp -d) && cd $$tmp && GOBIN=$$tmp GOFLAGS=-mod=mod go install $(1) && mv $$tmp/$(notdir $(firstword $(subst @, ,$(1)))) $(2) && rm -rf $$tmp
endef

$(STATICCHECK):
	$(call go-tool,honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION),$@)

$(GOVULNCHECK):
	$(call go-tool,golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION),$@)

$(VULNDB_DIR):
	$(call go-tool,golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION),$(TOOLS)/indexdb-$(VULNDB_VERSION))
	@src=$$(cd $$(mktemp -d) && go mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p') && \
	  $(TOOLS)/indexdb-$(VULNDB_VERSION) -vulns "$$src/data/osv" -out $@.tmp && mv $@.tmp $@

$(SQLC):
	$(call go-tool,github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION),$@)

$(MAILPIT):
	$(call go-tool,github.com/axllent/mailpit@$(MAILPIT_VERSION),$@)

.PHONY: mailpit
mailpit: $(MAILPIT) ## build the Mailpit SMTP server the notification tests use (once)

.PHONY: generate
generate: $(SQLC) ## regenerate the sqlc code from db/queries and the migrations
	@$(SQLC) generate

.PHONY: verify
verify: $(SQLC) ## check formatting, go vet, and that the generated code is up to date
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	@go vet ./...
	@for m in $(MODULES); do (cd $$m && go vet ./...) || exit 1; done
	@GOWORK=$(CURDIR)/go.work go list -m >/dev/null || { echo "go.work does not load"; exit 1; }
	@$(SQLC) diff || { echo "generated sqlc code is stale: run make generate"; exit 1; }
	@echo "verify: gofmt, go vet and sqlc diff clean"

.PHONY: lint
lint: verify $(STATICCHECK) $(GOVULNCHECK) $(VULNDB_DIR) ## verify, then staticcheck and govulncheck (VULNDB=https://vuln.go.dev for the live database)
	@$(STATICCHECK) ./...
	@for m in $(MODULES); do (cd $$m && $(STATICCHECK) ./...) || exit 1; done
	@echo "lint: staticcheck clean"
	@$(GOVULNCHECK) -db $(VULNDB) ./...
	@for m in $(MODULES); do (cd $$m && $(GOVULNCHECK) -db $(VULNDB) ./...) || exit 1; done

## ---- tests ----

.PHONY: module-test
module-test: env-up ## test the library modules pkg/outbox and pkg/inbox, each on its own go.mod, against the real stack
	@for m in pkg/outbox pkg/inbox; do \
	  echo "--- module: $$m"; \
	  (cd $$m && go test $(GO_TEST_FLAGS) ./...) || exit 1; \
	done

.PHONY: example-test
example-test: env-up ## test examples/shop, a separate module adopting pkg/outbox and pkg/inbox, against the real stack
	@echo "--- example: examples/shop adopts the packages with its own table names"
	@cd examples/shop && go test -count=1 ./...

.PHONY: bench
bench: env-up build ## measure each stage against a raw baseline, as ratios (about 25 minutes; JSON in results/)
	@bin/paylab bench

.PHONY: bench-peers
bench-peers: env-up build ## make bench, plus Watermill and Debezium on the same PostgreSQL and Kafka and the drains of 100 000 and 1 000 000 events (45–55 minutes; needs Maven)
	@bin/paylab bench --peers

.PHONY: test
test: lint env-up $(MAILPIT) ## lint (vet, generated code, staticcheck, govulncheck), then every test against the real stack
	@echo "--- smoke: the stack is real"
	@go test $(GO_TEST_FLAGS) -v -run '^TestSmoke' ./internal/testkit/smoke/
	@echo "--- all tests"
	@go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v /internal/testkit/smoke)
	@$(MAKE) --no-print-directory module-test
	@$(MAKE) --no-print-directory example-test
	@echo "--- fuzz: the request decoders, briefly"
	@$(MAKE) --no-print-directory fuzz FUZZTIME=4s
	@echo "--- chaos: the hole in naive and inbox-off mode, closed with outbox + inbox"
	@$(MAKE) --no-print-directory build
	@bin/paylab chaos run all --quick

.PHONY: build
build: ## build every binary into bin/
	@go build -o bin/ ./cmd/paylab ./services/orders ./services/ledger ./services/notifications

.PHONY: chaos
chaos: build $(MAILPIT) ## run every chaos scenario (naive vs outbox+inbox under faults, on a private 3-broker Kafka) and print the table
	@bin/paylab chaos run all

.PHONY: chaos-wal
chaos-wal: build $(MAILPIT) ## the quick chaos set with the relays streaming a replication slot (RELAY_MODE=wal)
	@bin/paylab chaos run all --quick --relay-mode wal

.PHONY: chaos-ha
chaos-ha: build $(MAILPIT) ## the chaos scenarios on a private Patroni cluster of three: leader SIGKILLed, asynchronous failover (acknowledged payments lost), switchover; 2 000 payments each, polling and WAL relays (about 15 minutes; not in make test)
	@bin/paylab chaos run ha
	@bin/paylab chaos run postgres-leader-killed --relay-mode wal

.PHONY: test-ha
test-ha: ## the HA PostgreSQL test: a private Patroni cluster of three, its leader SIGKILLed, the synchronously committed row and a pgx pool on the new leader, the same crash losing an asynchronous commit, the API through a failover and the WAL relay's standby guard (about 5 minutes; not in make test)
	@PAYLAB_PG_HA=1 go test -count=1 -v -timeout 10m ./internal/testkit/pgha/

.PHONY: compose-check
compose-check: ## docker-compose.yml for real: build, up, payments, ledger and receipts, 3 relays, the chaos service, down (needs a Docker engine; not in make test)
	@scripts/compose-check.sh

FUZZTIME     ?= 10s
ORDERS_FUZZ  := FuzzParseNewOrder FuzzParseNewRefund FuzzParseCapture FuzzParseOrderID FuzzAPI

.PHONY: fuzz
fuzz: env-up ## run every fuzz target of the orders API for FUZZTIME each (default 10s)
	@for f in $(ORDERS_FUZZ); do \
	  echo "--- fuzz $$f ($(FUZZTIME))"; \
	  rc=0; out=$$(go test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./services/orders/internal/orderhttp/ 2>&1) || rc=$$?; echo "$$out"; \
	  if [ $$rc -ne 0 ]; then \
	    if echo "$$out" | grep -q 'Failing input written' || ! echo "$$out" | grep -q 'context deadline exceeded'; then exit 1; fi; \
	    echo "--- fuzz $$f: the fuzzing engine hit its own deadline with no failing input (a known go test -fuzztime race on a busy machine); once more"; \
	    go test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./services/orders/internal/orderhttp/ || exit 1; \
	  fi; \
	done
