package invalidate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
)

// fleet is processes Invalidators sharing one budget of perSecond, each
// with its own cache fake whose sends s records.
func fleet(processes int, perSecond float64, s *sends, configure func(*invalidate.Options)) ([]*invalidate.Invalidator, []*cachetest.Cache, *cachetest.Budget) {
	budget := &cachetest.Budget{PerSecond: perSecond}
	invs := make([]*invalidate.Invalidator, processes)
	caches := make([]*cachetest.Cache, processes)
	for i := range invs {
		caches[i] = &cachetest.Cache{Unlinked: s.hook}
		opts := fast()
		opts.ECPUPerSecond, opts.Fleet = perSecond, budget
		if configure != nil {
			configure(&opts)
		}
		invs[i] = invalidate.New(caches[i], opts)
	}
	return invs, caches, budget
}

// mostIn is the most sends of s within any window d.
func mostIn(s *sends, d time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	most := 0
	for i, at := range s.count {
		j := i
		for j < len(s.count) && s.count[j] < at+d {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// TestAFleetSpendsItsBudgetOnce: twenty processes sharing a budget, each
// paging a tag of 5,000 entries at once, send the fleet's budget in every
// 10 s, not twenty times it; asking for it costs under 1 % of what is
// granted (a take, one script, about 1 ECPU).
func TestAFleetSpendsItsBudgetOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const processes, perSecond, each = 20, 1000, 5000
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		invs, caches, budget := fleet(processes, perSecond, s, nil)
		var wg sync.WaitGroup
		for i, inv := range invs {
			tag := fmt.Sprintf("cache:tag:p%d", i)
			entries(caches[i], tag, each)
			wg.Go(func() {
				rep := inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{tagged("tag", tag[len("cache:tag:"):])}))
				if err := rep.Results[0].Err; err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		took := time.Since(s.start)
		if most, bound := mostIn(s, 10*time.Second), int(1.1*perSecond*10); most > bound {
			t.Errorf("%d keys sent in a 10 s window by the fleet, budget %d a second: over %d", most, perSecond, bound)
		}
		if took < processes*each/perSecond*9/10*time.Second {
			t.Errorf("the fleet paged %d entries in %v at %d ECPUs a second", processes*each, took, perSecond)
		}
		calls, granted := budget.Counts()
		if float64(calls) > granted/100 {
			t.Errorf("%d takes for %g ECPUs granted: over 1 %%", calls, granted)
		}
		t.Logf("%d entries in %v; %d takes for %g ECPUs granted", processes*each, took, calls, granted)
	})
}

// TestAFleetInLineSpendsItsBudget: 120 processes sending one-key second
// deletes, one after another, each behind the others in the budget's
// line, spend it at its rate: a process that waited out the line is
// granted enough for more than one command (it was granted one, and took
// two takes an ECPU, at 0.6 of the rate).
func TestAFleetInLineSpendsItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const processes, perSecond, each = 120, 1000, 100
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		invs, _, budget := fleet(processes, perSecond, s, nil)
		var wg sync.WaitGroup
		for i, inv := range invs {
			wg.Go(func() {
				for n := range each {
					inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("again", true, fmt.Sprintf("cache:p%d:%d", i, n))}))
				}
			})
		}
		wg.Wait()
		took, ideal := time.Since(s.start), time.Duration(processes*each/perSecond)*time.Second
		if took > ideal*11/10 {
			t.Errorf("%d one-key second deletes in %v at %d ECPUs a second: over 1.1 × %v", processes*each, took, perSecond, ideal)
		}
		if calls, granted := budget.Counts(); float64(calls) > granted/20 {
			t.Errorf("%d takes for %g ECPUs granted: over 5 %%", calls, granted)
		}
	})
}

// TestFirstDeletesGoBeforeTheFleetsTags: while nine processes page big
// tags at the fleet's budget, a tenth's first delete is not held behind
// their pages: it waits at most what a chunk of 500 keys at 1,000 ECPUs a
// second runs past Ahead and Reserve (100 ms).
func TestFirstDeletesGoBeforeTheFleetsTags(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const processes, perSecond = 10, 1000
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		invs, caches, _ := fleet(processes, perSecond, s, nil)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i, inv := range invs[1:] {
			tag := fmt.Sprintf("cache:tag:p%d", i)
			entries(caches[i+1], tag, 20_000)
			wg.Go(func() {
				inv.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{tagged("tag", tag[len("cache:tag:"):])}))
			})
		}
		time.Sleep(3 * time.Second)
		var worst time.Duration
		for i := range 20 {
			key := fmt.Sprintf("cache:fresh:%d", i)
			asked := time.Since(s.start)
			invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("first", false, key)}))
			worst = max(worst, s.when(key)-asked)
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		if worst > 150*time.Millisecond {
			t.Errorf("a first delete waited %v behind the fleet's tags", worst)
		}
	})
}

