// Package cacheconn builds the valkey-go client of the cache from the
// worker's configuration, so every binary and test connects the same way.
package cacheconn
