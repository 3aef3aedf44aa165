package main

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unsafe"

	"github.com/invalidator-go/invalidator/events"
)

// structDecoder decodes the product's events the way encoding/json's API
// asks, into Go types, with a library that offers it (goccy/go-json,
// bytedance/sonic): the payload in one call, then each body, then the
// SNS Message in it. Every byte is validated by the library; the types
// hold only what the product reads, the rest is skipped (and validated).
type structDecoder struct {
	unmarshal func(data []byte, v any) error
	// valid, when set, validates each JSON text before it is decoded,
	// for a library whose decoding lets through what json.Valid refuses.
	valid func(data []byte) bool
}

// decode validates data if it must, and decodes it into v.
func (d structDecoder) decode(data []byte, v any) error {
	if d.valid != nil && !d.valid(data) {
		return libInvalid("malformed JSON")
	}
	return d.unmarshal(data, v)
}

// jsonBody is a body object: a change message's members and an
// envelope's, which collect gathers in one pass too.
type jsonBody struct {
	Entity       *string         `json:"entity"`
	ID           json.RawMessage `json:"id"` // a string or an integer
	Op           *string         `json:"op"`
	Version      *int64          `json:"version"`
	Keys         []string        `json:"keys"`
	Tags         []string        `json:"tags"`
	OccurredAt   *string         `json:"occurredAt"`
	SecondDelete *bool           `json:"secondDelete"`
	Type         *string         `json:"Type"`
	Message      *string         `json:"Message"`
	Timestamp    *string         `json:"Timestamp"`
	DetailType   json.RawMessage `json:"detail-type"`
	Detail       json.RawMessage `json:"detail"`
	Time         *string         `json:"time"`
}

func (d structDecoder) fields(b *jsonBody) (libChange, libEnvelope, error) {
	c := libChange{Entity: b.Entity, Op: b.Op, Version: b.Version, Keys: b.Keys, Tags: b.Tags,
		HasKeys: b.Keys != nil, HasTags: b.Tags != nil, OccurredAt: b.OccurredAt, SecondDelete: b.SecondDelete}
	if len(b.ID) > 0 {
		switch b.ID[0] {
		case '"':
			c.IDKind = 's'
			if err := d.unmarshal(b.ID, &c.ID); err != nil {
				return c, libEnvelope{}, err
			}
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			c.ID, c.IDKind = string(b.ID), 'n'
		default:
			return c, libEnvelope{}, libInvalid("id must be a string or an integer")
		}
	}
	env := libEnvelope{Type: b.Type, Message: b.Message, Timestamp: b.Timestamp,
		DetailType: b.DetailType != nil, Detail: b.Detail, Time: b.Time}
	return c, env, nil
}

// body decodes a body as events' decodeBody does: a change message, an
// array of them, or, when allowSNS, an envelope around one.
func (d structDecoder) body(data []byte, allowSNS bool, source events.Source, at time.Time, out []events.Change) ([]events.Change, error) {
	switch firstByte(data) {
	case '[':
		var all []jsonBody
		if err := d.decode(data, &all); err != nil {
			return out, err
		}
		if len(all) == 0 {
			return out, libInvalid("empty change array")
		}
		var first error
		for i := range all {
			c, _, err := d.fields(&all[i])
			if err == nil {
				var ch events.Change
				if ch, err = c.change(source, at); err == nil {
					out = append(out, ch)
				}
			}
			if first == nil {
				first = err
			}
		}
		return out, first
	case '{':
		var b jsonBody
		if err := d.decode(data, &b); err != nil {
			return out, err
		}
		c, env, err := d.fields(&b)
		if err != nil {
			return out, err
		}
		switch env.kind() {
		case 's':
			if !allowSNS {
				return out, libInvalid("an SNS envelope inside an SNS message")
			}
			if at, err = env.snsAt(); err != nil {
				return out, err
			}
			return d.body(bytesOf(*env.Message), false, events.SourceSNS, at, out)
		case 'e':
			if at, err = envelopeTime(env.Time); err != nil {
				return out, err
			}
			if firstByte(env.Detail) != '{' {
				return out, libInvalid("EventBridge detail must be an object")
			}
			var detail jsonBody
			if err := d.unmarshal(env.Detail, &detail); err != nil {
				return out, err
			}
			if c, _, err = d.fields(&detail); err != nil {
				return out, err
			}
			source = events.SourceEventBridge
		}
		ch, err := c.change(source, at)
		if err != nil {
			return out, err
		}
		return append(out, ch), nil
	default:
		var v any
		if err := d.decode(data, &v); err != nil {
			return out, err
		}
		return out, libInvalid("a body must be a JSON object or array")
	}
}

