package main

import (
	"encoding/base64"
	"time"

	"github.com/valyala/fastjson"

	"github.com/invalidator-go/invalidator/events"
)

// fastDecoder decodes the product's events with valyala/fastjson: each
// JSON text (the payload, a body, an SNS Message) parsed into a tree and
// read from it. fastjson's parser alone lets through what json.Valid
// refuses (control characters and bad escapes in strings, numbers such
// as 01), so each text is validated first (fastjson.Validate), as the
// product validates all it reads. A decoder is for one goroutine.
type fastDecoder struct {
	payload, body, message fastjson.Parser
	num                    []byte
}

// parse validates data and parses it with p.
func parse(p *fastjson.Parser, data []byte) (*fastjson.Value, error) {
	if err := fastjson.ValidateBytes(data); err != nil {
		return nil, err
	}
	return p.ParseBytes(data)
}

func (d *fastDecoder) records(p *fastjson.Parser, payload []byte) ([]*fastjson.Value, error) {
	v, err := parse(p, payload)
	if err != nil {
		return nil, err
	}
	records := v.Get("Records")
	if records == nil {
		return nil, libInvalid("not a Lambda event: no Records")
	}
	return records.Array()
}

// sqs decodes an SQS event payload as the SQS function does with
// SplitRecords and DecodeSQSJSON.
func (d *fastDecoder) sqs(payload []byte) ([]sqsResult, error) {
	records, err := d.records(&d.payload, payload)
	if err != nil {
		return nil, err
	}
	results := make([]sqsResult, len(records))
	for i, r := range records {
		var body []byte
		var sent string
		first := errKind(r, fastjson.TypeObject, "a record must be an object")
		r.GetObject().Visit(func(key []byte, v *fastjson.Value) {
			switch string(key) {
			case "messageId":
				results[i].ID = string(v.GetStringBytes())
				first = cmpOr(first, errKind(v, fastjson.TypeString, "messageId must be a string"))
			case "body":
				body = v.GetStringBytes()
				first = cmpOr(first, errKind(v, fastjson.TypeString, "body must be a string"))
			case "attributes":
				sent = string(v.GetStringBytes("SentTimestamp"))
			}
		})
		if first == nil && body == nil {
			first = libInvalid("the record has no body")
		}
		if results[i].Err = first; first != nil {
			continue
		}
		results[i].Changes, results[i].Err = d.sqsBody(body, sent)
	}
	return results, nil
}

// sqsBody is DecodeSQSBody.
func (d *fastDecoder) sqsBody(body []byte, sent string) ([]events.Change, error) {
	changes, err := d.decodeBody(&d.body, body, true, events.SourceSQS, time.Time{}, nil)
	return dated(changes, sentAt(sent)), err
}

// decodeBody decodes a body as events' decodeBody does; p parses it.
func (d *fastDecoder) decodeBody(p *fastjson.Parser, data []byte, allowSNS bool, source events.Source, at time.Time, out []events.Change) ([]events.Change, error) {
	v, err := parse(p, data)
	if err != nil {
		return out, err
	}
	switch v.Type() {
	case fastjson.TypeArray:
		elements := v.GetArray()
		if len(elements) == 0 {
			return out, libInvalid("empty change array")
		}
		var first error
		for _, e := range elements {
			c, _, err := d.fields(e)
			if err == nil {
				var ch events.Change
				if ch, err = c.change(source, at); err == nil {
					out = append(out, ch)
				}
			}
			first = cmpOr(first, err)
		}
		return out, first
	case fastjson.TypeObject:
	default:
		return out, libInvalid("a body must be a JSON object or array")
	}
	c, env, err := d.fields(v)
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
		return d.decodeBody(&d.message, v.GetStringBytes("Message"), false, events.SourceSNS, at, out)
	case 'e':
		if at, err = envelopeTime(env.Time); err != nil {
			return out, err
		}
		detail := v.Get("detail")
		if detail.Type() != fastjson.TypeObject {
			return out, libInvalid("EventBridge detail must be an object")
		}
		if c, _, err = d.fields(detail); err != nil {
			return out, err
		}
		source = events.SourceEventBridge
	}
	ch, err := c.change(source, at)
	if err != nil {
		return out, err
	}
	return append(out, ch), nil
}

