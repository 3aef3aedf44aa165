package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/cmd/invalidator/internal/inspect"
	"github.com/invalidator-go/invalidator/internal/own"
)

// findings is how many inconsistent keys the report lists at each delay.
const findings = 100

func inspectVerb(args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseInspect(args, stderr)
	if !ok {
		return code
	}
	read, checks, stop := stopOnSignals(o.run)
	defer stop()
	s, err := connect(read, o.endpoint, *o.rules)
	if err != nil {
		fmt.Fprintln(stderr, "invalidator inspect:", err)
		return 1
	}
	defer s.cache.Close()
	sources, err := o.sources(read, s)
	if err != nil {
		fmt.Fprintln(stderr, "invalidator inspect:", err)
		if errors.Is(err, own.ErrRefused) {
			return 2
		}
		return 1
	}
	cache, tier := inspect.Valkey(s.cache), (*nearTier)(nil)
	if o.local {
		tier = openNear(s, o.localLifetime, stderr)
		defer tier.close()
		cache = inspect.Near(cache, tier.tier)
	}
	in := inspect.New(cache, s.cfg.Rules, inspect.Options{Sample: o.sample, Delays: o.delays,
		VersionPath: o.path, ItemVersion: o.itemVersion, Findings: findings})
	rep, err := runInspection(in, read, checks, sources, stderr)
	rep.Local = tier.report()
	if o.asJSON {
		_ = json.NewEncoder(stdout).Encode(rep)
	} else {
		printReport(stdout, rep)
	}
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "invalidator inspect:", err)
		return 1
	case checks.Err() != nil:
		fmt.Fprintln(stderr, "invalidator inspect: stopped before the checks due were done; the figures are partial")
		return 1
	}
	return o.verdict(rep, stderr)
}

// inspection is what inspect's flags ask for.
type inspection struct {
	stream, table, queue, endpoint string
	rules                          *string
	receivers                      int
	sample, wantNines              float64
	at, versionPath, itemVersion   string
	run                            time.Duration
	asJSON                         bool
	local                          bool
	localLifetime                  time.Duration
	// at and versionPath, parsed.
	delays []time.Duration
	path   []string
}

// parseInspect reads inspect's flags and checks them; when it is not ok
// the verb returns code, as after parse.
func parseInspect(args []string, stderr io.Writer) (o inspection, code int, ok bool) {
	fs := inspectFlags(&o, stderr)
	if v := os.Getenv("INSPECT_SAMPLE"); v != "" {
		if err := fs.Set("sample", v); err != nil {
			fmt.Fprintln(stderr, "invalidator inspect: INSPECT_SAMPLE:", err)
			return o, 2, false
		}
	}
	if code, ok := parse(fs, args); !ok {
		return o, code, false
	}
	if problem := o.check(fs); problem != "" {
		fmt.Fprintln(stderr, "invalidator inspect:", problem)
		return o, 2, false
	}
	if !rulesGiven(*o.rules) {
		fmt.Fprintln(stderr, "invalidator inspect: no rules (--rules, INVALIDATION_RULES): planning the default cache:{entity}:{id}, which may not be the worker's keys")
	}
	return o, 0, true
}

