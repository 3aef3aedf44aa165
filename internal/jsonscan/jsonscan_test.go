package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

var seeds = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `true`, `false`, `null`, ` {"a" : [1, {"b":null}] } `,
	`{"entity":"product","id":"42"}`, `[{"entity":"a","id":1},{"keys":["x","y"]}]`,
	`{"Type":"Notification","Message":"{\"entity\":\"p\",\"id\":\"1\"}"}`,
	`"\u00e9\ud83d\ude00\ud800x\\\/\b\f\n\r\t"`, "\"\xff\xfe\"", `{"a":1,"a":2}`, `{"\u0061":1}`,
	`{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `1e`, `"\x"`, `"\u12"`, "\"a\tb\"", `{"a" 1}`, `{1:2}`,
	`tru`, `nul`, `{"a":1} x`, `[`, `{`, `"abc`, `[[[[[]]]]]`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, s := range seeds {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%.40q) = %v, encoding/json says %v", s, got, want)
		}
	}
}

func TestMembers(t *testing.T) {
	var got []string
	err := Members([]byte(` {"a" : "x", "b\u0021":[1, 2] , "c":{"d":null}} `), func(key, value []byte, kind Kind) error {
		got = append(got, string(key)+"="+string(value)+":"+kind.String())
		return nil
	})
	want := []string{`a="x":string`, `b!=[1, 2]:array`, `c={"d":null}:object`}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

func TestMembersErrors(t *testing.T) {
	stop := errors.New("stop")
	for _, in := range []string{`[1]`, `{"a":1`, `{"a":1} {}`, `{"a":}`, `{"a":1,}`} {
		if err := Members([]byte(in), func([]byte, []byte, Kind) error { return nil }); !errors.Is(err, ErrSyntax) {
			t.Errorf("Members(%s) = %v, want ErrSyntax", in, err)
		}
	}
	if err := Members([]byte(`{"a":1}`), func([]byte, []byte, Kind) error { return stop }); err != stop {
		t.Errorf("Members = %v, want the callback's error", err)
	}
}

func TestText(t *testing.T) {
	for raw, want := range map[string]string{
		`"plain"`:              "plain",
		`"a\"b\\c\/d"`:         `a"b\c/d`,
		`"\u00e9\ud83d\ude00"`: "é😀",
		`"\ud800"`:             "\uFFFD",
		"\"\xff\"":             "\uFFFD",
		`"line\r\nbreak"`:      "line\r\nbreak",
	} {
		got, err := Text([]byte(raw))
		if err != nil || got != want {
			t.Errorf("Text(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

// FuzzMembers holds Members and Text to encoding/json: same members, same
// raw values, same decoded strings, and an error exactly when it has one.
func FuzzMembers(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(data, &want)
		got := map[string][]byte{}
		err := Members(data, func(key, value []byte, kind Kind) error {
			got[string(key)] = value
			if kind == String {
				var ws string
				if err := json.Unmarshal(value, &ws); err != nil {
					t.Fatalf("value %q: encoding/json: %v", value, err)
				}
				if s, err := Text(value); err != nil || s != ws {
					t.Fatalf("Text(%q) = %q, %v; encoding/json %q", value, s, err, ws)
				}
			}
			return nil
		})
		if (err != nil) != (wantErr != nil || want == nil) {
			t.Fatalf("Members(%q) err = %v, encoding/json err = %v (map %v)", data, err, wantErr, want)
		}
		if err != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("Members(%q) got %d members, encoding/json %d", data, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("member %q = %q, encoding/json %q", k, got[k], v)
			}
		}
	})
}

// FuzzAppendStringAt holds the one-pass decoder to the two passes it
// replaces: the string Value finds, decoded by Text (held to encoding/json
// by FuzzMembers), and an error exactly when Value has one.
func FuzzAppendStringAt(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s + `,"next"`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		text, end, err := AppendStringAt([]byte("dst:"), data, 0)
		kind, wantEnd, wantErr := scanValue(data, 0, 1)
		if kind != String || wantErr != nil {
			if err == nil {
				t.Fatalf("AppendStringAt(%q) = %q, not an error; Value: %v, %v", data, text, kind, wantErr)
			}
			return
		}
		want, _ := Text(data[:wantEnd])
		if err != nil || end != wantEnd || string(text) != "dst:"+want {
			t.Fatalf("AppendStringAt(%q) = %q, %d, %v; want %q, %d", data, text, end, err, want, wantEnd)
		}
	})
}

// FuzzWalkAt: a decoder that walks every nested object and array itself,
// with WalkAt and ElementsAt, and reads the rest with ValueAt, accepts
// exactly what encoding/json accepts.
func FuzzWalkAt(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var walk func(i, depth int) (int, error)
		walk = func(i, depth int) (int, error) {
			if depth > maxDepth {
				return i, errors.New("too deep")
			}
			switch {
			case i < len(data) && data[i] == '{':
				return WalkAt(data, i, func(_ []byte, i int) (int, error) { return walk(i, depth+1) })
			case i < len(data) && data[i] == '[':
				return ElementsAt(data, i, func(i int) (int, error) { return walk(i, depth+1) })
			}
			_, end, err := ValueAt(data, i)
			return end, err
		}
		end, err := walk(SkipSpace(data, 0), 1)
		if got, want := err == nil && trailing(data, end) == nil, json.Valid(data); got != want {
			t.Fatalf("walking %q: accepted %v (%v), encoding/json %v", data, got, err, want)
		}
	})
}

