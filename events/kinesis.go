package events

import (
	"encoding/base64"
	"errors"
	"strconv"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// decodeKinesis decodes one record of a Kinesis event as Lambda delivers
// it — {"kinesis": {"sequenceNumber", "data": base64, ...},
// "eventSourceARN"} — and the change its data holds: a change message, a
// row that AWS DMS or Debezium wrote, or a record of Kinesis Data Streams
// for DynamoDB. Empty data (a tombstone) changes nothing. The delivery's ID
// is the sequence number, its message the data.
func decodeKinesis(raw []byte, keep Attributes) (d Delivery, changes []Change, err error) {
	var data []byte // the JSON string, still base64
	err = jsonscan.Walk(raw, func(key []byte, i int) (int, error) {
		if string(key) == "kinesis" && startsWith(raw, i, '{') {
			return jsonscan.WalkAt(raw, i, func(key []byte, i int) (int, error) {
				kind, end, err := jsonscan.ValueAt(raw, i)
				if err != nil {
					return end, err
				}
				value := raw[i:end]
				switch string(key) {
				case "data":
					if kind != jsonscan.String {
						return end, invalid("kinesis.data must be a base64 string")
					}
					data = value
				case "sequenceNumber":
					d.ID, err = stringField("kinesis.sequenceNumber", value, kind)
				case "approximateArrivalTimestamp":
					if secs, perr := strconv.ParseFloat(unsafeString(value), 64); kind == jsonscan.Number && perr == nil {
						d.SentAt = epochTime(secs)
					}
				}
				return end, err
			})
		}
		kind, end, err := jsonscan.ValueAt(raw, i)
		if err != nil {
			return end, err
		}
		switch string(key) {
		case "eventSourceARN":
			d.From, err = stringField("eventSourceARN", raw[i:end], kind)
		case "kinesis":
			err = invalid("kinesis must be an object")
		}
		return end, err
	})
	if err == nil && d.ID == "" {
		err = invalid("a Kinesis record needs its kinesis.sequenceNumber")
	}
	if err == nil && data == nil {
		err = invalid("a Kinesis record needs its kinesis.data")
	}
	if err != nil {
		return d, nil, recordError(d.ID, err)
	}
	text, err := jsonscan.Text(data)
	if err != nil {
		return d, nil, recordError(d.ID, err)
	}
	if d.message, err = base64.StdEncoding.AppendDecode(nil, unsafeBytes(text)); err != nil {
		return d, nil, recordError(d.ID, invalid("kinesis.data must be base64"))
	}
	if len(d.message) == 0 {
		return d, nil, nil
	}
	if dynamoDBInKinesis(d.message) {
		_, c, err := decodeDynamoDBJSON(d.message, d.ID, keep)
		if err != nil {
			return d, nil, err
		}
		return d, []Change{c}, nil
	}
	changes, err = decodeBody(d.message, envelope{source: SourceKinesis, occurredAt: d.SentAt, keep: keep}, true, nil)
	if err != nil {
		err = recordError(d.ID, err)
		if u := (*Unjoined)(nil); errors.As(err, &u) {
			u.record = d.ID
		}
		return d, changes, err
	}
	return d, changes, nil
}

// dynamoDBInKinesis says whether data is a record of Kinesis Data Streams
// for DynamoDB: an object with eventSource "aws:dynamodb".
func dynamoDBInKinesis(data []byte) (yes bool) {
	if firstByte(data) != '{' {
		return false
	}
	_ = jsonscan.Members(data, func(key, value []byte, kind jsonscan.Kind) error {
		if string(key) == "eventSource" && kind == jsonscan.String && textIs(value, "aws:dynamodb") {
			yes = true
		}
		return nil
	})
	return yes
}
