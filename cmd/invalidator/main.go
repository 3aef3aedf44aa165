// Command invalidator is the operator's tool beside the worker: each verb
// does one job, takes flags with environment fallbacks, answers --help, and
// exits non-zero when it fails.
//
//	invalidator keys      the keys an event's records plan, touching nothing
//	invalidator inspect   measure the cache's consistency with the changes
//	invalidator replay    re-invalidate what the failure queue (or a DLQ) holds
//	invalidator cache     set or get a key, or wait for its invalidation
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
)

// verb is one command of the tool.
type verb struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

var verbs = []verb{
	{"keys", "print the keys the rules plan for an event's records, touching nothing", keysVerb},
	{"inspect", "measure the cache's consistency with the changes, as a second consumer of the events", inspectVerb},
	{"replay", "re-invalidate what the failure queue (or a DLQ) holds, and delete what passes", replayVerb},
	{"cache", "set or get a key, or wait until an invalidation deletes it", cacheVerb},
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]) {
		usage(stdout)
		return 0
	}
	for _, v := range verbs {
		if v.name == args[0] {
			return v.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "invalidator: unknown verb %q\n\n", args[0])
	usage(stderr)
	return 2
}

// parse parses a verb's flags; when it is not ok the verb returns code:
// 0 after --help, 2 after a bad flag.
func parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// rulesFlag is the --rules flag of the verbs that plan keys.
func rulesFlag(fs *flag.FlagSet) *string {
	return fs.String("rules", os.Getenv("INVALIDATION_RULES_FILE"), "the worker's rules file, else INVALIDATION_RULES [INVALIDATION_RULES_FILE]")
}

// rulesGiven says whether the worker's rules were given: a file (--rules,
// INVALIDATION_RULES_FILE) or INVALIDATION_RULES; else the default rules
// plan keys that may not be the worker's.
func rulesGiven(rulesFile string) bool {
	return rulesFile != "" || os.Getenv("INVALIDATION_RULES") != ""
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: invalidator <verb> [flags]   (invalidator <verb> --help for its flags)")
	fmt.Fprintln(w, "\nverbs:")
	for _, v := range verbs {
		fmt.Fprintf(w, "  %-8s %s\n", v.name, v.summary)
	}
}
