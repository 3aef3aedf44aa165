# Every recipe runs in bash with the local stack's environment (localstack/env.sh),
# so go, moto and the AWS CLI are found even from a bare shell.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
ENV := . localstack/env.sh
LAMBDAS := $(filter-out poller,$(notdir $(patsubst %/,%,$(wildcard functions/*/))))

.PHONY: help setup valkey up down local quick-try test fuzz-short build image bench bench-record e2e e2e-record e2e-short e2e-fleet soak soak-short lint

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: ## install what is missing: Go, Valkey 9 (built once per machine) and 8, PostgreSQL, moto, AWS CLI, cfn-lint, the Lambda emulator
	bash localstack/setup.sh

valkey: ## build Valkey 9 from Debian's source package into VALKEY_HOME (~/.cache/invalidator/valkey-9), once per machine; make setup does
	bash -c '. localstack/lib.sh && ensure_valkey'

up: setup ## start the local stack (moto + TLS cluster) and create its resources; idempotent
	bash localstack/up.sh

down: ## stop everything the local stack started
	bash localstack/down.sh

local: up build ## run the worker on the local stack in the foreground: poller, and the functions under the emulator
	bash localstack/local.sh

quick-try: up build ## run the README's quick try as written, against the worker as make local runs it, with only what make setup provides on PATH
	bash localstack/quicktry.sh

test: up ## vet and test everything against the local stack, and lint the SAM template (localstack/test.sh); each part prints its duration
	bash localstack/test.sh

# Every fuzz target, FUZZ_TIME each (go test fuzzes one target per run), with
# no time spent minimizing: the front ends' fuzzers otherwise spend theirs
# shrinking inputs that found nothing. Go before 1.27 may fail a target with
# a bare "context deadline exceeded" as FUZZ_TIME ends (go.dev/issue/75804):
# such a run, which wrote no failing input, is run once more.
FUZZ_TIME ?= 5s
fuzz-short: ## run every fuzz target for FUZZ_TIME (default 5s) without minimizing, about 2 minutes (CI)
	$(ENV) && for dir in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u); do \
	  for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$dir/*_test.go); do \
	    for try in 1 2; do \
	      if out=$$(go test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZ_TIME) -fuzzminimizetime=0 ./$$dir 2>&1); then echo "$$out"; break; fi; \
	      echo "$$out"; \
	      if [ $$try = 1 ] && grep -q '^    context deadline exceeded$$' <<<"$$out" && ! grep -q 'Failing input written' <<<"$$out"; then \
	        echo "fuzz-short: $$target stopped at Go's fuzztime race (go.dev/issue/75804), no failing input: once more"; continue; \
	      fi; \
	      exit 1; \
	    done; \
	  done; \
	done

# GOARCH defaults to the host's; GOARCH=arm64 cross-compiles for Graviton.
# The Lambda functions are bootstraps for provided.al2023, on aws-lambda-go
# without its RPC mode (lambda.norpc: that mode is for the go1.x runtime
# only); the poller is a plain binary (GOOS from the host, so make local
# runs it anywhere).
LAMBDA_BUILD := CGO_ENABLED=0 GOOS=linux go build -tags lambda.norpc -trimpath -ldflags='-s -w'

build: ## build functions/<name> into bin/<name>/bootstrap, bin/poller/poller and bin/invalidator
	@$(ENV) && arch=$${GOARCH:-$$(go env GOARCH)} && for fn in $(LAMBDAS); do \
	  echo "building bin/$$fn/bootstrap (linux/$$arch)"; \
	  GOARCH=$$arch $(LAMBDA_BUILD) -o bin/$$fn/bootstrap ./functions/$$fn; \
	done
	@$(ENV) && echo "building bin/poller/poller and bin/invalidator ($$(go env GOOS)/$${GOARCH:-$$(go env GOARCH)})" && \
	  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/poller/poller ./functions/poller && \
	  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/invalidator ./cmd/invalidator

# sam build runs build-<logical ID> here (BuildMethod: makefile, CodeUri: .)
# with ARTIFACTS_DIR set, and no architecture: GOARCH defaults to arm64,
# the template's default Architecture (GOARCH=amd64 sam build for x86_64).
fn_SqsInvalidate := sqs-invalidate
fn_SnsInvalidate := sns-invalidate
fn_StreamInvalidate := stream-invalidate
fn_KinesisInvalidate := kinesis-invalidate
build-%Function:
	$(ENV) && GOARCH=$${GOARCH:-arm64} $(LAMBDA_BUILD) -o "$(ARTIFACTS_DIR)/bootstrap" ./functions/$(fn_$*)

# The poller as an OCI image for ECS, without Docker (docs/image.md): cmd/image
# is a module of its own, so go-containerregistry stays out of go.mod. It reads
# IMAGE_BASE (default distroless static, from its registry; scratch: none
# needed, as offline CI has), IMAGE_PUSH=<repo>:<tag> and the other IMAGE_*.
image: ## the poller as an OCI image index for linux/amd64 and linux/arm64 into bin/image (IMAGE_BASE=scratch needs no registry; IMAGE_PUSH=<repo>:<tag> pushes it)
	$(ENV) && go -C cmd/image run . -src $(CURDIR) -out $(CURDIR)/bin/image

# The benchmarks get a stack of their own: one TLS node owning every slot,
# the shape ElastiCache Serverless shows, with nothing else running on it,
# and moto with the stack's resources for the cost group, which counts the
# functions' and the poller's requests. BENCH_CACHE_PORT and BENCH_MOTO_PORT
# move it, to run beside another make bench.
BENCH_CACHE_PORT ?= 7010
BENCH_MOTO_PORT ?= 4610
BENCH_ENV := LOCAL_STATE=$(CURDIR)/.local/bench CACHE_PORTS=$(BENCH_CACHE_PORT) CACHE_ENDPOINT=127.0.0.1:$(BENCH_CACHE_PORT) \
	CACHE_CA_FILE=$(CURDIR)/.local/bench/tls/ca.crt MOTO_PORT=$(BENCH_MOTO_PORT) AWS_ENDPOINT_URL=http://127.0.0.1:$(BENCH_MOTO_PORT)

# A run writes its results under .local/bench (latest.md, cost.md,
# throughput.svg); make bench-record also writes them into the tracked
# bench/README.md and bench/throughput.svg.
bench: setup build ## measure against references in the same run; prints BENCH <name> <value>, writes the latest run, the cost tables and the throughput plot under .local/bench
	$(STACK_UNSET) && export $(BENCH_ENV) && $(ENV) && bash localstack/up.sh aws cache >/dev/null && \
	  { status=0; (cd bench && go run . -bin $(CURDIR)/bin $(BENCH_FLAGS)) || status=$$?; bash localstack/down.sh >/dev/null; exit $$status; }

bench-record: BENCH_FLAGS := -readme
bench-record: bench ## make bench that also rewrites bench/README.md's latest run, its cost tables and bench/throughput.svg

# The e2e run gets a stack of its own, beside make local's: moto on 4600,
# DynamoDB and its stream on a moto of their own on 4601 (one moto answers on
# one core: the queues' traffic then does not slow the table's writes and
# stream reads), a cluster on 7301-7303, state under .local/e2e. The third
# master has a replica on 7304, and both announce 7313, where the run keeps
# one endpoint following the master through its failovers, as ElastiCache
# Serverless does. PostgreSQL, the commit log, on 4602. The raw queue's
# visibility is six times the 10 s function timeout the run gives the
# driver; the worker may delete the keys of every kind of reader the run
# has. E2E_MOTO_PORT, E2E_MOTO_DYNAMODB_PORT, E2E_PG_PORT, E2E_CACHE_PORTS,
# E2E_REPLICA_PORT and E2E_ENDPOINT_PORT move it, to run beside another
# make e2e.
E2E_MOTO_PORT ?= 4600
E2E_PG_PORT ?= 4602
E2E_MOTO_DYNAMODB_PORT ?= 4601
E2E_CACHE_PORTS ?= 7301 7302 7303
E2E_REPLICA_PORT ?= 7304
E2E_ENDPOINT_PORT ?= 7313
E2E_LAST_MASTER := $(lastword $(E2E_CACHE_PORTS))
E2E_ENV := LOCAL_STATE=$(CURDIR)/.local/e2e MOTO_PORT=$(E2E_MOTO_PORT) PGPORT=$(E2E_PG_PORT) AWS_ENDPOINT_URL=http://127.0.0.1:$(E2E_MOTO_PORT) MOTO_DYNAMODB_PORT=$(E2E_MOTO_DYNAMODB_PORT) \
	CACHE_PORTS="$(E2E_CACHE_PORTS)" CACHE_ENDPOINT=127.0.0.1:$(firstword $(E2E_CACHE_PORTS)) CACHE_CA_FILE=$(CURDIR)/.local/e2e/tls/ca.crt VISIBILITY_TIMEOUT=60 \
	CACHE_REPLICAS="$(E2E_REPLICA_PORT):$(E2E_LAST_MASTER)" CACHE_ANNOUNCE="$(E2E_LAST_MASTER):$(E2E_ENDPOINT_PORT) $(E2E_REPLICA_PORT):$(E2E_ENDPOINT_PORT)" \
	WORKER_KEYS="cache:* naive:* replica:* e2e:mark:*"
# What env.sh derives from the endpoint, should the calling shell have it.
STACK_UNSET := unset TOPIC_ARN QUEUE_URL RAW_QUEUE_URL DLQ_URL FAILURE_QUEUE_URL SECOND_DELETE_QUEUE_URL INSPECT_QUEUE_URL WINDOW_QUEUE_URL \
	MOTO_DYNAMODB_PORT AWS_ENDPOINT_URL_DYNAMODB AWS_ENDPOINT_URL_DYNAMODB_STREAMS PG_DIR

# The run leaves its lag over time in .local/e2e/lag.json, which the bench
# module (that carries the plotting library) draws into E2E_PLOT: under
# .local/e2e, or into the tracked localstack/e2e/lag.svg for make e2e-record
# (or E2E_PLOT=localstack/e2e/lag.svg make e2e).
E2E_PLOT ?= .local/e2e/lag.svg

e2e: setup build ## the pipeline under faults, on a stack of its own; prints E2E <name> <value>, fails on a stale or lost invalidation; draws its lag into .local/e2e/lag.svg
	rm -f .local/e2e/lag.json
	$(STACK_UNSET) && export $(E2E_ENV) && $(ENV) && \
	  { status=0; { bash localstack/up.sh >/dev/null && go run ./localstack/e2e $(E2E_FLAGS); } || status=$$?; bash localstack/down.sh >/dev/null; \
	    if [ -f .local/e2e/lag.json ]; then (cd bench && go run ./cmd/e2eplot -in ../.local/e2e/lag.json -out ../$(E2E_PLOT)); fi; \
	    exit $$status; }

e2e-record: E2E_PLOT := localstack/e2e/lag.svg
e2e-record: e2e ## make e2e that draws its lag into the tracked localstack/e2e/lag.svg instead

e2e-short: E2E_FLAGS := -short
e2e-short: e2e ## make e2e with shorter outages and races and two failovers, about 8 minutes (CI)

e2e-fleet: E2E_FLAGS := -fleet
e2e-fleet: e2e ## only make e2e's fleet: 120 processes paging tags on one budget, unshared, shared, and without the first deletes' reserve, about 3 minutes

# make soak runs on make e2e's stack, without faults.
soak: E2E_FLAGS := -soak 10m
soak: e2e ## a steady load on every path for 10 minutes, then doubling rates; SOAK lines: RSS, goroutines, fds, lag, lost, the highest steady rate

soak-short: E2E_FLAGS := -soak 45s -soak-ramp 0 -soak-rate 10
soak-short: e2e ## make soak for 45 s at 10 changes/s of each kind, no ramp (CI)

lint: ## gofmt, go vet, shellcheck (when installed) and cfn-lint
	$(ENV) && test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(ENV) && go vet ./... && (cd bench && go vet ./...) && (cd cmd/image && go vet ./...)
	if command -v shellcheck >/dev/null; then shellcheck -x localstack/*.sh .ci/run; fi
	$(ENV) && if [ -f template.yaml ]; then cfn-lint template.yaml; fi
