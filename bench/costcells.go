package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/localstack/esm"
)

// cell is one configuration the cost group measures: a path, its batch
// size (records per invoke; for the poller, messages per receive) and
// second deletes on or off.
type cell struct {
	path   string // sqs, stream, sns, poller, naive
	batch  int
	second bool
}

func (c cell) name() string {
	sd := "nosd"
	if c.second {
		sd = "sd"
	}
	return fmt.Sprintf("%s_b%d_%s", c.path, c.batch, sd)
}

// costCells are the cells of make bench: each path at batch sizes 1, 10
// and 100 where it has them, with and without the second delete, and the
// naive design. The SNS function always gets one record; a receive brings
// the poller at most 10 (SQS's limit).
var costCells = []cell{
	{"sqs", 1, false}, {"sqs", 1, true}, {"sqs", 10, false}, {"sqs", 10, true}, {"sqs", 100, false}, {"sqs", 100, true},
	{"stream", 1, false}, {"stream", 1, true}, {"stream", 10, false}, {"stream", 10, true}, {"stream", 100, false}, {"stream", 100, true},
	{"sns", 1, false}, {"sns", 1, true},
	{"poller", 1, false}, {"poller", 1, true}, {"poller", 10, false}, {"poller", 10, true},
	{"naive", 1, false},
}

// cellUse is what a cell's changes used.
type cellUse struct {
	cell
	first, again []invokeUse // the invokes of first deletes; of second deletes
	// mapping are the requests of the event source mappings (in AWS,
	// Lambda's pollers, billed to you); function the functions' own,
	// poller the poller's.
	mapping, function, poller apiCounts
	pollerCPU                 time.Duration
	unlinks                   int
	batches                   batchSums
	logBytes                  int
	cold, coldCPU             time.Duration // the first function's first invoke
	took                      time.Duration
}

// templateSqsBatch is template.yaml's SqsBatchSize: the batch of the delay
// queue's mapping, whatever path sent the second deletes.
const templateSqsBatch = 10

func (s *costStack) measure(ctx context.Context, c cell, n int) cellUse {
	s.freshQueues(ctx, c)
	var again *lambdaRun
	if c.second && c.path != "poller" {
		// template.yaml gives the delay queue's mapping the SQS function's
		// batch size, and no batching window: at most 10.
		batch := templateSqsBatch
		if c.path == "sqs" {
			batch = min(c.batch, 10)
		}
		again = s.sqsLambda(ctx, s.again, batch, true)
	}
	var u cellUse
	switch c.path {
	case "poller":
		return s.pollerCell(ctx, c, n)
	case "sqs":
		first := s.sqsLambda(ctx, s.queue, c.batch, c.second)
		u = s.lambdaCell(ctx, c, n, first, again, func() {
			s.feed(ctx, n, min(2*c.batch, 20), first.mapping) // a receive finds as many as it asks for
		}, func() bool { return first.mapping.counts().Messages["DeleteMessageBatch"] >= n })
	case "naive":
		first := s.startLambda(s.naive, func(*apiCounter) []string { return naiveEnv() })
		first.run(ctx, s.sqsMapping(first, s.queue, 1))
		u = s.lambdaCell(ctx, c, n, first, nil, func() {
			s.feed(ctx, n, 2, first.mapping)
		}, func() bool { return first.mapping.counts().Messages["DeleteMessageBatch"] >= n })
	case "stream":
		arn := s.table(ctx, c, n)
		first := s.startLambda(s.bin+"/stream-invalidate/bootstrap", func(own *apiCounter) []string { return s.functionEnv(own, c.second) })
		streams := dynamodbstreams.NewFromConfig(s.aws, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(first.mapping.URL) })
		u = s.lambdaCell(ctx, c, n, first, again, func() {
			first.run(ctx, &esm.StreamMapping{Client: streams, StreamARN: arn, Settings: esm.Settings{Function: first.fn, BatchSize: int32(c.batch), Logger: s.warnings}})
		}, func() bool { b, _, _ := first.fn.logs.sums(); return b.Records >= n })
	case "sns":
		first := s.startLambda(s.bin+"/sns-invalidate/bootstrap", func(own *apiCounter) []string { return s.functionEnv(own, c.second) })
		// SNS invokes the function asynchronously, one message each: the
		// harness does as SNS does, and SNS's deliveries cost nothing.
		u = s.lambdaCell(ctx, c, n, first, again, func() {
			for i := range n {
				if _, err := first.fn.Invoke(ctx, snsEvent(s.next+i)); err != nil {
					log.Fatalf("SNS invoke: %v", err)
				}
			}
			s.next += n
		}, func() bool { return true })
	default:
		log.Fatalf("cost: no path %q", c.path)
	}
	return u
}

