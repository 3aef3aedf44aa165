package main

import (
	"context"
	"log"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/recipes/lock"
)

// lockGroup measures recipes/lock's Extend and Release on an engine that
// has SET … IFEQ and DELIFEQ (Valkey 9) against the same calls through a
// user refused COMMAND, which cannot ask and so runs the scripts: cycles a
// second from 16 goroutines and the server's CPU per cycle, rounds
// alternated, the ratios' medians.
func lockGroup(ctx context.Context, s server) {
	scripts := scriptsOnly(ctx, s)
	defer scripts.Close()
	var nativeRate, scriptRate, nativeCPU, scriptCPU []float64
	for range 3 {
		for _, c := range []struct {
			client    valkey.Client
			rate, cpu *[]float64
		}{{s.client, &nativeRate, &nativeCPU}, {scripts, &scriptRate, &scriptCPU}} {
			const workers, each = 16, 2_000
			before := s.used()
			*c.rate = append(*c.rate, opsPerSec(workers, each, func() error { return lockCycle(ctx, c.client) }))
			*c.cpu = append(*c.cpu, float64(s.used()-before)/float64(time.Microsecond)/(workers*each))
		}
	}
	print("lock_native_cycles_per_sec", median(nativeRate))
	print("lock_script_cycles_per_sec", median(scriptRate))
	print("lock_native_vs_script", medianRatio(nativeRate, scriptRate))
	if s.local {
		print("lock_native_server_cpu_us", median(nativeCPU))
		print("lock_script_server_cpu_us", median(scriptCPU))
	}
}

// lockCycle takes a lock, extends it and releases it.
func lockCycle(ctx context.Context, client valkey.Client) error {
	l, err := lock.TryLock(ctx, client, "bench:lock:"+strconv.FormatInt(time.Now().UnixNano(), 36), time.Second)
	if err != nil {
		return err
	}
	if err := l.Extend(ctx, 2*time.Second); err != nil {
		return err
	}
	return l.Release(ctx)
}

// scriptsOnly connects as a user allowed everything but COMMAND: the lock
// cannot ask the engine what it has, and runs its scripts.
func scriptsOnly(ctx context.Context, s server) valkey.Client {
	const user, password = "bench-scripts", "bench-scripts-password-0123456789"
	for _, node := range s.client.Nodes() {
		if err := node.Do(ctx, node.B().AclSetuser().Username(user).Rule("reset", "on", ">"+password, "~*", "&*", "+@all", "-command").Build()).Error(); err != nil {
			log.Fatalf("lock: ACL SETUSER: %v", err)
		}
	}
	cfg := s.cfg
	cfg.Username, cfg.Password, cfg.PasswordSecret = user, password, nil
	client, err := elasticache.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	return client
}
