package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The fuzzers hold every decoder to its promise: any input gives changes or
// an error wrapping errInvalid, never a panic. Their corpora start from the
// records in testdata.

// sqsEvent and snsEvent read fixtures with encoding/json, the reference
// the decoders are held to.
type sqsEvent struct {
	Records []struct {
		MessageID  string            `json:"messageId"`
		Body       string            `json:"body"`
		Attributes map[string]string `json:"attributes"`
	}
}

type snsEvent struct{ Records []SNSRecord }

func fixtureRecords[E any](f *testing.F, glob string, records func(E) [][]byte) {
	files, _ := filepath.Glob(filepath.Join("testdata", glob))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var ev E
		if err := json.Unmarshal(data, &ev); err != nil {
			continue // a golden file
		}
		for _, r := range records(ev) {
			f.Add(r)
		}
	}
}

// rawRecords adds each record of the fixtures, as SplitRecords finds them.
func rawRecords(f *testing.F, glob string) {
	files, _ := filepath.Glob(filepath.Join("testdata", glob))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		raws, _ := SplitRecords(data) // a golden file has none
		for _, raw := range raws {
			f.Add(raw)
		}
	}
}

func checkDecoded(t *testing.T, changes []Change, err error) {
	if err != nil && !errors.Is(err, errInvalid) {
		t.Fatalf("error does not wrap errInvalid: %v", err)
	}
	if err == nil && len(changes) == 0 {
		t.Fatal("no changes and no error")
	}
	// Changes returned beside an error are the valid part of the body.
	for _, c := range changes {
		if c.Entity == "" && len(c.Keys) == 0 && len(c.Tags) == 0 {
			t.Fatalf("change without entity, keys or tags: %+v", c)
		}
	}
}

func FuzzDecodeSQSBody(f *testing.F) {
	fixtureRecords(f, "sqs-*.json", func(ev sqsEvent) (out [][]byte) {
		for _, m := range ev.Records {
			out = append(out, []byte(m.Body))
		}
		return out
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		changes, err := DecodeSQSBody("fuzz", string(body), "")
		checkDecoded(t, changes, err)
	})
}

func FuzzDecodeSQSJSON(f *testing.F) {
	rawRecords(f, "sqs-*.json")
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, changes, err := DecodeSQSJSON(raw)
		if err == nil && !json.Valid(raw) {
			t.Fatalf("DecodeSQSJSON(%q) took invalid JSON", raw)
		}
		checkDecoded(t, changes, err)
	})
}

func FuzzDecodeSNS(f *testing.F) {
	fixtureRecords(f, "sns*.json", func(ev snsEvent) (out [][]byte) {
		for _, r := range ev.Records {
			out = append(out, []byte(r.SNS.Message))
		}
		return out
	})
	f.Fuzz(func(t *testing.T, message []byte) {
		rec := SNSRecord{SNS: SNSMessage{MessageID: "fuzz", Message: string(message)}}
		changes, err := DecodeSNS(rec)
		checkDecoded(t, changes, err)
	})
}

func FuzzDecodeDynamoDBJSON(f *testing.F) {
	rawRecords(f, "dynamodb*.json")
	f.Fuzz(func(t *testing.T, raw []byte) {
		// What rules read of the images, a map's member and a list among
		// them, reads as it does decoded whole: the same texts for a key.
		_, part, perr := DecodeDynamoDBJSON(raw, Attributes{"category": {}, "brand": {"name": {}}, "related": {}})
		_, c, err := DecodeDynamoDBJSON(raw, nil)
		if err == nil && !json.Valid(raw) || perr == nil && !json.Valid(raw) {
			t.Fatalf("DecodeDynamoDBJSON(%q) took invalid JSON", raw)
		}
		if err == nil {
			for _, path := range [][]string{{"category"}, {"brand", "name"}, {"related"}} {
				text := func(image Image) string {
					av, ok := image.Lookup(path)
					texts, err := av.Text()
					return fmt.Sprint(ok, texts, err)
				}
				if perr != nil || part.ID != c.ID || text(part.NewImage) != text(c.NewImage) || text(part.OldImage) != text(c.OldImage) {
					t.Fatalf("DecodeDynamoDBJSON(%q) in part: %v, %+v; whole %+v", raw, perr, part, c)
				}
			}
		}
		if err != nil {
			checkDecoded(t, nil, err)
			return
		}
		checkDecoded(t, []Change{c}, nil)
		for _, image := range []Image{c.ItemKey, c.OldImage, c.NewImage} {
			for _, av := range image {
				_, _ = av.Text() // must not panic on any attribute
			}
		}
	})
}