// TestAFleetBudgetThatCannotBeReadFallsBack: with the budget refused (its
// key denied), a process keeps to its fallback share, says so once and in
// every batch's metrics, and takes the fleet's budget again once it can be
// read.
func TestAFleetBudgetThatCannotBeReadFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perSecond, fallback = 1000, 100
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		var mu sync.Mutex
		var told []error
		invs, _, budget := fleet(1, perSecond, s, func(o *invalidate.Options) {
			o.FallbackECPUPerSecond = fallback
			o.OnFleetDown = func(err error) {
				mu.Lock()
				defer mu.Unlock()
				told = append(told, err)
			}
		})
		budget.Fail(cachetest.ErrNoPerm)
		keys := make([]string, 2000)
		for i := range keys {
			keys[i] = fmt.Sprintf("cache:k%d", i)
		}
		rep := invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("1", false, keys...)}))
		if err := rep.Results[0].Err; err != nil || !rep.Metrics.FleetDown {
			t.Fatalf("err %v, FleetDown %v: want done, and said down", err, rep.Metrics.FleetDown)
		}
		if most := mostIn(s, 10*time.Second); most > fallback*10+fallback/10+500 {
			t.Errorf("%d keys in 10 s with the fleet's budget down: over the fallback share, %d a second", most, fallback)
		}
		if len(told) != 1 || !errors.Is(told[0], cachetest.ErrNoPerm) {
			t.Errorf("told %v, want the budget's error once", told)
		}
		budget.Fail(nil)
		time.Sleep(30 * time.Second)
		invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("2", false, "cache:again")})) // asks it again, meanwhile
		synctest.Wait()
		rep = invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("3", false, "cache:again:3")}))
		if rep.Metrics.FleetDown || len(told) != 2 || told[1] != nil {
			t.Errorf("FleetDown %v, told %v: want the budget read again, and said so", rep.Metrics.FleetDown, told)
		}
	})
}

// TestAFleetBudgetOnANodeFailingOverIsReadAgainSoon: the budget's node out
// of reach, as in its failover, is asked again within two seconds, not
// after the 30 s a denied key waits: the deletes after a failover do not
// crawl at the fallback share.
func TestAFleetBudgetOnANodeFailingOverIsReadAgainSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		invs, _, budget := fleet(1, 1000, s, nil)
		budget.Fail(cachetest.ErrRefused)
		rep := invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("1", false, "cache:a")}))
		if !rep.Metrics.FleetDown {
			t.Fatal("the budget out of reach: not said down")
		}
		budget.Fail(nil)
		time.Sleep(2 * time.Second)
		invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("2", false, "cache:b")})) // asks it again, meanwhile
		synctest.Wait()
		rep = invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("3", false, "cache:c")}))
		if rep.Metrics.FleetDown {
			t.Error("2 s after its node came back, the budget is still not read")
		}
	})
}

// hanging is a budget whose node stopped answering: every take waits
// until its context ends.
type hanging struct{}

func (hanging) Take(ctx context.Context, _ float64, _ bool, _ int64) (float64, time.Duration, int64, error) {
	<-ctx.Done()
	return 0, 0, 0, ctx.Err()
}

// TestAFallenBackProcessDoesNotWaitOnItsBudget: once a process keeps to
// its fallback share, its deletes go at that share while the budget is
// asked again, not after each ask that the frozen node never answers.
func TestAFallenBackProcessDoesNotWaitOnItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		opts := fast()
		opts.ECPUPerSecond, opts.Fleet, opts.FallbackECPUPerSecond = 1000, hanging{}, 100
		inv := invalidate.New(&cachetest.Cache{Unlinked: s.hook}, opts)
		inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("first", false, "cache:first")})) // falls back
		start := time.Now()
		for i := range 20 {
			time.Sleep(200 * time.Millisecond)
			asked := time.Now()
			inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("k", false, fmt.Sprintf("cache:k%d", i))}))
			if took := time.Since(asked); took > 50*time.Millisecond {
				t.Fatalf("a one-key delete %v into the fallback took %v: it waited on the budget", asked.Sub(start), took)
			}
		}
	})
}

