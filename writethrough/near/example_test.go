package near_test

import (
	"context"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/writethrough"
	"github.com/invalidator-go/invalidator/writethrough/near"
)

type Product struct {
	ID    string
	Price int64
}

// A service's hot reads from memory: one channel per process, a tier per
// cache. The invalidator's announcements drop what the tier holds, and so
// do this process's writes, in every process.
func Example() {
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"my-cache.serverless.euw1.cache.amazonaws.com:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	channel := near.Open(client, near.ChannelOptions{}) // subscribes to invalidator:near
	defer channel.Close()
	products := writethrough.New[Product](client, writethrough.Options[Product]{
		TTL:   15 * time.Minute,
		Local: near.New[Product](channel, near.Options{MaxEntries: 100_000, MaxLifetime: time.Minute}),
	})
	p, err := products.Get(context.Background(), "cache:product:42", func(ctx context.Context) (Product, error) {
		return Product{ID: "42", Price: 1999}, nil // SELECT ... FROM products WHERE id = 42
	})
	if err == nil {
		fmt.Println(p.Price)
	}
}
