package cdc

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestAnUpdateInPostgresPlansItsKeys: changes made in a real PostgreSQL,
// read from its slot and written as Debezium does, decode through the
// Kinesis front end into the keys the rules plan — the old and the new
// category of a table with REPLICA IDENTITY FULL; of one without, what its
// key names, and a rule over its old value fails saying what to turn on.
// Read and not confirmed, they are read again; confirmed, never.
func TestAnUpdateInPostgresPlansItsKeys(t *testing.T) {
	pg := testenv.StartPostgres(t)
	pg.Exec(t,
		"CREATE TABLE products (id int PRIMARY KEY, name text, category text)",
		"ALTER TABLE products REPLICA IDENTITY FULL",
		"CREATE TABLE orders (id int PRIMARY KEY, status text)",
		"SELECT pg_create_logical_replication_slot('invalidator', 'wal2json')",
		"INSERT INTO products VALUES (1, 'lamp', 'lighting')",
		"UPDATE products SET category = 'garden' WHERE id = 1",
		"INSERT INTO orders VALUES (7, 'new')",
		"UPDATE orders SET status = 'paid' WHERE id = 7",
		"DELETE FROM orders WHERE id = 7",
		"TRUNCATE products",
	)
	db, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	read, upto, err := Read(t.Context(), db, "invalidator", "postgres", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Unconfirmed, a reader that stopped reads them again; confirmed, never.
	if again, at, err := Read(t.Context(), db, "invalidator", "postgres", 0); err != nil || len(again) != len(read) || at != upto {
		t.Fatalf("read again before confirming: %d changes to %s (%v); want the %d to %s", len(again), at, err, len(read), upto)
	}
	if err := Confirm(t.Context(), db, "invalidator", upto); err != nil {
		t.Fatal(err)
	}
	if again, _, err := Read(t.Context(), db, "invalidator", "postgres", 0); err != nil || len(again) != 0 {
		t.Fatalf("read again once confirmed: %d changes (%v); want none", len(again), err)
	}
	rules, err := invalidate.ParseRules([]byte(`tables:
  public.products: ["cache:product:{key.id}", "cache:category:{item.category}"]
  public.orders: ["cache:order:{key.id}", "cache:status:{old.status}"]
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, ev := range read {
		raw := `{"kinesis":{"sequenceNumber":"` + string(rune('1'+i)) + `","data":"` + base64.StdEncoding.EncodeToString(ev) + `"},"eventSourceARN":"arn:aws:kinesis:us-east-1:1:stream/cdc"}`
		_, changes, err := events.Decode(events.SourceKinesis, []byte(raw), rules.Attributes())
		if err != nil {
			got = append(got, "error: "+err.Error())
			continue
		}
		for _, c := range changes {
			keys, err := rules.Keys(&c, nil)
			slices.Sort(keys)
			line := string(c.Op) + " " + c.Table + ": " + strings.Join(keys, " ")
			if err != nil {
				line += " (" + err.Error() + ")"
			}
			got = append(got, line)
		}
	}
	want := []string{
		"create public.products: cache:category:lighting cache:product:1",
		"update public.products: cache:category:garden cache:category:lighting cache:product:1",
		"create public.orders: cache:order:7",
		"update public.orders: cache:order:7 (…REPLICA IDENTITY FULL…)",
		"delete public.orders: cache:order:7 (…REPLICA IDENTITY FULL…)",
		"error: …TRUNCATE of public.products…",
	}
	if len(got) != len(want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		head, rest, elided := strings.Cut(want[i], "…")
		mid, _, _ := strings.Cut(rest, "…")
		if !strings.HasPrefix(got[i], head) || elided && !strings.Contains(got[i], mid) {
			t.Errorf("change %d: %s\nwant %s", i, got[i], want[i])
		}
	}
}
