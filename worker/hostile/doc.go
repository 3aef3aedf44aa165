// Package hostile holds the hostile-input suite, and nothing else: one
// table of crafted inputs — huge sets, lists and messages, foreign and
// malformed values in the cache, escape-heavy and oversize bodies, ids no
// key should be guessed from — run through each front end (the SQS, SNS and
// stream functions and the poller) against the fakes (-short) and against
// the local stack. Every record must end done or parked with its reason on
// its first delivery, in bounded time and memory, and nothing the worker
// sends may pass an AWS limit. Rows that are about the template, the docs,
// the CLI or the services' library check their property at its own layer.
package hostile
