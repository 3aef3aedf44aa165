package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
)

// cacheVerb reads and writes single keys, and waits for a key's
// invalidation: what a person trying the worker, or checking a deployment,
// needs of the cache without another client.
func cacheVerb(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cache", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("cache-endpoint", os.Getenv("CACHE_ENDPOINT"), "host:port of the cache; the other CACHE_* variables as the worker reads them [CACHE_ENDPOINT]")
	ttl := fs.Duration("ttl", time.Hour, "set: the key's time to live")
	within := fs.Duration("within", 5*time.Second, "gone: how long to wait for the key's deletion before failing")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: invalidator cache [flags] set KEY VALUE | get KEY | gone KEY

  set KEY VALUE  store VALUE under KEY, with --ttl
  get KEY        print KEY's value; exit 1 when there is none
  gone KEY       wait until KEY no longer exists, up to --within, and print
                 how long that took; exit 1 when it is still there

Connects as the worker would, from the CACHE_* variables (docs/operations.md).

flags:
`)
		fs.PrintDefaults()
	}
	var words []string // flags may follow them: gone KEY --within 10s
	for {
		if code, ok := parse(fs, args); !ok {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		words, args = append(words, fs.Arg(0)), fs.Args()[1:]
	}
	op, want := "", map[string]int{"set": 3, "get": 2, "gone": 2}
	if len(words) > 0 {
		op = words[0]
	}
	if n, known := want[op]; !known || len(words) != n {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := elasticache.ConfigFromEnv(endpointEnv(*endpoint))
	if err != nil {
		fmt.Fprintln(stderr, "invalidator cache:", err)
		return 2
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "invalidator cache:", err)
		return 1
	}
	client, err := dial(awsCfg, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "invalidator cache:", err)
		return 1
	}
	defer client.Close()
	key := words[1]
	switch op {
	case "set":
		err = client.Do(ctx, client.B().Set().Key(key).Value(words[2]).Px(*ttl).Build()).Error()
	case "get":
		var value string
		if value, err = client.Do(ctx, client.B().Get().Key(key).Build()).ToString(); err == nil {
			fmt.Fprintln(stdout, value)
		} else if valkey.IsValkeyNil(err) {
			err = fmt.Errorf("%s: no such key", key)
		}
	case "gone":
		var took time.Duration
		if took, err = waitGone(ctx, client, key, *within); err == nil {
			fmt.Fprintf(stdout, "%s gone after %.2f s\n", key, took.Seconds())
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "invalidator cache:", err)
		return 1
	}
	return 0
}

// errStillThere is gone's failure: the key outlived the wait.
var errStillThere = errors.New("still there")

// waitGone polls until key does not exist, for at most within after the
// cache's first answer (connecting is not waiting for a deletion), and
// returns how long that took from that answer.
func waitGone(ctx context.Context, client valkey.Client, key string, within time.Duration) (time.Duration, error) {
	exists := func(ctx context.Context) (bool, error) {
		n, err := client.Do(ctx, client.B().Exists().Key(key).Build()).AsInt64()
		return n > 0, err
	}
	there, err := exists(ctx)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		switch {
		case err == nil && !there:
			return time.Since(start), nil
		// valkey-go may answer its own deadline just before ctx's is marked.
		case errors.Is(err, context.DeadlineExceeded), err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			return 0, fmt.Errorf("%s %w after %.1f s", key, errStillThere, within.Seconds())
		case err != nil:
			return 0, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
		there, err = exists(ctx)
	}
}
