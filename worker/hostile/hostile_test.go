package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHostileInputs runs every row of the table through every front end,
// on the fakes and, without -short, on the local stack, and checks for
// each record of a row:
//
//   - it is done or parked with its reason on its first delivery — never
//     handed back to fail again —, and the front end's answer says so as
//     its event source reads it; the ordinary record after it is done;
//   - in bounded time: the CPU the process spent on the batch, against a
//     bound from the input's size, well above what a fixed worker needs;
//   - in bounded memory: the bytes allocated, against a bound from the
//     input's size, and the heap retained once the batch is done;
//   - nothing the worker sent passed an AWS limit: SQS's message size (of
//     the receiving queue), characters, batch sizes and timeouts, and on
//     the stack ElastiCache Serverless's 3,999 arguments a request;
//   - the keys it must delete are gone, those it must keep never reached
//     the cache.
//
// Each row runs in a process of its own (this test binary again), which
// ends when a front end has not answered after three times its CPU bound:
// a row that hangs on the old code (quadratic planning of a set took 89 s)
// fails at its bound without slowing the rows after it, and its memory is
// measured alone.
func TestHostileInputs(t *testing.T) {
	if spec := os.Getenv(childVar); spec != "" {
		child(t, spec)
		return
	}
	// Rows run in parallel, -test.parallel (GOMAXPROCS) at a time: each
	// row's process measures its own CPU and memory.
	for _, stage := range []string{"fakes", "stack"} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			if stage == "stack" {
				openStack(t) // skips with -short or without the stack; fails in CI
			}
			for i := range rows {
				r := &rows[i]
				t.Run(r.name, func(t *testing.T) {
					t.Parallel()
					if r.layer != nil {
						if r.stack != (stage == "stack") {
							t.Skipf("checked at its layer, on the %s", map[bool]string{true: "stack", false: "fakes"}[r.stack])
						}
						r.layer(t)
						return
					}
					var run []string
					for _, fe := range frontEnds {
						if r.skipped(stage, fe) == "" {
							run = append(run, fe)
						}
					}
					outs := spawn(t, stage, i, run)
					for _, fe := range frontEnds {
						t.Run(fe, func(t *testing.T) {
							if why := r.skipped(stage, fe); why != "" {
								t.Skip(why)
							}
							judge(t, r, outs[fe])
						})
					}
				})
			}
		})
	}
}

// childVar names the stage, the row and the front ends a child process
// runs: "fakes:3:sqs-function,poller".
const childVar = "HOSTILE_CHILD"

const outcomePrefix = "HOSTILE-OUTCOME "

// spawn runs row i through the front ends fes, in a child process, again
// for those after one that did not answer.
func spawn(t *testing.T, stage string, i int, fes []string) map[string]outcome {
	outs := map[string]outcome{}
	for len(fes) > 0 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(len(fes))*10*time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHostileInputs$", "-test.short="+strconv.FormatBool(testing.Short()))
		cmd.Env = append(os.Environ(), childVar+"="+stage+":"+strconv.Itoa(i)+":"+strings.Join(fes, ","))
		output, err := cmd.CombinedOutput()
		cancel()
		for _, line := range strings.Split(string(output), "\n") {
			if rest, ok := strings.CutPrefix(line, outcomePrefix); ok {
				var o outcome
				if err := json.Unmarshal([]byte(rest), &o); err != nil {
					t.Fatalf("a child's outcome %q: %v", rest, err)
				}
				outs[o.FrontEnd] = o
			}
		}
		next := slices.IndexFunc(fes, func(fe string) bool { _, ok := outs[fe]; return !ok })
		if next < 0 {
			break
		}
		if k := next - 1; k < 0 || outs[fes[k]].Killed == "" {
			// The child ended without a word on this front end: its output says why.
			outs[fes[next]] = outcome{FrontEnd: fes[next], Err: fmt.Sprintf("the run ended (%v) without an outcome:\n%s", err, tail(string(output)))}
			next++
		}
		fes = fes[next:]
	}
	return outs
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// child runs one row through front ends, printing an outcome for each;
// a front end that does not answer within frontEndLimit ends the process.
func child(t *testing.T, spec string) {
	parts := strings.SplitN(spec, ":", 3)
	i, _ := strconv.Atoi(parts[1])
	r := &rows[i]
	open := func(ns string, watch []string) *env { return openFakes(t, ns, watch) }
	if parts[0] == "stack" {
		s := openStack(t)
		open = func(ns string, watch []string) *env { return s.open(t, ns, watch) }
	}
	emit := func(o outcome) {
		b, _ := json.Marshal(o)
		fmt.Println(outcomePrefix + string(b))
	}
	for _, fe := range strings.Split(parts[2], ",") {
		emit(runOne(t, open, r, fe, func(limit time.Duration) func() {
			watchdog := time.AfterFunc(limit, func() {
				emit(outcome{FrontEnd: fe, Killed: fmt.Sprintf("no answer after %v", limit)})
				os.Exit(0)
			})
			return func() { watchdog.Stop() }
		}))
	}
}

