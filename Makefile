# Every recipe runs in bash with the local stack's environment (localstack/env.sh),
# so go, moto and the AWS CLI are found even from a bare shell.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
ENV := . localstack/env.sh
LAMBDAS := $(filter-out poller,$(notdir $(patsubst %/,%,$(wildcard functions/*/))))

.PHONY: help setup up down local test build bench lint

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: ## install what is missing: Go, redis-server, moto, AWS CLI, cfn-lint, the Lambda emulator
	bash localstack/setup.sh

up: setup ## start the local stack (moto + TLS cluster) and create its resources; idempotent
	bash localstack/up.sh

down: ## stop everything the local stack started
	bash localstack/down.sh

local: up build ## run the worker on the local stack in the foreground: poller, and the functions under the emulator
	bash localstack/local.sh

test: up ## vet and test everything against the local stack, then lint the SAM template
	$(ENV) && go vet ./...
	$(ENV) && go test -race -count=1 ./...
	$(ENV) && if [ -f template.yaml ]; then cfn-lint template.yaml; fi

# GOARCH defaults to the host's; GOARCH=arm64 cross-compiles for Graviton.
# The Lambda functions are bootstraps for provided.al2023; the poller is a
# plain binary (GOOS from the host, so make local runs it anywhere).
build: ## build functions/<name> into bin/<name>/bootstrap, and bin/poller/poller
	$(ENV) && arch=$${GOARCH:-$$(go env GOARCH)} && for fn in $(LAMBDAS); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch go build -tags lambda.norpc -trimpath \
	    -ldflags='-s -w' -o bin/$$fn/bootstrap ./functions/$$fn; \
	  echo "bin/$$fn/bootstrap (linux/$$arch)"; \
	done
	$(ENV) && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/poller/poller ./functions/poller && \
	  echo "bin/poller/poller ($$(go env GOOS)/$${GOARCH:-$$(go env GOARCH)})"

# The benchmarks get a server of their own: one TLS node owning every slot,
# the shape ElastiCache Serverless shows, with nothing else running on it.
BENCH_ENV := LOCAL_STATE=$(CURDIR)/.local/bench CACHE_PORTS=7010 CACHE_ENDPOINT=127.0.0.1:7010 \
	CACHE_CA_FILE=$(CURDIR)/.local/bench/tls/ca.crt

bench: setup build ## measure against references in the same run; prints BENCH <name> <value>
	$(ENV) && export $(BENCH_ENV) && bash localstack/up.sh cache >/dev/null && \
	  { go run ./bench; status=$$?; bash localstack/down.sh >/dev/null; exit $$status; }

lint: ## gofmt, go vet, shellcheck (when installed) and cfn-lint
	$(ENV) && test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(ENV) && go vet ./...
	if command -v shellcheck >/dev/null; then shellcheck -x localstack/*.sh localstack/init/ready.d/*.sh .ci/run; fi
	$(ENV) && if [ -f template.yaml ]; then cfn-lint template.yaml; fi
