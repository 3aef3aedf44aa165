package invalidate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
)

func tagged(id string, tags ...string) invalidate.Record {
	return invalidate.Record{ID: id, Changes: []events.Change{{Tags: tags}}}
}

// entries registers n keys in the tag at key, in the fake.
func entries(cache *cachetest.Cache, key string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:entry:%04d", key, i) // in the fake's order
	}
	cache.Tag(key, keys...)
	return keys
}

func TestATagDeletesItsEntriesPageByPage(t *testing.T) {
	cache := &cachetest.Cache{}
	entries(cache, "cache:tag:big", 2500) // three pages
	entries(cache, "cache:tag:small", 3)
	opts := fast()
	rep := invalidate.New(cache, opts).Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{
		tagged("1", "big"), tagged("2", "small", "big"), tagged("3", "unknown")}))
	for _, res := range rep.Results {
		if res.Err != nil {
			t.Fatalf("record %s: %v", res.Record, res.Err)
		}
	}
	if got := rep.Results[1].Tags; len(got) != 2 || got[0].Tag != "small" || got[0].Deleted != 3 || len(got[0].Entries) != 3 ||
		got[1].Deleted != 2500 || len(got[1].Entries) != 2500 || got[1].Incomplete {
		t.Fatalf("record 2's tags: %+v", got)
	}
	if m := rep.Metrics; m.TagsInvalidated != 3 || m.TagsFailed != 0 || m.TagEntriesDeleted != 2503 {
		t.Fatalf("metrics %+v: want 3 tags, 2,503 entries", m)
	}
	if left := cache.Members("cache:tag:big"); len(left) != 0 {
		t.Fatalf("%d registrations left in the tag", len(left))
	}
}

func TestATagThatFailsIsReadAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      func(key string, attempt int) error
		transient bool
		left      int // registrations left in the tag
	}{
		{"an entry that cannot be deleted for now stays registered", func(key string, _ int) error {
			if key == "cache:tag:t:entry:1500" {
				return cachetest.ErrRefused
			}
			return nil
		}, true, 501}, // it, and the third page, not read
		{"an entry refused to the user stays registered, the pages after it are read", func(key string, _ int) error {
			if key == "cache:tag:t:entry:1500" {
				return cachetest.ErrNoPerm
			}
			return nil
		}, false, 1}, // it alone: the others are deleted, not left to their TTL
		{"the tag's node down for now", func(key string, _ int) error {
			if key == "cache:tag:t" {
				return cachetest.ErrRefused
			}
			return nil
		}, true, 2500},
		{"the tag refused to the user", func(key string, _ int) error {
			if key == "cache:tag:t" {
				return cachetest.ErrNoPerm
			}
			return nil
		}, false, 2500},
		{"the tag down a while", func(key string, attempt int) error {
			if key == "cache:tag:t" && attempt < 4 {
				return cachetest.ErrRefused
			}
			return nil
		}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := &cachetest.Cache{Fail: tc.fail}
			entries(cache, "cache:tag:t", 2500)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			in := invalidate.Decoded([]invalidate.Record{tagged("1", "t")})
			in.RetryFor = 100 * time.Millisecond
			res := invalidate.New(cache, fast()).Invalidate(ctx, in).Results[0]
			var tagErr *invalidate.TagError
			switch {
			case tc.left == 0 && res.Err != nil:
				t.Fatalf("record: %v, want it done once the tag answers", res.Err)
			case tc.left > 0 && (!errors.As(res.Err, &tagErr) || tagErr.Tag != "t" || res.Transient != tc.transient):
				t.Fatalf("record: %v (transient %v), want the tag's error, transient %v", res.Err, res.Transient, tc.transient)
			}
			if left := len(cache.Members("cache:tag:t")); left != tc.left {
				t.Fatalf("%d registrations left, want %d", left, tc.left)
			}
		})
	}
}

// TestATagEntryOutsideTheAllowedKeysIsKept: the worker deletes only keys
// the rules' allowedKeys allow, planned or registered in a tag by a
// service; the others stay registered, fail the record for good, and the
// rest of the tag goes.
func TestATagEntryOutsideTheAllowedKeysIsKept(t *testing.T) {
	cache := &cachetest.Cache{}
	cache.Tag("cache:tag:t", "cache:a", "session:b", "cache:c")
	rules, err := invalidate.NewRules(invalidate.RulesConfig{AllowedKeys: []string{"cache:*"}})
	if err != nil {
		t.Fatal(err)
	}
	opts := fast()
	opts.Rules = rules
	rep := invalidate.New(cache, opts).Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{tagged("1", "t")}))
	res := rep.Results[0]
	if !errors.Is(res.Err, invalidate.ErrPlan) || res.Transient || !strings.Contains(res.Err.Error(), "session:b") {
		t.Fatalf("record: %v (transient %v), want the entry outside cache:* for good", res.Err, res.Transient)
	}
	if left := cache.Members("cache:tag:t"); len(left) != 1 || left[0] != "session:b" || rep.Metrics.TagEntriesDeleted != 2 {
		t.Fatalf("left %v, %d deleted: want session:b alone kept", left, rep.Metrics.TagEntriesDeleted)
	}
}

// TestATransientTagOutranksAPlan: a record whose key cannot be planned and
// whose tag fails for now is retried, as with keys.
func TestATransientTagOutranksAPlan(t *testing.T) {
	cache := &cachetest.Cache{Fail: func(key string, _ int) error {
		if strings.HasPrefix(key, "cache:tag:") {
			return cachetest.ErrRefused
		}
		return nil
	}}
	rec := invalidate.Record{ID: "1", Changes: []events.Change{{Entity: "user"}, {Tags: []string{"t"}}}} // no id: no key
	in := invalidate.Decoded([]invalidate.Record{rec})
	in.RetryFor = 20 * time.Millisecond
	res := invalidate.New(cache, fast()).Invalidate(t.Context(), in).Results[0]
	if !res.Transient || !errors.Is(res.Err, syscall.ECONNREFUSED) {
		t.Fatalf("record: %v (transient %v), want the tag's failure for now first", res.Err, res.Transient)
	}
}

// TestKeysAndTagsShareTheBatchsRetries: a key and a tag on a node that is
// down are retried in the same window, RetryFor, not one after the other:
// a batch's answer does not wait for each in turn.
func TestKeysAndTagsShareTheBatchsRetries(t *testing.T) {
	cache := &cachetest.Cache{Fail: func(key string, _ int) error {
		if key == "cache:user:1" || key == "cache:tag:t" {
			return cachetest.ErrRefused
		}
		return nil
	}}
	entries(cache, "cache:tag:t", 3)
	in := invalidate.Decoded([]invalidate.Record{{ID: "1", Changes: []events.Change{{Entity: "user", ID: "1", Tags: []string{"t"}}}}})
	in.RetryFor = time.Second
	start := time.Now()
	res := invalidate.New(cache, fast()).Invalidate(t.Context(), in).Results[0]
	if took := time.Since(start); res.Err == nil || !res.Transient || took > 1800*time.Millisecond {
		t.Fatalf("after %v: %v (transient %v), want the record failed for now within about 1 s", took, res.Err, res.Transient)
	}
}