// The bounds of a run of records of n bytes in all, the cache's included.
// A fixed worker needs a fraction of each; the race detector's run takes
// several times the CPU.
func cpuBound(n, records int) time.Duration {
	return raceFactor * (time.Second + time.Duration(n)*time.Second/(1<<20) + time.Duration(records)*5*time.Millisecond)
}

func allocBound(n, records int) uint64 {
	return 128*uint64(n) + 32<<20 + uint64(records)<<18
}

// judge checks one run of row r through a front end.
func judge(t *testing.T, r *row, o outcome) {
	switch {
	case o.Killed != "":
		t.Fatalf("%s: %s; want every record done or parked within a bound of its size", o.FrontEnd, o.Killed)
	case o.Err != "":
		t.Fatalf("%s: %s", o.FrontEnd, o.Err)
	case o.Refused != "":
		if slices.Contains(r.want, refused) {
			t.Logf("the worker refuses the rules at start-up: %s", o.Refused)
			return
		}
		t.Fatalf("the worker refuses the rules at start-up: %s", o.Refused)
	}
	want := r.want
	if want == nil {
		want = fates(done, parked)
	}
	goodWant := fates(done)
	if r.good != nil {
		_, _, goodWant = r.good("")
	}
	parkedRecords := 0
	for _, rec := range o.Records {
		w := want
		what := "record " + strconv.Quote(rec.ID)
		if rec.Good {
			w, what = goodWant, "the ordinary record after the row's"
		}
		if !slices.Contains(w, rec.Fate) {
			t.Errorf("%s: want %s on its first delivery, got %s: %s", what, fateList(w), rec.Fate, rec.Reason)
		}
		if rec.Fate == parked {
			parkedRecords++
			switch {
			case rec.Reason == "":
				t.Errorf("%s: parked without a reason", what)
			case !rec.Good && r.reason != "" && !strings.Contains(strings.ToLower(rec.Reason), strings.ToLower(r.reason)):
				t.Errorf("%s: parked for %q, want a reason naming %s", what, truncate(rec.Reason), r.reason)
			}
		}
	}
	for _, u := range o.Unnamed {
		t.Errorf("the worker failed a record under the name %s, which is none of the batch's: want every record named by its ID, a stream record by its sequence number", u)
	}
	if o.Parked != parkedRecords {
		t.Errorf("%d records parked, %d messages sent to the failure queue: want one each", parkedRecords, o.Parked)
	}
	for _, v := range o.Violations {
		t.Errorf("over an AWS limit: %s", v)
	}
	if len(o.Touched) > 0 {
		t.Errorf("keys outside the rules reached the cache: %q; want them refused before any request", o.Touched)
	}
	if len(o.Gone) > 0 {
		t.Errorf("keys to keep were deleted: %q", o.Gone)
	}
	if len(o.Present) > 0 {
		t.Errorf("keys to delete are still there: %q", o.Present)
	}
	n := o.InputBytes + o.CacheBytes
	what := fmt.Sprintf("%d records of %s", len(o.Records), size(int64(o.InputBytes)))
	if o.CacheBytes > 0 {
		what += fmt.Sprintf(" (and %s in the cache)", size(int64(o.CacheBytes)))
	}
	if b := cpuBound(n, len(o.Records)); o.CPU > b {
		t.Errorf("%v of CPU for %s; the bound is %v", o.CPU.Round(time.Millisecond), what, b)
	}
	if b := allocBound(n, len(o.Records)); o.Allocated > b {
		t.Errorf("%s allocated for %s; the bound is %s", size(int64(o.Allocated)), what, size(int64(b)))
	}
	if b := cmpOrInt(r.retained, defaultRetained); o.Retained > b {
		t.Errorf("%s of heap retained once the batches were done; the bound is %s, to fit a 256 MB function beside its work", size(o.Retained), size(b))
	}
	t.Logf("%s, %d invokes: %v CPU, %v wall, %s allocated, %s retained",
		what, o.Invokes, o.CPU.Round(time.Millisecond), o.Wall.Round(time.Millisecond), size(int64(o.Allocated)), size(o.Retained))
}

func fateList(f []fate) string {
	s := make([]string, len(f))
	for i := range f {
		s[i] = string(f[i])
	}
	return strings.Join(s, " or ")
}

func cmpOrInt(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

func size(n int64) string {
	switch {
	case n >= 1<<20 || n <= -1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 || n <= -1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
