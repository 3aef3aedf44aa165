package events

import "time"

// Op is what happened to the entity.
type Op string

// The operations a change message or a stream record can carry.
const (
	OpUnknown Op = "" // the event did not say
	OpCreate  Op = "create"
	OpUpdate  Op = "update"
	OpDelete  Op = "delete"
)

// Source is where a change was published.
type Source string

// The sources of changes. A change published to SNS and delivered through
// SQS has source SNS: the source is the publisher's choice, not the route.
const (
	SourceSQS         Source = "sqs"
	SourceSNS         Source = "sns"
	SourceEventBridge Source = "eventbridge"
	SourceDynamoDB    Source = "dynamodb"
	// A Kinesis data stream: its records hold change messages, or the
	// rows a commit log's reader wrote (AWS DMS, Debezium) or DynamoDB's
	// own records (Kinesis Data Streams for DynamoDB).
	SourceKinesis Source = "kinesis"
	// A Kafka topic (Amazon MSK, a self-managed cluster): its records'
	// values hold what a Kinesis record's data does, but DynamoDB's.
	SourceKafka Source = "kafka"
	// Rows from a database's commit log, as AWS DMS and Debezium write
	// them: Table is schema.table, the images the row after and before.
	SourceDMS      Source = "dms"
	SourceDebezium Source = "debezium"
	// Aurora DSQL's change stream: Debezium's envelope with a type, no row
	// before an update, only the key before a delete.
	SourceDSQL Source = "dsql"
)

// Stream says whether records from s come in their shard's (a Kafka
// partition's) order, which a record that fails for now holds: Lambda
// retries the shard from it.
func (s Source) Stream() bool { return s == SourceDynamoDB || s == SourceKinesis || s == SourceKafka }

// Rows says whether changes from s are rows of a table — a DynamoDB item
// or a database's row — that the rules' tables plan, by the row's images.
func (s Source) Rows() bool {
	return s == SourceDynamoDB || s.CommitLog()
}

// CommitLog says whether changes from s are a database's rows read from its
// commit log (AWS DMS, Debezium, Aurora DSQL): rows whose images hold what
// the database sent, a key often alone before a change.
func (s Source) CommitLog() bool {
	return s == SourceDMS || s == SourceDebezium || s == SourceDSQL
}

// Change is one change to one entity: the unit that cache keys are planned
// from.
type Change struct {
	// Entity names the kind of thing that changed ("product"); for a DynamoDB
	// record, the table name.
	Entity string
	// ID identifies the thing; for a DynamoDB record, the values of its key
	// attributes in attribute-name order, joined with "#".
	ID string
	// Op is the operation, OpUnknown when the event does not say.
	Op Op
	// Version is the entity's version after the change, when HasVersion.
	Version    int64
	HasVersion bool
	// Keys, when not empty, are the exact cache keys to invalidate, replacing
	// the rules.
	Keys []string
	// Tags, when not empty, are the exact tags to invalidate — each deletes
	// the entries that depend on it —, replacing the rules' tags.
	Tags []string
	// SecondDelete marks a worker's own second delete of Keys and Tags, sent through
	// its delay queue ("secondDelete": true): deleted again, never delayed
	// a third time.
	SecondDelete bool
	// Failover marks the second delete that the failover schedule sends,
	// long enough after the first to land on whichever primary then holds
	// the key ("failover": true, with "secondDelete": true).
	Failover bool
	// OccurredAt is when the change happened, as precisely as the event
	// tells: the change's own occurredAt, else its envelope's time, else when
	// the queue received it. Zero when unknown.
	OccurredAt time.Time
	// Source is where the change was published.
	Source Source

	// Rows only (Source.Rows): a DynamoDB stream record's table, or a
	// database's schema.table; the item's key (none for a database's row,
	// whose {key.} placeholders read both images); and its images.
	Table          string
	ItemKey        Image
	OldImage       Image
	NewImage       Image
	SequenceNumber string
	// RowPart, when not empty, says that an image is only the part of its
	// row that came (an Aurora DSQL row in fragments, not all at hand): a
	// column it lacks is unknown, not absent.
	RowPart string
}
