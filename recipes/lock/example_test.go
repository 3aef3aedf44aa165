package lock_test

import (
	"context"
	"errors"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/recipes/lock"
)

func Example() {
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	ctx := context.Background()
	l, err := lock.TryLock(ctx, client, "lock:{report:daily}", 30*time.Second)
	if errors.Is(err, lock.ErrLocked) {
		return // another process builds the report
	}
	if err != nil {
		return
	}
	defer l.Release(ctx)
	// ... build the report within 30 s, or l.Extend it in time.
}