type jsonSQSPayload struct {
	Records []jsonSQSRecord `json:"Records"`
}

type jsonSQSRecord struct {
	MessageID  string  `json:"messageId"`
	Body       *string `json:"body"`
	Attributes struct {
		SentTimestamp string `json:"SentTimestamp"`
	} `json:"attributes"`
}

// sqs decodes an SQS event payload as the SQS function does with
// SplitRecords and DecodeSQSJSON.
func (d structDecoder) sqs(payload []byte) ([]sqsResult, error) {
	var p jsonSQSPayload
	if err := d.decode(payload, &p); err != nil {
		return nil, err
	}
	if p.Records == nil {
		return nil, libInvalid("not a Lambda event: no Records")
	}
	results := make([]sqsResult, len(p.Records))
	for i := range p.Records {
		results[i] = d.sqsRecord(&p.Records[i])
	}
	return results, nil
}

// sqsSplit keeps the product's split, so that a broken record fails alone
// as in the SQS function, and decodes each record with the library.
func (d structDecoder) sqsSplit(payload []byte) ([]sqsResult, error) {
	raws, err := events.SplitRecords(payload)
	results := make([]sqsResult, len(raws))
	for i, raw := range raws {
		var r jsonSQSRecord
		if err := d.decode(raw, &r); err != nil {
			results[i].Err = err
			continue
		}
		results[i] = d.sqsRecord(&r)
	}
	return results, err
}

func (d structDecoder) sqsRecord(r *jsonSQSRecord) sqsResult {
	res := sqsResult{ID: r.MessageID}
	if r.Body == nil {
		res.Err = libInvalid("the record has no body")
		return res
	}
	res.Changes, res.Err = d.sqsBody(*r.Body, r.Attributes.SentTimestamp)
	return res
}

// sqsBody is DecodeSQSBody.
func (d structDecoder) sqsBody(body, sent string) ([]events.Change, error) {
	changes, err := d.body(bytesOf(body), true, events.SourceSQS, time.Time{}, nil)
	return dated(changes, sentAt(sent)), err
}

// jsonStreamPayload is a Streams event; A is what an attribute of an
// image is decoded into.
type jsonStreamPayload[A any] struct {
	Records []struct {
		EventName      string `json:"eventName"`
		EventSourceARN string `json:"eventSourceARN"`
		DynamoDB       *struct {
			ApproximateCreationDateTime *float64            `json:"ApproximateCreationDateTime"`
			Keys                        map[string]jsonAttr `json:"Keys"`
			NewImage                    map[string]A        `json:"NewImage"`
			OldImage                    map[string]A        `json:"OldImage"`
			SequenceNumber              string              `json:"SequenceNumber"`
		} `json:"dynamodb"`
	} `json:"Records"`
}

// jsonAttr is an attribute value in DynamoDB's JSON form: one member set.
type jsonAttr struct {
	S    *string             `json:"S"`
	N    *string             `json:"N"`
	B    *string             `json:"B"`
	BOOL *bool               `json:"BOOL"`
	NULL *bool               `json:"NULL"`
	SS   []string            `json:"SS"`
	NS   []string            `json:"NS"`
	BS   []string            `json:"BS"`
	L    []jsonAttr          `json:"L"`
	M    map[string]jsonAttr `json:"M"`
}

// stream decodes a DynamoDB Streams payload as the stream function does
// with SplitRecords and DecodeDynamoDBJSON, its images whole.
func (d structDecoder) stream(payload []byte) ([]sqsResult, error) {
	return decodeStream(d, payload, jsonImage)
}

// streamKeys decodes it as the stream function does with the default
// rules, which read no image: the keys decoded, the images only validated,
// each attribute skipped into an empty struct.
func (d structDecoder) streamKeys(payload []byte) ([]sqsResult, error) {
	return decodeStream(d, payload, func(m map[string]struct{}, err error) (events.Image, error) {
		if m == nil || err != nil {
			return nil, err
		}
		return events.Image{}, nil
	})
}

