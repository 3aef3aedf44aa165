package writethrough_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/writethrough"
)

type Product struct {
	ID    string
	Price int64
}

// The read path of a service: cache-aside with stampede protection, and a
// write path that invalidates after the database write. The invalidator
// deletes the same keys when the change events arrive.
func Example() {
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"my-cache.serverless.euw1.cache.amazonaws.com:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	products := writethrough.New[Product](client, writethrough.Options[Product]{TTL: 15 * time.Minute})
	ctx := context.Background()

	p, err := products.Get(ctx, "cache:product:42", func(ctx context.Context) (Product, error) {
		// SELECT ... FROM products WHERE id = 42; no row: writethrough.ErrNotFound
		return Product{ID: "42", Price: 1999}, nil
	})
	switch {
	case errors.Is(err, writethrough.ErrNotFound):
		fmt.Println("no such product")
	case err == nil:
		fmt.Println(p.Price)
	}

	_ = products.Write(ctx, "cache:product:42", func(ctx context.Context) error {
		// UPDATE products SET price = 1899 WHERE id = 42
		return nil
	})
}
