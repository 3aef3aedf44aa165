package ratelimit

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/internal/luascript"
)

// Client is what a limiter needs of a client; valkey.Client has it.
type Client = luascript.Doer

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

// SlidingWindow allows Limit requests in any Window, logging each allowed
// request in a sorted set. Denied requests are not logged, so a client that
// keeps retrying is not locked out for longer.
type SlidingWindow struct {
	Client Client
	Limit  int64
	Window time.Duration
}

// slidingScript: drop entries older than the window, count, and log this
// request under a unique member if there is room. The oldest entry tells
// when room opens again.
var slidingScript = luascript.New(`
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
	return result(slidingScript.Run(ctx, s.Client, []string{key}, []string{micros(s.Window), strconv.FormatInt(s.Limit, 10), rand.Text()}).AsIntSlice())
}

// TokenBucket holds up to Capacity tokens and refills Rate tokens a second,
// continuously (fractions included); a request takes tokens or is denied.
type TokenBucket struct {
	Client   Client
	Capacity float64
	Rate     float64 // tokens per second
}

// bucketScript refills by the time since the last call, then takes ARGV[3]
// tokens if there are enough. The bucket is kept as long as refilling it
// takes, then forgotten, which is the same as full.
var bucketScript = luascript.New(`
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

// ErrCost is returned for a request costing more than the bucket holds.
var ErrCost = errors.New("ratelimit: cost above the bucket's capacity")

// Take decides a request costing cost tokens for key.
func (b *TokenBucket) Take(ctx context.Context, key string, cost float64) (Result, error) {
	if cost > b.Capacity || cost <= 0 {
		return Result{}, ErrCost
	}
	return result(bucketScript.Run(ctx, b.Client, []string{key}, []string{
		strconv.FormatFloat(b.Capacity, 'g', -1, 64), strconv.FormatFloat(b.Rate, 'g', -1, 64), strconv.FormatFloat(cost, 'g', -1, 64),
	}).AsIntSlice())
}

// Allow decides a request costing one token.
func (b *TokenBucket) Allow(ctx context.Context, key string) (Result, error) {
	return b.Take(ctx, key, 1)
}

// FixedWindow counts requests per Window, the window starting with its
// first request: the cheapest limiter, which lets up to twice Limit through
// around a window's edge.
type FixedWindow struct {
	Client Client
	Limit  int64
	Window time.Duration
}

var fixedScript = luascript.New(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local limit = tonumber(ARGV[1])
if n <= limit then return {1, limit - n, 0} end
return {0, 0, math.max(0, redis.call('PTTL', KEYS[1])) * 1000}`)

// Allow decides one request for key.
func (f *FixedWindow) Allow(ctx context.Context, key string) (Result, error) {
	return result(fixedScript.Run(ctx, f.Client, []string{key}, []string{strconv.FormatInt(f.Limit, 10), strconv.FormatInt(f.Window.Milliseconds(), 10)}).AsIntSlice())
}
