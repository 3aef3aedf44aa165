package invalidate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/events"
)

type av = events.AttributeValue

func s(v string) av     { return av{Type: events.TypeString, S: v} }
func ss(v ...string) av { return av{Type: events.TypeStringSet, SS: v} }

func mustRules(t *testing.T, yaml string) *Rules {
	t.Helper()
	r, err := ParseRules([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const testRules = `
entities:
  product: ["cache:product:{id}", "cache:{product:{id}}:reviews", "cache:products:list"]
  versioned: ["cache:v:{id}:{version}"]
  opaque: ["cache:{{id}:{id}"]
tables:
  Products:
    - "cache:product:{key.id}"
    - "cache:category:{item.category}"
    - "cache:tag:{item.tags}"
    - "cache:brand:{new.brand.name}"
    - "cache:was:{old.category}"
`

func stream(op events.Op, old, new events.Image) *events.Change {
	return &events.Change{
		Entity: "Products", ID: "p1", Op: op, Source: events.SourceDynamoDB, Table: "Products",
		ItemKey: events.Image{"id": s("p1")}, OldImage: old, NewImage: new,
	}
}

func TestKeys(t *testing.T) {
	r := mustRules(t, testRules)
	brand := av{Type: events.TypeMap, M: events.Image{"name": s("Acme")}}
	tests := []struct {
		name string
		c    *events.Change
		want []string
	}{
		{"default template", &events.Change{Entity: "user", ID: "9"}, []string{"cache:user:9"}},
		{"entity rule with hash tag", &events.Change{Entity: "product", ID: "42"},
			[]string{"cache:product:42", "cache:{product:42}:reviews", "cache:products:list"}},
		{"escaped brace", &events.Change{Entity: "opaque", ID: "7"}, []string{"cache:{id}:7"}},
		{"version", &events.Change{Entity: "versioned", ID: "7", Version: 3, HasVersion: true}, []string{"cache:v:7:3"}},
		{"explicit keys replace rules", &events.Change{Entity: "product", ID: "42", Keys: []string{"cache:a", "cache:{b}"}}, []string{"cache:a", "cache:{b}"}},
		{"IDs are data", &events.Change{Entity: "user", ID: "*  {x}\r\n"}, []string{"cache:user:*  {x}\r\n"}},
		{"default for a table without a rule", &events.Change{Entity: "Orders", ID: "o#1", Source: events.SourceDynamoDB, Table: "Orders"},
			[]string{"cache:Orders:o#1"}},
		{"update moves category and tags", stream(events.OpUpdate,
			events.Image{"id": s("p1"), "category": s("A"), "tags": ss("x", "y"), "brand": brand},
			events.Image{"id": s("p1"), "category": s("B"), "tags": ss("y", "z"), "brand": brand}),
			[]string{"cache:product:p1", "cache:category:A", "cache:category:B", "cache:tag:x", "cache:tag:y", "cache:tag:z",
				"cache:brand:Acme", "cache:was:A"}},
		{"insert has no old image", stream(events.OpCreate, nil,
			events.Image{"id": s("p1"), "category": s("B"), "tags": ss("z"), "brand": brand}),
			[]string{"cache:product:p1", "cache:category:B", "cache:tag:z", "cache:brand:Acme"}},
		{"remove has no new image", stream(events.OpDelete,
			events.Image{"id": s("p1"), "category": s("A"), "tags": ss("x")}, nil),
			[]string{"cache:product:p1", "cache:category:A", "cache:tag:x", "cache:was:A"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Keys(tt.c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("keys = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeysRefusesUnsafePlans(t *testing.T) {
	r := mustRules(t, testRules+"maxKeyBytes: 32\n")
	tests := []struct {
		name string
		c    *events.Change
		want string
	}{
		{"missing id", &events.Change{Entity: "user"}, "placeholder {id} is missing or empty"},
		{"missing version", &events.Change{Entity: "versioned", ID: "1"}, "has no version"},
		{"missing attribute", stream(events.OpUpdate, events.Image{"id": s("p1")}, events.Image{"id": s("p1")}),
			"placeholder {item.category} is missing from the item"},
		{"empty attribute", stream(events.OpCreate, nil, events.Image{"id": s("p1"), "category": s("")}),
			"placeholder {item.category} is empty"},
		{"NULL attribute", stream(events.OpCreate, nil, events.Image{"id": s("p1"), "category": av{Type: events.TypeNull}}),
			"the attribute is NULL"},
		{"too long", &events.Change{Entity: "user", ID: strings.Repeat("x", 40)}, "longer than the maximum of 32"},
		{"explicit key too long", &events.Change{Keys: []string{strings.Repeat("k", 33)}}, "longer than the maximum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := r.Keys(tt.c, []string{"earlier"})
			if !errors.Is(err, errPlan) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrPlan mentioning %q", err, tt.want)
			}
			if keys[0] != "earlier" || slices.ContainsFunc(keys, func(k string) bool { return len(k) > 32 || strings.Contains(k, "category") }) {
				t.Fatalf("keys = %q: a failed template must add no key", keys)
			}
		})
	}
}

func TestRulesValidation(t *testing.T) {
	tests := map[string]string{
		"unknown placeholder":     `entities: {product: ["cache:{ID}"]}`,
		"empty template":          `entities: {product: [" "]}`,
		"no templates":            `entities: {product: []}`,
		"image in entity rule":    `entities: {product: ["cache:{new.category}"]}`,
		"image in default":        `default: ["cache:{item.x}"]`,
		"empty attribute path":    `tables: {T: ["cache:{item.a..b}"]}`,
		"nested key path":         `tables: {T: ["cache:{key.a.b}"]}`,
		"unknown field":           `entitys: {product: ["cache:{id}"]}`,
		"bad syntax":              `entities: [`,
		"negative max key length": `maxKeyBytes: -1`,
		"a DSQL table over old":   `{dsqlTables: [public.orders], tables: {public.orders: ["cache:c:{old.customer}"]}}`,
		"a DSQL table's tag":      `{dsqlTables: [public.orders], tags: {tables: {public.orders: ["c:{old.customer}"]}}}`,
	}
	for name, yaml := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseRules([]byte(yaml)); !errors.Is(err, errRules) {
				t.Fatalf("err = %v, want ErrRules", err)
			}
		})
	}
}

// TestADSQLTableIsPlannedFromTheRowAfter: Aurora DSQL's tables are
// refused a template over {old.} at start, each named with the reason; the
// same template on another table, and {new.}, {key.} on a DSQL one, pass.
func TestADSQLTableIsPlannedFromTheRowAfter(t *testing.T) {
	_, err := ParseRules([]byte(`{dsqlTables: [public.orders], tables: {public.orders: ["cache:o:{key.id}", "cache:c:{old.customer}"], public.items: ["cache:c:{old.customer}"]}, tags: {tables: {public.orders: ["c:{new.customer}"]}}}`))
	if err == nil || !strings.Contains(err.Error(), `tables.public.orders: "cache:c:{old.customer}"`) || strings.Contains(err.Error(), "items") || !strings.Contains(err.Error(), "Aurora DSQL sends no row before an update") {
		t.Fatalf("err = %v, want the DSQL table's {old.} template named, alone, with the reason", err)
	}
	if _, err := ParseRules([]byte(`{dsqlTables: [public.orders], tables: {public.orders: ["cache:o:{key.id}", "cache:c:{new.customer}"], public.items: ["cache:c:{old.customer}"]}}`)); err != nil {
		t.Fatalf("a DSQL table planned from {key.} and {new.}: %v", err)
	}
}

func TestRulesFromEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(file, []byte(`{"entities":{"product":["p:{id}"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	product := &events.Change{Entity: "product", ID: "1"}
	for name, tc := range map[string]struct {
		env     map[string]string
		want    string
		wantErr bool
	}{
		"defaults":    {env: nil, want: "cache:product:1"},
		"inline YAML": {env: map[string]string{"INVALIDATION_RULES": "entities:\n  product: [\"y:{id}\"]"}, want: "y:1"},
		"file JSON":   {env: map[string]string{"INVALIDATION_RULES_FILE": file}, want: "p:1"},
		"both":        {env: map[string]string{"INVALIDATION_RULES": "{}", "INVALIDATION_RULES_FILE": file}, wantErr: true},
		"no file":     {env: map[string]string{"INVALIDATION_RULES_FILE": file + ".missing"}, wantErr: true},
		"bad inline":  {env: map[string]string{"INVALIDATION_RULES": "entities: {product: [\"{nope}\"]}"}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := RulesFromEnv(env(tc.env))
			if tc.wantErr {
				if !errors.Is(err, errRules) {
					t.Fatalf("err = %v, want ErrRules", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if keys, _ := r.Keys(product, nil); !slices.Equal(keys, []string{tc.want}) {
				t.Fatalf("keys = %q, want %q", keys, tc.want)
			}
		})
	}
}

func TestKeysKeepWhatCanBePlanned(t *testing.T) {
	r := mustRules(t, `tables: {T: ["cache:p:{key.id}", "cache:cat:{new.category}", "cache:tag:{item.tags}"]}`)
	c := &events.Change{Source: events.SourceDynamoDB, Table: "T", Entity: "T", ID: "1", Op: events.OpUpdate,
		ItemKey: events.Image{"id": s("1")}, OldImage: events.Image{"tags": ss("a")}, NewImage: events.Image{"tags": ss("b")}}
	keys, err := r.Keys(c, nil)
	if !errors.Is(err, errPlan) || !slices.Equal(keys, []string{"cache:p:1", "cache:tag:a", "cache:tag:b"}) {
		t.Fatalf("keys %q, err %v: want the plannable keys and the error", keys, err)
	}
}

func TestAbsentImagesAndEmptySets(t *testing.T) {
	r := mustRules(t, `tables: {T: ["cache:old:{old.category}"], S: ["cache:tag:{item.tags}"]}`)
	change := func(table string, op events.Op, old, new events.Image) *events.Change {
		return &events.Change{Source: events.SourceDynamoDB, Table: table, Entity: table, ID: "1", Op: op,
			ItemKey: events.Image{"id": s("1")}, OldImage: old, NewImage: new}
	}
	if keys, err := r.Keys(change("T", events.OpCreate, nil, events.Image{}), nil); err != nil || len(keys) != 0 {
		t.Fatalf("old. on INSERT: %q, %v; want no key and no error", keys, err)
	}
	// A MODIFY without its old image: the stream view type lacks it, and
	// planning nothing would skip the old category's key.
	if _, err := r.Keys(change("T", events.OpUpdate, nil, events.Image{"category": s("x")}), nil); !errors.Is(err, errPlan) {
		t.Fatalf("old. on MODIFY without OldImage: %v, want ErrPlan", err)
	}
	if _, err := r.Keys(change("S", events.OpCreate, nil, events.Image{"tags": ss()}), nil); !errors.Is(err, errPlan) {
		t.Fatalf("empty set: %v, want ErrPlan", err)
	}
}

func BenchmarkDefaultKey(b *testing.B) {
	rules := DefaultRules()
	c := events.Change{Entity: "product", ID: "12345"}
	var keys []string
	b.ReportAllocs()
	for b.Loop() {
		keys, _ = rules.Keys(&c, keys[:0])
	}
}

func TestKeysOutsideTheAllowedOnesFail(t *testing.T) {
	derived, err := ParseRules([]byte(`entities: {product: ["cache:product:{id}", "cache:{product:{id}}:reviews", "lists:products"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if patterns, isDerived := derived.AllowedKeys(); !isDerived || strings.Join(patterns, " ") != "cache:* lists:products" {
		t.Fatalf("derived %q (%v), want cache:* and the literal key", patterns, isDerived)
	}
	given, err := ParseRules([]byte(`{allowedKeys: ["cache:product:*", "cache:?:x"], default: ["{entity}:{id}"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rules *Rules
		keys  []string
		kept  []string
	}{
		{derived, []string{"cache:product:1", "session:abc", "lists:products"}, []string{"cache:product:1", "lists:products"}},
		{derived, []string{"lists:products:2"}, nil},
		{given, []string{"cache:product:1", "cache:a:x", "cache:ab:x", "cache:user:1"}, []string{"cache:product:1", "cache:a:x"}},
	} {
		kept, err := tc.rules.Keys(&events.Change{Entity: "product", Keys: tc.keys}, nil)
		wantErr := len(kept) != len(tc.keys)
		if !slices.Equal(kept, tc.kept) || wantErr != errors.Is(err, errPlan) || wantErr && !strings.Contains(err.Error(), "outside the allowed keys") {
			t.Errorf("%q: kept %q, %v; want %q", tc.keys, kept, err, tc.kept)
		}
	}
	// A planned key is held to them too: {entity} may be anything.
	if _, err := given.Keys(&events.Change{Entity: "session", ID: "1"}, nil); !errors.Is(err, errPlan) {
		t.Errorf("session:1 planned: %v, want ErrPlan", err)
	}
	for _, bad := range []string{`allowedKeys: []`, `allowedKeys: [""]`, `allowedKeys: ["cache:[a-é]*"]`} {
		if _, err := ParseRules([]byte(bad)); !errors.Is(err, errRules) {
			t.Errorf("%s: %v, want ErrRules", bad, err)
		}
	}
}

func TestTags(t *testing.T) {
	r := mustRules(t, `
default: ["k:{entity}:{id}"]
entities: {product: ["cache:product:{id}"]}
tables: {Products: ["cache:product:{key.id}"]}
tags:
  entities: {product: ["product:{id}"]}
  tables: {Products: ["product:{key.id}", "category:{item.category}"]}
`)
	tests := []struct {
		name string
		c    *events.Change
		want []string
	}{
		{"entity rule", &events.Change{Entity: "product", ID: "42"}, []string{"product:42"}},
		{"no tag rule", &events.Change{Entity: "user", ID: "1"}, nil},
		{"explicit tags replace the rules'", &events.Change{Entity: "product", ID: "42", Tags: []string{"product:7", "product:{b} *"}}, []string{"product:7", "product:{b} *"}},
		{"a move invalidates both categories", stream(events.OpUpdate, events.Image{"id": s("p1"), "category": s("A")}, events.Image{"id": s("p1"), "category": s("B")}),
			[]string{"product:p1", "category:A", "category:B"}},
	}
	for _, tt := range tests {
		got, err := r.Tags(tt.c, nil)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	if got, _ := r.Keys(&events.Change{Entity: "product", ID: "42", Tags: []string{"x"}}, nil); !slices.Equal(got, []string{"cache:product:42"}) {
		t.Errorf("explicit tags changed the keys: %q", got)
	}
	if got, err := r.Keys(&events.Change{Tags: []string{"x"}}, nil); err != nil || len(got) != 0 {
		t.Errorf("a change of tags alone plans keys %q, %v", got, err)
	}
	if patterns, _ := r.AllowedKeys(); strings.Join(patterns, " ") != "k:* cache:product:* cache:tag:product:* cache:tag:category:* cache:tag:" {
		t.Errorf("derived %q, want the keys' patterns and the tags' with their clock", patterns)
	}
	if r.TagKey("product:1") != "cache:tag:product:1" || r.TagClock() != "cache:tag:" {
		t.Errorf("tag key %q, clock %q", r.TagKey("product:1"), r.TagClock())
	}
	// A tag outside the allowed keys, too long, or unplannable fails the
	// change; the others are still invalidated.
	got, err := r.Tags(&events.Change{Entity: "product", Tags: []string{"session:1", strings.Repeat("x", 1024), "product:9"}}, nil)
	if !errors.Is(err, errPlan) || !strings.Contains(err.Error(), `tag key "cache:tag:session:1" is outside`) || !slices.Equal(got, []string{"product:9"}) {
		t.Errorf("bad tags: %q, %v", got, err)
	}
	if _, err := r.Tags(&events.Change{Entity: "product"}, nil); !errors.Is(err, errPlan) {
		t.Errorf("a tag without its id: %v, want a plan error", err)
	}

	prefixed := mustRules(t, `{tagPrefix: "t:", allowedKeys: ["cache:*", "t:*"], tags: {entities: {a: ["{id}"]}}}`)
	if got, err := prefixed.Tags(&events.Change{Entity: "a", ID: "1"}, nil); err != nil || prefixed.TagKey(got[0]) != "t:1" {
		t.Errorf("under a prefix of its own: %q, %v", got, err)
	}
	if _, err := ParseRules([]byte(`{allowedKeys: ["cache:tag:product:*"], tags: {entities: {a: ["product:{id}"]}}}`)); !errors.Is(err, errRules) {
		t.Errorf("rules whose tag clock is not allowed: %v, want ErrRules", err)
	}
	untagged := mustRules(t, `{allowedKeys: ["cache:tag:product:*"]}`)
	if _, err := untagged.Tags(&events.Change{Tags: []string{"product:1"}}, nil); !errors.Is(err, errPlan) || !strings.Contains(err.Error(), "tag clock") {
		t.Errorf("an explicit tag whose clock is not allowed: %v", err)
	}
}

// TestSetsStopAtTheCap: a template whose set placeholder, its
// cross-product with the other placeholders counted, passes the cap fails
// for being too large, whatever members follow (an empty one here). A
// placeholder on an image the record cannot have plans no key, whatever
// the sets before it.
func TestSetsStopAtTheCap(t *testing.T) {
	r := mustRules(t, `tables: {T: ["cache:tag:{item.tags}"], P: ["cache:pair:{new.a}:{new.b}"], G: ["cache:gone:{new.tags}:{old.a}"]}`)
	// set is n distinct members, then, with empty, an empty one.
	set := func(n int, prefix string, empty bool) av {
		out := make([]string, n)
		for i := range out {
			out[i] = prefix + strconv.Itoa(i)
		}
		if empty {
			out = append(out, "")
		}
		return ss(out...)
	}
	for _, tc := range []struct {
		name, table string
		op          events.Op
		old, new    events.Image
		want        string // the error's end, or "" for none
	}{
		{"one set past the cap", "T", events.OpUpdate, events.Image{"tags": ss("x")}, events.Image{"tags": set(1000, "y", true)},
			`"cache:tag:{item.tags}": expands to more than 1000 keys`},
		{"a cross-product past the cap", "P", events.OpCreate, nil, events.Image{"a": set(40, "a", false), "b": set(26, "b", true)},
			`"cache:pair:{new.a}:{new.b}": expands to more than 1000 keys`},
		{"an image the record cannot have", "G", events.OpCreate, nil, events.Image{"tags": set(2000, "t", false)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &events.Change{Source: events.SourceDynamoDB, Table: tc.table, Entity: tc.table, ID: "1", Op: tc.op,
				ItemKey: events.Image{"id": s("1")}, OldImage: tc.old, NewImage: tc.new}
			keys, err := r.Keys(c, nil)
			if tc.want == "" && (err != nil || len(keys) != 0) || tc.want != "" && (!errors.Is(err, errPlan) || !strings.HasSuffix(err.Error(), tc.want)) {
				t.Fatalf("keys %q, err %v; want %q", keys, err, tc.want)
			}
		})
	}
}

// TestTemplatesShareASetsRead: 5,000 templates over one set of 1,001
// members read and deduplicate it once for the change, not once each
// (which allocated over 250 MB): the record still fails, each template
// past its cap.
func TestTemplatesShareASetsRead(t *testing.T) {
	templates := make([]string, 5000)
	for i := range templates {
		templates[i] = strconv.Quote("cache:t" + strconv.Itoa(i) + ":{item.tags}")
	}
	r := mustRules(t, `tables: {T: [`+strings.Join(templates, ",")+`]}`)
	members := make([]string, 1001)
	for i := range members {
		members[i] = "m" + strconv.Itoa(i)
	}
	c := &events.Change{Source: events.SourceDynamoDB, Table: "T", Op: events.OpUpdate,
		ItemKey: events.Image{"id": s("1")}, OldImage: events.Image{"tags": ss(members[:1000]...)}, NewImage: events.Image{"tags": ss(members...)}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keys, err := r.Keys(c, nil)
	runtime.ReadMemStats(&after)
	if len(keys) != 0 || !errors.Is(err, errPlan) || !strings.HasSuffix(err.Error(), "expands to more than 1000 keys") {
		t.Fatalf("keys %d, err %v; want none and the first template past its cap", len(keys), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("planning allocated %d MiB, want at most 16", got>>20)
	}
}

// TestRulesReadOnlyTheirAttributes: the rules name the attributes their
// table templates read, down each path, and a stream record decoded with
// only those plans what it plans decoded whole, keys, tags and errors.
func TestRulesReadOnlyTheirAttributes(t *testing.T) {
	r := mustRules(t, `
entities: {product: ["cache:product:{id}"]}
tables: {CaptureProducts: ["cache:p:{key.id}", "cache:cat:{item.category}", "cache:{item.tags}:{new.sizes}", "cache:h:{old.hashes}",
  "cache:b:{new.brand.name}", "cache:m:{old.brand}", "cache:r:{item.related}", "cache:d:{new.discontinued}", "cache:x:{new.brand.name.x}"]}
tags: {tables: {Other: ["t:{new.thumb}"]}}
`)
	// id: a key, which a database's row holds among its columns.
	want := events.Attributes{"id": {}, "category": {}, "tags": {}, "sizes": {}, "hashes": {}, "brand": {"name": {"x": {}}}, "related": {}, "discontinued": {}, "thumb": {}}
	if got := r.Attributes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("attributes %v, want %v", got, want)
	}
	for _, fixture := range []string{"../events/testdata/dynamodb.json", "../events/testdata/dynamodb-edge.json"} {
		data, err := os.ReadFile(fixture)
		if err != nil {
			t.Fatal(err)
		}
		raws, err := events.SplitRecords(data)
		if err != nil {
			t.Fatal(err)
		}
		for i, raw := range raws {
			plan := func(keep events.Attributes) string {
				_, c, err := events.DecodeDynamoDBJSON(raw, keep)
				if err != nil {
					return err.Error()
				}
				keys, kerr := r.Keys(&c, nil)
				tags, terr := r.Tags(&c, nil)
				return fmt.Sprint(keys, kerr, tags, terr)
			}
			if whole, read := plan(nil), plan(r.Attributes()); whole != read {
				t.Errorf("%s record %d: decoded whole %s, only what is read %s", fixture, i, whole, read)
			}
		}
	}
}

// TestLongKeysAreNotBuilt: a template whose keys are too long fails, and
// keys it would build too long are not built: a string of 100 KB crossed
// with a set of 1,000 members would be 100 MB of keys.
func TestLongKeysAreNotBuilt(t *testing.T) {
	r := mustRules(t, `tables: {T: ["c:{new.a}:{new.b}"], U: ["cache:{new.b}"]}`)
	members := make([]string, 1000)
	for i := range members {
		members[i] = strconv.Itoa(i)
	}
	image := events.Image{"a": s(strings.Repeat("x", 100<<10)), "b": ss(members...)}
	change := &events.Change{Source: events.SourceDynamoDB, Table: "T", Entity: "T", ID: "1", Op: events.OpCreate, ItemKey: events.Image{"id": s("1")}, NewImage: image}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keys, err := r.Keys(change, nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errPlan) || !strings.HasSuffix(err.Error(), "key of 102404 bytes is longer than the maximum of 1024") || len(keys) != 0 {
		t.Fatalf("keys %d, err %v", len(keys), err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
		t.Fatalf("planning allocated %d bytes", allocated)
	}
	// Those that fit are planned, in order.
	change.Table = "U"
	image["b"] = ss("short", strings.Repeat("y", 1100), "also")
	if keys, err := r.Keys(change, nil); !errors.Is(err, errPlan) || strings.Join(keys, " ") != "cache:short cache:also" {
		t.Fatalf("keys %q, err %v", keys, err)
	}
}