// inspectFlags binds inspect's flags, with their environment fallbacks, to o.
func inspectFlags(o *inspection, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.stream, "stream", os.Getenv("INSPECT_STREAM_ARN"), "a DynamoDB stream to read beside the stream function [INSPECT_STREAM_ARN]")
	fs.StringVar(&o.table, "table", os.Getenv("INSPECT_TABLE"), "a DynamoDB table whose stream to read, instead of --stream [INSPECT_TABLE]")
	fs.StringVar(&o.queue, "queue", os.Getenv("INSPECT_QUEUE_URL"), "an SQS queue of the inspector's own, subscribed to the worker's topic; the messages it reads are deleted. The worker's queues are refused [INSPECT_QUEUE_URL]")
	fs.IntVar(&o.receivers, "receivers", 1, "receive loops on --queue, each up to 10 messages a receive; raise it for a busy topic")
	fs.StringVar(&o.endpoint, "cache-endpoint", os.Getenv("CACHE_ENDPOINT"), "host:port of the cache; the other CACHE_* variables as the worker reads them [CACHE_ENDPOINT]")
	o.rules = rulesFlag(fs)
	fs.Float64Var(&o.sample, "sample", 1, "the share of changes checked, from 0 to 1; lower it on a busy system [INSPECT_SAMPLE]")
	fs.StringVar(&o.at, "at", envOr("INSPECT_AT", "1s,10s"), "when to check each change's keys after the change is read [INSPECT_AT]")
	fs.DurationVar(&o.run, "for", 0, "stop reading after this long, then finish the checks (default: until interrupted)")
	fs.StringVar(&o.versionPath, "version-path", os.Getenv("INSPECT_VERSION_PATH"), "where plain JSON values hold their version, like version or meta.version; writethrough entries carry theirs [INSPECT_VERSION_PATH]")
	fs.StringVar(&o.itemVersion, "item-version", "version", "the number attribute of a stream record's new image that holds the item's version")
	fs.Float64Var(&o.wantNines, "want-nines", 0, "exit 1 when consistency at the longest delay shows fewer nines than this")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as one JSON object on stdout")
	fs.BoolVar(&o.local, "local", os.Getenv("INSPECT_LOCAL") == "true", "read the keys through a local tier, as a service with writethrough/near does, subscribed to ANNOUNCE_CHANNEL (default invalidator:near) [INSPECT_LOCAL]")
	fs.DurationVar(&o.localLifetime, "local-lifetime", time.Minute, "with --local, the longest the tier holds a key: the service's MaxLifetime")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: invalidator inspect [flags]

Measures how consistent the cache is with the changes that invalidate it.
Reads changes as a second consumer — a DynamoDB stream from its latest
record, or an SQS queue of its own subscribed to the topic, skipping (and
leaving) what was sent more than 5 s before it started —, samples them, plans their keys
with the worker's rules (give --rules, or INVALIDATION_RULES as the worker
has it), and after each delay reads those keys (GET only). A key is
consistent when it is absent (counted apart too), holds a writethrough
lease, or holds a version at least the change's: a writethrough entry's,
or the number at --version-path in a JSON value; after a delete, a cached
"not found" too. It is inconsistent when it holds an older version,
unverified when there is no version to compare, unreadable when the cache
does not answer within 1 s; a check more than 1 s after it fell due counts
late. Prints progress on stderr, then consistency at each delay as a share
and as nines, and the inconsistent keys. Interrupt once to stop reading
and finish the checks, twice to stop at once.

It consumes only a queue of its own (the template's cache-invalidation-inspect,
INSPECT_QUEUE_URL), for it deletes what it reads: it exits 2 on QUEUE_URL,
RAW_QUEUE_URL, FAILOVER_WINDOW_QUEUE_URL, SECOND_DELETE_QUEUE_URL, DLQ_URL and
FAILURE_QUEUE_URL, a queue named as the worker's are (the local stack's
cache-invalidation, -raw, -window, -again, -dlq, -failures; CloudFormation's
<stack>-Queue-, -FailoverWindowQueue-, -SecondDeleteQueue-, -DeadLetterQueue-,
-FailureQueue-), one with a dead-letter queue, and one that is a dead-letter
queue.

