package invalidate

import (
	"testing"
	"testing/synctest"
	"time"
)

// spendFor is how long taking n ECPUs one at a time takes.
func spendFor(t *testing.T, p *pacer, n int) time.Duration {
	start := time.Now()
	for range n {
		if err := p.take(t.Context(), firstDeletes, 1); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

func TestAThrottlingReplyHalvesThePaceForAWhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPacer(1000, nil, 0)
		spendFor(t, p, 100) // the burst
		if took := spendFor(t, p, 2000); took < 1990*time.Millisecond || took > 2010*time.Millisecond {
			t.Fatalf("2,000 ECPUs took %v at 1,000 a second", took)
		}
		p.throttled()
		p.throttled() // the same burst's: once
		// From 500 a second, back at 1,000 in 5 s: 500t + 50t² = 2,000.
		if took := spendFor(t, p, 2000); took < 3*time.Second || took > 3100*time.Millisecond {
			t.Fatalf("2,000 ECPUs took %v after a throttling reply, want about 3.06 s", took)
		}
		time.Sleep(10 * time.Second)
		spendFor(t, p, 100)
		if took := spendFor(t, p, 2000); took > 2010*time.Millisecond {
			t.Fatalf("2,000 ECPUs took %v 10 s after: the pace did not come back", took)
		}
	})
}
