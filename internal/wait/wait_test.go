package wait

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoffDoublesUpToMostWithEqualJitter(t *testing.T) {
	const base, most = 50 * time.Millisecond, time.Second
	steps := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	for i, step := range steps {
		step *= time.Millisecond
		lo, hi := step, time.Duration(0)
		for range 1000 {
			d := Backoff(base, most, i+1)
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < step/2 || hi > step {
			t.Errorf("attempt %d: pauses in [%v, %v], want within [%v, %v]", i+1, lo, hi, step/2, step)
		}
		if hi-lo < step/4 { // a thousand draws spread over most of the range
			t.Errorf("attempt %d: pauses in [%v, %v], want jitter over [%v, %v]", i+1, lo, hi, step/2, step)
		}
	}
}

func TestBackoffEdges(t *testing.T) {
	for _, c := range []struct {
		base, most time.Duration
		attempt    int
		lo, hi     time.Duration
	}{
		{time.Second, time.Minute, 0, time.Second / 2, time.Second},                   // below 1: the first
		{time.Second, time.Minute, -5, time.Second / 2, time.Second},                  // below 1: the first
		{time.Second, 5 * time.Second, 1 << 30, 5 * time.Second / 2, 5 * time.Second}, // no overflow
		{time.Minute, time.Second, 1, time.Second / 2, time.Second},                   // base above most
		{1<<62 + 1, 1<<63 - 1, 100, (1<<63 - 1) / 2, 1<<63 - 1},                       // no overflow near the top
		{0, time.Second, 3, 0, 0},
		{time.Second, 0, 3, 0, 0},
		{1, 1, 1, 0, 1},
	} {
		for range 100 {
			if d := Backoff(c.base, c.most, c.attempt); d < c.lo || d > c.hi {
				t.Fatalf("Backoff(%v, %v, %d) = %v, want within [%v, %v]", c.base, c.most, c.attempt, d, c.lo, c.hi)
			}
		}
	}
}

func TestBeforeDeadlineKeepsTheMarginOrHalfTheTimeLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct{ left, margin, want time.Duration }{
			{10 * time.Second, time.Second, 9 * time.Second}, // the margin
			{time.Second, 2 * time.Second, time.Second / 2},  // half the time left
			{2 * time.Second, time.Second, time.Second},      // both the same
			{10 * time.Second, 0, 10 * time.Second},          // no margin
		} {
			parent, cancelParent := context.WithTimeout(t.Context(), c.left)
			ctx, cancel := BeforeDeadline(parent, c.margin)
			deadline, ok := ctx.Deadline()
			if got := time.Until(deadline); !ok || got != c.want {
				t.Errorf("%v left, margin %v: %v left (deadline %t), want %v", c.left, c.margin, got, ok, c.want)
			}
			start := time.Now()
			<-ctx.Done()
			if took := time.Since(start); took != c.want {
				t.Errorf("%v left, margin %v: ended after %v, want %v", c.left, c.margin, took, c.want)
			}
			if c.want < c.left && parent.Err() != nil {
				t.Errorf("%v left, margin %v: the parent ended with it", c.left, c.margin)
			}
			cancel()
			cancelParent()
		}
	})
}

func TestBeforeDeadlineWithoutADeadlineIsTheContext(t *testing.T) {
	parent, cancelParent := context.WithCancel(t.Context())
	ctx, cancel := BeforeDeadline(parent, time.Second)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a deadline where there was none")
	}
	cancel() // a no-op: ctx is the caller's
	if ctx.Err() != nil {
		t.Fatal("cancel ended the caller's context")
	}
	cancelParent()
	if ctx.Err() == nil {
		t.Fatal("the context outlived its parent")
	}
}
