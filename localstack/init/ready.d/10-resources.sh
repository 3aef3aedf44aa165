#!/usr/bin/env bash
# Creates the AWS resources the worker uses, with the names template.yaml uses.
# Runs against whatever AWS_ENDPOINT_URL names: moto (localstack/up.sh) or
# LocalStack, where it is mounted as a ready hook. Idempotent: every step
# looks before it creates, so running it twice changes nothing.
set -euo pipefail

# LocalStack runs its hooks inside the container, where the endpoint is local.
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_DEFAULT_REGION="$AWS_REGION"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-123456789012}" # LocalStack: the account ID
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_PAGER=""

topic="${TOPIC_NAME:-cache-changes}"
queue="${QUEUE_NAME:-cache-invalidation}"
dlq="${DLQ_NAME:-cache-invalidation-dlq}"
failures="${FAILURE_QUEUE_NAME:-cache-invalidation-failures}"
raw_queue="${RAW_QUEUE_NAME:-cache-invalidation-raw}"
again="${SECOND_DELETE_QUEUE_NAME:-cache-invalidation-again}"
inspect="${INSPECT_QUEUE_NAME:-cache-invalidation-inspect}"
window="${FAILOVER_WINDOW_QUEUE_NAME:-cache-invalidation-window}"
table="${TABLE_NAME:-Products}"
secret="${WORKER_PASSWORD_SECRET_NAME:-invalidator-worker-password}"
# As template.yaml: QueueMaxReceiveCount, and 6 x the function timeout.
max_receive_count="${MAX_RECEIVE_COUNT:-1000}"
visibility_timeout="${VISIBILITY_TIMEOUT:-180}"
# As template.yaml's SecondDeleteQueue, to which the worker sizes its messages
# (worker.DefaultDelayMaxBytes).
second_delete_max_bytes="${SECOND_DELETE_QUEUE_MAX_BYTES:-262144}"
# As template.yaml's Queue: room for a parked record's attributes below 1 MiB.
queue_max_bytes="${QUEUE_MAX_BYTES:-1040384}"

# awscli v1 sends SQS calls to queue.amazonaws.com unless the endpoint is
# given as a flag, whatever AWS_ENDPOINT_URL says; so pass it to every call.
# Inside a LocalStack container without the plain CLI, awslocal does the same.
if command -v aws >/dev/null; then
  awscli() { aws --endpoint-url "$AWS_ENDPOINT_URL" --output text "$@"; }
else
  awscli() { awslocal --output text "$@"; }
fi

# DynamoDB may have an endpoint of its own (localstack/env.sh, MOTO_DYNAMODB_PORT).
dynamodb() { awscli --endpoint-url "${AWS_ENDPOINT_URL_DYNAMODB:-$AWS_ENDPOINT_URL}" dynamodb "$@"; }

queue_url() { # name -> URL, creating the queue when it is missing
  awscli sqs get-queue-url --queue-name "$1" --query QueueUrl 2>/dev/null ||
    awscli sqs create-queue --queue-name "$1" --query QueueUrl
}

queue_arn() { # URL -> ARN
  awscli sqs get-queue-attributes --queue-url "$1" --attribute-names QueueArn --query Attributes.QueueArn
}

# Attribute values that are themselves JSON travel as strings inside JSON;
# python3 does the quoting because awscli needs it anyway.
queue_attributes() { # policy-json|"" redrive-json|"" visibility -> --attributes JSON
  python3 - "$@" <<'PY'
import json, sys
attrs = {"VisibilityTimeout": sys.argv[3], "MessageRetentionPeriod": "1209600"}
if sys.argv[1]:
    attrs["Policy"] = sys.argv[1]
if sys.argv[2]:
    attrs["RedrivePolicy"] = sys.argv[2]
print(json.dumps(attrs))
PY
}

sns_may_send() { # queue-arn -> queue policy letting the topic deliver to it
  printf '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"sns.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"%s","Condition":{"ArnEquals":{"aws:SourceArn":"%s"}}}]}' "$1" "$topic_arn"
}

subscribe() { # queue-arn raw(true|false)
  local existing
  existing=$(awscli sns list-subscriptions-by-topic --topic-arn "$topic_arn" \
    --query "Subscriptions[?Endpoint=='$1'].SubscriptionArn")
  if [ -z "$existing" ] || [ "$existing" = "None" ]; then
    existing=$(awscli sns subscribe --topic-arn "$topic_arn" --protocol sqs \
      --notification-endpoint "$1" --query SubscriptionArn)
  fi
  awscli sns set-subscription-attributes --subscription-arn "$existing" \
    --attribute-name RawMessageDelivery --attribute-value "$2"
}

topic_arn=$(awscli sns create-topic --name "$topic" --query TopicArn)

