package main

import (
	"context"
	"encoding/base64"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// itemBytes is DynamoDB's largest item, as it counts an item's size: the
// names and values of its attributes. Each image of a hostile record holds
// one that large, the most a stream record can carry.
const itemBytes = 400 << 10

// hostileRules read each shape's attributes, as a table's rules may; and
// Multiply's are 5,000 templates over one set, which start-up accepts.
var hostileRules = `tables:
  Set: ["cache:tag:{item.tags}"]
  Binary: ["cache:blob:{item.blobs}"]
  Wide: ["cache:wide:{key.id}"]
  Deep: ["cache:deep:{new.` + strings.Repeat("d.", 32) + `v}"]
  Long: ["cache:name:{new.name}"]
  Cross: ["cache:x:{new.name}:{new.tags}"]
  Multiply: [` + members(5_000, func(i int) string { return `"cache:t` + strconv.Itoa(i) + `:{item.tags}"` }) + `]`

// hostileShape is one kind of hostile record: its table, the attributes of
// each of its images beside the key, in DynamoDB's JSON, and whether it is
// parked. Each image is an item of about itemBytes as DynamoDB counts its
// size, made of what costs the most to decode per byte counted.
type hostileShape struct {
	table  string
	image  func(version int) string
	parked bool
}

// short is the i-th of the distinct 3-byte strings of printable ASCII.
func short(i int) string {
	return string([]byte{byte(' ' + i%94), byte(' ' + i/94%94), byte(' ' + i/94/94%94)})
}

var hostileShapes = []hostileShape{
	// One string set of 3-byte members, one more in the new image:
	// {item.tags} passes its cap.
	{"Set", func(v int) string {
		return `"tags":{"SS":[` + members(itemBytes/3+v, func(i int) string { return strconv.Quote(short(i)) }) + `]}`
	}, true},
	// A binary set, each member decoded, and encoded again for a key.
	{"Binary", func(v int) string {
		return `"blobs":{"BS":[` + members(itemBytes/3+v, func(i int) string {
			return `"` + base64.StdEncoding.EncodeToString([]byte(short(i))) + `"`
		}) + `]}`
	}, true},
	// Attributes of a 3-byte name and a boolean.
	{"Wide", func(v int) string {
		return members(itemBytes/4, func(i int) string { return strconv.Quote(short(i)) + `:{"BOOL":` + strconv.FormatBool(v == 1) + `}` })
	}, false},
	// Maps nested as deep as DynamoDB allows, side by side.
	{"Deep", func(v int) string {
		deep := `{"v":{"S":"x` + strconv.Itoa(v) + `"}}`
		for range 31 {
			deep = `{"d":{"M":` + deep + `}}`
		}
		return `"d":{"M":` + deep + `},` + members(itemBytes/170, func(i int) string { return strconv.Quote(short(i)) + `:{"M":` + deep + `}` })
	}, false},
	// One string as long as an item, of characters JSON escapes in 6 bytes,
	// read into a key far over maxKeyBytes.
	{"Long", func(v int) string {
		return `"name":{"S":"` + strings.Repeat(`\u0001`, itemBytes-8) + strconv.Itoa(v) + `"}`
	}, true},
	// A string of most of an item crossed with a set of 1,000: a thousand
	// keys each as long as the string, were they built.
	{"Cross", func(v int) string {
		return `"name":{"S":"` + strings.Repeat("x", itemBytes-4_000) + strconv.Itoa(v) + `"},"tags":{"SS":[` +
			members(1000, func(i int) string { return strconv.Quote(short(i)) }) + `]}`
	}, true},
	// A set of 1,000 under 5,000 templates: 5,000,000 keys, were they
	// planned; the record's cap passed at the 51st template.
	{"Multiply", func(int) string {
		return `"tags":{"SS":[` + members(1000, func(i int) string { return strconv.Quote(short(i)) }) + `]}`
	}, true},
}

// members joins n elements made by member.
func members(n int, member func(i int) string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(member(i))
	}
	return b.String()
}

// payload is a stream function's payload of one MODIFY record of the shape,
// both images.
func (s hostileShape) payload() []byte {
	key := `{"id":{"S":"p1"}}`
	image := func(v int) string { return `{"id":{"S":"p1"},` + s.image(v) + `}` }
	return []byte(`{"Records":[{"eventID":"1","eventName":"MODIFY","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",` +
		`"eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/` + s.table + `/stream/2026-01-01T00:00:00.000",` +
		`"dynamodb":{"ApproximateCreationDateTime":1795953600,"Keys":` + key + `,"OldImage":` + image(0) + `,"NewImage":` + image(1) +
		`,"SequenceNumber":"100000000000000000001","SizeBytes":819200,"StreamViewType":"NEW_AND_OLD_IMAGES"}}]}`)
}

// hostileGroup measures the CPU time the stream function spends on one
// hostile record — split, decoded, planned, its keys deleted (in a cache
// in memory), parked (to an SQS that takes every message) when it fails
// for good — for each shape, the median of 5 runs, and its peak heap in a
// sixth, and prints the worst shape's of each: a 256 MB function has about
// a seventh of a vCPU, and must park such a record within a second; a
// 128 MB one holds the record beside its work.
func hostileGroup(ctx context.Context) {
	rules, err := invalidate.ParseRules([]byte(hostileRules))
	if err != nil {
		log.Fatal(err)
	}
	var parked atomic.Int64
	park := &timedParker{Parker: failurequeue.Queue{Client: takeAll{sent: &parked}, URL: "failure"}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := worker.New(invalidate.New(&cachetest.Cache{}, invalidate.Options{Rules: rules}), worker.Options{
		Logger: logger, Metrics: io.Discard, Park: park,
	})
	var worst, worstHeap float64
	for _, s := range hostileShapes {
		payload := s.payload()
		once := func() {
			parked.Store(0)
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			rep, err := w.Lambda(ctx, events.SourceDynamoDB, payload)
			if err != nil || len(rep.ToRetry()) != 0 || (parked.Load() == 1) != s.parked {
				log.Fatalf("%s: %v, %d to retry, %d parked; want it parked: %v", s.table, err, len(rep.ToRetry()), parked.Load(), s.parked)
			}
		}
		var took, parking []float64
		for range 5 {
			park.spent = 0
			runtime.GC()
			before := threadsCPU(os.Getpid())
			once()
			took, parking = append(took, ms(threadsCPU(os.Getpid())-before)), append(parking, ms(park.spent))
		}
		heap := peakHeap(once)
		log.Printf("hostile record, %s (%d KB of JSON): %.1f ms of CPU, %.1f of it parking; peak heap %.1f MiB", s.table, len(payload)>>10, median(took), median(parking), heap)
		worst, worstHeap = max(worst, median(took)), max(worstHeap, heap)
	}
	print("hostile_worst_record_cpu_ms", worst)
	print("hostile_worst_record_peak_heap_mib", worstHeap)
}

// timedParker parks through Parker and adds the CPU time it takes to spent.
type timedParker struct {
	worker.Parker
	spent time.Duration
}

func (p *timedParker) Park(ctx context.Context, records []failurequeue.Record) []error {
	before := threadsCPU(os.Getpid())
	defer func() { p.spent += threadsCPU(os.Getpid()) - before }()
	return p.Parker.Park(ctx, records)
}

// takeAll is an SQS that takes every message sent alone and counts them;
// parking sends nothing else.
type takeAll struct {
	queues.SQS
	sent *atomic.Int64
}

func (q takeAll) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.sent.Add(1)
	return &sqs.SendMessageOutput{}, nil
}
