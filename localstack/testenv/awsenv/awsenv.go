package awsenv

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// AWS returns an SDK configuration for moto, after checking that moto
// accepts connections. The SDK reads AWS_ENDPOINT_URL itself.
func AWS(t testing.TB) aws.Config {
	t.Helper()
	endpoint := testenv.Getenv(t, "AWS_ENDPOINT_URL")
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("AWS_ENDPOINT_URL=%q is not a URL", endpoint)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		testenv.Unavailable(t, "moto is not answering on "+u.Host+": "+err.Error())
	}
	conn.Close()
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatalf("AWS configuration: %v", err)
	}
	return cfg
}

// SQS returns an SQS client for moto.
func SQS(t testing.TB) *sqs.Client { t.Helper(); return sqs.NewFromConfig(AWS(t)) }

// SNS returns an SNS client for moto.
func SNS(t testing.TB) *sns.Client { t.Helper(); return sns.NewFromConfig(AWS(t)) }

// SecretsManager returns a Secrets Manager client for moto.
func SecretsManager(t testing.TB) *secretsmanager.Client {
	t.Helper()
	return secretsmanager.NewFromConfig(AWS(t))
}

// DynamoDB returns a DynamoDB client for moto.
func DynamoDB(t testing.TB) *dynamodb.Client { t.Helper(); return dynamodb.NewFromConfig(AWS(t)) }

// Streams returns a DynamoDB Streams client for moto.
func Streams(t testing.TB) *dynamodbstreams.Client {
	t.Helper()
	return dynamodbstreams.NewFromConfig(AWS(t))
}

// Table makes a table keyed by a string id, with a NEW_AND_OLD_IMAGES
// stream, deleted after the test; it returns the table's name and its
// stream's ARN.
func Table(t testing.TB) (string, string) {
	t.Helper()
	db := DynamoDB(t)
	name := "Products" + rand.Text()[:8]
	out, err := db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	var inUse *ddbtypes.ResourceInUseException
	if errors.As(err, &inUse) {
		// Sent again by the SDK after moto made it, its answer lost on a
		// loaded machine: the name is this test's own.
		desc, derr := db.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if derr != nil {
			t.Fatal(err)
		}
		return name, aws.ToString(desc.Table.LatestStreamArn)
	}
	if err != nil {
		t.Fatal(err)
	}
	return name, *out.TableDescription.LatestStreamArn
}

// Kinesis returns a Kinesis client for moto.
func Kinesis(t testing.TB) *kinesis.Client { t.Helper(); return kinesis.NewFromConfig(AWS(t)) }

// KinesisStream makes a Kinesis data stream of shards shards, deleted
// after the test, and returns its ARN once it is active.
func KinesisStream(t testing.TB, shards int32) string {
	t.Helper()
	k := Kinesis(t)
	name := "commit-log-" + rand.Text()[:8]
	if _, err := k.CreateStream(t.Context(), &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		var inUse *kinesistypes.ResourceInUseException
		if !errors.As(err, &inUse) { // sent again by the SDK, its answer lost
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = k.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(name), EnforceConsumerDeletion: aws.Bool(true)})
	})
	return KinesisActive(t, name)
}

// KinesisActive waits up to 10 s for the stream named name to be active,
// and returns its ARN.
func KinesisActive(t testing.TB, name string) string {
	t.Helper()
	k := Kinesis(t)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		desc, err := k.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err == nil && desc.StreamDescriptionSummary.StreamStatus == kinesistypes.StreamStatusActive {
			return aws.ToString(desc.StreamDescriptionSummary.StreamARN)
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s not active after 10 s: %v", name, err)
		}
	}
}

// S3 returns an S3 client for moto, which answers path-style requests.
func S3(t testing.TB) *s3.Client {
	t.Helper()
	return s3.NewFromConfig(AWS(t), func(o *s3.Options) { o.UsePathStyle = true })
}

// Bucket makes a bucket, emptied and deleted after the test, and returns
// its name.
func Bucket(t testing.TB) string {
	t.Helper()
	c := S3(t)
	name := "invalidator-test-" + strings.ToLower(rand.Text()[:12])
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name)}); err == nil {
			for _, o := range out.Contents {
				_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: o.Key})
			}
		}
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return name
}