flags:
`)
		fs.PrintDefaults()
	}
	return fs
}

// check parses --at and --version-path and returns what is wrong with the
// flags, if anything.
func (o *inspection) check(fs *flag.FlagSet) string {
	var err, perr error
	o.delays, err = parseDelays(o.at)
	o.path, perr = inspect.ParsePath(o.versionPath)
	switch {
	case fs.NArg() > 0:
		return fmt.Sprintf("unexpected argument %q: everything is a flag", fs.Arg(0))
	case err != nil:
		return "--at: " + err.Error()
	case perr != nil:
		return "--version-path: " + perr.Error()
	case o.stream == "" && o.table == "" && o.queue == "":
		return "nothing to read: give --stream (or --table), --queue or both"
	case o.stream != "" && o.table != "":
		return "--stream and --table both name a stream: give one"
	case !(o.sample > 0 && o.sample <= 1):
		return "--sample: want a share above 0, up to 1"
	case !(o.wantNines >= 0):
		return "--want-nines: want a number of nines, 0 or more"
	case o.receivers < 1:
		return "--receivers: want 1 or more"
	case o.run < 0:
		return "--for: want a duration, or 0 for until interrupted"
	case o.localLifetime <= 0:
		return "--local-lifetime: want a duration above 0"
	}
	return ""
}

// stopOnSignals returns the contexts of the reading and of the checks: the
// first signal ends the reading, as the end of run does when it is set,
// the second the checks. stop releases them.
func stopOnSignals(run time.Duration) (read, checks context.Context, stop func()) {
	read, stopReading := context.WithCancel(context.Background())
	checks, stopChecks := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-signals
		stopReading()
		<-signals
		stopChecks()
		signal.Stop(signals) // a third one ends the process
	}()
	if run > 0 {
		time.AfterFunc(run, stopReading)
	}
	return read, checks, func() {
		signal.Stop(signals)
		stopChecks()
		stopReading()
	}
}

// sources opens what the flags name to read: the stream (--stream, or
// --table's latest) and the queue.
func (o *inspection) sources(ctx context.Context, s session) ([]inspect.Source, error) {
	stream := o.stream
	if o.table != "" && stream == "" {
		var err error
		if stream, err = latestStream(ctx, dynamodb.NewFromConfig(s.aws), o.table); err != nil {
			return nil, err
		}
	}
	var sources []inspect.Source
	if stream != "" {
		sources = append(sources, &inspect.Stream{Client: dynamodbstreams.NewFromConfig(s.aws), ARN: stream})
	}
	if o.queue != "" {
		client := sqs.NewFromConfig(s.aws)
		if err := own.Check(ctx, client, o.queue, os.Getenv, own.RefuseAll); err != nil {
			return nil, fmt.Errorf("%w; inspect consumes what it reads: give it a queue of its own, subscribed to the topic (INSPECT_QUEUE_URL; the template's cache-invalidation-inspect)", err)
		}
		sources = append(sources, &inspect.Queue{Client: client, URL: o.queue, Receivers: o.receivers})
	}
	return sources, nil
}

// runInspection runs in over sources, printing its progress on stderr
// every two seconds.
func runInspection(in *inspect.Inspector, read, checks context.Context, sources []inspect.Source, stderr io.Writer) (inspect.Report, error) {
	start := time.Now()
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fmt.Fprintln(stderr, progress(in.Snapshot(), time.Since(start), read.Err() != nil))
			}
		}
	}()
	defer close(done)
	return in.Run(read, checks, sources...)
}

// verdict is the exit status of a finished inspection: 1 when --want-nines
// asks for more nines than the longest delay shows.
func (o *inspection) verdict(rep inspect.Report, stderr io.Writer) int {
	if last := rep.Delays[len(rep.Delays)-1]; o.wantNines > 0 {
		n, _ := last.Nines()
		switch {
		case last.Compared() == 0:
			fmt.Fprintf(stderr, "invalidator inspect: no key compared at +%v (unverified %d, unreadable %d): no nines to show\n", last.After, last.Unverified, last.Unreadable)
			return 1
		case n < o.wantNines:
			fmt.Fprintf(stderr, "invalidator inspect: %.2f nines at +%v, want %v (with none inconsistent, %.0f checks show %v)\n",
				n, last.After, o.wantNines, math.Ceil(math.Pow(10, o.wantNines)), o.wantNines)
			return 1
		}
	}
	return 0
}

func latestStream(ctx context.Context, db *dynamodb.Client, table string) (string, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", err
	}
	if out.Table.LatestStreamArn == nil {
		return "", fmt.Errorf("table %s has no stream", table)
	}
	return *out.Table.LatestStreamArn, nil
}

func parseDelays(s string) ([]time.Duration, error) {
	var out []time.Duration
	for f := range strings.SplitSeq(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q: want durations after the change, like 1s,10s", s)
		}
		if len(out) > 0 && d <= out[len(out)-1] {
			return nil, fmt.Errorf("%q: want increasing delays", s)
		}
		out = append(out, d)
	}
	return out, nil
}

// progress is the line printed every two seconds on stderr.
func progress(r inspect.Report, elapsed time.Duration, finishing bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "inspect %v: %d changes read, %d sampled; checked", elapsed.Round(time.Second), r.Changes, r.Sampled)
	for _, d := range r.Delays {
		fmt.Fprintf(&b, " +%v: %d keys, %d inconsistent;", d.After, d.Keys, d.Inconsistent)
	}
	if r.ReadErrors > 0 {
		fmt.Fprintf(&b, " %d failed reads (last: %s);", r.ReadErrors, r.LastReadError)
	}
	if finishing {
		b.WriteString(" reading stopped, finishing the checks")
	}
	return strings.TrimSuffix(b.String(), ";")
}

func printReport(w io.Writer, r inspect.Report) {
	fmt.Fprintf(w, "%d records read: %d changes, %d sampled; %d records undecodable, %d sampled changes with no keys, %d duplicate deliveries\n",
		r.Records, r.Changes, r.Sampled, r.Undecodable, r.Unplanned, r.Duplicates)
	if r.ReadErrors > 0 {
		fmt.Fprintf(w, "%d reads of the sources failed and were retried; the last: %s\n", r.ReadErrors, r.LastReadError)
	}
	if l := r.Local; l != nil {
		fmt.Fprintf(w, "through a local tier: %d keys from memory, %d reads kept, %d keys dropped by %d announcements, flushes %v\n",
			l.Hits, l.Kept, l.Dropped, l.Messages, l.Flushes)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "after\tkeys\tconsistent\t(absent)\tinconsistent\tunverified\tunreadable\tlate\tconsistency\tnines")
	for _, d := range r.Delays {
		share, nines := "n/a", "n/a" // no key compared
		if d.Compared() > 0 {
			n, atLeast := d.Nines()
			share, nines = fmt.Sprintf("%.4f%%", 100*d.Share()), strconv.FormatFloat(math.Floor(n*100)/100, 'f', 2, 64)
			if atLeast {
				nines = "≥ " + nines // all consistent: more checks could show more
			}
		}
		fmt.Fprintf(tw, "+%v\t%d\t%d\t(%d)\t%d\t%d\t%d\t%d\t%s\t%s\n", d.After, d.Keys, d.Consistent, d.Absent, d.Inconsistent, d.Unverified, d.Unreadable, d.Late, share, nines)
	}
	tw.Flush()
	for _, d := range r.Delays {
		if d.Keys > 0 && d.Unverified*2 > d.Keys {
			fmt.Fprintf(w, "most keys at +%v hold values without a version to compare: give --version-path, or cache through writethrough with a VersionOf\n", d.After)
			break
		}
	}
	if len(r.Inconsistent) > 0 {
		fmt.Fprintf(w, "inconsistent keys (up to %d a delay):\n", findings)
		for _, f := range r.Inconsistent {
			if f.Tag != "" {
				fmt.Fprintf(w, "  +%v %s, in tag %s, holds a value filled before the change to %s %s\n", f.After, f.Key, f.Tag, f.Entity, f.ID)
				continue
			}
			fmt.Fprintf(w, "  +%v %s holds version %d, the change to %s %s made %d\n", f.After, f.Key, f.Found, f.Entity, f.ID, f.Want)
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
