package events

import "github.com/invalidator-go/invalidator/internal/jsonscan"

// WithoutImages returns a raw stream record with its item images emptied,
// a Kinesis record without its data or a Kafka record without its value,
// the rest byte for byte: what parking keeps of one too large for a
// message, which its stream still holds whole.
func WithoutImages(raw []byte) ([]byte, error) {
	type cut struct {
		from, to int
		empty    string
	}
	var cuts []cut // the images' values, or the data's
	err := jsonscan.Walk(raw, func(key []byte, i int) (int, error) {
		if string(key) != "dynamodb" && string(key) != "kinesis" || i >= len(raw) || raw[i] != '{' {
			_, end, err := jsonscan.ValueAt(raw, i)
			if string(key) == "value" && err == nil {
				cuts = append(cuts, cut{i, end, "null"})
			}
			return end, err
		}
		return jsonscan.WalkAt(raw, i, func(key []byte, i int) (int, error) {
			_, end, err := jsonscan.ValueAt(raw, i)
			switch string(key) {
			case "NewImage", "OldImage":
				cuts = append(cuts, cut{i, end, "{}"})
			case "data":
				cuts = append(cuts, cut{i, end, `""`})
			}
			return end, err
		})
	})
	if err != nil {
		return nil, err
	}
	out, at := make([]byte, 0, len(raw)), 0
	for _, c := range cuts {
		out = append(append(out, raw[at:c.from]...), c.empty...)
		at = c.to
	}
	return append(out, raw[at:]...), nil
}

// StreamPosition reads where a raw stream record sits, which a record
// without its images keeps: its stream's ARN and its sequence number, to
// read it again from its stream.
func StreamPosition(raw []byte) (streamARN, seq string, err error) {
	err = jsonscan.Members(raw, func(key, value []byte, kind jsonscan.Kind) error {
		if string(key) == "eventSourceARN" && kind == jsonscan.String {
			streamARN, _ = jsonscan.Text(value)
		}
		return nil
	})
	if seq = sequenceNumber(raw); err == nil && (streamARN == "" || seq == "") {
		err = invalid("a stream record names its stream (eventSourceARN) and its place in it (dynamodb.SequenceNumber)")
	}
	return streamARN, seq, err
}
