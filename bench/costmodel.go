package main

import (
	"math"
	"time"
)

// Public list prices, US East (N. Virginia), as known on 2026-12-01. There
// is no internet here: each was read from the copies of the pages (or of
// pages quoting them) that the search tool holds — see bench/README.md,
// "What it costs", for which and of when.
const (
	// aws.amazon.com/lambda/pricing: $0.20 per million requests; Arm
	// duration $0.0000133334 per GB-second for the first 7.5 billion
	// GB-seconds a month, rounded up to the next millisecond per invoke.
	lambdaRequestUSD = 0.20 / 1e6
	lambdaArmGBsUSD  = 0.0000133334
	// aws.amazon.com/sqs/pricing: standard queues, $0.40 per million
	// requests (each 64 KB of payload one request), the first 100 billion
	// a month. A receive that returns nothing is a request too.
	sqsRequestUSD = 0.40 / 1e6
	// aws.amazon.com/sns/pricing: $0.50 per million publishes (64 KB
	// each); deliveries to SQS queues and Lambda functions are free.
	snsPublishUSD = 0.50 / 1e6
	// aws.amazon.com/fargate/pricing: Linux/ARM, per vCPU-hour and per
	// GB-hour.
	fargateArmVCPUHourUSD = 0.03238
	fargateArmGBHourUSD   = 0.00356
	// aws.amazon.com/elasticache/pricing: ElastiCache Serverless for
	// Valkey, $0.0023 per million ECPUs; a simple command moving up to
	// 1 KB, such as an UNLINK of one key, is 1 ECPU.
	valkeyECPUUSD = 0.0023 / 1e6
	// aws.amazon.com/cloudwatch/pricing: Standard logs ingested, $0.50 per
	// GB: Lambda's first tier, and what the poller's awslogs driver sends.
	logsIngestedUSDPerGB = 0.50
)

// How the deployment runs, from template.yaml and the AWS documentation.
const (
	// Lambda gives a function CPU in proportion to its memory: 1,769 MB is
	// one vCPU-second per second (docs.aws.amazon.com/lambda/latest/dg/
	// configuration-memory.html).
	mbPerVCPU = 1769
	// An idle SQS event source mapping long-polls with five pollers
	// (docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html:
	// "five concurrent batches", "as few as 2" when traffic is low), each
	// waiting up to 20 s, SQS's longest poll.
	lambdaIdlePollers = 5
	longPollSeconds   = 20
	// The poller's receive loops on each of its two queues
	// (poller.Options.Receivers), each long-polling 20 s (POLLER_WAIT_TIME).
	pollerReceivers = 2
	// The poller's task: 0.25 vCPU and 0.5 GB on arm64, run at most this
	// busy before another task is added.
	taskVCPU, taskGB, taskBusy = 0.25, 0.5, 0.7
	// The bounds of the billed-duration model: Graviton's core at worst this
	// much slower than this machine's on the same work, and the round trip
	// to ElastiCache in a VPC this much longer than over loopback.
	slowerCore  = 1.5
	cacheTripMs = 1.0
)

// cpuShare is the share of a vCPU a function of the template's memory
// size gets: 0.145 at 256 MB.
const cpuShare = float64(memoryMB) / mbPerVCPU

// billedMs models what Lambda bills for one invoke at memoryMB on arm64:
// the emulator's Duration with the function's CPU time stretched by the
// share of a vCPU the memory buys (central), or not stretched at all
// (low), or stretched on a core half again as slow and with a longer trip
// to the cache (high); rounded up to the next millisecond.
func billedMs(u invokeUse) (central, low, high float64) {
	ms, cpu := u.ms, float64(u.cpu)/float64(time.Millisecond)
	return math.Ceil(ms + cpu*(1/cpuShare-1)), math.Ceil(ms), math.Ceil(ms + cpu*(slowerCore/cpuShare-1) + cacheTripMs)
}

// figures are a cell's counts per 1,000 changes.
type figures struct {
	Changes                         int // handled: sent once, but moto or the SDK may deliver one twice
	Invokes, SecondInvokes          float64
	DurationMs, CPUMs               float64 // the emulator's Durations; the functions' CPU time
	BilledMs, BilledLow, BilledHigh float64
	// SQS requests: every client's, Lambda's pollers', the functions' and
	// the poller's. Receives are those that brought messages; the empty
	// ones counted here are the local stack's and are modelled instead.
	Receives, Empty, Deletes, Visibility, Sends float64
	MessagesPerReceive                          float64
	StreamReads                                 float64 // DynamoDB Streams requests: free to Lambda
	Unlinks, SecondDeleteKeys                   float64
	LogBytes, PollerCPUMs                       float64
}

