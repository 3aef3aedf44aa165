package main

import (
	"context"
	"errors"
	"log"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/writethrough"
)

// readsGroup measures writethrough's reads: its hits against plain GETs,
// its loads under a stampede, and GetMany.
func readsGroup(ctx context.Context, s server) {
	hits, plains := getHits(ctx, s.client)
	print("get_hit_ops_per_sec", median(hits))
	print("plain_get_ops_per_sec", median(plains))
	print("get_hit_vs_plain_get", medianRatio(hits, plains))
	print("stampede_loads", float64(stampede(s.cfg)))
	getManyLines(ctx, s.client)
}

type product struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Price int64  `json:"price"`
}

// getHits returns the hits/s of writethrough's Get and the GETs/s of a
// plain GET loop on the same key, each from 16 goroutines, in three rounds.
func getHits(ctx context.Context, client valkey.Client) (hit, plain []float64) {
	const workers, each = 16, 20_000
	cache := writethrough.New[product](client, writethrough.Options[product]{})
	key := "bench:get:{p}"
	if _, err := cache.Get(ctx, key, func(context.Context) (product, error) {
		return product{ID: "42", Name: "Walking boots", Price: 8999}, nil
	}); err != nil {
		log.Fatal(err)
	}
	// Rounds of both, back to back, as for the pipeline: the medians count.
	var hits, plains []float64
	for range 3 {
		plains = append(plains, opsPerSec(workers, each, func() error { return client.Do(ctx, client.B().Get().Key(key).Build()).Error() }))
		hits = append(hits, opsPerSec(workers, each, func() error { _, err := cache.Get(ctx, key, hitOnly); return err }))
	}
	return hits, plains
}

// hitOnly is the loader of a key that must be cached.
func hitOnly(context.Context) (product, error) { return product{}, errors.New("a hit was expected") }

// opsPerSec runs op each times on each of workers goroutines and returns
// how many a second they did together.
func opsPerSec(workers, each int, op func() error) float64 {
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range each {
				if err := op(); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	return float64(workers*each) / time.Since(start).Seconds()
}

// stampede returns how often the loader runs when 200 readers, spread over
// 10 clients as over 10 processes, ask for one missing key at once.
func stampede(cfg elasticache.Config) int32 {
	key := "bench:stampede:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	var loads atomic.Int32
	load := func(context.Context) (product, error) {
		loads.Add(1)
		time.Sleep(50 * time.Millisecond)
		return product{ID: "hot"}, nil
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		client, err := elasticache.New(cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer client.Close()
		cache := writethrough.New[product](client, writethrough.Options[product]{})
		for range 20 {
			wg.Go(func() {
				<-start
				if _, err := cache.Get(context.Background(), key, load); err != nil {
					log.Fatal(err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return loads.Load()
}
