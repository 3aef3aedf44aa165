package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fixtures in testdata were captured from moto 5.2.1 (SNS→SQS delivery,
// DynamoDB Streams) and completed by hand with the shapes moto cannot make.
// Each X.json has its expected decoding in X.golden.json; -update rewrites them.
var update = flag.Bool("update", false, "rewrite the golden files")

type decoded struct {
	Record  string   `json:"record"`
	Changes []Change `json:"changes,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func outcome(id string, changes []Change, err error) decoded {
	d := decoded{Record: id, Changes: changes}
	if err != nil {
		if !errors.Is(err, errInvalid) {
			panic("decode error does not wrap errInvalid: " + err.Error())
		}
		d.Error = err.Error()
	}
	return d
}

func TestGolden(t *testing.T) {
	// each decodes every record of an event from source, as Decode does.
	each := func(source Source) func(t *testing.T, data []byte) []decoded {
		return func(t *testing.T, data []byte) (out []decoded) {
			raws, err := SplitRecords(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range raws {
				d, changes, err := Decode(source, raw, nil)
				out = append(out, outcome(d.ID, changes, err))
			}
			return out
		}
	}
	decoders := map[string]func(t *testing.T, data []byte) []decoded{
		"sqs": func(t *testing.T, data []byte) (out []decoded) {
			raws, err := SplitRecords(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range raws {
				id, changes, err := DecodeSQSJSON(raw)
				out = append(out, outcome(id, changes, err))
			}
			return out
		},
		"sns": func(t *testing.T, data []byte) (out []decoded) {
			var ev snsEvent
			mustUnmarshal(t, data, &ev)
			for _, r := range ev.Records {
				changes, err := DecodeSNS(r)
				out = append(out, outcome(r.SNS.MessageID, changes, err))
			}
			return out
		},
		"kinesis": each(SourceKinesis),
		"kafka":   each(SourceKafka),
		"dynamodb": func(t *testing.T, data []byte) (out []decoded) {
			raws, err := SplitRecords(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range raws {
				seq, c, err := DecodeDynamoDBJSON(raw, nil)
				var changes []Change
				if err == nil {
					changes = []Change{c}
				}
				out = append(out, outcome(seq, changes, err))
			}
			return out
		},
	}
	fixtures, _ := filepath.Glob("testdata/*.json")
	for _, fixture := range fixtures {
		if strings.HasSuffix(fixture, ".golden.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(fixture), ".json")
		t.Run(name, func(t *testing.T) {
			source, _, _ := strings.Cut(name, "-")
			decode, ok := decoders[source]
			if !ok {
				t.Fatalf("no decoder for fixture %s", fixture)
			}
			data, err := os.ReadFile(fixture)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(decode(t, data), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			matchGolden(t, fixture, got)
		})
	}
}

// matchGolden compares the decoding of fixture, got, with its X.golden.json,
// which -update rewrites.
func matchGolden(t *testing.T, fixture string, got []byte) {
	t.Helper()
	golden := strings.TrimSuffix(fixture, ".json") + ".golden.json"
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./events -update to create it)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Errorf("decoding %s differs from %s:\n%s", fixture, golden, got)
	}
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// pathsAgree holds a decoder straight from the JSON (raw, over the records
// SplitRecords finds) to one from encoding/json's reading of the event
// (typed), fixture by fixture: same IDs, changes and errors.
func pathsAgree[E any](t *testing.T, glob string, typed func(E) []decoded, raw func([]byte) decoded) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", glob))
	for _, file := range files {
		if strings.HasSuffix(file, ".golden.json") {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var ev E
		mustUnmarshal(t, data, &ev)
		want := typed(ev)
		raws, err := SplitRecords(data)
		if err != nil || len(raws) != len(want) {
			t.Fatalf("%s: split into %d records (%v), want %d", file, len(raws), err, len(want))
		}
		for i := range want {
			gotJSON, _ := json.Marshal(raw(raws[i]))
			wantJSON, _ := json.Marshal(want[i])
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("%s record %d:\n got %s\nwant %s", file, i, gotJSON, wantJSON)
			}
		}
	}
}

func TestSQSPathsAgree(t *testing.T) {
	pathsAgree(t, "sqs*.json", func(ev sqsEvent) (out []decoded) {
		for _, m := range ev.Records {
			changes, err := DecodeSQSBody(m.MessageID, m.Body, m.Attributes["SentTimestamp"])
			out = append(out, outcome(m.MessageID, changes, err))
		}
		return out
	}, func(raw []byte) decoded {
		return outcome(DecodeSQSJSON(raw))
	})
}

func TestSQSJSONNamesBrokenRecords(t *testing.T) {
	for _, tc := range []struct{ raw, id, reason string }{
		{`{"body":7,"messageId":"m1"}`, "m1", "body must be a string"},
		{`{"messageId":"m2"}`, "m2", "has no body"},
		{`{"messageId":"m3","body":"{\"entity\":\"user\",\"id\":\"1\"}","attributes":{"SentTimestamp":"\u0031\u0030"}}`, "m3", ""},
		{`{"messageId":5,"body":"{}"}`, "", "messageId must be a string"},
		{`[]`, "", "want object"},
	} {
		id, changes, err := DecodeSQSJSON([]byte(tc.raw))
		if id != tc.id || (tc.reason == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: id %q, err %v; want %q and %q", tc.raw, id, err, tc.id, tc.reason)
		}
		if err == nil && !changes[0].OccurredAt.Equal(time.UnixMilli(10)) {
			t.Errorf("%s: occurred at %v, want the escaped SentTimestamp 10", tc.raw, changes[0].OccurredAt)
		}
	}
}

// TestSNSEnvelopeMessage: the Message is decoded as it is read, and the
// last of duplicate ones counts, as with encoding/json.
func TestSNSEnvelopeMessage(t *testing.T) {
	const a, b = `"{\"entity\":\"a\",\"id\":\"1\"}"`, `"{\"entity\":\"b\",\"id\":\"2\"}"`
	for _, tc := range []struct{ body, entity, reason string }{
		{`{"Type":"Notification","Message":` + a + `}`, "a", ""},
		{`{"Message":` + a + `,"Type":"Notification","Message":` + b + `}`, "b", ""},
		{`{"Type":"Notification","Message":5}`, "", "the SNS Message must be a string"},
		{`{"Type":"Notification","Message":` + a + `,"Message":[]}`, "", "the SNS Message must be a string"},
		{`{"Type":"Notification","Message":"{\"entity\":\u0022x\"}"}`, "x", ""},
	} {
		changes, err := DecodeSQSBody("m", tc.body, "")
		if tc.reason != "" {
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("%s: err %v, want %q", tc.body, err, tc.reason)
			}
			continue
		}
		if err != nil || len(changes) != 1 || changes[0].Entity != tc.entity || changes[0].Source != SourceSNS {
			t.Errorf("%s: %+v, %v; want entity %s from SNS", tc.body, changes, err, tc.entity)
		}
	}
}

// TestSplitRecordsLeavesBrokenRecordsToTheirDecoder: a record broken inside
// fails alone, by its message ID, and the rest of its batch goes on.
func TestSplitRecordsLeavesBrokenRecordsToTheirDecoder(t *testing.T) {
	payload := `{"Records":[{"messageId":"a","body":"{\"entity\":\"user\",\"id\":\"1\"}"},` +
		`{"messageId":"b","body":"{}","attributes":{"SentTimestamp":"1",}},` +
		`{"messageId":"c","body":"{\"keys\":[\"k\"]}"}]}`
	raws, err := SplitRecords([]byte(payload))
	if err != nil || len(raws) != 3 {
		t.Fatalf("SplitRecords: %d records, %v; want 3", len(raws), err)
	}
	for i, want := range []string{"a", "b", "c"} {
		id, _, err := DecodeSQSJSON(raws[i])
		if id != want || (want == "b") != errors.Is(err, errInvalid) {
			t.Errorf("record %d: id %q, err %v; want %q, failing only if b", i, id, err, want)
		}
	}
}

func TestDynamoDBJSONLimits(t *testing.T) {
	deep := `{"S":"x"}`
	for range 40 {
		deep = `{"L":[` + deep + `]}`
	}
	raw := `{"eventName":"INSERT","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/T/stream/s","dynamodb":{"Keys":{"id":{"S":"1"}},"NewImage":{"deep":` + deep + `},"SequenceNumber":"42"}}`
	seq, _, err := DecodeDynamoDBJSON([]byte(raw), nil)
	if seq != "42" || !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "32 levels") {
		t.Fatalf("deep nesting: seq %q, err %v", seq, err)
	}
	// Deeper than JSON itself may nest (10,000, as encoding/json): the record
	// is refused, and still named.
	deeper := strings.Repeat(`[`, 10_001) + strings.Repeat(`]`, 10_001)
	raw = `{"eventName":"INSERT","dynamodb":{"Keys":{"id":{"S":"1"}},"NewImage":{"deep":{"L":` + deeper + `}},"SequenceNumber":"44"}}`
	if seq, _, err := DecodeDynamoDBJSON([]byte(raw), nil); seq != "44" || !errors.Is(err, errInvalid) {
		t.Fatalf("nesting past JSON's limit: seq %q, err %v; want the record refused under its sequence number", seq, err)
	}
	// A field broken before SequenceNumber still names its record, so that
	// only it fails, not its batch.
	broken := `{"eventName":7,"dynamodb":{"Keys":{"id":{"X":"1"}},"SequenceNumber":"43"}}`
	if seq, _, err := DecodeDynamoDBJSON([]byte(broken), nil); seq != "43" || err == nil {
		t.Fatalf("broken record: seq %q, err %v", seq, err)
	}
}

// TestSplitRecordsRefusesWhatIsNoEvent: a payload without Records is no
// event, and fails its invoke; an empty batch is one.
func TestSplitRecordsRefusesWhatIsNoEvent(t *testing.T) {
	for _, payload := range []string{`{}`, `{"detail-type":"Object Created","detail":{}}`, `{"records":[]}`} {
		if _, err := SplitRecords([]byte(payload)); !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "no Records") {
			t.Errorf("%s: err %v, want no Records", payload, err)
		}
	}
	if raws, err := SplitRecords([]byte(`{"Records":[]}`)); err != nil || len(raws) != 0 {
		t.Errorf("an empty batch: %d records, %v", len(raws), err)
	}
}

func TestCreationTimeInAnyUnit(t *testing.T) {
	want := time.Unix(1795953600, 0)
	for _, tc := range []struct {
		value float64
		want  time.Time
	}{
		{1795953600, want}, {1795953600000, want}, {1795953600000000, want}, {1795953600.5, want.Add(500 * time.Millisecond)},
		{-1, time.Time{}}, {0, time.Time{}}, {1e300, time.Time{}},
	} {
		if got := epochTime(tc.value); !got.Equal(tc.want) {
			t.Errorf("epochTime(%v) = %v, want %v", tc.value, got, tc.want)
		}
	}
}

// TestChangeTags: a change may name tags, beside or instead of an entity
// and keys, and a second delete may be of tags alone.
func TestChangeTags(t *testing.T) {
	for _, tc := range []struct {
		body   string
		tags   []string
		reason string
	}{
		{`{"tags":["category:shoes","product:1"]}`, []string{"category:shoes", "product:1"}, ""},
		{`{"entity":"product","id":"1","tags":["product:1"]}`, []string{"product:1"}, ""},
		{`{"tags":["t"],"secondDelete":true}`, []string{"t"}, ""},
		{`{"tags":[]}`, nil, "tags is empty"},
		{`{"tags":"product:1"}`, nil, "tags must be an array of strings"},
		{`{"tags":["a",""]}`, nil, "tags[1] is empty"},
		{`{"tags":["a",7]}`, nil, "tags[1] must be a string"},
		{`{"secondDelete":true,"entity":"x"}`, nil, "a second delete needs keys or tags"},
	} {
		changes, err := DecodeSQSBody("m", tc.body, "")
		if tc.reason != "" {
			if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("%s: err %v, want %q", tc.body, err, tc.reason)
			}
			continue
		}
		if err != nil || len(changes) != 1 || !slices.Equal(changes[0].Tags, tc.tags) {
			t.Errorf("%s: %+v, %v; want tags %q", tc.body, changes, err, tc.tags)
		}
	}
}

// TestRecordLimits: a record may ask for at most maxChanges changes,
// maxKeys keys and maxTags tags; past one it fails for good, naming
// itself, at that point: what follows, broken here, is never read, and
// the changes decoded before are kept.
func TestRecordLimits(t *testing.T) {
	names := func(n int, prefix string) string {
		out := make([]string, n)
		for i := range out {
			out[i] = `"` + prefix + strconv.Itoa(i) + `"`
		}
		return "[" + strings.Join(out, ",") + "]"
	}
	changes := func(n int, change string) string {
		return strings.TrimSuffix(strings.Repeat(change+",", n), ",")
	}
	const broken = "7" // a bad element: reading it is an error of its own
	for _, tc := range []struct {
		name, body string
		kept       int
		reason     string
	}{
		{"keys at the limit", `{"keys":` + names(maxKeys, "cache:k") + `}`, 1, ""},
		{"keys past the limit", `{"keys":` + strings.TrimSuffix(names(maxKeys+1, "cache:k"), "]") + "," + broken + `]}`, 0, "more than 10000 keys in one record"},
		{"keys of several changes", `[` + changes(2, `{"keys":`+names(maxKeys/2+1, "cache:k")+`}`) + "," + broken + `]`, 2, "more than 10000 keys in one record"},
		{"tags past the limit", `{"tags":` + strings.TrimSuffix(names(maxTags+1, "t"), "]") + "," + broken + `]}`, 0, "more than 1000 tags in one record"},
		{"tags of several changes", `[` + changes(2, `{"tags":`+names(maxTags/2+1, "t")+`}`) + "," + broken + `]`, 2, "more than 1000 tags in one record"},
		{"changes at the limit", `[` + changes(maxChanges, `{"entity":"a","id":"1"}`) + `]`, maxChanges, ""},
		{"changes past the limit", `[` + changes(maxChanges+1, `{"entity":"a","id":"1"}`) + "," + broken + `]`, maxChanges, "more than 10000 changes in one record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeSQSBody("m1", tc.body, "")
			if len(got) != tc.kept || tc.reason == "" && err != nil ||
				tc.reason != "" && (!errors.Is(err, errInvalid) || err.Error() != `record "m1": `+tc.reason) {
				t.Fatalf("%d changes, err %v; want %d and %q", len(got), err, tc.kept, tc.reason)
			}
		})
	}
}

// TestDecodeKeepsOnlyWhatIsRead: of a stream record's images, only the
// attributes named are decoded, down their paths; the others, however
// large, deep or broken inside, are only checked to be JSON. The key
// attributes are always decoded.
func TestDecodeKeepsOnlyWhatIsRead(t *testing.T) {
	deep := `{"S":"x"}`
	for range 40 {
		deep = `{"L":[` + deep + `]}`
	}
	image := `{"id":{"S":"1"},"tags":{"SS":["a","b"]},"brand":{"M":{"name":{"S":"Acme"},"logo":{"X":1}}},"list":{"L":[{"X":1}]},"deep":` + deep + `,"odd":{"X":1}}`
	raw := `{"eventName":"MODIFY","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/T/stream/s","dynamodb":{"Keys":{"id":{"S":"1"},"sk":{"N":"2"}},` +
		`"OldImage":` + image + `,"NewImage":` + image + `,"SequenceNumber":"42"}}`
	keep := Attributes{"tags": {}, "brand": {"name": {}}, "list": {}}
	_, c, err := DecodeDynamoDBJSON([]byte(raw), keep)
	if err != nil {
		t.Fatal(err)
	}
	want := Image{"tags": {Type: TypeStringSet, SS: []string{"a", "b"}}, "brand": {Type: TypeMap, M: Image{"name": {Type: TypeString, S: "Acme"}}}, "list": {Type: TypeList}}
	for _, got := range []Image{c.OldImage, c.NewImage} {
		if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
			t.Errorf("image %s, want %s", g, w)
		}
	}
	if c.ID != "1#2" || len(c.ItemKey) != 2 {
		t.Errorf("key %q %v, want both key attributes", c.ID, c.ItemKey)
	}
	if _, _, err := DecodeDynamoDBJSON([]byte(raw), nil); !errors.Is(err, errInvalid) {
		t.Errorf("everything kept: %v, want the broken attributes to fail the record", err)
	}
	if _, _, err := DecodeDynamoDBJSON([]byte(strings.Replace(raw, `"odd":{"X":1}`, `"odd":{"X":1`, 1)), keep); !errors.Is(err, errInvalid) {
		t.Errorf("an attribute kept out that is not JSON: %v, want the record to fail", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNumericIDs: a numeric id is the text of its JSON integer literal,
// however large; a fraction or an exponent is refused, since the key would
// depend on how the producer's encoder writes the number.
func TestNumericIDs(t *testing.T) {
	for _, tc := range []struct{ id, want, reason string }{
		{"42", "42", ""}, {"-7", "-7", ""}, {"18446744073709551616", "18446744073709551616", ""},
		{"123456789012345678901234567890", "123456789012345678901234567890", ""},
		{"1.5", "", "a numeric id must be an integer, not 1.5"}, {"1e3", "", "not 1e3"}, {"1.0", "", "not 1.0"}, {"2E0", "", "not 2E0"},
	} {
		changes, err := DecodeSQSBody("m", `{"entity":"product","id":`+tc.id+`}`, "")
		if tc.reason != "" {
			if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("id %s: %v, want %q", tc.id, err, tc.reason)
			}
			continue
		}
		if err != nil || changes[0].ID != tc.want {
			t.Errorf("id %s: %+v, %v; want %s", tc.id, changes, err, tc.want)
		}
	}
}
