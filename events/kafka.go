package events

import (
	"encoding/base64"
	"strconv"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// decodeKafka decodes one record of a Kafka event — Amazon MSK's or a
// self-managed cluster's, as Lambda delivers it: {"topic", "partition",
// "offset", "timestamp", "key", "value": base64, "headers"} — and the
// change its value holds: a change message, or a row that AWS DMS or
// Debezium wrote (Debezium on MSK Connect). A null or empty value (a
// tombstone, which Debezium writes after a delete for compaction) changes
// nothing. The delivery's ID is topic-partition@offset, its message the
// value.
func decodeKafka(raw []byte, keep Attributes) (d Delivery, changes []Change, err error) {
	var topic, partition, offset string
	var value []byte // the JSON string, still base64; nil: none or null
	err = jsonscan.Members(raw, func(key, v []byte, kind jsonscan.Kind) error {
		var err error
		switch string(key) {
		case "topic":
			topic, err = stringField("topic", v, kind)
		case "partition":
			partition, err = integerField("partition", v, kind)
		case "offset":
			offset, err = integerField("offset", v, kind)
		case "timestamp":
			if ms, perr := strconv.ParseInt(unsafeString(v), 10, 64); kind == jsonscan.Number && perr == nil {
				d.SentAt = epochTime(float64(ms) / 1000)
			}
		case "value":
			switch kind {
			case jsonscan.String:
				value = v
			case jsonscan.Null:
			default:
				err = invalid("a Kafka record's value must be a base64 string or null")
			}
		}
		return err
	})
	if err == nil && (topic == "" || partition == "" || offset == "") {
		err = invalid("a Kafka record needs its topic, partition and offset")
	}
	if err != nil {
		return d, nil, recordError(d.ID, err)
	}
	d.ID, d.From = topic+"-"+partition+"@"+offset, topic
	if value == nil {
		return d, nil, nil
	}
	text, err := jsonscan.Text(value)
	if err != nil {
		return d, nil, recordError(d.ID, err)
	}
	if d.message, err = base64.StdEncoding.AppendDecode(nil, unsafeBytes(text)); err != nil {
		return d, nil, recordError(d.ID, invalid("a Kafka record's value must be base64"))
	}
	if len(d.message) == 0 {
		return d, nil, nil
	}
	changes, err = decodeBody(d.message, envelope{source: SourceKafka, occurredAt: d.SentAt, keep: keep}, true, nil)
	if err != nil {
		return d, changes, recordError(d.ID, err)
	}
	return d, changes, nil
}

// integerField is a JSON integer's text: a Kafka record's partition or
// offset.
func integerField(name string, value []byte, kind jsonscan.Kind) (string, error) {
	if _, err := strconv.ParseInt(unsafeString(value), 10, 64); kind != jsonscan.Number || err != nil {
		return "", invalid(name + " must be an integer")
	}
	return string(value), nil
}
