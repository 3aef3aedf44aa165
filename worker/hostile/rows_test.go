package hostile

import (
	"hash/crc32"
	"strconv"
	"strings"
	"testing"
)

// fate is what became of a record, as its source sees it.
type fate string

const (
	done    fate = "done"    // its keys deleted, acknowledged
	parked  fate = "parked"  // in the failure queue with its reason, acknowledged
	retry   fate = "retry"   // handed back to its source, to come again
	refused fate = "refused" // the worker refused its rules at start-up: nothing was taken
)

// fact is something in the cache before a row runs.
type fact struct {
	key string
	// string, hash, list, set, zset, stream; tag: a writethrough tag
	// registering the keys in values (which are not stored: facts of
	// their own store those a row looks at).
	kind string
	// values: a string's value; a hash's fields and values in pairs; the
	// members of the others.
	values []string
	// fake is the server's reply to any command on key, for the fakes,
	// which hold no types: what Valkey answers a script that meets this
	// value (WRONGTYPE, not an integer...). The stack answers for itself.
	fake string
}

// row is one crafted input: change messages (the SQS and SNS functions and
// the poller get each as a message) and stream records (the stream
// function), with what the cache holds, and what must come of them.
// Beside its records every front end gets an ordinary one, after them,
// which must be done and its key deleted: the rest of the batch proceeds.
type row struct {
	name    string
	finding string // the finding (26, "Why"; 38.4: issue 38's item 4) it shows, if any
	// messages are the bodies of the row's change messages, for namespace
	// ns; nil when the row has no message form.
	messages func(ns string) []string
	// records are the row's stream changes; nil when it has no stream form.
	records func(ns string) []change
	// rules are INVALIDATION_RULES, @TAGS@ being the run's tag prefix;
	// default baseRules.
	rules string
	// vars are the worker's other variables, as its environment holds them
	// (its ECPU budget).
	vars map[string]string
	// cache is what the cache holds first, tags under tags.
	cache func(ns, tags string) []fact
	// want are the fates the row's records may have: default done or
	// parked; never retry, which would come back and fail again.
	want []fate
	// reason is a text the reason of a parked record holds.
	reason string
	// deleted are keys that must be gone afterwards; kept keys must be
	// there still, and never sent to the cache at all.
	deleted, kept func(ns string) []string
	// good replaces the ordinary message beside the row's (its body, its
	// key and the fates it may have), for rows whose rules plan it
	// elsewhere.
	good func(ns string) (body, key string, want []fate)
	// noSecondDelete names the stages on which the row's keys are not sent
	// again through the delay queue: what the row measures does not need
	// them, and moto would hold them, slowly.
	noSecondDelete []string
	// retained bounds the heap a front end keeps once its batches are
	// done, the worker with it; default defaultRetained.
	retained int64
	// skip names front ends ("sqs-function", ..., or "stack/poller") the
	// row does not run through, and why.
	skip map[string]string
	// layer checks a finding at its own layer (template, docs, CLI,
	// writethrough) instead of through the front ends; stack says it needs
	// the local stack.
	layer func(t *testing.T)
	stack bool
}

// baseRules plan the keys of the ordinary records and most rows: change
// messages by the default template (cache:{entity}:{id}), stream records
// by their id and each of their labels.
const baseRules = `tables: {Products: ["cache:product:{key.id}", "cache:label:{item.labels}"]}
tagPrefix: "@TAGS@"
`

// tagRules add a tag for each stream record's id.
const tagRules = baseRules + `tags: {tables: {Products: ["product:{key.id}"]}}
`

// The replies of Valkey 8 that rows meet, for the fakes.
const (
	wrongType   = "WRONGTYPE Operation against a key holding the wrong kind of value script: 0c8e9b6d, on @user_script:3."
	notInteger  = "ERR value is not an integer or out of range script: 35c6b7d0, on @user_script:4."
	overflowing = "ERR increment or decrement would overflow script: 35c6b7d0, on @user_script:5."
	noPerm      = "NOPERM this user has no permissions to access one of the keys used as arguments"
)

