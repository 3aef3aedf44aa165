package events

import (
	"cmp"
	"errors"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// envelope holds what a body tells about where its changes came from, and
// what of a row to read (nil: every column).
type envelope struct {
	source     Source
	occurredAt time.Time
	keep       Attributes
}

// at takes the envelope's time from the raw string value of field, when
// the envelope has one.
func (env *envelope) at(raw []byte, field string) error {
	if raw == nil {
		return nil
	}
	t, err := parseTime(raw)
	if err != nil {
		return &fieldError{reason: "bad " + field, err: err}
	}
	env.occurredAt = t
	return nil
}

// The most one record may ask for: changes in an array body, and explicit
// keys and tags, all its changes together. Each is counted as the record is
// decoded, and a record past one fails for good there, without the rest of
// it being read: the work a record can cause is bounded whatever its size.
// The changes decoded before are kept, as with a bad element.
const (
	maxChanges = 10_000
	maxKeys    = 10_000
	maxTags    = 1_000 // each is read and deleted a page at a time: far more work than a key
)

// decodeBody decodes a body that holds a change message or an array of
// them, or, when allowed, an envelope around one. data is not retained.
func decodeBody(data []byte, env envelope, allowSNS bool, out []Change) ([]Change, error) {
	// The first byte tells the shape; Elements and Members validate as they
	// go, so the body is scanned once.
	switch firstByte(data) {
	case '[':
		// A bad element fails the body, but the good ones are kept: their
		// keys are invalidated while the record goes back to be retried.
		n := len(out)
		var first error
		var changes, keys, tags int
		err := jsonscan.Elements(data, func(value []byte, kind jsonscan.Kind) error {
			if changes++; changes > maxChanges {
				return pastLimit("changes", maxChanges)
			}
			if kind != jsonscan.Object {
				first = cmp.Or(first, invalid("a change array must hold objects, not "+kind.String()))
				return nil
			}
			c, err := decodeChange(value, env)
			if err != nil {
				if isPastLimit(err) {
					return err
				}
				first = cmp.Or(first, err)
				return nil
			}
			out = append(out, c)
			keys, tags = keys+len(c.Keys), tags+len(c.Tags)
			switch {
			case keys > maxKeys:
				return pastLimit("keys", maxKeys)
			case tags > maxTags:
				return pastLimit("tags", maxTags)
			}
			return nil
		})
		if isPastLimit(err) {
			return out, err
		}
		if err != nil {
			return out[:n], err // not JSON: nothing in it can be trusted
		}
		if first == nil && len(out) == n {
			first = invalid("empty change array")
		}
		return out, first
	case '{':
		return decodeObject(data, env, allowSNS, out)
	default:
		_, kind, err := jsonscan.Value(data)
		if err != nil {
			return out, err
		}
		return out, invalid("a body must be a JSON object or array, not " + kind.String())
	}
}

func firstByte(data []byte) byte {
	for _, c := range data {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

// fields are the members of a body object that decoding looks at, raw:
// those that tell an envelope, and those of a change message. One pass
// over the object gathers them all.
type fields struct {
	snsType, timestamp       []byte // SNS envelope
	message                  field  // SNS envelope: a string decoded, into msgBuf
	detailType, detail, time []byte // EventBridge envelope
	entity, id, op, version  field  // change message
	keys, tags, occurredAt   field
	secondDelete, failover   field
	// rows from a commit log: AWS DMS's record, and Debezium's (op above),
	// bare or in its schema and payload wrapper
	data, metadata, beforeImage field
	before, after, source       field
	schema, payload             field
	recordType                  field   // Aurora DSQL's: full, chunked (a main record) or fragment
	chunked, chunkID, index     field   // Aurora DSQL's main record's, a fragment's
	msgBuf                      *[]byte // from messageBuffers, until release
}

type field struct {
	raw  []byte // nil when absent
	kind jsonscan.Kind
}

// collect gathers the fields of the object raw. A duplicate member
// replaces the earlier one, as with encoding/json. A string Message, most
// of an SNS envelope, is decoded as it is validated; the caller releases
// its buffer.
func collect(raw []byte) (f fields, err error) {
	err = jsonscan.Walk(raw, func(key []byte, i int) (int, error) {
		if string(key) == "Message" && i < len(raw) && raw[i] == '"' {
			if f.msgBuf == nil {
				f.msgBuf = messageBuffers.Get().(*[]byte)
			}
			text, end, err := jsonscan.AppendStringAt((*f.msgBuf)[:0], raw, i)
			*f.msgBuf, f.message = text, field{text, jsonscan.String}
			return end, err
		}
		kind, end, err := jsonscan.ValueAt(raw, i)
		if err != nil {
			return end, err
		}
		value := raw[i:end]
		switch string(key) {
		case "Type":
			f.snsType = value
		case "Message":
			f.message = field{value, kind}
		case "Timestamp":
			f.timestamp = value
		case "detail-type":
			f.detailType = value
		case "detail":
			f.detail = value
		case "time":
			f.time = value
		case "entity":
			f.entity = field{value, kind}
		case "id":
			f.id = field{value, kind}
		case "op":
			f.op = field{value, kind}
		case "version":
			f.version = field{value, kind}
		case "keys":
			f.keys = field{value, kind}
		case "tags":
			f.tags = field{value, kind}
		case "occurredAt":
			f.occurredAt = field{value, kind}
		case "secondDelete":
			f.secondDelete = field{value, kind}
		case "failover":
			f.failover = field{value, kind}
		case "data":
			f.data = field{value, kind}
		case "metadata":
			f.metadata = field{value, kind}
		case "before-image":
			f.beforeImage = field{value, kind}
		case "before":
			f.before = field{value, kind}
		case "after":
			f.after = field{value, kind}
		case "source":
			f.source = field{value, kind}
		case "schema":
			f.schema = field{value, kind}
		case "payload":
			f.payload = field{value, kind}
		case "type":
			f.recordType = field{value, kind}
		case "chunked":
			f.chunked = field{value, kind}
		case "chunk_id":
			f.chunkID = field{value, kind}
		case "index":
			f.index = field{value, kind}
		}
		return end, nil
	})
	return f, err
}

// release gives back the buffer of a decoded Message.
func (f *fields) release() {
	if f.msgBuf != nil {
		messageBuffers.Put(f.msgBuf)
	}
}

func decodeObject(raw []byte, env envelope, allowSNS bool, out []Change) ([]Change, error) {
	f, err := collect(raw)
	defer f.release()
	if err != nil {
		return out, err
	}
	switch {
	case f.snsType != nil && f.message.raw != nil:
		if !allowSNS {
			return out, invalid("an SNS envelope inside an SNS message")
		}
		return decodeSNSEnvelope(&f, env, out)
	case f.detailType != nil && f.detail != nil:
		return decodeEventBridge(&f, env, out)
	case f.entity.raw != nil || f.keys.raw != nil || f.tags.raw != nil: // a change message, whatever else it holds
		return appendChange(out, &f, env)
	case f.metadata.kind == jsonscan.Object:
		return decodeDMS(&f, env, out)
	case f.schema.raw != nil && f.payload.raw != nil:
		return decodeDebeziumWrapped(&f, env, out)
	case f.source.kind == jsonscan.Object && f.op.raw != nil:
		return decodeDebezium(&f, env, out)
	case textIs(f.recordType.raw, "fragment"): // its main record carries the change
		_, err := decodeFragment(&f)
		return out, err
	default:
		return appendChange(out, &f, env)
	}
}

// messageBuffers hold unescaped SNS Messages while they are decoded.
var messageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func decodeSNSEnvelope(o *fields, env envelope, out []Change) ([]Change, error) {
	// The type is compared raw first: decoding it is for the odd escaped one.
	if t := o.snsType; string(t) != `"Notification"` && !textIs(t, "Notification") {
		return out, invalid("an SNS envelope must have Type Notification, not " + truncate(o.snsType))
	}
	env.source = SourceSNS
	if err := env.at(o.timestamp, "SNS Timestamp"); err != nil {
		return out, err
	}
	if o.message.kind != jsonscan.String {
		return out, invalid("the SNS Message must be a string")
	}
	// Every string kept from the Message is copied, so its buffer can be
	// reused.
	out, err := decodeBody(o.message.raw, env, false, out)
	if errors.Is(err, jsonscan.ErrSyntax) {
		err = &fieldError{reason: "the SNS Message is not JSON", err: err}
	}
	return out, err
}

func decodeEventBridge(o *fields, env envelope, out []Change) ([]Change, error) {
	env.source = SourceEventBridge
	if err := env.at(o.time, "EventBridge time"); err != nil {
		return out, err
	}
	if _, kind, _ := jsonscan.Value(o.detail); kind != jsonscan.Object {
		return out, invalid("EventBridge detail must be an object, not " + kind.String())
	}
	detail, err := collect(o.detail)
	defer detail.release()
	if err != nil {
		return out, err
	}
	return appendChange(out, &detail, env)
}

// appendChange interprets the fields of a change message and appends the
// change to out, unless it is invalid.
func appendChange(out []Change, f *fields, env envelope) ([]Change, error) {
	c, err := f.change(env)
	if err != nil {
		return out, err
	}
	return append(out, c), nil
}

// decodeChange decodes one change message object.
func decodeChange(raw []byte, env envelope) (Change, error) {
	f, err := collect(raw)
	defer f.release()
	if err != nil {
		return Change{}, err
	}
	return f.change(env)
}

// change interprets the fields of a change message.
func (f *fields) change(env envelope) (c Change, err error) {
	c = Change{Source: env.source, OccurredAt: env.occurredAt}
	// What is missing first: another kind of event (an S3 notification in
	// EventBridge) fails for that, not for a field it happens to share.
	if f.entity.raw == nil && f.keys.raw == nil && f.tags.raw == nil {
		return c, invalid("a change needs an entity, keys or tags: this is no change message")
	}
	if f.entity.raw != nil {
		if c.Entity, err = nonEmptyText("entity", f.entity.raw, f.entity.kind); err != nil {
			return c, err
		}
	}
	if f.id.raw != nil {
		if c.ID, err = idText(f.id.raw, f.id.kind); err != nil {
			return c, err
		}
	}
	if f.op.raw != nil {
		if c.Op, err = parseOp(f.op.raw, f.op.kind); err != nil {
			return c, err
		}
	}
	if f.version.raw != nil {
		if c.Version, err = parseVersion(f.version.raw, f.version.kind); err != nil {
			return c, err
		}
		c.HasVersion = true
	}
	if f.keys.raw != nil {
		if c.Keys, err = parseStrings("keys", f.keys.raw, f.keys.kind, maxKeys); err != nil {
			return c, err
		}
	}
	if f.tags.raw != nil {
		if c.Tags, err = parseStrings("tags", f.tags.raw, f.tags.kind, maxTags); err != nil {
			return c, err
		}
	}
	if f.occurredAt.raw != nil {
		if f.occurredAt.kind != jsonscan.String {
			return c, invalid("occurredAt must be an RFC 3339 string")
		}
		t, err := parseTime(f.occurredAt.raw)
		if err != nil {
			return c, &fieldError{reason: "occurredAt is not RFC 3339", err: err}
		}
		c.OccurredAt = t
	}
	if f.secondDelete.raw != nil {
		switch f.secondDelete.kind {
		case jsonscan.True:
			c.SecondDelete = true
		case jsonscan.False:
		default:
			return c, invalid("secondDelete must be true or false, not " + f.secondDelete.kind.String())
		}
		if c.SecondDelete && len(c.Keys) == 0 && len(c.Tags) == 0 {
			return c, invalid("a second delete needs keys or tags")
		}
	}
	if f.failover.raw != nil {
		switch f.failover.kind {
		case jsonscan.True:
			c.Failover = true
		case jsonscan.False:
		default:
			return c, invalid("failover must be true or false, not " + f.failover.kind.String())
		}
		if c.Failover && !c.SecondDelete {
			return c, invalid("failover marks a second delete: secondDelete must be true")
		}
	}
	if c.Entity == "" && len(c.Keys) == 0 && len(c.Tags) == 0 {
		return c, invalid("a change needs an entity, keys or tags")
	}
	return c, nil
}