// fields gathers a body object's members in one pass, as collect does.
func (d *fastDecoder) fields(v *fastjson.Value) (c libChange, env libEnvelope, err error) {
	if err = errKind(v, fastjson.TypeObject, "a change must be an object"); err != nil {
		return c, env, err
	}
	text := func(v *fastjson.Value, what string) *string {
		if v.Type() != fastjson.TypeString {
			err = cmpOr(err, libInvalid(what+" must be a string"))
			return nil
		}
		s := string(v.GetStringBytes())
		return &s
	}
	v.GetObject().Visit(func(key []byte, v *fastjson.Value) {
		switch string(key) {
		case "entity":
			c.Entity = text(v, "entity")
		case "id":
			switch v.Type() {
			case fastjson.TypeString:
				c.ID, c.IDKind = string(v.GetStringBytes()), 's'
			case fastjson.TypeNumber:
				d.num = v.MarshalTo(d.num[:0]) // the literal's text
				c.ID, c.IDKind = string(d.num), 'n'
			default:
				err = cmpOr(err, libInvalid("id must be a string or an integer"))
			}
		case "op":
			c.Op = text(v, "op")
		case "version":
			n, verr := v.Int64()
			c.Version = &n
			err = cmpOr(err, verr)
		case "keys":
			c.Keys, c.HasKeys = d.strings(v, &err), true
		case "tags":
			c.Tags, c.HasTags = d.strings(v, &err), true
		case "occurredAt":
			c.OccurredAt = text(v, "occurredAt")
		case "secondDelete":
			b, berr := v.Bool()
			c.SecondDelete = &b
			err = cmpOr(err, berr)
		case "Type":
			s := string(v.GetStringBytes()) // not a string: not Notification
			env.Type = &s
		case "Message":
			s := "" // the Message is parsed from the tree; present is enough
			env.Message, env.MessageBad = &s, v.Type() != fastjson.TypeString
		case "Timestamp":
			env.Timestamp = stringOrNil(v)
		case "detail-type":
			env.DetailType = true
		case "detail":
			env.Detail = []byte{}
		case "time":
			env.Time = stringOrNil(v)
		}
	})
	return c, env, err
}

func (d *fastDecoder) strings(v *fastjson.Value, err *error) []string {
	a, aerr := v.Array()
	if aerr != nil {
		*err = cmpOr(*err, aerr)
		return nil
	}
	out := make([]string, len(a))
	for i, e := range a {
		out[i] = string(e.GetStringBytes())
		*err = cmpOr(*err, errKind(e, fastjson.TypeString, "keys and tags must be strings"))
	}
	return out
}

// stream decodes a DynamoDB Streams payload as the stream function does
// with SplitRecords and DecodeDynamoDBJSON, its images whole.
func (d *fastDecoder) stream(payload []byte) ([]sqsResult, error) {
	return d.decodeStream(payload, fastImage)
}

// streamKeys decodes it as the stream function does with the default
// rules, which read no image: parsed (and validated), not converted.
func (d *fastDecoder) streamKeys(payload []byte) ([]sqsResult, error) {
	return d.decodeStream(payload, func(v *fastjson.Value, err *error) events.Image {
		*err = cmpOr(*err, errKind(v, fastjson.TypeObject, "an image must be an object"))
		return events.Image{}
	})
}

