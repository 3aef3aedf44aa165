#!/usr/bin/env bash
# Runs the worker on the local stack, in the foreground, until Ctrl-C:
#   - the poller, consuming cache-invalidation (SNS envelopes) and the second
#     deletes of cache-invalidation-again;
#   - the Lambda functions under the Runtime Interface Emulator, fed by the
#     local event source mapping driver from cache-invalidation-raw, the
#     Products stream and the commit log's Kinesis stream;
#   - the commit log's stand-in (localstack/commitlog), which puts the local
#     PostgreSQL's changes on that Kinesis stream, as Debezium Server would.
# Expects the stack up (make up) and the functions built (make build).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$INVALIDATOR_ROOT"

export INVALIDATION_RULES_FILE="${INVALIDATION_RULES_FILE:-$INVALIDATOR_ROOT/localstack/rules.yaml}"
export FAILOVER_WINDOW_QUEUE_URL="${FAILOVER_WINDOW_QUEUE_URL:-$WINDOW_QUEUE_URL}"
export HEALTH_ADDR="${HEALTH_ADDR:-127.0.0.1:8080}"
# Stopping waits for the poller's long polls in flight: 5 s, not 20, here.
export POLLER_WAIT_TIME="${POLLER_WAIT_TIME:-5s}"
mkdir -p "$RUN_DIR"
say "building the local event source mapping driver and the commit log's stand-in"
go build -o "$LOCAL_STATE/bin/driver" ./localstack/driver
go build -o "$LOCAL_STATE/bin/commitlog" ./localstack/commitlog

pids=()
stop() {
  trap - INT TERM EXIT
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  rm -f "$RUN_DIR/poller.pid" "$RUN_DIR/driver.pid" "$RUN_DIR/commitlog.pid"
}
# Stopped on purpose (Ctrl-C, kill -TERM), the worker ends well: status 0.
trap 'stop; exit 0' INT TERM
trap stop EXIT

# The worker logs in as its own least-privileged user, as in AWS: the
# poller and the functions by the ARN of the secret that holds its password.
export CACHE_USERNAME="$WORKER_USERNAME" CACHE_PASSWORD="" CACHE_PASSWORD_SECRET_ARN="$WORKER_PASSWORD_SECRET_ARN"
bin/poller/poller &
pids+=($!)
echo $! >"$RUN_DIR/poller.pid"
"$LOCAL_STATE/bin/driver" -bin "$INVALIDATOR_ROOT/bin" &
pids+=($!)
echo $! >"$RUN_DIR/driver.pid"
"$LOCAL_STATE/bin/commitlog" &
pids+=($!)
echo $! >"$RUN_DIR/commitlog.pid"

say "worker running on the local stack (Ctrl-C stops it). Try it in another shell, at $INVALIDATOR_ROOT (README.md):"
quick_try_block | sed 's/^/  /'
say "and watch the batch lines below."
wait -n "${pids[@]}"
