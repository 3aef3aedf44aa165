package worker

import (
	"io"
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// emfMetrics declares the metrics of every batch line; each must also be a
// top-level member of the line, or CloudWatch drops it.
const emfMetrics = `[{"Name":"Records","Unit":"Count"},{"Name":"FailedRecords","Unit":"Count"},{"Name":"ParkedRecords","Unit":"Count"},` +
	`{"Name":"KeysDeleted","Unit":"Count"},{"Name":"KeysAbsent","Unit":"Count"},` +
	`{"Name":"KeysFailed","Unit":"Count"},{"Name":"MaxLag","Unit":"Milliseconds"},` +
	`{"Name":"SecondDeletesScheduled","Unit":"Count"},{"Name":"SecondDeleteRefills","Unit":"Count"},` +
	`{"Name":"RedeletedKeys","Unit":"Count"},{"Name":"RedeleteRefills","Unit":"Count"},` +
	`{"Name":"TagsInvalidated","Unit":"Count"},{"Name":"TagsFailed","Unit":"Count"},{"Name":"TagEntriesDeleted","Unit":"Count"},` +
	`{"Name":"Announcements","Unit":"Count"},{"Name":"AnnounceFailedKeys","Unit":"Count"}]`

// writeEMF writes one CloudWatch Embedded Metric Format line, parked
// counting the failed records sent to the failure queue, second the second
// deletes scheduled and the keys they found filled again, again the keys
// deleted again after a reconnect and those found there again, announced
// the messages sent to the local tiers and the keys not announced, with the
// invoke's request ID, if any, as a property: CloudWatch
// Logs turns it into metrics without any API call from the function. The
// line's shape is fixed, so it is written directly: json.Marshal of maps
// slowed the first invoke of every cold start (bench/README.md).
func writeEMF(w io.Writer, namespace, function, requestID string, source events.Source, m invalidate.Metrics, parked int, second secondDeletes, again redeletes, announced *announcements, now time.Time) error {
	messages, unannounced := announced.counts()
	b := make([]byte, 0, 1024)
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":`...)
	b = appendString(b, namespace)
	b = append(b, `,"Dimensions":[["Function","Source"]],"Metrics":`+emfMetrics+`}]},"Function":`...)
	b = appendString(b, function)
	b = append(b, `,"Source":`...)
	b = appendString(b, string(source))
	if requestID != "" {
		b = append(b, `,"request_id":`...)
		b = appendString(b, requestID)
	}
	for _, metric := range []struct {
		name  string
		value int64
	}{
		{"Records", int64(m.Records)}, {"FailedRecords", int64(m.Failed)}, {"ParkedRecords", int64(parked)}, {"KeysDeleted", int64(m.KeysDeleted)},
		{"KeysAbsent", int64(m.KeysAbsent)}, {"KeysFailed", int64(m.KeysFailed)}, {"MaxLag", m.MaxLag.Milliseconds()},
		{"SecondDeletesScheduled", int64(second.scheduled)}, {"SecondDeleteRefills", int64(second.present)},
		{"RedeletedKeys", int64(again.keys)}, {"RedeleteRefills", int64(again.present)},
		{"TagsInvalidated", int64(m.TagsInvalidated)}, {"TagsFailed", int64(m.TagsFailed)}, {"TagEntriesDeleted", int64(m.TagEntriesDeleted)},
		{"Announcements", messages}, {"AnnounceFailedKeys", unannounced},
	} {
		b = append(b, `,"`+metric.name+`":`...)
		b = strconv.AppendInt(b, metric.value, 10)
	}
	_, err := w.Write(append(b, "}\n"...))
	return err
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < ' ':
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
