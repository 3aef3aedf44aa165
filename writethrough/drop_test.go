package writethrough

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestAStaleLeaseIsDropped: a lease that will not expire by itself within
// LeaseTTL — PERSISTed, set by someone else without a TTL or with a longer
// one — was left by no loader that can still fill: the Get drops it, loads
// under a lease of its own and fills, without waiting LeaseTTL. A lease
// that will expire within LeaseTTL is a loader's, and is waited on.
func TestAStaleLeaseIsDropped(t *testing.T) {
	client := testenv.Cache(t)
	var log bytes.Buffer
	c := New[product](client, Options[product]{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	lease := entry{kind: kindLease, stamp: stamp()}.encode()
	for _, tc := range []struct {
		name  string
		plant func(k string) valkey.Completed
		then  func(k string) valkey.Completed
		stale bool
	}{
		{"PERSISTed", func(k string) valkey.Completed {
			return client.B().Set().Key(k).Value(lease).Nx().Px(c.opts.LeaseTTL).Build()
		},
			func(k string) valkey.Completed { return client.B().Persist().Key(k).Build() }, true},
		{"set without a TTL", func(k string) valkey.Completed { return client.B().Set().Key(k).Value(lease).Build() }, nil, true},
		{"set without a TTL, lease-shaped", func(k string) valkey.Completed { return client.B().Set().Key(k).Value(magic + "l|x|").Build() }, nil, true},
		{"set for longer than LeaseTTL", func(k string) valkey.Completed { return client.B().Set().Key(k).Value(lease).Ex(time.Hour).Build() }, nil, true},
		{"a loader's, 500 ms left", func(k string) valkey.Completed {
			return client.B().Set().Key(k).Value(lease).Px(500 * time.Millisecond).Build()
		}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := key(t)
			for _, cmd := range []func(string) valkey.Completed{tc.plant, tc.then} {
				if cmd != nil {
					if err := client.Do(t.Context(), cmd(k)).Error(); err != nil {
						t.Fatal(err)
					}
				}
			}
			start := time.Now()
			v, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "source"}, nil })
			took := time.Since(start)
			if err != nil || v.ID != "source" {
				t.Fatalf("Get = %+v, %v", v, err)
			}
			switch {
			case tc.stale && took > c.opts.LeaseTTL/3:
				t.Fatalf("the Get took %v: it waited on a lease that no loader will fill", took)
			case !tc.stale && took < 400*time.Millisecond:
				t.Fatalf("the Get took %v: it did not wait for a loader's lease", took)
			}
			raw, err := client.Do(t.Context(), client.B().Get().Key(k).Build()).AsBytes()
			if e, derr := decodeEntry(raw); err != nil || derr != nil || e.kind != kindValue {
				t.Fatalf("the key holds %q (%v): want the value filled", raw, err)
			}
			if ttl, _ := client.Do(t.Context(), client.B().Pttl().Key(k).Build()).AsInt64(); ttl <= 0 {
				t.Fatalf("the fill's TTL is %d", ttl)
			}
		})
	}
	if s := c.Stats(); s != (Stats{StaleLeases: 4}) {
		t.Errorf("Stats = %+v, want the 4 stale leases", s)
	}
	if n := strings.Count(log.String(), "stale lease dropped"); n != 4 {
		t.Errorf("%d log lines of stale leases, want 4:\n%s", n, log.String())
	}
}

// TestForeignValuesAreCounted: what a Cache finds at its keys and did not
// store — a string of someone else's, a value of another type, an entry
// whose payload its Codec refuses — is dropped, counted in Stats and
// logged with its key, and the Get loads and fills.
func TestForeignValuesAreCounted(t *testing.T) {
	client := testenv.Cache(t)
	var log bytes.Buffer
	c := New[product](client, Options[product]{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	for _, tc := range []struct {
		name  string
		plant func(k string) valkey.Completed
		want  Stats
		line  string
	}{
		{"a string of someone else's", func(k string) valkey.Completed { return client.B().Set().Key(k).Value("not an envelope").Build() },
			Stats{Foreign: 1}, "foreign value dropped"},
		{"a hash", func(k string) valkey.Completed {
			return client.B().Hset().Key(k).FieldValue().FieldValue("f", "v").Build()
		},
			Stats{Foreign: 2}, "foreign value dropped"},
		{"a payload that does not decode", func(k string) valkey.Completed {
			e := entry{kind: kindValue, stamp: "s", expiry: time.Now().Add(time.Hour), payload: []byte("{broken")}
			return client.B().Set().Key(k).Value(e.encode()).Build()
		}, Stats{Foreign: 2, Undecodable: 1}, "payload does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := key(t)
			if err := client.Do(t.Context(), tc.plant(k)).Error(); err != nil {
				t.Fatal(err)
			}
			log.Reset()
			for range 2 { // the second Get hits the fill
				v, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "source"}, nil })
				if err != nil || v.ID != "source" {
					t.Fatalf("Get = %+v, %v", v, err)
				}
			}
			raw, err := client.Do(t.Context(), client.B().Get().Key(k).Build()).AsBytes()
			if e, derr := decodeEntry(raw); err != nil || derr != nil || e.kind != kindValue {
				t.Fatalf("the key holds %q (%v): want the value filled", raw, err)
			}
			if s := c.Stats(); s != tc.want {
				t.Errorf("Stats = %+v, want %+v", s, tc.want)
			}
			if !strings.Contains(log.String(), tc.line) || !strings.Contains(log.String(), "key="+k) || strings.Count(log.String(), "\n") != 1 {
				t.Errorf("want one line %q naming the key; logged:\n%s", tc.line, log.String())
			}
		})
	}
}
