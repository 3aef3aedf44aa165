package queues

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS is what the worker asks of SQS, for both front ends: to receive, to
// delete what is done, to hand back what failed for now, and to send to
// its delay, window and failure queues. *sqs.Client has it.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// New is an SQS client of region, built as the functions build theirs:
// without the SDK's config loader and its weight at cold start. endpoint
// is nil in AWS.
func New(region string, creds aws.CredentialsProvider, endpoint *string, client *http.Client) *sqs.Client {
	return sqs.New(sqs.Options{Region: region, Credentials: creds, BaseEndpoint: endpoint, HTTPClient: client})
}

// batchMost is the most entries SQS takes in a batch request.
const batchMost = 10

// Message is a message received: what decoding it and answering for it
// need.
type Message struct {
	ID, Body string
	// Handle is its receipt handle, which deletes it or hands it back.
	Handle string
	// SentTimestamp is SQS's SentTimestamp attribute, as it gives it:
	// milliseconds since the epoch, in decimal.
	SentTimestamp string
	// Receives is its ApproximateReceiveCount, this receive counted.
	Receives int
}

// Receive is one receive from the queue at url: at most most messages,
// each hidden for hide, waiting up to wait for the first. It returns the
// messages and the receive's request ID.
func Receive(ctx context.Context, client SQS, url string, most int32, wait, hide time.Duration) ([]Message, string, error) {
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(url),
		MaxNumberOfMessages: most,
		WaitTimeSeconds:     int32(wait / time.Second),
		VisibilityTimeout:   int32(hide / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, "", err
	}
	requestID, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	msgs := make([]Message, len(out.Messages))
	for i, m := range out.Messages {
		receives, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		msgs[i] = Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Handle: aws.ToString(m.ReceiptHandle),
			SentTimestamp: m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], Receives: receives}
	}
	return msgs, requestID, nil
}

// Return is a received message to show again: its receipt handle, and
// after how long, in SQS's whole seconds.
type Return struct {
	Handle string
	After  time.Duration
}

// HandBack makes the messages of the queue at url visible again, each
// after its After, ten to a request.
func HandBack(ctx context.Context, client SQS, url string, msgs []Return) error {
	var errs []error
	for start := 0; start < len(msgs); start += batchMost {
		chunk := msgs[start:min(start+batchMost, len(msgs))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
				ReceiptHandle: aws.String(m.Handle), VisibilityTimeout: int32(m.After.Round(time.Second) / time.Second)}
		}
		out, err := client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err == nil && len(out.Failed) > 0 {
			err = fmt.Errorf("%d of %d messages: %s", len(out.Failed), len(chunk), aws.ToString(out.Failed[0].Message))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Delete deletes the messages of handles from the queue at url, ten to a
// request.
func Delete(ctx context.Context, client SQS, url string, handles []string) error {
	var errs []error
	for start := 0; start < len(handles); start += batchMost {
		chunk := handles[start:min(start+batchMost, len(handles))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, h := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h)}
		}
		out, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err == nil && len(out.Failed) > 0 {
			err = fmt.Errorf("%d of %d messages: %s", len(out.Failed), len(chunk), aws.ToString(out.Failed[0].Message))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Outgoing is a message to send: its body, how long it stays hidden (in
// SQS's whole seconds, at most 900), and its message attributes, each a
// String.
type Outgoing struct {
	Body       string
	Delay      time.Duration
	Attributes map[string]string
}

// Size is the size SQS counts against a queue's MaximumMessageSize: the
// body, and each attribute's name, type and value.
func (m Outgoing) Size() int {
	n := len(m.Body)
	for name, v := range m.Attributes {
		n += len(name) + len("String") + len(v)
	}
	return n
}

// Send sends msgs, at most ten, to the queue at url in one request.
func Send(ctx context.Context, client SQS, url string, msgs ...Outgoing) error {
	if len(msgs) == 1 {
		m := msgs[0]
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(m.Body),
			DelaySeconds: delaySeconds(m.Delay), MessageAttributes: messageAttributes(m.Attributes)})
		return err
	}
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(m.Body),
			DelaySeconds: delaySeconds(m.Delay), MessageAttributes: messageAttributes(m.Attributes)}
	}
	out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err == nil && len(out.Failed) > 0 {
		err = fmt.Errorf("%d of %d messages: %s", len(out.Failed), len(msgs), aws.ToString(out.Failed[0].Message))
	}
	return err
}

// delaySeconds is d as SQS's DelaySeconds: whole seconds, rounded up, at
// most 900.
func delaySeconds(d time.Duration) int32 {
	return int32(min((d+time.Second-1)/time.Second, 900))
}

func messageAttributes(strs map[string]string) map[string]types.MessageAttributeValue {
	if len(strs) == 0 {
		return nil
	}
	attrs := make(map[string]types.MessageAttributeValue, len(strs))
	for name, v := range strs {
		attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return attrs
}

// Strings are a received message's String attributes, as Outgoing holds
// them.
func Strings(attrs map[string]types.MessageAttributeValue) map[string]string {
	strs := make(map[string]string, len(attrs))
	for name, v := range attrs {
		if aws.ToString(v.DataType) == "String" {
			strs[name] = aws.ToString(v.StringValue)
		}
	}
	return strs
}
