package lambdaevent

import (
	"fmt"
	"strings"
)

// StreamPayload builds the JSON of a DynamoDB Streams batch of n MODIFY
// records as Lambda delivers it, shaped like the ones moto emits for the
// Products table: about 590 bytes a record, so that 10,000 stay under
// Lambda's 6 MB payload limit.
func StreamPayload(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"Records":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"eventID":"%032x","eventName":"MODIFY","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",`+
			`"dynamodb":{"ApproximateCreationDateTime":1795953600,"Keys":{"id":{"S":"p-%d"}},`+
			`"NewImage":{"id":{"S":"p-%d"},"category":{"S":"boots"},"tags":{"SS":["winter"]}},`+
			`"OldImage":{"id":{"S":"p-%d"},"category":{"S":"shoes"},"tags":{"SS":["sale"]}},`+
			`"SequenceNumber":"110000000001%010d","SizeBytes":312,"StreamViewType":"NEW_AND_OLD_IMAGES"},`+
			`"eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/Products/stream/2026-11-29T12:00:00.000"}`, i, i, i, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}
