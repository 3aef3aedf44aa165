"""Creates the AWS resources the worker uses, with the names template.yaml uses.

Runs against whatever AWS_ENDPOINT_URL names: moto (localstack/up.sh runs it
with the Python that has moto, and so boto3) or LocalStack, where it is
mounted as a ready hook and runs in LocalStack's own Python. Idempotent: every
step looks before it creates, so running it twice changes nothing. One
process, not the AWS CLI once per call: its 50 start-ups took a stack 90 s.
Each queue's attributes are set in one call: moto drops a queue's Policy when
SetQueueAttributes leaves it out (AWS keeps it).
"""

import json
import os

import boto3
from botocore.exceptions import ClientError

env = os.environ.get
endpoint = env("AWS_ENDPOINT_URL") or "http://localhost:4566"  # LocalStack's hooks: inside the container
session = boto3.session.Session(
    region_name=env("AWS_REGION") or "us-east-1",
    aws_access_key_id=env("AWS_ACCESS_KEY_ID") or "123456789012",  # LocalStack: the account ID
    aws_secret_access_key=env("AWS_SECRET_ACCESS_KEY") or "test",
)
sns = session.client("sns", endpoint_url=endpoint)
sqs = session.client("sqs", endpoint_url=endpoint)
secrets = session.client("secretsmanager", endpoint_url=endpoint)
# DynamoDB may have an endpoint of its own (localstack/env.sh, MOTO_DYNAMODB_PORT).
dynamodb = session.client("dynamodb", endpoint_url=env("AWS_ENDPOINT_URL_DYNAMODB") or endpoint)
kinesis = session.client("kinesis", endpoint_url=endpoint)

topic = env("TOPIC_NAME") or "cache-changes"
queue = env("QUEUE_NAME") or "cache-invalidation"
dlq = env("DLQ_NAME") or "cache-invalidation-dlq"
failures = env("FAILURE_QUEUE_NAME") or "cache-invalidation-failures"
raw_queue = env("RAW_QUEUE_NAME") or "cache-invalidation-raw"
again = env("SECOND_DELETE_QUEUE_NAME") or "cache-invalidation-again"
inspect = env("INSPECT_QUEUE_NAME") or "cache-invalidation-inspect"
window = env("FAILOVER_WINDOW_QUEUE_NAME") or "cache-invalidation-window"
table = env("TABLE_NAME") or "Products"
cdc_stream = env("CDC_STREAM_NAME") or "cache-invalidation-cdc"
secret = env("WORKER_PASSWORD_SECRET_NAME") or "invalidator-worker-password"
# As template.yaml: QueueMaxReceiveCount, and 6 x the function timeout.
max_receive_count = env("MAX_RECEIVE_COUNT") or "1000"
visibility_timeout = env("VISIBILITY_TIMEOUT") or "180"
# As template.yaml's SecondDeleteQueue, to which the worker sizes its
# messages (worker.DefaultDelayMaxBytes).
second_delete_max_bytes = env("SECOND_DELETE_QUEUE_MAX_BYTES") or "262144"
# As template.yaml's Queue: room for a parked record's attributes below 1 MiB.
queue_max_bytes = env("QUEUE_MAX_BYTES") or "1040384"
fortnight = "1209600"


def queue_url(name):
    """The queue's URL, creating the queue when it is missing."""
    try:
        return sqs.get_queue_url(QueueName=name)["QueueUrl"]
    except ClientError:
        return sqs.create_queue(QueueName=name)["QueueUrl"]


def queue_arn(url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def set_attributes(url, **attributes):
    sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)


