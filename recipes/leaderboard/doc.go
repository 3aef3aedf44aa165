// Package leaderboard keeps a leaderboard in one sorted set, where at equal
// points the player who got there first ranks higher.
//
// A score is points + f, where the fraction f < 1 encodes how early the
// points were reached: f = (2^b − 1 − t) / 2^b for t time units since the
// epoch, b = TimeBits. Sorting by score therefore sorts by points, then by
// time. A float64 holds 53 bits exactly, so points stay exact up to
// 2^(53−b) − 1 (MaxPoints): with the default 32 bits of 1-second time units
// (136 years), 2,097,151 points. Fewer time bits, a coarser resolution or
// a shorter season buy more points. Points are whole numbers from 0 to
// MaxPoints; players with equal points reached in the same time unit are
// ordered by name.
package leaderboard