func (u cellUse) figures() figures {
	f := figures{Changes: u.handled()}
	per := 1000 / float64(f.Changes)
	f.Invokes, f.SecondInvokes = float64(len(u.first)+len(u.again))*per, float64(len(u.again))*per
	for _, i := range append(append([]invokeUse(nil), u.first...), u.again...) {
		c, lo, hi := billedMs(i)
		f.DurationMs += i.ms * per
		f.CPUMs += float64(i.cpu) / float64(time.Millisecond) * per
		f.BilledMs, f.BilledLow, f.BilledHigh = f.BilledMs+c*per, f.BilledLow+lo*per, f.BilledHigh+hi*per
	}
	sqs := u.mapping.add(u.function).add(u.poller)
	receives := sqs.Calls["ReceiveMessage"] - sqs.Empty
	f.Receives, f.Empty = float64(receives)*per, float64(sqs.Empty)*per
	f.Deletes = float64(sqs.Calls["DeleteMessageBatch"]+sqs.Calls["DeleteMessage"]) * per
	f.Visibility = float64(sqs.Calls["ChangeMessageVisibilityBatch"]+sqs.Calls["ChangeMessageVisibility"]) * per
	f.Sends = float64(sqs.Calls["SendMessage"]+sqs.Calls["SendMessageBatch"]) * per
	if receives > 0 {
		f.MessagesPerReceive = float64(sqs.Messages["ReceiveMessage"]) / float64(receives)
	}
	f.StreamReads = float64(sqs.Calls["GetRecords"]+sqs.Calls["GetShardIterator"]+sqs.Calls["DescribeStream"]) * per
	f.Unlinks = float64(u.unlinks) * per
	f.SecondDeleteKeys = float64(u.batches.SecondDeleteKey+u.batches.FailoverKey) * per
	f.LogBytes = float64(u.logBytes) * per
	f.PollerCPUMs = float64(u.pollerCPU) / float64(time.Millisecond) * per
	return f
}

// handled is how many changes the cell's first deletes took: one key
// each, or for the naive function, which logs no batch line, one invoke
// each. A message moto hands to two receivers, or sent again by the SDK
// after a reply it could not read, is a change more, and counted as one.
func (u cellUse) handled() int {
	if u.path == "naive" {
		return len(u.first)
	}
	return u.batches.KeysDeleted + u.batches.KeysAbsent - u.batches.SecondDeleteKey - u.batches.FailoverKey
}

// dollars is what a million changes cost on a path at a rate, by item.
type dollars struct {
	Requests, Duration, SQS, Fargate, Cache, Logs float64
	Tasks                                         int     // the poller's Fargate tasks
	DurationLow, DurationHigh                     float64 // the billed-duration model's bounds
}

func (d dollars) total() float64 {
	return d.Requests + d.Duration + d.SQS + d.Fargate + d.Cache + d.Logs
}

// idleMappings is how many SQS event source mappings of a Lambda path poll
// a queue: the SQS function's two (its queue and, as template.yaml always
// makes it, the delay queue), the delay queue's alone for the stream and
// SNS functions when they send second deletes.
func idleMappings(c cell) int {
	switch {
	case c.path == "sqs":
		return 2
	case c.path == "naive" || c.second:
		return 1
	}
	return 0
}

// cost prices a million changes of cell c at rate changes per second. What
// a Lambda path uses grows with the changes, but for the receives its idle
// pollers make whatever the rate; the poller pays for its tasks by the
// hour, and the rate sets how many it needs.
func cost(c cell, f figures, rate float64) dollars {
	const million = 1e6
	k := million / 1000 // figures are per 1,000 changes
	hours := million / rate / 3600
	gbs := func(ms float64) float64 { return ms * k / 1000 * memoryMB / 1024 * lambdaArmGBsUSD }
	d := dollars{
		Requests: f.Invokes * k * lambdaRequestUSD,
		Duration: gbs(f.BilledMs), DurationLow: gbs(f.BilledLow), DurationHigh: gbs(f.BilledHigh),
		Cache: f.Unlinks * k * valkeyECPUUSD,
		Logs:  f.LogBytes * k / (1 << 30) * logsIngestedUSDPerGB,
	}
	requests := (f.Receives + f.Deletes + f.Visibility + f.Sends) * k
	idlePerSecond := float64(idleMappings(c)*lambdaIdlePollers) / longPollSeconds
	if c.path == "poller" {
		d.Tasks = tasks(f, rate)
		d.Fargate = float64(d.Tasks) * taskHourUSD * hours
		idlePerSecond = float64(d.Tasks*2*pollerReceivers) / longPollSeconds
	}
	d.SQS = (requests + idlePerSecond*hours*3600) * sqsRequestUSD
	return d
}

// taskHourUSD is what one poller task costs an hour.
const taskHourUSD = taskVCPU*fargateArmVCPUHourUSD + taskGB*fargateArmGBHourUSD

// tasks is how many poller tasks rate changes per second keep at most
// taskBusy busy, at the CPU time per change measured here; one at least.
func tasks(f figures, rate float64) int {
	return max(1, int(math.Ceil(rate/changesPerTask(f))))
}

// changesPerTask is how many changes per second one task sustains.
func changesPerTask(f figures) float64 { return taskVCPU * taskBusy / (f.PollerCPUMs / 1000 / 1000) }

// coldStartUSD is what one cold start of a function costs at the template's
// memory size, since Lambda bills init too: its first invoke (init and
// handler, from outside) with the CPU time stretched as for any invoke.
func coldStartUSD(u cellUse) float64 {
	ms, _, _ := billedMs(invokeUse{ms: float64(u.cold) / float64(time.Millisecond), cpu: u.coldCPU})
	return ms / 1000 * memoryMB / 1024 * lambdaArmGBsUSD
}