// decodeStream decodes a Streams payload, its images' attributes into A,
// converted by image.
func decodeStream[A any](d structDecoder, payload []byte, image func(map[string]A, error) (events.Image, error)) ([]sqsResult, error) {
	var p jsonStreamPayload[A]
	if err := d.decode(payload, &p); err != nil {
		return nil, err
	}
	if p.Records == nil {
		return nil, libInvalid("not a Lambda event: no Records")
	}
	results := make([]sqsResult, len(p.Records))
	for i, r := range p.Records {
		rec := events.StreamRecord{EventName: r.EventName, EventSourceARN: r.EventSourceARN}
		var err error
		if s := r.DynamoDB; s != nil {
			rec.SequenceNumber = s.SequenceNumber
			if s.ApproximateCreationDateTime != nil {
				rec.ApproximateCreationDateTime = epochTime(*s.ApproximateCreationDateTime)
			}
			rec.Keys, err = jsonImage(s.Keys, err)
			rec.NewImage, err = image(s.NewImage, err)
			rec.OldImage, err = image(s.OldImage, err)
		}
		var c events.Change
		if err == nil {
			c, err = events.DecodeDynamoDB(rec)
		}
		results[i] = sqsResult{ID: rec.SequenceNumber, Changes: []events.Change{c}, Err: err}
	}
	return results, nil
}

// jsonImage converts an image, unless an earlier one failed.
func jsonImage(m map[string]jsonAttr, err error) (events.Image, error) {
	if m == nil || err != nil {
		return nil, err
	}
	image := make(events.Image, len(m))
	for name, a := range m {
		av, err := a.value()
		if err != nil {
			return nil, err
		}
		image[name] = av
	}
	return image, nil
}

func (a *jsonAttr) value() (events.AttributeValue, error) {
	set := 0
	for _, present := range [...]bool{a.S != nil, a.N != nil, a.B != nil, a.BOOL != nil, a.NULL != nil,
		a.SS != nil, a.NS != nil, a.BS != nil, a.L != nil, a.M != nil} {
		if present {
			set++
		}
	}
	if set != 1 {
		return events.AttributeValue{}, libInvalid("an attribute value must hold exactly one type")
	}
	switch {
	case a.S != nil:
		return events.AttributeValue{Type: events.TypeString, S: *a.S}, nil
	case a.N != nil:
		return events.AttributeValue{Type: events.TypeNumber, S: *a.N}, nil
	case a.B != nil:
		b, err := base64.StdEncoding.AppendDecode([]byte{}, bytesOf(*a.B))
		return events.AttributeValue{Type: events.TypeBinary, B: b}, err
	case a.BOOL != nil:
		return events.AttributeValue{Type: events.TypeBoolean, BOOL: *a.BOOL}, nil
	case a.NULL != nil:
		if !*a.NULL {
			return events.AttributeValue{}, libInvalid("a NULL attribute cannot hold false")
		}
		return events.AttributeValue{Type: events.TypeNull}, nil
	case a.SS != nil:
		return events.AttributeValue{Type: events.TypeStringSet, SS: a.SS}, nil
	case a.NS != nil:
		return events.AttributeValue{Type: events.TypeNumberSet, SS: a.NS}, nil
	case a.BS != nil:
		bs := make([][]byte, len(a.BS))
		for i, s := range a.BS {
			var err error
			if bs[i], err = base64.StdEncoding.AppendDecode(nil, bytesOf(s)); err != nil {
				return events.AttributeValue{}, err
			}
		}
		return events.AttributeValue{Type: events.TypeBinarySet, BS: bs}, nil
	case a.L != nil:
		var list []events.AttributeValue
		for i := range a.L {
			av, err := a.L[i].value()
			if err != nil {
				return av, err
			}
			list = append(list, av)
		}
		return events.AttributeValue{Type: events.TypeList, L: list}, nil
	default:
		m, err := jsonImage(a.M, nil)
		return events.AttributeValue{Type: events.TypeMap, M: m}, err
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

// bytesOf views a string as bytes without copying, as the product does:
// the libraries only read their input.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