dlq_url=$(queue_url "$dlq")
dlq_arn=$(queue_arn "$dlq_url")
failures_url=$(queue_url "$failures")
for url in "$dlq_url" "$failures_url"; do
  awscli sqs set-queue-attributes --queue-url "$url" --attributes MessageRetentionPeriod=1209600
done
# Records are parked whole: the failure queue takes SQS's largest messages.
awscli sqs set-queue-attributes --queue-url "$failures_url" --attributes MaximumMessageSize=1048576

redrive=$(printf '{"deadLetterTargetArn":"%s","maxReceiveCount":"%s"}' "$dlq_arn" "$max_receive_count")
for name in "$queue" "$raw_queue"; do
  url=$(queue_url "$name")
  arn=$(queue_arn "$url")
  awscli sqs set-queue-attributes --queue-url "$url" \
    --attributes "$(queue_attributes "$(sns_may_send "$arn")" "$redrive" "$visibility_timeout")"
  awscli sqs set-queue-attributes --queue-url "$url" --attributes MaximumMessageSize="$queue_max_bytes"
  if [ "$name" = "$raw_queue" ]; then subscribe "$arn" true; else subscribe "$arn" false; fi
done

# Second deletes: what cannot be delivered goes to the failure queue, for
# invalidator replay, as in template.yaml.
again_url=$(queue_url "$again")
again_redrive=$(printf '{"deadLetterTargetArn":"%s","maxReceiveCount":"%s"}' "$(queue_arn "$failures_url")" "$max_receive_count")
awscli sqs set-queue-attributes --queue-url "$again_url" --attributes "$(queue_attributes "" "$again_redrive" "$visibility_timeout")"
awscli sqs set-queue-attributes --queue-url "$again_url" --attributes MaximumMessageSize="$second_delete_max_bytes"

# The failover window: the fleet's last minute of deletes, which nothing
# consumes; read again after a sign of a failover (template.yaml's
# FailoverWindowQueue).
window_url=$(queue_url "$window")
awscli sqs set-queue-attributes --queue-url "$window_url" --attributes MessageRetentionPeriod=60,MaximumMessageSize="$second_delete_max_bytes"

# invalidator inspect's copy of every change, kept a minute (template.yaml's
# InspectQueue, which is opt-in there).
inspect_url=$(queue_url "$inspect")
inspect_arn=$(queue_arn "$inspect_url")
awscli sqs set-queue-attributes --queue-url "$inspect_url" --attributes "$(python3 -c 'import json,sys; print(json.dumps({"MessageRetentionPeriod": "60", "Policy": sys.argv[1]}))' "$(sns_may_send "$inspect_arn")")"
subscribe "$inspect_arn" false

# The worker's cache password, which the functions read by the secret's ARN
# as in AWS: the "password" key, as template.yaml's CachePasswordSecretArn
# holds it. Written again each run, to follow WORKER_PASSWORD (env.sh's).
secret_string=$(python3 -c 'import json, sys; print(json.dumps({"password": sys.argv[1]}))' "${WORKER_PASSWORD:-local-worker-password-0123456789}")
if awscli secretsmanager describe-secret --secret-id "$secret" >/dev/null 2>&1; then
  awscli secretsmanager put-secret-value --secret-id "$secret" --secret-string "$secret_string" >/dev/null
else
  awscli secretsmanager create-secret --name "$secret" --secret-string "$secret_string" >/dev/null
fi

if ! dynamodb describe-table --table-name "$table" --query Table.TableName >/dev/null 2>&1; then
  dynamodb create-table --table-name "$table" \
    --attribute-definitions AttributeName=id,AttributeType=S \
    --key-schema AttributeName=id,KeyType=HASH \
    --billing-mode PAY_PER_REQUEST \
    --stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES >/dev/null
fi
dynamodb wait table-exists --table-name "$table"
stream_arn=$(dynamodb describe-table --table-name "$table" --query Table.LatestStreamArn)

echo "resources ready:"
echo "  topic       $topic_arn"
echo "  queue       $(queue_url "$queue") (DLQ $dlq after $max_receive_count receives)"
echo "  raw queue   $(queue_url "$raw_queue") (RawMessageDelivery=true)"
echo "  dlq         $dlq_url"
echo "  again       $again_url (second deletes, delayed; failures after $max_receive_count receives)"
echo "  window      $window_url (the last minute of deletes, deleted again after a sign of a failover)"
echo "  inspect     $inspect_url (a copy of each change for invalidator inspect, kept 60 s)"
echo "  failures    $failures_url (records parked by the worker, and what the stream and SNS paths give up on)"
echo "  table       $table, stream $stream_arn"
echo "  secret      $secret (the worker's cache password, which the functions read)"
