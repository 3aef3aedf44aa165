package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

func keysVerb(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rulesFile := rulesFlag(fs)
	asJSON := fs.Bool("json", false, "one JSON object per record on stdout")
	members := fs.Int("members", 0, "also read from the cache up to this many of the current members of each tag (HGET, HSCAN only); the CACHE_* settings as the worker reads them")
	endpoint := fs.String("cache-endpoint", os.Getenv("CACHE_ENDPOINT"), "host:port of the cache, for --members [CACHE_ENDPOINT]")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: invalidator keys [flags] [FILE|-]

Reads an event from FILE, or standard input, and prints for each record the
keys and the tags the worker's rules plan for it, or why it fails — touching
nothing; with --members, the entries each tag holds now, which its
invalidation would delete. The event may be a Lambda payload (SQS, SNS,
DynamoDB Streams, Kinesis, Kafka), one SQS message, an SNS envelope, an EventBridge
event, a change message, or a row as AWS DMS or Debezium writes it. The exit
status is 1 when a record fails.

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	in := io.Reader(os.Stdin)
	if name := fs.Arg(0); name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(stderr, "invalidator keys:", err)
			return 2
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(in)
	if err != nil {
		fmt.Fprintln(stderr, "invalidator keys:", err)
		return 2
	}
	rules, err := invalidate.RulesFromEnv(ruleEnv(*rulesFile, os.Getenv))
	if err != nil {
		fmt.Fprintln(stderr, "invalidator keys:", err)
		return 2
	}
	var cache valkey.Client
	if *members > 0 {
		s, err := connect(context.Background(), *endpoint, *rulesFile)
		if err != nil {
			fmt.Fprintln(stderr, "invalidator keys:", err)
			return 2
		}
		defer s.cache.Close()
		cache = s.cache
	}
	status := 0
	for _, rec := range records(rules, data) {
		out := plan(rules, rec)
		if cache != nil {
			out.Members = map[string]tagMembers{}
			for _, tag := range out.Tags {
				t, err := invalidate.ReadTag(context.Background(), cache, rules.TagKey(tag), *members)
				if err != nil {
					fmt.Fprintln(stderr, "invalidator keys:", err)
					return 2
				}
				m := tagMembers{Keys: []string{}, More: t.More}
				for _, member := range t.Members {
					m.Keys = append(m.Keys, member.Key)
				}
				out.Members[tag] = m
			}
		}
		if out.Error != "" {
			status = 1
		}
		if *asJSON {
			line, _ := json.Marshal(out)
			fmt.Fprintf(stdout, "%s\n", line)
		} else {
			out.print(stdout)
		}
	}
	return status
}

// planned is one record's keys and tags, or why it fails, and the members
// of its tags when asked for.
type planned struct {
	Record  string                `json:"record"`
	Keys    []string              `json:"keys"`
	Tags    []string              `json:"tags"`
	Members map[string]tagMembers `json:"members,omitempty"`
	Error   string                `json:"error,omitempty"`
}

// tagMembers are the entries a tag holds; More says there are others.
type tagMembers struct {
	Keys []string `json:"keys"`
	More bool     `json:"more,omitempty"`
}

// print writes out as text: the record's ID, keys, tags and error on its
// line, the members of each tag on one line each below, each shown as the
// terminal can take it.
func (out planned) print(w io.Writer) {
	line := item(cmp.Or(out.Record, "-")) + "\t" + items(out.Keys) // a bare message has no ID
	if len(out.Tags) > 0 {
		line += "\ttags: " + items(out.Tags)
	}
	if out.Error != "" {
		line += "\terror: " + shown(out.Error)
	}
	fmt.Fprintln(w, line)
	for _, tag := range out.Tags {
		if m, ok := out.Members[tag]; ok {
			keys := cmp.Or(items(m.Keys), "(none)")
			if m.More {
				keys += " …"
			}
			fmt.Fprintf(w, "\ttag %s: %s\n", item(tag), keys)
		}
	}
}

// shown is s as it is when every character of it prints, else quoted as Go
// quotes strings (\n, \x1b, \u202e): a key may hold a terminal's escape
// sequences, which must not reach the terminal.
func shown(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// item is s shown in a list separated by spaces: quoted also when it holds
// a space or begins with a quote, so that each item reads as one.
func item(s string) string {
	if strings.Contains(s, " ") || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	return shown(s)
}

// items are the items shown, separated by spaces.
func items(list []string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = item(s)
	}
	return strings.Join(out, " ")
}

// plan plans rec's keys and tags as the worker would, keeping those
// planned beside a failure, which the worker invalidates too.
func plan(rules *invalidate.Rules, rec invalidate.Record) planned {
	out := planned{Record: rec.ID, Keys: []string{}, Tags: []string{}}
	err := rec.Err
	for i := range rec.Changes {
		var kerr, terr error
		out.Keys, kerr = rules.Keys(&rec.Changes[i], out.Keys)
		out.Tags, terr = rules.Tags(&rec.Changes[i], out.Tags)
		err = cmp.Or(err, kerr, terr)
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// records decodes data as whatever event it is, as the front end for its
// source would with rules: a Lambda payload, one record of one, or a
// message body.
func records(rules *invalidate.Rules, data []byte) []invalidate.Record {
	raws, err := events.SplitRecords(data)
	if err != nil {
		if _, ok := events.SourceOf(data); ok {
			return []invalidate.Record{record(rules, data)}
		}
		// An array of change messages, or what no decoder takes.
		changes, err := events.DecodeSQSBody("", string(data), "")
		return []invalidate.Record{{Changes: changes, Err: err}}
	}
	out := make([]invalidate.Record, len(raws))
	for i, raw := range raws {
		out[i] = record(rules, raw)
	}
	return out
}

// record decodes one record of a Lambda payload as the function for its
// source, told by its shape, does with rules.
func record(rules *invalidate.Rules, raw []byte) invalidate.Record {
	source, ok := events.SourceOf(raw)
	if !ok {
		source = events.SourceSQS
	}
	d, changes, err := events.Decode(source, raw, rules.Attributes())
	return invalidate.Record{ID: d.ID, Changes: changes, Err: err}
}

// ruleEnv is getenv with the rules file given by flag, which then wins over
// INVALIDATION_RULES.
func ruleEnv(rulesFile string, getenv func(string) string) func(string) string {
	return func(key string) string {
		switch {
		case key == "INVALIDATION_RULES_FILE":
			return rulesFile
		case key == "INVALIDATION_RULES" && rulesFile != "":
			return ""
		}
		return getenv(key)
	}
}
