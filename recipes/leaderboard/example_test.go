package leaderboard_test

import (
	"context"
	"fmt"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/recipes/leaderboard"
)

func Example() {
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	board, err := leaderboard.New(client, "leaderboard:{season-1}", leaderboard.Options{})
	if err != nil {
		return
	}
	ctx := context.Background()
	_, _ = board.Add(ctx, "alice", 120)
	_, _ = board.Add(ctx, "bob", 120) // same points, later: ranks below alice
	top, _ := board.Top(ctx, 10)
	for _, e := range top {
		fmt.Println(e.Rank, e.Member, e.Points)
	}
}
