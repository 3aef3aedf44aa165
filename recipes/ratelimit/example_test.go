package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/recipes/ratelimit"
)

func Example() {
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	limit, err := ratelimit.NewSlidingWindow(client, 100, time.Minute)
	if err != nil {
		return
	}
	r, err := limit.Allow(context.Background(), "ratelimit:{user:42}:api")
	if err == nil && !r.Allowed {
		fmt.Printf("429 Too Many Requests; Retry-After: %.0f\n", r.RetryAfter.Seconds())
	}
}