func FuzzElements(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want []json.RawMessage
		wantErr := json.Unmarshal(data, &want)
		var got [][]byte
		err := Elements(data, func(value []byte, _ Kind) error { got = append(got, value); return nil })
		if (err != nil) != (wantErr != nil || want == nil) {
			t.Fatalf("Elements(%q) err = %v, encoding/json err = %v", data, err, wantErr)
		}
		if err == nil && len(got) != len(want) {
			t.Fatalf("Elements(%q) got %d, encoding/json %d", data, len(got), len(want))
		}
		for i := range got {
			if err == nil && !bytes.Equal(got[i], want[i]) {
				t.Fatalf("element %d = %q, encoding/json %q", i, got[i], want[i])
			}
		}
	})
}

func BenchmarkMembersSNSEnvelope(b *testing.B) {
	body := []byte(`{"Type":"Notification","MessageId":"22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324","TopicArn":"arn:aws:sns:us-east-1:123456789012:cache-changes","Message":"{\"entity\":\"product\",\"id\":\"4242\"}","Timestamp":"2026-11-29T12:00:00.000Z","SignatureVersion":"1","Signature":"` + strings.Repeat("EXAMPLEpH+DcEwjAPg8O9mY8dReBSwksfg2S7WKQcikcNKWLQjw", 7) + `","SigningCertURL":"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000.pem","UnsubscribeURL":"https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-1:123456789012:cache-changes:c9135db0"}`)
	var buf []byte
	for b.Loop() {
		_ = Members(body, func(key, value []byte, kind Kind) error {
			if string(key) == "Message" {
				buf, _ = AppendText(buf[:0], value)
			}
			return nil
		})
	}
}

// FuzzMemberElements holds MemberElements to Members and Elements: on valid
// JSON, the same elements; on any input, when it finds elements that are
// each valid JSON, the input was valid — skimming an element never hides
// a fault outside it.
func FuzzMemberElements(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"b":{"a":[0]},"a":[1, {"a":[2]}, "x"] ,"a":[],"c":null}`))
	f.Add([]byte(`{"a":{}}`))
	f.Add([]byte(`{"a":[{"b":"x\"]"},[{"c":[1,]}],{"d":"\u12"}]}`))
	f.Add([]byte(`{"a":[{"b":"}"}, {"c":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want [][]byte
		err := MemberElements(data, "a", func(value []byte, _ Kind) error { got = append(got, value); return nil })
		found := false
		wantErr := Members(data, func(key, value []byte, kind Kind) error {
			if string(key) != "a" {
				return nil
			}
			found = true
			if kind != Array {
				return errors.New("not an array")
			}
			return Elements(value, func(value []byte, _ Kind) error { want = append(want, value); return nil })
		})
		if wantErr == nil && !found {
			if !errors.Is(err, ErrNoMember) {
				t.Fatalf("MemberElements(%q) = %v, want ErrNoMember", data, err)
			}
			return
		}
		if wantErr == nil && (err != nil || !slices.EqualFunc(got, want, bytes.Equal)) {
			t.Fatalf("MemberElements(%q) = %q, %v; Members and Elements %q", data, got, err, want)
		}
		if err == nil && wantErr != nil && !slices.ContainsFunc(got, func(v []byte) bool { return !Valid(v) }) {
			t.Fatalf("MemberElements(%q) = %q, every one valid, but Members and Elements: %v", data, got, wantErr)
		}
	})
}

// BenchmarkAppendTextSQSBody unescapes an SNS envelope as it comes as the
// body of an SQS record in a Lambda payload: long runs between escapes.
func BenchmarkAppendTextSQSBody(b *testing.B) {
	envelope := `{"Type":"Notification","MessageId":"22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324","Message":"{\"entity\":\"product\",\"id\":\"4242\"}","Signature":"` + strings.Repeat("EXAMPLEpH+DcEwjAPg8O9mY8dReBSwksfg2S7WKQcikcNKWLQjw", 7) + `","UnsubscribeURL":"https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-1:123456789012:cache-changes:c9135db0"}`
	raw, _ := json.Marshal(envelope)
	var buf []byte
	for b.Loop() {
		buf, _ = AppendText(buf[:0], raw)
	}
}

// TestSpecial puts each character that ends a run at every position of
// runs of every length up to past the first words, and of lengths around
// the windows beyond them, among plain ASCII and among bytes with the high
// bit set (which the word tricks must not mistake for control characters).
func TestSpecial(t *testing.T) {
	lengths := []int{255, 256, 257, 271, 272, 273, 288, 300, 511, 512, 513, 529, 600}
	for n := range 100 {
		lengths = append(lengths, n)
	}
	for _, filler := range []byte{'a', ' ', 0x80, 0xa2, 0xdc, 0xff} {
		for _, n := range lengths {
			s := bytes.Repeat([]byte{filler}, n)
			if got := special(s); got != n {
				t.Fatalf("filler %#x, length %d, nothing special: got %d", filler, n, got)
			}
			for p := range n {
				for _, c := range []byte{'"', '\\', 0, 0x1f, '\n'} {
					s[p] = c
					if got := special(s); got != p {
						t.Fatalf("filler %#x, length %d, %q at %d: got %d", filler, n, c, p, got)
					}
					if p+1 < n { // a second one after the first changes nothing
						s[n-1] = '"'
						if got := special(s); got != p {
							t.Fatalf("filler %#x, length %d, %q at %d and a quote at the end: got %d", filler, n, c, p, got)
						}
						s[n-1] = filler
					}
					s[p] = filler
				}
			}
		}
	}
}

// BenchmarkValidManyEscapes is a string at SQS's 256 KiB limit with an
// escape every 20 bytes: linear, not the quadratic of looking for the
// closing quote again after every escape.
func BenchmarkValidManyEscapes(b *testing.B) {
	body := append([]byte{'"'}, bytes.Repeat([]byte(`abcdefghijklmnopqr\n`), 256<<10/20)...)
	body = append(body, '"')
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !Valid(body) {
			b.Fatal("invalid")
		}
	}
}
