package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// TestAKilledStandInLosesNothing: the stand-in killed outright (SIGKILL)
// again and again while a row is updated, each time between reading the
// slot and confirming it or anywhere else, then started again: every
// update reaches the stream, in commit order (some twice, as Debezium
// after a crash).
func TestAKilledStandInLosesNothing(t *testing.T) {
	pg := testenv.StartPostgres(t)
	pg.Exec(t,
		"CREATE TABLE products (id int PRIMARY KEY, price int)",
		"ALTER TABLE products REPLICA IDENTITY FULL",
		"INSERT INTO products VALUES (1, 0)",
		"SELECT pg_create_logical_replication_slot('invalidator', 'wal2json')",
	)
	arn := awsenv.KinesisStream(t, 1)
	bin := filepath.Join(t.TempDir(), "commitlog")
	if out, err := exec.Command("go", append(append([]string{"build"}, testenv.BuildFlags()...), "-o", bin, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-stream", arn[strings.LastIndex(arn, "/")+1:], "-every", "10ms")
		cmd.Env = append(os.Environ(), "PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(pg.Port), "PGUSER=postgres", "PGDATABASE=postgres", "CDC_SLOT=invalidator")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	const updates = 40
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= updates; i++ {
			psql := append(pg.PSQL(), "-c", fmt.Sprintf("UPDATE products SET price = %d WHERE id = 1", i))
			if out, err := exec.Command(psql[0], psql[1:]...).CombinedOutput(); err != nil {
				t.Errorf("update %d: %v %s", i, err, out)
				return
			}
		}
	}()
	kills := 0
	for running := true; running; kills++ {
		select {
		case <-done:
			running = false
		default:
		}
		cmd := start()
		time.Sleep(time.Duration(50+kills*37%200) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	last := start()
	defer func() { _ = last.Process.Kill(); _ = last.Wait() }()

	seen := map[int]bool{}
	var order []int
	k := awsenv.Kinesis(t)
	shards, err := k.ListShards(t.Context(), &kinesis.ListShardsInput{StreamARN: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	it, err := k.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{StreamARN: aws.String(arn),
		ShardId: shards.Shards[0].ShardId, ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	iterator := it.ShardIterator
	for deadline := time.Now().Add(20 * time.Second); len(seen) < updates && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, err := k.GetRecords(t.Context(), &kinesis.GetRecordsInput{StreamARN: aws.String(arn), ShardIterator: iterator})
		if err != nil {
			t.Fatal(err)
		}
		iterator = out.NextShardIterator
		for _, r := range out.Records {
			var ev struct {
				After struct {
					Price int `json:"price"`
				} `json:"after"`
			}
			if err := json.Unmarshal(r.Data, &ev); err != nil {
				t.Fatalf("a record that is no change event: %v: %s", err, r.Data)
			}
			if p := ev.After.Price; !seen[p] {
				seen[p] = true
				order = append(order, p)
			}
		}
	}
	if len(seen) != updates {
		t.Fatalf("%d of %d updates reached the stream across %d kills; saw %v", len(seen), updates, kills, order)
	}
	for i, p := range order {
		if p != i+1 {
			t.Fatalf("updates out of commit order across %d kills: %v", kills, order)
		}
	}
	t.Logf("%d updates, each on the stream in order, across %d kills", updates, kills)
}
