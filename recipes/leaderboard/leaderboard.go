package leaderboard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"
)

// ErrPointsOutOfRange is returned when points would leave 0..MaxPoints,
// where they are no longer exact.
var ErrPointsOutOfRange = errors.New("leaderboard: points out of range")

// Options shape a Board's scores. The zero value gives the defaults.
type Options struct {
	// Epoch is when time starts counting. Default 2026-01-01T00:00:00Z.
	Epoch time.Time
	// Resolution is the smallest difference in time that breaks a tie,
	// above 0. Default 1 s.
	Resolution time.Duration
	// TimeBits is the part of the score given to time (1-52): the board
	// lasts Resolution × 2^TimeBits from Epoch. Default 32.
	TimeBits uint
	// Now tells the time. Default time.Now.
	Now func() time.Time
}

// Board is one leaderboard.
type Board struct {
	client valkey.Client
	key    string
	opts   Options
}

// New returns the board stored at key, or an error naming the option that
// cannot work.
func New(client valkey.Client, key string, opts Options) (*Board, error) {
	if key == "" {
		return nil, errors.New("leaderboard: key is empty, want the sorted set's name")
	}
	if opts.Epoch.IsZero() {
		opts.Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if opts.Resolution < 0 {
		return nil, fmt.Errorf("leaderboard: Resolution is %v, want above 0 (0 for the default 1s)", opts.Resolution)
	}
	if opts.Resolution == 0 {
		opts.Resolution = time.Second
	}
	if opts.TimeBits == 0 {
		opts.TimeBits = 32
	}
	if opts.TimeBits > 52 {
		return nil, fmt.Errorf("leaderboard: TimeBits is %d, want 1 to 52 (0 for the default 32): points need a bit", opts.TimeBits)
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
// with the time fraction ARGV[3], in one step. It refuses totals outside
// 0..ARGV[4] by returning -1, never a total.
var addScript = valkey.NewLuaScript(`
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
local points = 0
if cur then points = math.floor(tonumber(cur)) end
points = points + tonumber(ARGV[2])
if points < 0 or points > tonumber(ARGV[4]) then return -1 end
redis.call('ZADD', KEYS[1], string.format('%.17g', points + tonumber(ARGV[3])), ARGV[1])
return points`)

// Add gives member delta points (negative to take some away) and returns
// the new total, reached now for the tie-break.
func (b *Board) Add(ctx context.Context, member string, delta int64) (int64, error) {
	f, err := b.fraction()
	if err != nil {
		return 0, err
	}
	points, err := addScript.Exec(ctx, b.client, []string{b.key}, []string{
		member, strconv.FormatInt(delta, 10), strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatInt(b.MaxPoints(), 10),
	}).AsInt64()
	if err == nil && points < 0 {
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

// Top returns the first n players; none when n ≤ 0.
func (b *Board) Top(ctx context.Context, n int64) ([]Entry, error) {
	if n <= 0 {
		return nil, nil // ZRANGE 0 -1 would be the whole board
	}
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
