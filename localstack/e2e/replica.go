package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"
)

// replicaReads measures what a reader of the shard's replica (READONLY, as
// on a node-based cluster, or ElastiCache Serverless's port 6380) sees
// after an invalidation has finished: n times, a key is set on the master
// and seen on the replica, then deleted on the master, and the replica is
// read from the moment the delete's answer came until it no longer serves
// the value. Replication is asynchronous, so it may for a while: this is
// outside what the invalidator promises, and the docs say by how much.
func (s *stack) replicaReads(ctx context.Context, n int) (stale []time.Duration, err error) {
	master, err := s.nodeClient(s.shard.master)
	if err != nil {
		return nil, err
	}
	defer master.Close()
	replica, err := s.nodeClient(s.shard.replica)
	if err != nil {
		return nil, err
	}
	defer replica.Close()
	err = replica.Dedicated(func(r valkey.DedicatedClient) error {
		if err := r.Do(ctx, r.B().Readonly().Build()).Error(); err != nil {
			return err
		}
		read := func(key string) (string, error) {
			v, err := r.Do(ctx, r.B().Get().Key(key).Build()).ToString()
			if valkey.IsValkeyNil(err) {
				return "", nil
			}
			return v, err
		}
		for i := 0; len(stale) < n; i++ {
			key := "e2e:replica-read:" + strconv.Itoa(i)
			if err := master.Do(ctx, master.B().Set().Key(key).Value("cached").Build()).Error(); err != nil {
				if verr, ok := valkey.IsValkeyErr(err); ok {
					if _, moved := verr.IsMoved(); moved { // a slot of another shard
						continue
					}
				}
				return err
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				if v, err := read(key); err != nil || v == "cached" {
					if err != nil {
						return err
					}
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("the replica on %d never had %s", s.shard.replica, key)
				}
			}
			if err := master.Do(ctx, master.B().Unlink().Key(key).Build()).Error(); err != nil {
				return err
			}
			finished, served := time.Now(), time.Duration(0)
			for {
				v, err := read(key)
				if err != nil {
					return err
				}
				if v == "" {
					break
				}
				served = time.Since(finished) // the value, after its delete finished
			}
			stale = append(stale, served)
		}
		return nil
	})
	return stale, err
}

// nodeClient is a connection to the one node on port.
func (s *stack) nodeClient(port int) (valkey.Client, error) {
	cfg := s.env.cache
	cfg.Endpoint = "127.0.0.1:" + strconv.Itoa(port)
	opt, err := cfg.ClientOption()
	if err != nil {
		return nil, err
	}
	opt.ForceSingleClient = true
	return valkey.NewClient(opt)
}

// printReplicaReads writes how often, and for how long, the replica served
// a value after its delete had finished on the master.
func printReplicaReads(stale []time.Duration) {
	if len(stale) == 0 {
		return
	}
	served := 0
	for _, d := range stale {
		if d > 0 {
			served++
		}
	}
	fmt.Printf("E2E replica_reads_after_delete %d\n", len(stale))
	fmt.Printf("E2E replica_stale_after_delete_pct %.1f\n", 100*float64(served)/float64(len(stale)))
	fmt.Printf("E2E replica_stale_after_delete_p99_us %d\n", percentile(stale, 0.99).Microseconds())
	fmt.Printf("E2E replica_stale_after_delete_max_us %d\n", percentile(stale, 1).Microseconds())
}
