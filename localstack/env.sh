# shellcheck shell=bash
# Environment of the local stack, for tools, tests and the worker:
#   . localstack/env.sh
# Every value can be overridden by exporting it first. The names are the
# worker's own configuration variables, so a binary run in this shell talks
# to the local stack.

INVALIDATOR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export INVALIDATOR_ROOT
export LOCAL_STATE="${LOCAL_STATE:-$INVALIDATOR_ROOT/.local}"

# Tools installed in the usual places are found even from a bare shell (CI, cron).
for dir in /usr/local/go/bin "$HOME/go/bin" "${PYENV_ROOT:-$HOME/.pyenv}/shims" "$HOME/.local/bin" "$LOCAL_STATE/go/bin"; do
  case ":$PATH:" in *":$dir:"*) ;; *) [ -d "$dir" ] && PATH="$dir:$PATH" ;; esac
done
export PATH

# The Lambda Runtime Interface Emulator, which make setup builds: shared by
# every stack, whatever its LOCAL_STATE.
export RIE_BIN="${RIE_BIN:-$INVALIDATOR_ROOT/.local/bin/aws-lambda-rie}"

# AWS: moto on one port, like LocalStack. Dummy credentials: moto accepts any,
# and LocalStack takes a 12-digit key as the account, so both use this one.
export MOTO_PORT="${MOTO_PORT:-4566}"
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://127.0.0.1:$MOTO_PORT}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_DEFAULT_REGION="$AWS_REGION"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-123456789012}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_ACCOUNT_ID="${AWS_ACCOUNT_ID:-123456789012}"
export AWS_PAGER=""
# MOTO_DYNAMODB_PORT, when set, gives DynamoDB and its stream a moto of their
# own (make e2e and make soak): one moto process answers on one core, and the
# queues' traffic then does not delay the table's writes and stream reads.
# The AWS SDKs read the service-specific endpoints themselves.
if [ -n "${MOTO_DYNAMODB_PORT:-}" ]; then
  export AWS_ENDPOINT_URL_DYNAMODB="${AWS_ENDPOINT_URL_DYNAMODB:-http://127.0.0.1:$MOTO_DYNAMODB_PORT}"
  export AWS_ENDPOINT_URL_DYNAMODB_STREAMS="${AWS_ENDPOINT_URL_DYNAMODB_STREAMS:-$AWS_ENDPOINT_URL_DYNAMODB}"
fi

# Cache: a 3-master TLS-only cluster with the default user off and one ACL
# user, which is how ElastiCache Serverless presents itself to a client.
export CACHE_PORTS="${CACHE_PORTS:-7001 7002 7003}"
export CACHE_ENDPOINT="${CACHE_ENDPOINT:-127.0.0.1:${CACHE_PORTS%% *}}"
export CACHE_TLS="${CACHE_TLS:-true}"
export CACHE_CA_FILE="${CACHE_CA_FILE:-$LOCAL_STATE/tls/ca.crt}"
export CACHE_USERNAME="${CACHE_USERNAME:-app}"
export CACHE_PASSWORD="${CACHE_PASSWORD:-local-dev-password-0123456789}"
# The worker's own user, with only the commands the worker runs: the same
# rules template.yaml gives the ElastiCache user (Valkey adds client|setinfo,
# which redis-server 7.0 does not know).
export WORKER_USERNAME="${WORKER_USERNAME:-invalidator}"
export WORKER_PASSWORD="${WORKER_PASSWORD:-local-worker-password-0123456789}"
# The functions read that password from a secret, by its ARN, as in AWS
# (CACHE_PASSWORD_SECRET_ARN); init/ready.d/10-resources.py makes it. A
# partial ARN, without the suffix Secrets Manager adds to the name: Secrets
# Manager and moto take it.
export WORKER_PASSWORD_SECRET_NAME="${WORKER_PASSWORD_SECRET_NAME:-invalidator-worker-password}"
# ASKING lets it follow a slot being migrated; PUBLISH, on its one channel,
# announces its deletes to the services' local tiers. The scripts (EVALSHA,
# EVAL) invalidate tags: the tag clock (TIME, INCR, INCRBY), each tag's hash
# (EXISTS, HGET, HSET, HSCAN, HDEL); none can overwrite a cached value.
export WORKER_ACL="~invalidator:ecpu-budget:* resetchannels &invalidator:near -@all +unlink +publish +asking +ping +hello +auth +client|setname +cluster|shards +cluster|slots +cluster|info +evalsha +eval +time +incr +incrby +exists +hget +hset +hscan +hdel"
# The local cluster is taken as a cache of 100,000 ECPUs a second at most,
# of which the worker processes ask up to 25 % together
# (CACHE_WORKER_ECPU_SHARE), through one budget in the cache, as the
# template's default 120 processes do: make e2e's burst, 3,000 keys a
# second and their second deletes, fits (docs/tags.md).
export CACHE_MAX_ECPU_PER_SECOND="${CACHE_MAX_ECPU_PER_SECOND:-100000}"
export CACHE_WORKER_MAX_PROCESSES="${CACHE_WORKER_MAX_PROCESSES:-120}"
# The channel of those announcements (writethrough/local's default).
export ANNOUNCE_CHANNEL="${ANNOUNCE_CHANNEL:-invalidator:near}"
# The keys it may delete: the rules' allowedKeys, and CacheKeyPatterns in
# template.yaml. Space-separated.
export WORKER_KEYS="${WORKER_KEYS:-cache:*}"

