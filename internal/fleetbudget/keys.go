package fleetbudget

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// Budget is the budget of PerSecond ECPUs a second at its two keys
// (Keys): it takes from the first, and while the first cannot be reached
// for now (its node failing over) from the second, for a while: a failover
// of one node leaves the fleet its budget, not only its fallback share.
// One Budget serves one process: it remembers which line its place is in.
type Budget struct {
	PerSecond float64
	keys      [2]string
	mu        sync.Mutex
	on        int       // the key taken from
	left      time.Time // when the first key was last left
	line      int       // the key whose line the last place is in
}

// BackAfter is how long a process takes from the second key after the
// first failed it: the processes that left the first key together go
// back about together, and the fleet is split between two budgets, each
// of the whole rate, only that long after a failover.
const BackAfter = 10 * time.Second

// New is the budget of perSecond ECPUs a second, at Keys(perSecond).
func New(perSecond float64) *Budget {
	return &Budget{PerSecond: perSecond, keys: Keys(perSecond)}
}

// Take is the package's Take at the key the budget is on: when it fails
// for now, the other key is asked at once, within what is left of ctx
// (the first has half of it: a node that does not answer takes all it
// is given).
func (b *Budget) Take(ctx context.Context, c Client, want float64, first bool, place int64, reserve time.Duration) (got float64, wait time.Duration, next int64, err error) {
	b.mu.Lock()
	on := b.on
	if on == 1 && time.Since(b.left) >= BackAfter {
		on = 0
	}
	if b.line != on {
		place = 0 // a place in the other key's line means nothing here
	}
	b.mu.Unlock()
	half, cancel := ctx, context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		half, cancel = context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/2))
	}
	got, wait, next, err = Take(half, c, b.keys[on], b.PerSecond, want, first, place, reserve)
	cancel()
	if err != nil && cacheerr.Transient(err) && ctx.Err() == nil {
		if g, w, n, err2 := Take(ctx, c, b.keys[1-on], b.PerSecond, want, first, 0, reserve); err2 == nil {
			got, wait, next, err = g, w, n, nil
			b.mu.Lock()
			if on == 0 {
				b.left = time.Now()
			}
			b.mu.Unlock()
			on = 1 - on
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		b.on, b.line = on, on
	}
	return got, wait, next, err
}

// Keys are the two keys of a budget of perSecond ECPUs a second: Key's,
// and one whose slot is as far from it as a few hashtags get, half the
// slots away, so that a cluster of more than one shard keeps them on two.
func Keys(perSecond float64) [2]string {
	first := Key(perSecond)
	from := slot(first)
	best, far := "", -1
	for i := range 64 {
		tag := strconv.Itoa(i)
		d := (int(slot(tag)) - int(from) + slots) % slots
		if d = min(d, slots-d); d > far {
			best, far = tag, d
		}
	}
	return [2]string{first, Pattern[:len(Pattern)-1] + "{" + best + "}" + first[len(Pattern)-1:]}
}

const slots = 16384

// slot is the cluster slot of key (CRC16/XMODEM of its hashtag, or of
// the whole key without one), as CLUSTER KEYSLOT answers.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % slots
}
