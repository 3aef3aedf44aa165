package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/writethrough"
)

// getManyLines measures GetMany: 100 cached keys, over as many slots,
// read by GetMany against one DoMulti of plain GETs (the limit) and against
// 100 Gets one after another; and the loader's calls for 100 misses. The
// values go through a codec that copies their bytes, so that the ratio is
// GetMany's cost, not encoding/json's; the JSON line gives that.
func getManyLines(ctx context.Context, client valkey.Client) {
	const n, workers, each = 100, 8, 300
	cache := writethrough.New[product](client, writethrough.Options[product]{})
	raw := writethrough.New[string](client, writethrough.Options[string]{Codec: bytesCodec{}})
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:many:%d", i)
	}
	if _, err := cache.GetMany(ctx, keys, loadAll); err != nil {
		log.Fatal(err)
	}
	rawKeys := make([]string, n)
	for i := range rawKeys {
		rawKeys[i] = fmt.Sprintf("bench:many:raw:%d", i)
	}
	if _, err := raw.GetMany(ctx, rawKeys, loadJSON); err != nil {
		log.Fatal(err)
	}
	var many, multi, gets, json []float64
	for range 3 {
		multi = append(multi, opsPerSec(workers, each, func() error {
			cmds := make(valkey.Commands, n)
			for i, k := range keys {
				cmds[i] = client.B().Get().Key(k).Build()
			}
			for _, r := range client.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					return err
				}
			}
			return nil
		}))
		many = append(many, opsPerSec(workers, each, func() error {
			_, err := raw.GetMany(ctx, rawKeys, nil)
			return err
		}))
		json = append(json, opsPerSec(workers, each, func() error {
			_, err := cache.GetMany(ctx, keys, noLoads)
			return err
		}))
		gets = append(gets, opsPerSec(workers, each/10, func() error {
			for _, k := range keys {
				if _, err := cache.Get(ctx, k, hitOnly); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	print("get_many_100_per_sec", median(many))
	print("get_many_vs_domulti", medianRatio(many, multi))
	print("get_many_json_vs_domulti", medianRatio(json, multi))
	print("get_many_100_vs_100_gets", medianRatio(json, gets))

	var calls atomic.Int32
	missing := make([]string, n)
	for i := range missing {
		missing[i] = fmt.Sprintf("bench:many:missing:%d:%d", time.Now().UnixNano(), i)
	}
	if _, err := cache.GetMany(ctx, missing, func(ctx context.Context, keys []string) (map[string]product, error) {
		calls.Add(1)
		return loadAll(ctx, keys)
	}); err != nil {
		log.Fatal(err)
	}
	print("get_many_loader_calls", float64(calls.Load()))
}

// loadAll loads a product for each of keys.
func loadAll(_ context.Context, keys []string) (map[string]product, error) {
	vs := make(map[string]product, len(keys))
	for _, k := range keys {
		vs[k] = product{ID: k, Name: "Walking boots", Price: 8999}
	}
	return vs, nil
}

// loadJSON loads a product's JSON for each of keys.
func loadJSON(_ context.Context, keys []string) (map[string]string, error) {
	vs := make(map[string]string, len(keys))
	for _, k := range keys {
		vs[k] = `{"id":"42","name":"Walking boots","price":8999}`
	}
	return vs, nil
}

// bytesCodec stores strings as they are, and reads them without a copy: a
// view of the reply's bytes, as valkey-go's AsBytes is, so that the ratio
// is GetMany's cost alone.
type bytesCodec struct{}

func (bytesCodec) Marshal(v string) ([]byte, error) { return []byte(v), nil }
func (bytesCodec) Unmarshal(data []byte) (string, error) {
	return unsafe.String(unsafe.SliceData(data), len(data)), nil
}

// noLoads is the loader of keys that must be cached.
func noLoads(context.Context, []string) (map[string]product, error) {
	return nil, errors.New("hits were expected")
}
