package invalidate_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
)

// The batch logic against a cache in memory: the tests of the same
// behaviour on the real cluster (invalidate_test.go) skip with -short.

func TestBadRecordsFailAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cache := &cachetest.Cache{}
	rep := invalidate.New(cache, fast()).Invalidate(ctx, invalidate.Decoded([]invalidate.Record{
		{ID: "ok", Changes: []events.Change{{Entity: "user", ID: "1"}}},
		{ID: "bad-json", Err: errMalformed},
		{ID: "no-id", Changes: []events.Change{{Entity: "user", ID: "2"}, {Entity: "user"}}},
	}))
	var failed []string
	for _, res := range rep.Results {
		if res.Err != nil {
			failed = append(failed, res.Record)
		}
	}
	if got := fmt.Sprint(failed); got != "[bad-json no-id]" {
		t.Fatalf("failed = %s, want [bad-json no-id]", got)
	}
	if !errors.Is(rep.Results[1].Err, errMalformed) || !errors.Is(rep.Results[2].Err, invalidate.ErrPlan) {
		t.Fatalf("errors = %v / %v", rep.Results[1].Err, rep.Results[2].Err)
	}
	if rep.Results[1].Transient || rep.Results[2].Transient {
		t.Fatal("a record that cannot be decoded or planned failed for now")
	}
	// The planned key of the failing record is deleted all the same.
	if cache.Attempts("cache:user:2") != 1 || cache.Attempts("cache:user:1") != 1 {
		t.Fatal("the planned keys were not each sent once")
	}
}

func TestInputsDecodeInChunksAndDeleteEachKeyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cache := &cachetest.Cache{}
	inputs := make([]int, 1000)
	for i := range inputs {
		inputs[i] = i
	}
	rep := invalidate.New(cache, fast()).Invalidate(ctx, invalidate.Inputs(inputs, func(i *int) invalidate.Record {
		if *i%97 == 0 {
			panic("decoder bug")
		}
		// Inputs i and i+500 change the same item, in chunks far apart.
		return invalidate.Record{ID: strconv.Itoa(*i), Changes: []events.Change{{Entity: "item", ID: strconv.Itoa(*i % 500)}}}
	}))
	for i, res := range rep.Results {
		switch {
		case i%97 == 0:
			if !errors.Is(res.Err, invalidate.ErrInternal) || !strings.Contains(res.Err.Error(), "decoder bug") || res.Transient {
				t.Fatalf("input %d: err = %v, want the decoder's panic, for good", i, res.Err)
			}
		case res.Err != nil || res.Record != strconv.Itoa(i) || len(res.Keys) != 1:
			t.Fatalf("result %d = %+v", i, res)
		}
	}
	if m := rep.Metrics; m.KeysDeleted != 500 || m.Failed != 11 {
		t.Fatalf("metrics = %+v, want 500 distinct keys deleted, 11 records failed", m)
	}
	for i := range 500 {
		if n := cache.Attempts("cache:item:" + strconv.Itoa(i)); n != 1 {
			t.Fatalf("cache:item:%d sent %d times, want once", i, n)
		}
	}
}

// errMalformed is a record's decoding error: it fails the record for good.
var errMalformed = errors.New("malformed JSON")