def sns_may_send(arn):
    """A queue policy letting the topic deliver to the queue."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"}, "Action": "sqs:SendMessage",
        "Resource": arn, "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}}}]})


def subscribe(arn, raw):
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=topic_arn)["Subscriptions"]
    found = [s["SubscriptionArn"] for s in subscriptions if s["Endpoint"] == arn]
    subscription = found[0] if found else sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)["SubscriptionArn"]
    sns.set_subscription_attributes(SubscriptionArn=subscription, AttributeName="RawMessageDelivery",
                                    AttributeValue="true" if raw else "false")


topic_arn = sns.create_topic(Name=topic)["TopicArn"]

dlq_url = queue_url(dlq)
dlq_arn = queue_arn(dlq_url)
failures_url = queue_url(failures)
set_attributes(dlq_url, MessageRetentionPeriod=fortnight)
# Records are parked whole: the failure queue takes SQS's largest messages.
set_attributes(failures_url, MessageRetentionPeriod=fortnight, MaximumMessageSize="1048576")

redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count})
urls = {}
for name, raw in ((queue, False), (raw_queue, True)):
    url = urls[name] = queue_url(name)
    arn = queue_arn(url)
    set_attributes(url, VisibilityTimeout=visibility_timeout, MessageRetentionPeriod=fortnight,
                   Policy=sns_may_send(arn), RedrivePolicy=redrive, MaximumMessageSize=queue_max_bytes)
    subscribe(arn, raw)

# Second deletes: what cannot be delivered goes to the failure queue, for
# invalidator replay, as in template.yaml.
again_url = queue_url(again)
set_attributes(again_url, VisibilityTimeout=visibility_timeout, MessageRetentionPeriod=fortnight,
               RedrivePolicy=json.dumps({"deadLetterTargetArn": queue_arn(failures_url), "maxReceiveCount": max_receive_count}),
               MaximumMessageSize=second_delete_max_bytes)

# The failover window: the fleet's last minute of deletes, which nothing
# consumes; read again after a sign of a failover. Four slots of 20 s, as
# template.yaml's FailoverWindowQueue to FailoverWindowQueue4.
window_urls = [queue_url(window + suffix) for suffix in ("", "-2", "-3", "-4")]
for url in window_urls:
    set_attributes(url, MessageRetentionPeriod="60", MaximumMessageSize=second_delete_max_bytes)

# invalidator inspect's copy of every change, kept a minute (template.yaml's
# InspectQueue, which is opt-in there).
inspect_url = queue_url(inspect)
inspect_arn = queue_arn(inspect_url)
set_attributes(inspect_url, MessageRetentionPeriod="60", Policy=sns_may_send(inspect_arn))
subscribe(inspect_arn, False)

# The worker's cache password, which the functions read by the secret's ARN
# as in AWS: the "password" key, as template.yaml's CachePasswordSecretArn
# holds it. Written again each run, to follow WORKER_PASSWORD (env.sh's).
secret_string = json.dumps({"password": env("WORKER_PASSWORD") or "local-worker-password-0123456789"})
try:
    secrets.describe_secret(SecretId=secret)
    secrets.put_secret_value(SecretId=secret, SecretString=secret_string)
except ClientError as e:
    if e.response["Error"]["Code"] != "ResourceNotFoundException":
        raise
    secrets.create_secret(Name=secret, SecretString=secret_string)

try:
    dynamodb.describe_table(TableName=table)
except ClientError as e:
    if e.response["Error"]["Code"] != "ResourceNotFoundException":
        raise
    dynamodb.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
dynamodb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1})
stream_arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]

# The commit log's stream: the PostgreSQL stand-in writes Debezium's
# records on it, the Kinesis function reads them (template.yaml's
# KinesisStreamArn names a team's own). One shard: the stand-in keeps the
# commit order on one partition key.
try:
    kinesis.describe_stream_summary(StreamName=cdc_stream)
except ClientError as e:
    if e.response["Error"]["Code"] != "ResourceNotFoundException":
        raise
    kinesis.create_stream(StreamName=cdc_stream, ShardCount=1)
kinesis.get_waiter("stream_exists").wait(StreamName=cdc_stream, WaiterConfig={"Delay": 1})
cdc_arn = kinesis.describe_stream_summary(StreamName=cdc_stream)["StreamDescriptionSummary"]["StreamARN"]

print(f"""resources ready:
  topic       {topic_arn}
  queue       {urls[queue]} (DLQ {dlq} after {max_receive_count} receives)
  raw queue   {urls[raw_queue]} (RawMessageDelivery=true)
  dlq         {dlq_url}
  again       {again_url} (second deletes, delayed; failures after {max_receive_count} receives)
  window      {', '.join(window_urls)} (the last minute of deletes in slots, deleted again after a sign of a failover)
  inspect     {inspect_url} (a copy of each change for invalidator inspect, kept 60 s)
  failures    {failures_url} (records parked by the worker, and what the stream and SNS paths give up on)
  table       {table}, stream {stream_arn}
  kinesis     {cdc_arn} (the commit log's changes, from PostgreSQL)
  secret      {secret} (the worker's cache password, which the functions read)""", flush=True)
