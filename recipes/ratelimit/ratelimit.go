package ratelimit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"
)

// Result is a limiter's decision.
type Result struct {
	Allowed bool
	// Remaining is how many more requests would be allowed now.
	Remaining int64
	// RetryAfter is how long until a denied request would be allowed; 0
	// when allowed.
	RetryAfter time.Duration
}

func result(reply []int64, err error) (Result, error) {
	if err != nil {
		return Result{}, err
	}
	if len(reply) != 3 {
		return Result{}, errors.New("ratelimit: unexpected script reply")
	}
	return Result{Allowed: reply[0] == 1, Remaining: reply[1], RetryAfter: time.Duration(reply[2]) * time.Microsecond}, nil
}

func micros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// maxCount bounds limits and capacities: Lua counts in doubles, exact up
// to 2^53.
const maxCount = 1 << 53

// checkWindow refuses what the scripts cannot count: limit requests in a
// window the server expires in whole milliseconds (PEXPIRE 0 would delete
// the key, allowing everything).
func checkWindow(limiter string, limit int64, window time.Duration) error {
	if limit < 1 || limit > maxCount {
		return fmt.Errorf("ratelimit: %s limit is %d, want 1 to 2^53", limiter, limit)
	}
	if window < time.Millisecond {
		return fmt.Errorf("ratelimit: %s window is %v, want at least 1ms", limiter, window)
	}
	return nil
}

// SlidingWindow allows a number of requests in any window, logging each
// allowed request in a sorted set. Denied requests are not logged, so a
// client that keeps retrying is not locked out for longer.
type SlidingWindow struct {
	client valkey.Client
	limit  int64
	window time.Duration
}

// NewSlidingWindow returns a limiter allowing limit requests in any window.
func NewSlidingWindow(client valkey.Client, limit int64, window time.Duration) (*SlidingWindow, error) {
	if err := checkWindow("SlidingWindow", limit, window); err != nil {
		return nil, err
	}
	return &SlidingWindow{client: client, limit: limit, window: window}, nil
}

// slidingScript: drop entries older than the window, count, and log this
// request under a unique member if there is room. The oldest entry tells
// when room opens again.
var slidingScript = valkey.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  return {1, limit - count - 1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, 0, math.max(0, tonumber(oldest[2]) + window - now)}`)

// Allow decides one request for key.
func (s *SlidingWindow) Allow(ctx context.Context, key string) (Result, error) {
	return result(slidingScript.Exec(ctx, s.client, []string{key}, []string{micros(s.window), strconv.FormatInt(s.limit, 10), rand.Text()}).AsIntSlice())
}

// TokenBucket holds up to a capacity of tokens and refills at a rate of
// tokens a second, continuously (fractions included); a request takes
// tokens or is denied.
type TokenBucket struct {
	client   valkey.Client
	capacity float64
	rate     float64
}

// maxRefill bounds the time to refill an empty bucket, the longest
// RetryAfter: a time.Duration, about 292 years.
const maxRefill = time.Duration(math.MaxInt64)

// NewTokenBucket returns a bucket of capacity tokens refilled at rate
// tokens a second.
func NewTokenBucket(client valkey.Client, capacity, rate float64) (*TokenBucket, error) {
	if !(capacity > 0 && capacity <= maxCount) { // NaN included
		return nil, fmt.Errorf("ratelimit: TokenBucket capacity is %v, want above 0 and at most 2^53", capacity)
	}
	if !(rate > 0) || capacity/rate > maxRefill.Seconds() {
		return nil, fmt.Errorf("ratelimit: TokenBucket rate is %v tokens/s, want above 0 and capacity/rate (a full refill) under 292 years", rate)
	}
	return &TokenBucket{client: client, capacity: capacity, rate: rate}, nil
}

// bucketScript refills by the time since the last call, then takes ARGV[3]
// tokens if there are enough. The bucket is kept as long as refilling it
// takes, then forgotten, which is the same as full.
var bucketScript = valkey.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local capacity, rate, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(b[1]) or capacity, tonumber(b[2]) or now
tokens = math.min(capacity, tokens + (now - at) / 1000000 * rate)
local allowed, retry = 0, 0
if tokens >= cost then
  tokens, allowed = tokens - cost, 1
else
  retry = math.ceil((cost - tokens) / rate * 1000000)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%d', now))
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000) + 1000)
return {allowed, math.floor(tokens), retry}`)

// ErrCost is returned for a request costing nothing or more than the
// bucket holds.
var ErrCost = errors.New("ratelimit: cost not above 0 and within the bucket's capacity")

// Take decides a request costing cost tokens for key.
func (b *TokenBucket) Take(ctx context.Context, key string, cost float64) (Result, error) {
	if !(cost > 0 && cost <= b.capacity) { // NaN included
		return Result{}, ErrCost
	}
	return result(bucketScript.Exec(ctx, b.client, []string{key}, []string{
		strconv.FormatFloat(b.capacity, 'g', -1, 64), strconv.FormatFloat(b.rate, 'g', -1, 64), strconv.FormatFloat(cost, 'g', -1, 64),
	}).AsIntSlice())
}

// Allow decides a request costing one token.
func (b *TokenBucket) Allow(ctx context.Context, key string) (Result, error) {
	return b.Take(ctx, key, 1)
}

// FixedWindow counts requests per window, the window starting with its
// first request: the cheapest limiter, which lets up to twice the limit
// through around a window's edge.
type FixedWindow struct {
	client valkey.Client
	limit  int64
	window time.Duration
}

// NewFixedWindow returns a limiter allowing limit requests a window. The
// server keeps time in milliseconds: window is truncated to them.
func NewFixedWindow(client valkey.Client, limit int64, window time.Duration) (*FixedWindow, error) {
	if err := checkWindow("FixedWindow", limit, window); err != nil {
		return nil, err
	}
	return &FixedWindow{client: client, limit: limit, window: window}, nil
}

var fixedScript = valkey.NewLuaScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local limit = tonumber(ARGV[1])
if n <= limit then return {1, limit - n, 0} end
return {0, 0, math.max(0, redis.call('PTTL', KEYS[1])) * 1000}`)

// Allow decides one request for key.
func (f *FixedWindow) Allow(ctx context.Context, key string) (Result, error) {
	return result(fixedScript.Exec(ctx, f.client, []string{key}, []string{strconv.FormatInt(f.limit, 10), strconv.FormatInt(f.window.Milliseconds(), 10)}).AsIntSlice())
}