func (d *fastDecoder) decodeStream(payload []byte, image func(*fastjson.Value, *error) events.Image) ([]sqsResult, error) {
	records, err := d.records(&d.payload, payload)
	if err != nil {
		return nil, err
	}
	results := make([]sqsResult, len(records))
	for i, r := range records {
		var rec events.StreamRecord
		err := errKind(r, fastjson.TypeObject, "a record must be an object")
		r.GetObject().Visit(func(key []byte, v *fastjson.Value) {
			switch string(key) {
			case "eventName":
				rec.EventName = string(v.GetStringBytes())
			case "eventSourceARN":
				rec.EventSourceARN = string(v.GetStringBytes())
			case "dynamodb":
				err = cmpOr(err, errKind(v, fastjson.TypeObject, "dynamodb must be an object"))
				v.GetObject().Visit(func(key []byte, v *fastjson.Value) {
					switch string(key) {
					case "Keys":
						rec.Keys = fastImage(v, &err)
					case "NewImage":
						rec.NewImage = image(v, &err)
					case "OldImage":
						rec.OldImage = image(v, &err)
					case "SequenceNumber":
						rec.SequenceNumber = string(v.GetStringBytes())
					case "ApproximateCreationDateTime":
						secs, ferr := v.Float64()
						rec.ApproximateCreationDateTime = epochTime(secs)
						err = cmpOr(err, ferr)
					}
				})
			}
		})
		var c events.Change
		if err == nil {
			c, err = events.DecodeDynamoDB(rec)
		}
		results[i] = sqsResult{ID: rec.SequenceNumber, Changes: []events.Change{c}, Err: err}
	}
	return results, nil
}

func fastImage(v *fastjson.Value, err *error) events.Image {
	o, oerr := v.Object()
	if oerr != nil {
		*err = cmpOr(*err, oerr)
		return nil
	}
	image := make(events.Image, o.Len())
	o.Visit(func(key []byte, v *fastjson.Value) {
		av, aerr := fastAttr(v)
		*err = cmpOr(*err, aerr)
		image[string(key)] = av
	})
	return image
}

func fastAttr(v *fastjson.Value) (av events.AttributeValue, err error) {
	o, err := v.Object()
	if err != nil || o.Len() != 1 {
		return av, cmpOr(err, libInvalid("an attribute value must hold exactly one type"))
	}
	o.Visit(func(key []byte, v *fastjson.Value) {
		label := events.AttributeType(key)
		switch label {
		case events.TypeString, events.TypeNumber:
			av = events.AttributeValue{Type: label, S: string(v.GetStringBytes())}
			err = errKind(v, fastjson.TypeString, "an S or N attribute must hold a string")
		case events.TypeBinary:
			av.Type = label
			av.B, err = base64.StdEncoding.AppendDecode([]byte{}, v.GetStringBytes())
			err = cmpOr(errKind(v, fastjson.TypeString, "a B attribute must hold a string"), err)
		case events.TypeBoolean:
			av.Type = label
			av.BOOL, err = v.Bool()
		case events.TypeNull:
			av.Type = label
			if v.Type() != fastjson.TypeTrue {
				err = libInvalid("a NULL attribute must hold true")
			}
		case events.TypeStringSet, events.TypeNumberSet:
			av.Type = label
			a, aerr := v.Array()
			av.SS, err = make([]string, len(a)), aerr
			for i, e := range a {
				av.SS[i] = string(e.GetStringBytes())
				err = cmpOr(err, errKind(e, fastjson.TypeString, "a set must hold strings"))
			}
		case events.TypeBinarySet:
			av.Type = label
			a, aerr := v.Array()
			av.BS, err = make([][]byte, len(a)), aerr
			for i, e := range a {
				var berr error
				av.BS[i], berr = base64.StdEncoding.AppendDecode(nil, e.GetStringBytes())
				err = cmpOr(err, berr)
			}
		case events.TypeList:
			av.Type = label
			a, aerr := v.Array()
			err = aerr
			for _, e := range a {
				item, ierr := fastAttr(e)
				av.L, err = append(av.L, item), cmpOr(err, ierr)
			}
		case events.TypeMap:
			av = events.AttributeValue{Type: label, M: fastImage(v, &err)}
		default:
			err = libInvalid("unknown attribute type " + string(key))
		}
	})
	return av, err
}

func errKind(v *fastjson.Value, want fastjson.Type, reason string) error {
	if v.Type() != want {
		return libInvalid(reason)
	}
	return nil
}

func stringOrNil(v *fastjson.Value) *string {
	if v.Type() != fastjson.TypeString {
		return nil
	}
	s := string(v.GetStringBytes())
	return &s
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