func fates(f ...fate) []fate { return f }

// keys are n keys, the i-th key(i).
func keys(n int, key func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = key(i)
	}
	return out
}

// keysMessage is a change message naming keys.
func keysMessage(keys []string) string { return `{"keys":` + strs(keys) + `}` }

var rows = []row{
	// --- Finding 1: every expansion bounded, checked before the work ---
	{
		name: "a string set of 100,000 members in each image", finding: "1",
		records: func(ns string) []change {
			return []change{{event: "MODIFY", id: ns + "set",
				old: item(ns+"set", "labels", attrSS(members(0, 100_000))), new: item(ns+"set", "labels", attrSS(members(50_000, 100_000)))}}
		},
		want: fates(parked),
		skip: map[string]string{"messages": "a change message has no images: its sets are its keys and tags, the rows of 80,000 keys and 100,000 tags"},
	},
	{
		name: "a list of 100,000 elements", finding: "1",
		records: func(ns string) []change {
			list := make([]string, 100_000)
			for i := range list {
				list[i] = attrS(strconv.Itoa(i))
			}
			return []change{modify(ns+"list", "labels", attrL(list))}
		},
		want: fates(parked),
		skip: map[string]string{"messages": "a change message has no lists but its keys and tags"},
	},
	{
		name: "100,000 tags in one record", finding: "1",
		messages: func(ns string) []string { return []string{`{"tags":` + strs(members(0, 100_000)) + `}`} },
		records: func(ns string) []change {
			return []change{modify(ns+"tags", "labels", attrSS(members(0, 100_000)))}
		},
		rules: baseRules + `tags: {tables: {Products: ["label:{item.labels}"]}}
`,
		want: fates(parked),
	},
	{
		name: "80,000 keys in one message (what 1 MiB holds)", finding: "1",
		messages: func(ns string) []string {
			return []string{keysMessage(keys(80_000, func(i int) string { return "cache:" + strconv.FormatInt(int64(i), 36) }))}
		},
		want: fates(parked),
		skip: map[string]string{"stream-function": "a stream record's keys come from its sets: the row of 100,000 members"},
	},
	{
		name: "an array body of 35,000 changes (what 1 MiB holds)", finding: "1",
		messages: func(ns string) []string {
			var b strings.Builder
			b.WriteByte('[')
			for i := range 35_000 {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`{"entity":"p","id":"` + strconv.Itoa(i) + `"}`)
			}
			b.WriteByte(']')
			return []string{b.String()}
		},
		skip: map[string]string{"stream-function": "a stream record holds one change"},
	},
	{
		name: "a 6 MB payload",
		messages: func(ns string) []string {
			// Six messages of 1,000,000 bytes: 100 changes each, padded
			// with a field the worker skips. (The 35,000 changes of a
			// message are the row before's; six times them is 210,000
			// UNLINKs, which the stack's cluster takes longer than an
			// invoke under the race detector.)
			body := make([]string, 6)
			for m := range body {
				changes := make([]string, 100)
				for i := range changes {
					changes[i] = `{"entity":"product","id":"` + ns + strconv.Itoa(m*100+i) + `","pad":` + str(strings.Repeat("<x&\u2028", 1_640)) + `}`
				}
				body[m] = "[" + strings.Join(changes, ",") + "]"
			}
			return body
		},
		records: func(ns string) []change {
			// Fifteen items of 400 KB (DynamoDB's most), both images.
			out := make([]change, 15)
			for i := range out {
				id := ns + "big" + strconv.Itoa(i)
				out[i] = modify(id, "labels", attrSS([]string{id}), "blob", attrS(strings.Repeat("x", 195_000)))
			}
			return out
		},
		skip: map[string]string{"sns-function": "SNS delivers one message of at most 256 KiB an invoke"},
	},

	// --- Finding 2: a closed list of transient errors ---
	{
		name: "a tag key holding a string (WRONGTYPE)", finding: "2",
		messages: func(ns string) []string { return []string{`{"tags":["product:wrongtype` + ns + `"]}`} },
		records:  func(ns string) []change { return []change{modify("wrongtype"+ns, "labels", attrSS([]string{ns}))} },
		rules:    tagRules,
		cache: func(ns, tags string) []fact {
			return []fact{{key: tags + "product:wrongtype" + ns, kind: "string", values: []string{"foreign"}, fake: wrongType}}
		},
		want: fates(parked), reason: "WRONGTYPE",
	},
	{
		name: "a tag clock that is not an integer", finding: "2",
		messages: func(ns string) []string { return []string{`{"tags":["clock` + ns + `"]}`} },
		records:  func(ns string) []change { return []change{modify("clock"+ns, "labels", attrSS([]string{ns}))} },
		rules:    tagRules,
		cache: func(ns, tags string) []fact {
			return []fact{{key: tags, kind: "string", values: []string{"twelve"}, fake: notInteger}}
		},
		want: fates(parked), reason: "not an integer",
		// One tag clock for every tag: the ordinary stream record's tag
		// fails with it, for good.
		good: func(ns string) (string, string, []fate) { return "", "", fates(done, parked) },
	},
	{
		name: "a tag clock at the largest integer (INCR overflows)", finding: "2",
		messages: func(ns string) []string { return []string{`{"tags":["overflow` + ns + `"]}`} },
		records:  func(ns string) []change { return []change{modify("overflow"+ns, "labels", attrSS([]string{ns}))} },
		rules:    tagRules,
		cache: func(ns, tags string) []fact {
			return []fact{{key: tags, kind: "string", values: []string{"9223372036854775807"}, fake: overflowing}}
		},
		want: fates(parked), reason: "overflow",
		good: func(ns string) (string, string, []fate) { return "", "", fates(done, parked) },
	},
	{
		name:     "a tag whose entries are keys the worker may not delete",
		messages: func(ns string) []string { return []string{`{"tags":["foreign` + ns + `"]}`} },
		cache: func(ns, tags string) []fact {
			return []fact{
				{key: "session:" + ns, kind: "string", values: []string{"a session"}, fake: noPerm},
				{key: tags + "foreign" + ns, kind: "tag", values: []string{"session:" + ns, "cache:entry:" + ns}},
				{key: "cache:entry:" + ns, kind: "string", values: []string{"v"}},
			}
		},
		want: fates(parked), reason: "NOPERM",
		deleted: func(ns string) []string { return []string{"cache:entry:" + ns} },
		skip:    map[string]string{"stream-function": "the same tag through the stream is the WRONGTYPE row's path"},
	},
	{
		name:     "keys holding every type of value",
		messages: func(ns string) []string { return []string{keysMessage(typedKeys(ns))} },
		records: func(ns string) []change {
			var labels []string
			for _, k := range typedKeys(ns) {
				labels = append(labels, strings.TrimPrefix(k, "cache:label:"))
			}
			return []change{modify(ns+"typed", "labels", attrSS(labels))}
		},
		cache: func(ns, tags string) []fact {
			k := typedKeys(ns)
			return []fact{{key: k[0], kind: "string", values: []string{strings.Repeat("v", 1<<20)}},
				{key: k[1], kind: "hash", values: []string{"f", "v"}}, {key: k[2], kind: "list", values: []string{"a", "b"}},
				{key: k[3], kind: "set", values: []string{"a", "b"}}, {key: k[4], kind: "zset", values: []string{"a", "b"}},
				{key: k[5], kind: "stream", values: []string{"f", "v"}}}
		},
		want: fates(done), deleted: typedKeys,
	},
	{
		name:     "a tag of 100,000 entries, some of them foreign fields",
		messages: func(ns string) []string { return []string{`{"tags":["product:wide` + ns + `"]}`} },
		records:  func(ns string) []change { return []change{modify("wide"+ns, "labels", attrSS([]string{ns}))} },
		rules:    tagRules,
		cache: func(ns, tags string) []fact {
			entries := keys(100_000, func(i int) string { return "cache:wide:" + ns + ":" + strconv.Itoa(i) })
			return []fact{{key: tags + "product:wide" + ns, kind: "tag", values: entries},
				{key: entries[0], kind: "string", values: []string{"v"}}, {key: entries[99_999], kind: "string", values: []string{"v"}},
				{key: tags + "product:wide" + ns, kind: "hash", values: []string{"\x00e", "not a clock", "cache:wide:" + ns + ":odd", "not a registration"}}}
		},
		want: fates(done),
		deleted: func(ns string) []string {
			return []string{"cache:wide:" + ns + ":0", "cache:wide:" + ns + ":99999"}
		},
	},

	// --- Finding 3: what the worker sends, sized as it is sent ---
	{
		name: "150 keys of 1,000 '<' (a second delete of 1.17 MB)", finding: "3",
		messages: func(ns string) []string { return []string{keysMessage(escapeKeys("cache:"+ns, 150, "<", 1000))} },
		records: func(ns string) []change {
			return []change{modify(ns+"lt", "labels", attrSS(escapeKeys(ns, 150, "<", 990)))}
		},
		want: fates(done),
	},
	{
		name: "240 keys of 333 U+2028 (escaped twice their size)", finding: "3",
		messages: func(ns string) []string { return []string{keysMessage(escapeKeys("cache:"+ns, 240, "\u2028", 333))} },
		records: func(ns string) []change {
			return []change{modify(ns+"ls", "labels", attrSS(escapeKeys(ns, 240, "\u2028", 330)))}
		},
		want: fates(done),
	},
	{
		name: "150 keys of 990 control characters", finding: "3",
		messages: func(ns string) []string { return []string{keysMessage(escapeKeys("cache:"+ns, 150, "\x01", 990))} },
		want:     fates(done),
		skip:     map[string]string{"stream-function": "the '<' row is the stream's escape-heavy record"},
	},
	{
		name: "a 205 KB record of '<' that fails for good", finding: "3",
		messages: func(ns string) []string {
			return []string{`{"entity":"product","id":"` + ns + `","op":"upsert","pad":` + str(strings.Repeat("<", 205_000)) + `}`}
		},
		records: func(ns string) []change {
			c := modify(ns+"pad", "labels", attrSS([]string{ns}), "pad", attrS(strings.Repeat("<", 195_000)))
			c.event = "UPSERT"
			return []change{c}
		},
		want: fates(parked),
	},
	{
		name: "a body of 1,000,000 bytes of '\"<&' that is not JSON", finding: "3",
		messages: func(ns string) []string { return []string{strings.Repeat(`"<&`, 333_333)} },
		want:     fates(parked),
		skip:     map[string]string{"stream-function": "a stream record is JSON: the 205 KB row is its oversize record"},
	},
	{
		name: "ids holding U+FFFE and U+FFFF",
		messages: func(ns string) []string {
			return []string{`{"entity":"product","id":"` + ns + `\ufffe\uffff"}`}
		},
		records: func(ns string) []change { return []change{modify(ns+"\ufffe\uffff", "labels", attrSS([]string{ns}))} },
		want:    fates(done),
		deleted: func(ns string) []string { return []string{"cache:product:" + ns + "\ufffe\uffff"} },
	},
	{
		name: "a body of invalid UTF-8",
		messages: func(ns string) []string {
			return []string{testdata("invalid-utf8.json", ns)}
		},
		want: fates(parked),
		skip: map[string]string{"poller": "SQS refuses a body of invalid UTF-8: none reaches the poller",
			"stream-function": "Lambda's stream records are valid JSON"},
	},
	{
		name:     "an id of an unpaired surrogate",
		messages: func(ns string) []string { return []string{`{"entity":"product","id":"` + ns + `\ud800"}`} },
		want:     fates(parked),
		skip:     map[string]string{"stream-function": "DynamoDB holds valid UTF-8 only"},
	},
	{
		name:     "ids of glob characters, braces, spaces, CR, LF and NUL",
		messages: func(ns string) []string { return []string{testdata("glob-id.json", ns)} },
		records: func(ns string) []change {
			return []change{modify(globID(ns), "labels", attrSS([]string{ns}))}
		},
		cache: func(ns, tags string) []fact {
			return []fact{{key: "cache:product:" + globID(ns), kind: "string", values: []string{"v"}},
				{key: "cache:product:" + ns + "a", kind: "string", values: []string{"v"}}}
		},
		want:    fates(done),
		deleted: func(ns string) []string { return []string{"cache:product:" + globID(ns)} },
		kept:    func(ns string) []string { return []string{"cache:product:" + ns + "a"} },
	},
	{
		name: "nesting 10,001 levels deep",
		messages: func(ns string) []string {
			return []string{`{"entity":"product","id":"` + ns + `","x":` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + `}`}
		},
		records: func(ns string) []change {
			nested := strings.Repeat(`{"M":{"a":`, 10_001) + attrS("x") + strings.Repeat("}}", 10_001)
			return []change{modify(ns+"deep", "labels", attrSS([]string{ns}), "deep", nested)}
		},
	},

	{
		name: "commit log rows: a 900 KB list column, 10,001 levels deep, 30,000 columns",
		// As Debezium and AWS DMS write rows, with baseRules' table renamed
		// as a database names it: each row's key deleted, its columns read
		// in bounded work, or parked with its reason.
		rules: strings.Replace(baseRules, "Products", "public.products", 1),
		messages: func(ns string) []string {
			src := `"source":{"connector":"postgresql","schema":"public","table":"products"},"op":"c"`
			return []string{
				`{"before":null,"after":{"id":"` + ns + `l","big":[` + strings.Repeat("0,", 450_000) + `0]},` + src + `}`,
				`{"before":null,"after":{"id":"` + ns + `d","deep":` + strings.Repeat(`{"a":`, 10_001) + "0" + strings.Repeat("}", 10_001) + `},` + src + `}`,
				`{"data":{"id":"` + ns + `w"` + strings.Repeat(`,"c":0`, 30_000) + `},"metadata":{"record-type":"data","operation":"insert","schema-name":"public","table-name":"products"}}`,
			}
		},
		cache: func(ns, tags string) []fact {
			return []fact{{key: "cache:product:" + ns + "l", kind: "string", values: []string{"v"}}, {key: "cache:product:" + ns + "w", kind: "string", values: []string{"v"}}}
		},
		deleted: func(ns string) []string { return []string{"cache:product:" + ns + "l", "cache:product:" + ns + "w"} },
	},

	{
		name: "Aurora DSQL records over 9 MiB: 200 main records naming one chunk of a 900 KB row, one naming 10,000 fragments",
		// Joined once from the batch on the Kinesis front end, whose fragments
		// it holds; parked at once with the reason on the others, and the
		// record whose fragments are not there; never waited for.
		rules: strings.Replace(baseRules, "tables: {", `tables: {public.order_items: ["cache:order:{new.order_id}"], `, 1),
		messages: func(ns string) []string {
			row := `{"order_id":"` + ns + `","note":"` + strings.Repeat("<", 900_000) + `"}`
			main := func(chunk string, total int, crc uint32) string {
				return `{"type":"chunked","op":"u","before":null,"after":null,"source":{"schema":"public","table":"order_items"},` +
					`"chunked":{"after":{"chunk_id":"` + chunk + `","total_fragments":` + strconv.Itoa(total) + `,"crc32c":"` + strconv.FormatUint(uint64(crc), 10) + `"}}}`
			}
			fragment := func(i int, data string) string {
				return obj("type", str("fragment"), "chunk_id", str(ns), "index", strconv.Itoa(i), "data", str(data))
			}
			out := []string{fragment(1, row[40:]), fragment(0, row[:40])}
			for range 200 {
				out = append(out, main(ns, 2, crc32.Checksum([]byte(row), crc32.MakeTable(crc32.Castagnoli))))
			}
			return append(out, main(ns+"-none", 10_000, 1))
		},
		reason: "whose row came in fragments",
	},

	// --- Finding 4: allowedKeys derived from the parsed template ---
	{
		name: "keys outside a hash-tagged template: {user:{id}}:profile", finding: "4",
		rules:    "default: [\"{user:{id}}:profile\"]\n",
		messages: func(ns string) []string { return []string{keysMessage([]string{"session:" + ns, "lock:" + ns})} },
		cache: func(ns, tags string) []fact {
			return []fact{{key: "session:" + ns, kind: "string", values: []string{"v"}}, {key: "lock:" + ns, kind: "string", values: []string{"v"}}}
		},
		want: fates(parked, refused),
		kept: func(ns string) []string { return []string{"session:" + ns, "lock:" + ns} },
		// The stack's worker user may delete cache:* only (WORKER_KEYS, as
		// template.yaml's CacheKeyPatterns): there the ordinary key of
		// these rules is refused (NOPERM), and parked.
		good: func(ns string) (string, string, []fate) {
			return `{"entity":"good","id":"` + ns + `"}`, "{user:" + ns + "}:profile", fates(done, parked)
		},
		skip: map[string]string{"stream-function": "a stream record names no keys of its own"},
	},
	{
		name: "keys outside a template that begins with a placeholder", finding: "4",
		rules:    "default: [\"{entity}:{id}\"]\n",
		messages: func(ns string) []string { return []string{keysMessage([]string{"session:" + ns})} },
		cache: func(ns, tags string) []fact {
			return []fact{{key: "session:" + ns, kind: "string", values: []string{"v"}}}
		},
		want: fates(parked, refused),
		kept: func(ns string) []string { return []string{"session:" + ns} },
		good: func(ns string) (string, string, []fate) {
			return `{"entity":"cache:good","id":"` + ns + `"}`, "cache:good:" + ns, fates(done)
		},
		skip: map[string]string{"stream-function": "a stream record names no keys of its own"},
	},

	// --- Finding 5: inspect consumes only its own queue ---
	{name: "invalidator inspect --queue pointed at the failure queue", finding: "5", layer: inspectLeavesParkedRecords, stack: true},

	// --- Finding 6: memory bounded in bytes ---
	{
		name: "128 MiB of 1 KiB keys through the re-delete window", finding: "6",
		messages: func(ns string) []string {
			// 512 messages of 256 keys of 1,024 bytes: a window of the last
			// deletes kept in the worker's memory would hold them all (the
			// failover window is an SQS queue since).
			out := make([]string, 512)
			for m := range out {
				out[m] = keysMessage(keys(256, func(i int) string {
					k := "cache:" + ns + ":" + strconv.Itoa(m*256+i) + ":"
					return k + strings.Repeat("k", 1024-len(k))
				}))
			}
			return out
		},
		records: func(ns string) []change {
			out := make([]change, 512)
			for r := range out {
				labels := keys(256, func(i int) string {
					l := ns + ":" + strconv.Itoa(r*256+i) + ":"
					return l + strings.Repeat("k", 1024-len("cache:label:")-len(l))
				})
				out[r] = change{event: "INSERT", id: ns + "w" + strconv.Itoa(r), new: item(ns+"w"+strconv.Itoa(r), "labels", attrSS(labels))}
			}
			return out
		},
		want: fates(done), noSecondDelete: []string{"fakes", "stack"}, retained: 80 << 20,
		// What the worker keeps is the same behind every front end: the
		// stream function, which takes the 128 MiB in the fewest invokes,
		// shows it.
		skip: map[string]string{"messages": "what the worker keeps is the same behind every front end: the stream function shows it",
			"stack/stream-function": "what the worker keeps in memory the fakes show as well; 128 MiB of UNLINKs would slow the tests that share the stack's cluster"},
	},

	// --- Findings 7 to 10: the docs, the services' library, the template ---
	{name: "the services' access strings in the deploy docs", finding: "7", layer: accessStringsNameKeys},
	{name: "a writethrough lease without a TTL", finding: "8", layer: leaseWithoutTTL, stack: true},
	{name: "no secret in a function's environment", finding: "9", layer: noSecretInEnvironment},
	{name: "the queues that hold work are retained", finding: "10", layer: queuesRetained},

	// --- Finding 11: keys printed raw, big numeric ids, foreign values ---
	{name: "invalidator keys on a key of terminal escapes", finding: "11", layer: keysPrintedQuoted},
	{name: "a foreign value at a writethrough key", finding: "11", layer: foreignValue, stack: true},
	{
		name: "a numeric id above 2^63-1", finding: "11",
		messages: func(ns string) []string { return []string{`{"entity":"product","id":` + bigID(ns) + `}`} },
		records: func(ns string) []change {
			return []change{{event: "MODIFY", id: bigID(ns), old: item(bigID(ns), "labels", attrSS([]string{ns})), new: item(bigID(ns), "labels", attrSS([]string{ns}))}}
		},
		want:    fates(done),
		deleted: func(ns string) []string { return []string{"cache:product:" + bigID(ns)} },
	},

	// --- Issue 38, items 1 and 2: a record bigger than its budget, rules that multiply ---
	{
		name: "a message of 8,000 changes × 5 templates (40,000 keys) at the template's default budget", finding: "38.1",
		messages: func(string) []string { return []string{budgetChanges(8000)} },
		rules:    budgetRules, vars: map[string]string{"CACHE_MAX_ECPU_PER_SECOND": "5000"},
		want: fates(parked), reason: "cost at least 40000 ECPUs", noSecondDelete: []string{"fakes", "stack"},
	},
	{
		name: "a message of 1,000 keys at the template's least budget", finding: "38.1",
		messages: func(string) []string { return []string{budgetChanges(200)} },
		rules:    budgetRules, vars: map[string]string{"CACHE_MAX_ECPU_PER_SECOND": "1000", "CACHE_WORKER_ECPU_SHARE": "1"},
		want: fates(parked), reason: "cost at least 1000 ECPUs", noSecondDelete: []string{"fakes", "stack"},
	},
	{name: "rules of 5,000 templates over a set of 1,000", finding: "38.2", layer: templatesThatMultiply},

	// --- Issue 38, item 5: GetMany's deadline and pipelines ---
	{name: "a GetMany of 200 ms whose loader blocks 3 s", finding: "38.5", layer: getManyAtItsDeadline, stack: true},
	{name: "a GetMany of 20,000 misses, MaxBatch 20,000", finding: "38.5", layer: getManyPipelines, stack: true},

	// --- Issue 38, item 4: replay takes only what the worker failed, with its rules ---
	{name: "invalidator replay without rules", finding: "38.4", layer: replayWithoutRules, stack: true},
	{name: "invalidator replay --queue pointed at the live queue and the delay queue", finding: "38.4", layer: replayLeavesLiveQueues, stack: true},
}