# PostgreSQL, the local commit log (make up starts it; docs/commit-log.md):
# psql and the commit log's stand-in reach it by libpq's own variables. Its
# files are outside the clone: as root the server runs as postgres, which
# may not enter the clone's folders.
export PGHOST="${PGHOST:-127.0.0.1}"
export PGPORT="${PGPORT:-5442}"
export PGUSER="${PGUSER:-postgres}"
export PGDATABASE="${PGDATABASE:-shop}"
export PG_DIR="${PG_DIR:-${TMPDIR:-/tmp}/invalidator-postgres-$PGPORT}"
export CDC_SLOT="${CDC_SLOT:-invalidator}"
export CDC_STREAM_NAME="${CDC_STREAM_NAME:-cache-invalidation-cdc}"

# Resource names, shared with init/ready.d/10-resources.py and template.yaml.
export TOPIC_NAME="${TOPIC_NAME:-cache-changes}"
export QUEUE_NAME="${QUEUE_NAME:-cache-invalidation}"
export DLQ_NAME="${DLQ_NAME:-cache-invalidation-dlq}"
export FAILURE_QUEUE_NAME="${FAILURE_QUEUE_NAME:-cache-invalidation-failures}"
export RAW_QUEUE_NAME="${RAW_QUEUE_NAME:-cache-invalidation-raw}"
export SECOND_DELETE_QUEUE_NAME="${SECOND_DELETE_QUEUE_NAME:-cache-invalidation-again}"
export INSPECT_QUEUE_NAME="${INSPECT_QUEUE_NAME:-cache-invalidation-inspect}"
# The failover window's queue. Its URL is not exported as the worker's
# FAILOVER_WINDOW_QUEUE_URL: the workers of tests would share it, and each
# sign of a failover in one test would delete the others' keys again.
# make local and make e2e give it to theirs.
export FAILOVER_WINDOW_QUEUE_NAME="${FAILOVER_WINDOW_QUEUE_NAME:-cache-invalidation-window}"
export TABLE_NAME="${TABLE_NAME:-Products}"
export TOPIC_ARN="${TOPIC_ARN:-arn:aws:sns:$AWS_REGION:$AWS_ACCOUNT_ID:$TOPIC_NAME}"
export WORKER_PASSWORD_SECRET_ARN="${WORKER_PASSWORD_SECRET_ARN:-arn:aws:secretsmanager:$AWS_REGION:$AWS_ACCOUNT_ID:secret:$WORKER_PASSWORD_SECRET_NAME}"
export QUEUE_URL="${QUEUE_URL:-$AWS_ENDPOINT_URL/$AWS_ACCOUNT_ID/$QUEUE_NAME}"
export RAW_QUEUE_URL="${RAW_QUEUE_URL:-$AWS_ENDPOINT_URL/$AWS_ACCOUNT_ID/$RAW_QUEUE_NAME}"
export DLQ_URL="${DLQ_URL:-$AWS_ENDPOINT_URL/$AWS_ACCOUNT_ID/$DLQ_NAME}"
export FAILURE_QUEUE_URL="${FAILURE_QUEUE_URL:-$AWS_ENDPOINT_URL/$AWS_ACCOUNT_ID/$FAILURE_QUEUE_NAME}"
export SECOND_DELETE_QUEUE_URL="${SECOND_DELETE_QUEUE_URL:-$AWS_ENDPOINT_URL/$AWS_ACCOUNT_ID/$SECOND_DELETE_QUEUE_NAME}"
export INSPECT_QUEUE_URL="${INSPECT_QUEUE_URL:-$AWS_ENDPOINT_URL/$AWS_ACCOUNT_ID/$INSPECT_QUEUE_NAME}"
_window="$AWS_ENDPOINT_URL/$AWS_ACCOUNT_ID/$FAILOVER_WINDOW_QUEUE_NAME"
export WINDOW_QUEUE_URL="${WINDOW_QUEUE_URL:-$_window,$_window-2,$_window-3,$_window-4}" # its four slots
unset _window
