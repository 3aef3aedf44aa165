package testenv

// BuildFlags are the go build flags that build a binary for a test as the
// test itself was built: with -race under go test -race, so that the
// binary shares the packages the test run compiled, rather than compiling
// every one of them again, and the race detector watches it too.
func BuildFlags() []string {
	if raceEnabled {
		return []string{"-race"}
	}
	return nil
}
