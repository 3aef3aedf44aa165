package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/frontend/worker"
	"github.com/invalidator-go/invalidator/invalidate"
)

func keysVerb(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rulesFile := rulesFlag(fs)
	asJSON := fs.Bool("json", false, "one JSON object per record on stdout")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: invalidator keys [flags] [FILE|-]

Reads an event from FILE, or standard input, and prints for each record the
keys the worker's rules plan for it, or why it fails — touching nothing. The
event may be a Lambda payload (SQS, SNS, DynamoDB Streams), one SQS message,
an SNS envelope, an EventBridge event or a change message. The exit status is
1 when a record fails.

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
	status := 0
	for _, rec := range records(data) {
		out := plan(rules, rec)
		if out.Error != "" {
			status = 1
		}
		if *asJSON {
			line, _ := json.Marshal(out)
			fmt.Fprintf(stdout, "%s\n", line)
		} else {
			id := cmp.Or(out.Record, "-") // a bare message has no ID
			if out.Error != "" {
				fmt.Fprintf(stdout, "%s\t%s\terror: %s\n", id, strings.Join(out.Keys, " "), out.Error)
			} else {
				fmt.Fprintf(stdout, "%s\t%s\n", id, strings.Join(out.Keys, " "))
			}
		}
	}
	return status
}

// planned is one record's keys, or why it fails.
type planned struct {
	Record string   `json:"record"`
	Keys   []string `json:"keys"`
	Error  string   `json:"error,omitempty"`
}

// plan plans rec's keys as the worker would, keeping those planned beside
// a failure, which the worker deletes too.
func plan(rules *invalidate.Rules, rec invalidate.Record) planned {
	out := planned{Record: rec.ID, Keys: []string{}}
	err := rec.Err
	for i := range rec.Changes {
		var perr error
		if out.Keys, perr = rules.Keys(&rec.Changes[i], out.Keys); err == nil {
			err = perr
		}
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// records decodes data as whatever event it is, as the front end for its
// source would.
func records(data []byte) []invalidate.Record {
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil {
		// An array of change messages, or what no decoder takes.
		changes, err := events.DecodeSQSBody("", string(data), "")
		return []invalidate.Record{{Changes: changes, Err: err}}
	}
	if _, ok := members["Records"]; !ok {
		if _, ok := members["body"]; ok {
			id, changes, err := events.DecodeSQSJSON(data)
			return []invalidate.Record{{ID: id, Changes: changes, Err: err}}
		}
		changes, err := events.DecodeSQSBody("", string(data), "")
		return []invalidate.Record{{Changes: changes, Err: err}}
	}
	raws, err := events.SplitRecords(data)
	if err != nil {
		return []invalidate.Record{{Err: err}}
	}
	out := make([]invalidate.Record, len(raws))
	for i, raw := range raws {
		out[i] = record(raw)
	}
	return out
}

// record decodes one record of a Lambda payload as the function for its
// source, told by its shape, does.
func record(raw []byte) invalidate.Record {
	var members map[string]json.RawMessage
	_ = json.Unmarshal(raw, &members)
	switch {
	case members["dynamodb"] != nil:
		return worker.Decode(events.SourceDynamoDB, raw)
	case members["Sns"] != nil:
		return worker.Decode(events.SourceSNS, raw)
	default:
		return worker.Decode(events.SourceSQS, raw)
	}
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
