package leaderboard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/luascript"
)

// Client is what a Board needs of a client; valkey.Client has it.
type Client = luascript.Doer

// ErrPointsOutOfRange is returned when points would leave 0..MaxPoints,
// where they are no longer exact.
var ErrPointsOutOfRange = errors.New("leaderboard: points out of range")

// Options shape a Board's scores. The zero value gives the defaults.
type Options struct {
	// Epoch is when time starts counting. Default 2026-01-01T00:00:00Z.
	Epoch time.Time
	// Resolution is the smallest difference in time that breaks a tie.
	// Default 1 s.
	Resolution time.Duration
	// TimeBits is the part of the score given to time (1-52): the board
	// lasts Resolution × 2^TimeBits from Epoch. Default 32.
	TimeBits uint
	// Now tells the time. Default time.Now.
	Now func() time.Time
}

// Board is one leaderboard.
type Board struct {
	client Client
	key    string
	opts   Options
}

// New returns the board stored at key.
func New(client Client, key string, opts Options) (*Board, error) {
	if opts.Epoch.IsZero() {
		opts.Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if opts.Resolution <= 0 {
		opts.Resolution = time.Second
	}
	if opts.TimeBits == 0 {
		opts.TimeBits = 32
	}
	if opts.TimeBits > 52 {
		return nil, fmt.Errorf("leaderboard: TimeBits %d leaves no bits for points", opts.TimeBits)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Board{client: client, key: key, opts: opts}, nil
}

// MaxPoints is the most points a player can have while staying exact.
func (b *Board) MaxPoints() int64 { return 1<<(53-b.opts.TimeBits) - 1 }

// fraction encodes now: earlier is larger, always below 1.
func (b *Board) fraction() (float64, error) {
	units := int64(b.opts.Now().Sub(b.opts.Epoch) / b.opts.Resolution)
	last := int64(1)<<b.opts.TimeBits - 1
	if units < 0 || units > last {
		return 0, fmt.Errorf("leaderboard: %v is outside the board's time span", b.opts.Now())
	}
	return float64(last-units) / math.Exp2(float64(b.opts.TimeBits)), nil
}

// addScript adds ARGV[2] points to member ARGV[1] and stamps the new total
// with the time fraction ARGV[3], in one step, refusing totals outside
// 0..ARGV[4].
var addScript = luascript.New(`
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
local points = 0
if cur then points = math.floor(tonumber(cur)) end
points = points + tonumber(ARGV[2])
if points < 0 or points > tonumber(ARGV[4]) then return redis.error_reply('OUTOFRANGE') end
redis.call('ZADD', KEYS[1], string.format('%.17g', points + tonumber(ARGV[3])), ARGV[1])
return points`)

// Add gives member delta points (negative to take some away) and returns
// the new total, reached now for the tie-break.
func (b *Board) Add(ctx context.Context, member string, delta int64) (int64, error) {
	f, err := b.fraction()
	if err != nil {
		return 0, err
	}
	points, err := addScript.Run(ctx, b.client, []string{b.key}, []string{
		member, strconv.FormatInt(delta, 10), strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatInt(b.MaxPoints(), 10),
	}).AsInt64()
	if verr, ok := valkey.IsValkeyErr(err); ok && verr.Error() == "OUTOFRANGE" {
		return 0, fmt.Errorf("%w: 0 to %d", ErrPointsOutOfRange, b.MaxPoints())
	}
	return points, err
}

// Set gives member exactly points, reached now.
func (b *Board) Set(ctx context.Context, member string, points int64) error {
	if points < 0 || points > b.MaxPoints() {
		return fmt.Errorf("%w: 0 to %d", ErrPointsOutOfRange, b.MaxPoints())
	}
	f, err := b.fraction()
	if err != nil {
		return err
	}
	return b.client.Do(ctx, b.client.B().Zadd().Key(b.key).ScoreMember().ScoreMember(float64(points)+f, member).Build()).Error()
}

// Entry is one player's place.
type Entry struct {
	Member string
	Points int64
	Rank   int64 // 1 is first
}

// Top returns the first n players.
func (b *Board) Top(ctx context.Context, n int64) ([]Entry, error) {
	scores, err := b.client.Do(ctx, b.client.B().Zrange().Key(b.key).Min("0").Max(strconv.FormatInt(n-1, 10)).Rev().Withscores().Build()).AsZScores()
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, len(scores))
	for i, s := range scores {
		entries[i] = Entry{Member: s.Member, Points: int64(math.Floor(s.Score)), Rank: int64(i) + 1}
	}
	return entries, nil
}

// Rank returns member's place (1 is first); ok is false when it has none.
func (b *Board) Rank(ctx context.Context, member string) (rank int64, ok bool, err error) {
	r, err := b.client.Do(ctx, b.client.B().Zrevrank().Key(b.key).Member(member).Build()).AsInt64()
	if valkey.IsValkeyNil(err) {
		return 0, false, nil
	}
	return r + 1, err == nil, err
}

// Points returns member's points; ok is false when it has none.
func (b *Board) Points(ctx context.Context, member string) (points int64, ok bool, err error) {
	s, err := b.client.Do(ctx, b.client.B().Zscore().Key(b.key).Member(member).Build()).AsFloat64()
	if valkey.IsValkeyNil(err) {
		return 0, false, nil
	}
	return int64(math.Floor(s)), err == nil, err
}
