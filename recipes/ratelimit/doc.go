// Package ratelimit has three rate limiters, each decided in one Lua script
// so that concurrent callers can never both take the last slot: a sliding
// window log, a token bucket and a fixed window counter. Time comes from
// the server (TIME), so clients with skewed clocks agree. Each limiter
// touches one key; name it with a hash tag ({user:42}) when other keys of
// the same subject must live in the same slot. The constructors refuse
// limits that cannot work, such as an empty window or a zero limit.
package ratelimit