// TestAFleetBudgetReadAgainGivesItsPaceBack: once the budget answers
// again, a process that kept to its fallback share asks at the fleet's
// pace at once, not after ramping up from the fallback as after a
// throttling reply: the backlog of the outage goes.
func TestAFleetBudgetReadAgainGivesItsPaceBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		invs, _, budget := fleet(1, 1000, s, func(o *invalidate.Options) { o.FallbackECPUPerSecond = 10 })
		budget.Fail(cachetest.ErrRefused)
		invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("down", false, "cache:down")}))
		budget.Fail(nil)
		time.Sleep(2 * time.Second)
		invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("back", false, "cache:back")})) // asks it again, meanwhile
		synctest.Wait()
		keys := make([]string, 1000)
		for i := range keys {
			keys[i] = fmt.Sprintf("cache:backlog:%d", i)
		}
		start := time.Now()
		invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("backlog", false, keys...)}))
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Errorf("1,000 keys at 1,000 ECPUs a second took %v once the budget answered again", took)
		}
	})
}

// TestAFleetAsksLittleForWhatItIsGranted: the template's fleet, 120
// processes at the fleet's share, each paging a tag, and one more sending
// a first delete every 100 ms: its takes (about an ECPU each) stay near
// 1 % of what they grant. It was 37 % while the turns that came as the
// fleet ran ahead were all told to come back at the same moment, to be
// refused again but one.
func TestAFleetAsksLittleForWhatItIsGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const processes, perSecond, each = 120, 1250, 600
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		invs, caches, budget := fleet(processes+1, perSecond, s, nil)
		ctx, stop := context.WithCancel(t.Context())
		var first sync.WaitGroup
		first.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				invs[processes].Invalidate(ctx, invalidate.Decoded([]invalidate.Record{keysRecord("first", false, fmt.Sprintf("cache:fresh:%d", n))}))
				time.Sleep(100 * time.Millisecond)
			}
		})
		var wg sync.WaitGroup
		for i, inv := range invs[:processes] {
			tag := fmt.Sprintf("cache:tag:p%d", i)
			entries(caches[i], tag, each)
			wg.Go(func() {
				if err := inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{tagged("tag", tag[len("cache:tag:"):])})).Results[0].Err; err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		stop()
		first.Wait()
		calls, granted := budget.Counts()
		if float64(calls) > granted/50 {
			t.Errorf("%d takes for %g ECPUs granted: over 2 %%", calls, granted)
		}
		t.Logf("%d takes for %g ECPUs granted (%.2f %%) in %v", calls, granted, float64(calls)/granted*100, time.Since(s.start))
	})
}

// TestATrickleOfFirstDeletesTakesOnceASecond: a process deleting a key
// every 100 ms asks the fleet's budget about once a second, each take
// about an ECPU: it took four times a second, each grant gone after
// 250 ms, for a few ECPUs.
func TestATrickleOfFirstDeletesTakesOnceASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		invs, _, budget := fleet(1, 1250, s, nil)
		for n := range 100 {
			if err := invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("first", false, fmt.Sprintf("cache:fresh:%d", n))})).Results[0].Err; err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if calls, granted := budget.Counts(); calls > 15 {
			t.Errorf("%d takes in 10 s for %g ECPUs granted: want about one a second", calls, granted)
		}
	})
}

// TestATrickleDoesNotStarveABigTag: one process pages a tag of 20,000
// entries at the fleet's budget while fifteen others each invalidate a
// tagged record every 50 ms, a few percent of the budget together: the
// big tag takes about what it would alone. A process that asked for more
// than it spends, in the line, would be granted what lapses unspent, and
// the big one behind it waited (3.5 × as long with a tenth of a second's
// budget a turn).
func TestATrickleDoesNotStarveABigTag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const trickles, perSecond, big = 15, 10_000, 20_000
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		invs, caches, _ := fleet(1+trickles, perSecond, s, nil)
		entries(caches[0], "cache:tag:big", big)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i, inv := range invs[1:] {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					inv.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{tagged("trickle", fmt.Sprintf("t%d-%d", i, n))}))
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
		time.Sleep(time.Second) // the trickles in the line first
		start := time.Now()
		if err := invs[0].Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{tagged("big", "big")})).Results[0].Err; err != nil {
			t.Fatal(err)
		}
		took, alone := time.Since(start), time.Duration(big/perSecond)*time.Second
		cancel()
		wg.Wait()
		if took > alone*3/2 {
			t.Errorf("a tag of %d entries took %v beside %d trickles at %d ECPUs a second: over 1.5 × %v", big, took, trickles, perSecond, alone)
		}
	})
}
