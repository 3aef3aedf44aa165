package hostile

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The inputs are written as the event sources and producers write JSON:
// only what JSON requires is escaped. encoding/json would turn <, > and &
// into six bytes each, and so hide the very growth some rows are about.

// str is s as a JSON string: ", \ and control characters escaped, the rest
// — invalid UTF-8 included — byte for byte.
func str(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// strs is ss as a JSON array of strings.
func strs(ss []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(str(s))
	}
	b.WriteByte(']')
	return b.String()
}

// obj is a JSON object of names and raw JSON values, in pairs.
func obj(pairs ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(str(pairs[i]))
		b.WriteByte(':')
		b.WriteString(pairs[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

// DynamoDB attribute values, in the JSON of stream records.
func attrS(s string) string       { return `{"S":` + str(s) + `}` }
func attrN(n string) string       { return `{"N":` + str(n) + `}` }
func attrSS(ss []string) string   { return `{"SS":` + strs(ss) + `}` }
func attrL(items []string) string { return `{"L":[` + strings.Join(items, ",") + `]}` }

// members are n distinct short texts from first on: base 36 numbers.
func members(first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.FormatInt(int64(first+i), 36)
	}
	return out
}

// change is one stream record's change: its event name, the item's id and
// its images (raw JSON objects; "" for none).
type change struct {
	event, id string
	old, new  string
}

const streamTable = "Products"

// streamRecord is a record of the stream of table streamTable, in the
// shape Lambda delivers it.
func streamRecord(seq string, c change) string {
	ddb := []string{"ApproximateCreationDateTime", strconv.FormatInt(time.Now().Unix(), 10),
		"Keys", obj("id", attrS(c.id))}
	if c.new != "" {
		ddb = append(ddb, "NewImage", c.new)
	}
	if c.old != "" {
		ddb = append(ddb, "OldImage", c.old)
	}
	ddb = append(ddb, "SequenceNumber", str(seq), "SizeBytes", strconv.Itoa(len(c.old)+len(c.new)), "StreamViewType", `"NEW_AND_OLD_IMAGES"`)
	return obj("eventID", str("ev-"+seq), "eventName", str(c.event), "eventVersion", `"1.1"`, "eventSource", `"aws:dynamodb"`,
		"awsRegion", `"us-east-1"`, "dynamodb", obj(ddb...),
		"eventSourceARN", str("arn:aws:dynamodb:us-east-1:123456789012:table/"+streamTable+"/stream/2026-11-29T12:00:00.000"))
}

// item is an image of the table: its id and other attributes, in pairs.
func item(id string, attrs ...string) string {
	return obj(append([]string{"id", attrS(id)}, attrs...)...)
}

// modify is a MODIFY of item id whose images hold attrs, both.
func modify(id string, attrs ...string) change {
	return change{event: "MODIFY", id: id, old: item(id, attrs...), new: item(id, attrs...)}
}

// The payloads of the three functions, as Lambda's event sources send them.

func sqsPayload(queueARN string, ids, bodies []string) []byte {
	var b strings.Builder
	b.WriteString(`{"Records":[`)
	sent := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i, body := range bodies {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(obj("messageId", str(ids[i]), "receiptHandle", str("handle-"+ids[i]), "body", str(body),
			"attributes", obj("ApproximateReceiveCount", `"1"`, "SentTimestamp", str(sent)),
			"messageAttributes", "{}", "eventSource", `"aws:sqs"`, "eventSourceARN", str(queueARN), "awsRegion", `"us-east-1"`))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func snsPayload(id, message string) []byte {
	return []byte(`{"Records":[` + obj("EventSource", `"aws:sns"`, "EventVersion", `"1.0"`,
		"EventSubscriptionArn", `"arn:aws:sns:us-east-1:123456789012:cache-changes:0f2d"`,
		"Sns", obj("Type", `"Notification"`, "MessageId", str(id), "TopicArn", `"arn:aws:sns:us-east-1:123456789012:cache-changes"`,
			"Subject", "null", "Message", str(message), "Timestamp", str(time.Now().UTC().Format(time.RFC3339Nano)),
			"SignatureVersion", `"1"`, "Signature", `"c2lnbmF0dXJl"`, "MessageAttributes", "{}")) + `]}`)
}

// kinesisRecord is a record of a Kinesis event whose data is body.
func kinesisRecord(seq, body string) string {
	return obj("kinesis", obj("kinesisSchemaVersion", `"1.0"`, "partitionKey", `"k"`, "sequenceNumber", str(seq),
		"data", str(base64.StdEncoding.EncodeToString([]byte(body))), "approximateArrivalTimestamp", strconv.FormatInt(time.Now().Unix(), 10)),
		"eventSource", `"aws:kinesis"`, "eventID", str("shardId-000000000000:"+seq), "eventName", `"aws:kinesis:record"`,
		"eventSourceARN", `"arn:aws:kinesis:us-east-1:123456789012:stream/commit-log"`)
}

// kafkaRecord is a record of a Kafka event, at offset on partition 0 of
// topic hostile, whose value is body.
func kafkaRecord(offset int, body string) string {
	return obj("topic", `"hostile"`, "partition", "0", "offset", strconv.Itoa(offset), "timestamp", strconv.FormatInt(time.Now().UnixMilli(), 10),
		"timestampType", `"CREATE_TIME"`, "key", `null`, "value", str(base64.StdEncoding.EncodeToString([]byte(body))), "headers", "[]")
}

func streamPayload(records []string) []byte {
	return []byte(`{"Records":[` + strings.Join(records, ",") + `]}`)
}

// testdata reads a crafted input, its @NS@ replaced by the run's namespace.
func testdata(name, ns string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return strings.ReplaceAll(string(b), "@NS@", ns)
}
