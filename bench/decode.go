package main

import (
	"encoding/json"
	"log"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/bytedance/sonic"
	gojson "github.com/goccy/go-json"
	"github.com/valyala/fastjson"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/invalidate"
)

// The decode group holds the product's own decoding (internal/jsonscan
// under events.SplitRecords, DecodeSQSJSON, DecodeSQSBody and
// DecodeDynamoDBJSON) against the fastest validating JSON libraries doing
// the same work: the same payloads and bodies to the same events.Change
// values, every byte validated as json.Valid would. It needs no cache.

// decodeRounds alternate the decoders, each timed for decodeWindow; the
// median of the rounds' ratios counts, as the machine's speed drifts.
const (
	decodeRounds = 15
	decodeWindow = 100 * time.Millisecond
)

// decoder is one way of decoding the corpora; a nil func is a corpus it
// is not measured on.
type decoder struct {
	name   string
	sqs    func(payload []byte) ([]sqsResult, error) // a Lambda SQS event
	body   func(body, sent string) ([]events.Change, error)
	stream func(payload []byte) ([]sqsResult, error) // a Lambda Streams event
	keys   func(payload []byte) ([]sqsResult, error) // the same, with the default rules
}

func decoders() []decoder {
	jsonscan := decoder{name: "jsonscan", sqs: jsonscanSQS, stream: jsonscanStream(nil),
		keys: jsonscanStream(invalidate.DefaultRules().Attributes()),
		body: func(body, sent string) ([]events.Change, error) { return events.DecodeSQSBody("", body, sent) }}
	goccy := structDecoder{unmarshal: gojson.Unmarshal}
	// ValidateString: sonic lets control characters through strings
	// otherwise, which json.Valid refuses. It checks no escape in what it
	// skips, nor does its Valid ("\q" passes): fastjson's validator, the
	// fastest strict one here, goes first.
	sonicAPI := sonic.Config{ValidateString: true}.Froze()
	son := structDecoder{unmarshal: sonicAPI.Unmarshal, valid: func(data []byte) bool { return fastjson.ValidateBytes(data) == nil }}
	fast := &fastDecoder{}
	return []decoder{
		jsonscan,
		{name: "goccy", sqs: goccy.sqs, body: goccy.sqsBody, stream: goccy.stream, keys: goccy.streamKeys},
		{name: "goccy_split", sqs: goccy.sqsSplit},
		{name: "sonic", sqs: son.sqs, body: son.sqsBody, stream: son.stream, keys: son.streamKeys},
		{name: "fastjson", sqs: fast.sqs, stream: fast.stream, keys: fast.streamKeys,
			body: func(body, sent string) ([]events.Change, error) { return fast.sqsBody(bytesOf(body), sent) }},
	}
}

func jsonscanSQS(payload []byte) ([]sqsResult, error) {
	raws, err := events.SplitRecords(payload)
	results := make([]sqsResult, len(raws))
	for i, raw := range raws {
		results[i].ID, results[i].Changes, results[i].Err = events.DecodeSQSJSON(raw)
	}
	return results, err
}

// jsonscanStream decodes as the stream function does with rules that
// read keep of the images (nil: all of them).
func jsonscanStream(keep events.Attributes) func(payload []byte) ([]sqsResult, error) {
	return func(payload []byte) ([]sqsResult, error) {
		raws, err := events.SplitRecords(payload)
		results := make([]sqsResult, len(raws))
		for i, raw := range raws {
			seq, c, err := events.DecodeDynamoDBJSON(raw, keep)
			results[i] = sqsResult{ID: seq, Changes: []events.Change{c}, Err: err}
		}
		return results, err
	}
}

// decodeCorpus is what the group decodes: SNS-in-SQS messages as the
// throughput group sends them, in Lambda payloads of 1,000, and 1,000
// MODIFY stream records as the memory group's.
type decodeCorpus struct {
	msgs     []lambdaevents.SQSMessage
	payloads [][]byte
	stream   []byte
	streamN  int
}

func newDecodeCorpus() decodeCorpus {
	var c decodeCorpus
	for i := range 4 {
		batch := snsMessages(i*1000, 1000)
		payload, err := json.Marshal(lambdaevents.SQSEvent{Records: batch})
		if err != nil {
			log.Fatal(err)
		}
		c.msgs, c.payloads = append(c.msgs, batch...), append(c.payloads, payload)
	}
	c.stream, c.streamN = lambdaevent.StreamPayload(1000), 1000
	return c
}

