package fleetbudget

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/internal/tagset"
)

// Keys are the keys of a budget of perSecond ECPUs a second: every
// process on a cache given the same budget shares them, whichever stack it
// belongs to, and one given another its own, so that no process paces
// another by its rate. Their hashtags' slots, 16284 and 105, are at the
// two ends of the cluster's: in its last shard and its first, whatever
// their count (worker's tests ask the cluster). The worker's cache user
// needs them in its key patterns (Pattern; template.yaml adds it).
func Keys(perSecond float64) [2]string {
	rate := strconv.FormatFloat(perSecond, 'f', -1, 64)
	return [2]string{prefix + "{b76}" + rate, prefix + "{b26}" + rate}
}

const prefix = "invalidator:ecpu-budget:"

// Pattern matches every budget's key: the worker's user's ACL needs it.
const Pattern = prefix + "*"

// How far ahead of the cache's clock grants may run: what the fleet may
// spend at once beyond its rate. Queue bounds how far ahead a refused take
// is told to come back: takes that never came back hold the line that long
// at most.
const (
	Ahead   = 100 * time.Millisecond
	Reserve = 400 * time.Millisecond
	Queue   = 10 * time.Minute
)

// takeScript grants ARGV[2] ECPUs of a budget of ARGV[1] ECPUs a second
// kept at KEYS[1], to first deletes when ARGV[3] is 1; ARGV[4] to [6] are
// Ahead, Reserve and Queue in ms, ARGV[7] the take's place in the line, or
// 0. The hash holds 't', the theoretical arrival time, and 'q', where the
// line of refused takes ends, in ms of the cache's clock. While there is a
// line, a take without a place joins it: no process that was just granted
// goes before one that waits. A take with a place keeps it, told to come
// back when the line reaches it, and is then granted once the fleet is at
// most twice Ahead ahead, however large it is; else it takes a new place,
// at the line's end: the takes whose turn came while the fleet ran ahead
// (the first deletes granted meanwhile move the line on) come back as far
// apart as their places, not all at once to be refused again, all but
// one, over and over. It returns the ECPUs granted, in
// thousandths, the ms to wait — before spending them when granted, before
// asking again when not — and the take's place. HGET and HSET, not HMGET:
// the worker's user has them for tags.
var takeScript = tagset.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local rate, want, first = tonumber(ARGV[1]) / 1000, tonumber(ARGV[2]), ARGV[3] == '1'
local ahead, reserve, queue, place = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local tat = math.max(tonumber(redis.call('HGET', KEYS[1], 't')) or now, now)
local lead, takes = tat - now, want / rate
if not first then
  local q = math.min(math.max(tonumber(redis.call('HGET', KEYS[1], 'q')) or tat, tat), now + queue)
  local fits = lead == 0 or lead + takes <= ahead
  if place > 0 then
    if place - ahead > now then return {0, math.ceil(place - ahead - now), place} end
    fits = lead <= 2 * ahead
  elseif q > tat then fits = false end
  if not fits then
    redis.call('HSET', KEYS[1], 'q', string.format('%.3f', q + takes))
    return {0, math.ceil(math.max(q - ahead - now, 1)), math.max(math.floor(q), 1)}
  end
end
local wait = 0
if first and lead > ahead + reserve then wait = math.ceil(lead - ahead - reserve) end
redis.call('HSET', KEYS[1], 't', string.format('%.3f', tat + takes))
return {math.floor(want * 1000), wait, 0}`)

// Client is what taking needs of a valkey-go client.
type Client = tagset.Client

// Take asks the budget of perSecond ECPUs a second at key (one of Keys) for want ECPUs, for first deletes or not, from its place
// in the line (0: none), first deletes running up to reserve (Reserve, but
// to measure it) beyond Ahead. It returns the ECPUs granted — want, or 0
// when refused —, the time to wait — before spending them when granted,
// before asking again when refused — and, when refused, its place, to ask
// again with.
func Take(ctx context.Context, c Client, key string, perSecond, want float64, first bool, place int64, reserve time.Duration) (got float64, wait time.Duration, next int64, err error) {
	if perSecond <= 0 || want <= 0 || math.IsInf(want, 0) || math.IsNaN(want) {
		return 0, 0, 0, fmt.Errorf("fleetbudget: %g ECPUs of %g a second", want, perSecond)
	}
	f := "0"
	if first {
		f = "1"
	}
	reply, err := takeScript.Each(ctx, c, []string{key}, func(int) []string {
		return []string{strconv.FormatFloat(perSecond, 'f', 3, 64), strconv.FormatFloat(want, 'f', 3, 64), f,
			ms(Ahead), ms(reserve), ms(Queue), strconv.FormatInt(place, 10)}
	})[0].AsIntSlice()
	if err != nil {
		return 0, 0, 0, err
	}
	if len(reply) != 3 {
		return 0, 0, 0, fmt.Errorf("fleetbudget: a reply of %d values", len(reply))
	}
	return float64(reply[0]) / 1000, time.Duration(reply[1]) * time.Millisecond, reply[2], nil
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