// budgetRules plan five keys for each change of entity p.
const budgetRules = baseRules + `entities: {p: ["cache:p:{id}", "cache:p:{id}:a", "cache:p:{id}:b", "cache:p:{id}:c", "cache:p:{id}:d"]}
`

// budgetChanges is a message of n changes of entity p.
func budgetChanges(n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"entity":"p","id":` + strconv.Itoa(i) + `}`)
	}
	return b.String() + "]"
}

// typedKeys are six keys, for a value of each type.
func typedKeys(ns string) []string {
	return []string{"cache:label:" + ns + ":string", "cache:label:" + ns + ":hash", "cache:label:" + ns + ":list",
		"cache:label:" + ns + ":set", "cache:label:" + ns + ":zset", "cache:label:" + ns + ":stream"}
}

// escapeKeys are n distinct keys under prefix, each of width copies of s.
func escapeKeys(prefix string, n int, s string, width int) []string {
	return keys(n, func(i int) string { return prefix + ":" + strconv.Itoa(i) + ":" + strings.Repeat(s, width) })
}

// globID is an id of what a pattern or a protocol would read.
func globID(ns string) string { return ns + "*?[a-z]{x} \r\n\x00end" }

// bigID is a number of 21 digits, the run's own.
func bigID(ns string) string {
	n := uint64(0)
	for _, c := range ns {
		n = n*31 + uint64(c)
	}
	return "9" + strconv.FormatUint(n%8e18+1e19, 10)
}