func decodeGroup() {
	c := newDecodeCorpus()
	ds := decoders()
	for _, d := range ds[1:] {
		checkSame(c, ds[0], d)
		checkValidates(ds[0], d)
	}
	// work[corpus](d) decodes the corpus once with d: n messages
	// (records).
	type work struct {
		name string
		n    int
		run  func(d decoder)
		has  func(d decoder) bool
	}
	must := func(_ any, err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	corpora := []work{
		{"sqs", len(c.msgs), func(d decoder) {
			for _, p := range c.payloads {
				must(d.sqs(p))
			}
		}, func(d decoder) bool { return d.sqs != nil }},
		{"sqs_body", len(c.msgs), func(d decoder) {
			for _, m := range c.msgs {
				must(d.body(m.Body, m.Attributes["SentTimestamp"]))
			}
		}, func(d decoder) bool { return d.body != nil }},
		{"stream", c.streamN, func(d decoder) { must(d.stream(c.stream)) }, func(d decoder) bool { return d.stream != nil }},
		{"stream_keys", c.streamN, func(d decoder) { must(d.keys(c.stream)) }, func(d decoder) bool { return d.keys != nil }},
	}
	// rates[corpus][decoder] are messages (records) per CPU second, a
	// round each. A corpus's rounds run back to back, so that the
	// decoders' windows lie close together.
	rates := make([][][]float64, len(corpora))
	for i, w := range corpora {
		rates[i] = make([][]float64, len(ds))
		for round := range decodeRounds {
			for k := range ds {
				j := (round + k) % len(ds) // each goes first in turn
				if w.has(ds[j]) {
					rates[i][j] = append(rates[i][j], rate(w.n, func() { w.run(ds[j]) }))
				}
			}
		}
	}
	for i, w := range corpora {
		corpus, unit := w.name, "_messages_per_sec"
		if strings.HasPrefix(corpus, "stream") {
			unit = "_records_per_sec"
		}
		print("decode_"+corpus+"_jsonscan"+unit, median(rates[i][0]))
		for j, d := range ds[1:] {
			if w.has(d) {
				print("decode_"+corpus+"_"+d.name+"_vs_jsonscan", medianRatio(rates[i][j+1], rates[i][0]))
			}
		}
	}
}

// rate returns n ÷ the CPU time the process spends in fn, fn run over
// until that is at least decodeWindow: CPU time, not time passing, as the
// machine is shared and a decoder's rate should not depend on what else
// runs on it. The garbage collector's time counts, since it runs in the
// process.
func rate(n int, fn func()) float64 {
	runtime.GC() // no decoder pays for another's garbage
	start := cpuTime()
	for reps := 1; ; reps++ {
		fn()
		if took := cpuTime() - start; took >= decodeWindow {
			return float64(reps*n) / took.Seconds()
		}
	}
}

// cpuTime is the CPU time the process has used, to the microsecond.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkSame fails the run unless d decodes the corpus, all three ways, to
// exactly what the product does.
func checkSame(c decodeCorpus, product, d decoder) {
	same := func(what string, want, got []sqsResult, wantErr, gotErr error) {
		if wantErr != nil || gotErr != nil {
			log.Fatalf("decode %s: jsonscan: %v, %s: %v", what, wantErr, d.name, gotErr)
		}
		for i := range want {
			if want[i].Err != nil || got[i].Err != nil {
				log.Fatalf("decode %s record %d: jsonscan: %v, %s: %v", what, i, want[i].Err, d.name, got[i].Err)
			}
		}
		if !reflect.DeepEqual(want, got) {
			log.Fatalf("decode %s: %s's changes differ from jsonscan's", what, d.name)
		}
	}
	for _, p := range c.payloads {
		want, wantErr := product.sqs(p)
		got, gotErr := d.sqs(p)
		same("sqs", want, got, wantErr, gotErr)
	}
	if d.body == nil { // measured on SQS payloads only
		return
	}
	for i, m := range c.msgs {
		want, wantErr := product.body(m.Body, m.Attributes["SentTimestamp"])
		got, gotErr := d.body(m.Body, m.Attributes["SentTimestamp"])
		same("sqs body "+m.MessageId, []sqsResult{{ID: m.MessageId, Changes: want}}, []sqsResult{{ID: m.MessageId, Changes: got}}, wantErr, gotErr)
		if i == 0 && (len(got) != 1 || got[0].Entity != "product" || got[0].Source != events.SourceSNS) {
			log.Fatalf("decode: the corpus decodes to %+v", got)
		}
	}
	want, wantErr := product.stream(c.stream)
	got, gotErr := d.stream(c.stream)
	same("stream", want, got, wantErr, gotErr)
	want, wantErr = product.keys(c.stream)
	got, gotErr = d.keys(c.stream)
	same("stream keys", want, got, wantErr, gotErr)
}

// badJSON are values json.Valid refuses; each is put into the corpus as
// a member the product skips, at every level of nesting.
var badJSON = []string{`01`, "\"a\x01b\"", `"\q"`, `"\u12G4"`, `tru`, `nul`, `[1,]`, `[1 2]`, `{"a":1,}`, `{"a" 1}`, `1.`, `-`, `1e`}

// checkValidates fails the run unless d refuses every malformed record
// that the product refuses: a decoder that skips validation does less
// work, and its rate would mean nothing.
func checkValidates(product, d decoder) {
	msg := snsMessages(0, 1)[0]
	payload := func(m lambdaevents.SQSMessage) string {
		p, _ := json.Marshal(lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{m}})
		return string(p)
	}
	var envelope map[string]string
	if err := json.Unmarshal([]byte(msg.Body), &envelope); err != nil {
		log.Fatal(err)
	}
	stream := string(lambdaevent.StreamPayload(1))
	for _, bad := range badJSON {
		member := `"x":` + bad + `,`
		inBody, inMessage := msg, msg
		inBody.Body = "{" + member + msg.Body[1:]
		env := map[string]string{}
		for k, v := range envelope {
			env[k] = v
		}
		env["Message"] = "{" + member + envelope["Message"][1:]
		b, _ := json.Marshal(env)
		inMessage.Body = string(b)
		sqsCases := map[string]string{
			"record":     strings.Replace(payload(msg), `{"messageId":`, "{"+member+`"messageId":`, 1),
			"attributes": strings.Replace(payload(msg), `"attributes":{`, `"attributes":{`+member, 1),
			"body":       payload(inBody),
			"message":    payload(inMessage),
		}
		for where, p := range sqsCases {
			mustRefuse(product.sqs, d.sqs, d.name, bad, "an SQS "+where, p)
		}
		if d.stream == nil {
			continue
		}
		streamCases := map[string]string{
			"record":   strings.Replace(stream, `{"eventID":`, "{"+member+`"eventID":`, 1),
			"dynamodb": strings.Replace(stream, `"dynamodb":{`, `"dynamodb":{`+member, 1),
			"image":    strings.Replace(stream, `"NewImage":{`, `"NewImage":{"x":{"S":`+bad+`},`, 1),
		}
		for where, p := range streamCases {
			mustRefuse(product.stream, d.stream, d.name, bad, "a stream "+where, p)
			mustRefuse(product.keys, d.keys, d.name, bad, "a stream "+where+" (keys only)", p)
		}
	}
	// And in the strings that are decoded, not skipped: the body, the
	// Message in it, a key attribute.
	for _, bad := range []string{`\q`, `\u12G4`, "\x01"} {
		inMessage := msg
		inMessage.Body = strings.Replace(msg.Body, `"Message":"{`, `"Message":"`+bad+`{`, 1)
		mustRefuse(product.sqs, d.sqs, d.name, bad, "an SQS body string", strings.Replace(payload(msg), `"body":"{`, `"body":"`+bad+`{`, 1))
		mustRefuse(product.sqs, d.sqs, d.name, bad, "an SNS Message string", payload(inMessage))
		if d.stream == nil {
			continue
		}
		inKey := strings.Replace(stream, `"Keys":{"id":{"S":"`, `"Keys":{"id":{"S":"`+bad, 1)
		mustRefuse(product.stream, d.stream, d.name, bad, "a key attribute", inKey)
		mustRefuse(product.keys, d.keys, d.name, bad, "a key attribute (keys only)", inKey)
	}
}

// mustRefuse fails the run unless both the product and the library
// refuse payload, which holds bad in where: the check holds nothing when
// the product lets it through.
func mustRefuse(product, lib func([]byte) ([]sqsResult, error), name, bad, where, payload string) {
	switch {
	case !refuses(product, payload):
		log.Fatalf("decode: jsonscan accepts %s in %s, which json.Valid refuses", bad, where)
	case !refuses(lib, payload):
		log.Fatalf("decode: %s accepts %s in %s, which json.Valid refuses", name, bad, where)
	}
}

// refuses says whether decode fails the payload or a record of it.
func refuses(decode func([]byte) ([]sqsResult, error), payload string) bool {
	results, err := decode([]byte(payload))
	if err != nil {
		return true
	}
	for _, r := range results {
		if r.Err != nil {
			return true
		}
	}
	return false
}
