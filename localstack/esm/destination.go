package esm

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Destination keeps what a stream mapping gives up on, as Lambda's
// on-failure destinations do: record is the failure record (the condition,
// the batch's coordinates), event the invocation's event.
type Destination interface {
	Keep(ctx context.Context, shard string, record map[string]any, event []byte) error
}

// Queue is an SQS on-failure destination: it gets the failure record
// alone, as Lambda sends it to a queue or a topic.
type Queue struct {
	Client *sqs.Client
	URL    string
}

func (q Queue) Keep(ctx context.Context, _ string, record map[string]any, _ []byte) error {
	body, err := json.Marshal(record)
	if err != nil {
		return err
	}
	_, err = q.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(body))})
	return err
}

// Bucket is an S3 on-failure destination: it gets the failure record with
// the invocation's event in its payload, escaped, under the key Lambda
// gives it: aws/lambda/<mapping's UUID>/<shard>/YYYY/MM/DD/
// YYYY-MM-DDTHH.MM.SS-<UUID>.
type Bucket struct {
	Client *s3.Client
	Name   string
	// Mapping names the mapping in the keys; the same name always makes
	// the same UUID, as a mapping keeps its own.
	Mapping string
}

func (b Bucket) Keep(ctx context.Context, shard string, record map[string]any, event []byte) error {
	withEvent := map[string]any{"payload": string(event)}
	for k, v := range record {
		withEvent[k] = v
	}
	body, err := json.Marshal(withEvent)
	if err != nil {
		return err
	}
	now, random := time.Now().UTC(), make([]byte, 16)
	_, _ = rand.Read(random)
	mapping := sha256.Sum256([]byte(b.Mapping))
	key := path.Join("aws/lambda", uuid(mapping[:16]), shard, now.Format("2006/01/02"), now.Format("2006-01-02T15.04.05")+"-"+uuid(random))
	_, err = b.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.Name), Key: aws.String(key), Body: bytes.NewReader(body)})
	return err
}

// uuid writes 16 bytes as a UUID's 8-4-4-4-12 hex digits.
func uuid(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
