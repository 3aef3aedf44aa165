package lambdaevent

import (
	"github.com/invalidator-go/invalidator/events"
)

// SQSEvent is an SQS-triggered function's payload.
type SQSEvent struct {
	Records []SQSMessage `json:"Records"`
}

// SQSMessage is one record of an SQSEvent.
type SQSMessage struct {
	MessageId      string            `json:"messageId"`
	ReceiptHandle  string            `json:"receiptHandle"`
	Body           string            `json:"body"`
	MD5OfBody      string            `json:"md5OfBody,omitempty"`
	Attributes     map[string]string `json:"attributes"`
	EventSource    string            `json:"eventSource"`
	EventSourceARN string            `json:"eventSourceARN"`
	AWSRegion      string            `json:"awsRegion"`
}

// SNSEvent is an SNS-triggered function's payload.
type SNSEvent struct {
	Records []events.SNSRecord `json:"Records"`
}

// DynamoDBEvent is a Streams-triggered function's payload.
type DynamoDBEvent struct {
	Records []DynamoDBEventRecord `json:"Records"`
}

// DynamoDBEventRecord is one record of a DynamoDBEvent.
type DynamoDBEventRecord struct {
	EventID        string               `json:"eventID"`
	EventName      string               `json:"eventName"`
	EventVersion   string               `json:"eventVersion,omitempty"`
	EventSource    string               `json:"eventSource"`
	AWSRegion      string               `json:"awsRegion,omitempty"`
	EventSourceArn string               `json:"eventSourceARN"`
	Change         DynamoDBStreamRecord `json:"dynamodb"`
}

// DynamoDBStreamRecord is the change a DynamoDBEventRecord carries.
type DynamoDBStreamRecord struct {
	ApproximateCreationDateTime int64        `json:",omitempty"` // seconds
	Keys                        events.Image `json:",omitempty"`
	NewImage                    events.Image `json:",omitempty"`
	OldImage                    events.Image `json:",omitempty"`
	SequenceNumber              string
	SizeBytes                   int64  `json:",omitempty"`
	StreamViewType              string `json:",omitempty"`
}
