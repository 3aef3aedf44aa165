// Package env reads the environment variables of the functions and the
// poller: the one place they are read, so that an error names the variable
// at fault in one way, and docs_env_test.go finds every variable the
// binaries read by the names given to these readers.
//
// Each reader takes getenv (os.Getenv in production, a map in tests) and
// the variable's name, a string literal at every call: an unset or empty
// variable gives the default.
package env

import (
	"fmt"
	"strconv"
	"time"
)

// String returns the variable key, "" when unset.
func String(getenv func(string) string, key string) string {
	return getenv(key)
}

// Bool reads key, true or false as strconv.ParseBool reads them, def when
// unset.
func Bool(getenv func(string) string, key string, def bool) (bool, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", key, v)
	}
	return b, nil
}

// Int reads key, a whole number from lo to hi, def when unset.
func Int(getenv func(string) string, key string, def, lo, hi int) (int, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: want a whole number from %d to %d", key, v, lo, hi)
	}
	return n, nil
}

// Duration reads key, a Go duration from lo to hi, def when unset. A hi
// of 0 leaves it unbounded above.
func Duration(getenv func(string) string, key string, def, lo, hi time.Duration) (time.Duration, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && d >= lo && (hi == 0 || d <= hi) {
		return d, nil
	}
	if hi == 0 {
		return 0, fmt.Errorf("%s=%q: want a duration of %v or more, like 30s", key, v, lo)
	}
	return 0, fmt.Errorf("%s=%q: want a duration from %v to %v", key, v, lo, hi)
}