// lambdaCell feeds a cell, waits until its first deletes are done and,
// with second deletes, until every one sent to the delay queue has been
// received and deleted, and returns what it used.
func (s *costStack) lambdaCell(ctx context.Context, c cell, n int, first, again *lambdaRun, feed func(), firstDone func() bool) cellUse {
	before, start := s.unlinks(ctx), time.Now()
	feed()
	waitFor(c.name()+"'s first deletes", 2*time.Minute, firstDone)
	if again != nil {
		waitFor(c.name()+"'s second deletes and failover schedule", 2*time.Minute, func() bool {
			b, _, _ := again.fn.logs.sums()
			sent := first.function.counts().Sent[s.again]
			return b.SecondDeleteKey >= n && b.FailoverKey >= n && again.mapping.counts().Messages["DeleteMessageBatch"] >= sent
		})
	}
	u := cellUse{cell: c, took: time.Since(start), cold: first.fn.cold, coldCPU: first.fn.coldCPU}
	u.mapping, u.function = first.mapping.counts(), first.function.counts()
	u.first, u.batches, u.logBytes = first.stop()
	if again != nil {
		u.mapping, u.function = u.mapping.add(again.mapping.counts()), u.function.add(again.function.counts())
		uses, b, logBytes := again.stop()
		u.again, u.logBytes = uses, u.logBytes+logBytes
		u.batches.KeysDeleted, u.batches.KeysAbsent = u.batches.KeysDeleted+b.KeysDeleted, u.batches.KeysAbsent+b.KeysAbsent
		u.batches.SecondDeleteKey += b.SecondDeleteKey
		u.batches.FailoverKey += b.FailoverKey
	}
	u.unlinks = s.unlinks(ctx) - before
	return u
}

// table makes a table of its own for a stream cell, a copy of the local
// stack's (TABLE_NAME, made by localstack/up.sh as template.yaml makes it),
// and writes n items into it before the mapping starts, so that every
// batch is full: its n INSERT records are the cell's changes, each one key
// (cache:<table>:<id>, by the default rules).
func (s *costStack) table(ctx context.Context, c cell, n int) string {
	stack, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(os.Getenv("TABLE_NAME"))})
	if err != nil {
		log.Fatalf("cost: the local stack's table (TABLE_NAME): %v", err)
	}
	t := stack.Table
	name := "Cost" + strconv.Itoa(c.batch) + strconv.FormatBool(c.second) + strconv.FormatInt(time.Now().UnixNano(), 36)
	out, err := s.db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), AttributeDefinitions: t.AttributeDefinitions,
		KeySchema: t.KeySchema, BillingMode: ddbtypes.BillingModePayPerRequest, StreamSpecification: t.StreamSpecification})
	if err != nil {
		log.Fatalf("cost: create table: %v", err)
	}
	s.tables = append(s.tables, name)
	for from := 0; from < n; from += 25 { // BatchWriteItem's most
		var writes []ddbtypes.WriteRequest
		for i := from; i < min(from+25, n); i++ {
			writes = append(writes, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: map[string]ddbtypes.AttributeValue{
				"id":   &ddbtypes.AttributeValueMemberS{Value: strconv.Itoa(s.next + i)},
				"name": &ddbtypes.AttributeValueMemberS{Value: "Walking boots"},
			}}})
		}
		if _, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{name: writes}}); err != nil {
			log.Fatalf("cost: write items: %v", err)
		}
	}
	s.next += n
	return aws.ToString(out.TableDescription.LatestStreamArn)
}

// snsEvent is what SNS hands the function for one published change.
func snsEvent(id int) lambdaevents.SNSEvent {
	return lambdaevents.SNSEvent{Records: []lambdaevents.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns",
		EventSubscriptionArn: "arn:aws:sns:us-east-1:123456789012:cache-changes:2bcfbf39-05c3-41de-beaa-fcfcc21c8f55",
		SNS: lambdaevents.SNSEntity{
			Type: "Notification", MessageID: fmt.Sprintf("95df01b4-ee98-5cb9-9903-%012d", id),
			TopicArn: "arn:aws:sns:us-east-1:123456789012:cache-changes", Timestamp: time.Now().UTC(),
			Message:          `{"entity":"product","id":"` + strconv.Itoa(id) + `","op":"update","version":3}`,
			SignatureVersion: "1", Signature: signature,
			SigningCertURL: "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000.pem",
			UnsubscribeURL: "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
		},
	}}}
}

// naiveEnv is the naive function's: the cache only.
func naiveEnv() []string {
	cfg, _ := elasticache.ConfigFromEnv(os.Getenv)
	return append(cfg.Env(), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(memoryMB))
}
