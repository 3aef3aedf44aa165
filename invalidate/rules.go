package invalidate

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/env"
	"github.com/invalidator-go/invalidator/internal/tagset"
)

// defaultTemplate is the key of a change without a rule of its own.
const defaultTemplate = "cache:{entity}:{id}"

// defaultMaxKeyBytes is the longest key planned unless the rules say
// otherwise. Valkey allows far longer keys, but a key this long is almost
// always a template or data bug, better caught than deleted.
const defaultMaxKeyBytes = 1024

// RulesConfig is the rules as written in INVALIDATION_RULES or
// INVALIDATION_RULES_FILE, in YAML or JSON:
//
//	default: ["cache:{entity}:{id}"]          # changes without a rule
//	maxKeyBytes: 1024
//	allowedKeys: ["cache:*"]                  # what may be deleted at all
//	entities:                                 # change messages, by entity
//	  product: ["cache:product:{id}", "cache:{product:{id}}:reviews", "cache:product-list"]
//	tables:                                   # DynamoDB stream records, by table
//	  Products: ["cache:product:{key.id}", "cache:category:{item.category}"]
//	tags:                                     # the tags they invalidate, beside the keys
//	  tables: {Products: ["product:{key.id}", "category:{item.category}"]}
type RulesConfig struct {
	// Default templates apply to changes whose entity or table has no rule.
	// Default: ["cache:{entity}:{id}"]. Only {entity}, {id}, {op},
	// {version} and {table} may appear.
	Default []string `json:"default,omitempty"`
	// MaxKeyBytes is the longest key allowed, in bytes. Default 1024.
	MaxKeyBytes int `json:"maxKeyBytes,omitempty"`
	// AllowedKeys are the patterns of the keys the worker may delete,
	// planned or given in a change's keys, read as Valkey reads an ACL
	// user's key patterns (*, ?, [...] classes, \ escapes): give the cache
	// user the same ones. A key outside them fails its record, for good.
	// Default: each template's literal text up to its first placeholder,
	// hash-tag braces included, with *?[]\ escaped, then * ("cache:*" for
	// the default rules); a key template that begins with a placeholder
	// would allow every key, and is refused without AllowedKeys.
	AllowedKeys []string `json:"allowedKeys,omitempty"`
	// Entities maps an entity to the templates of its change messages.
	Entities map[string][]string `json:"entities,omitempty"`
	// Tables maps a DynamoDB table, or a database's schema.table (rows
	// from AWS DMS or Debezium), to the templates of its records, which may
	// also read the item or row: {key.NAME} (a row: as it is now),
	// {new.PATH}, {old.PATH}, {item.PATH} (both images).
	Tables map[string][]string `json:"tables,omitempty"`
	// DSQLTables are the tables whose rows come from Aurora DSQL's change
	// stream, which sends no row before an update and only the key before
	// a delete: their templates, keys' and tags', may not read {old.}.
	DSQLTables []string `json:"dsqlTables,omitempty"`
	// Tags are the templates of the tags that changes invalidate, beside
	// their keys: each deletes the entries that depend on it (writethrough's
	// Options.TagsOf). A change with no rule here has none; a change
	// message's own tags replace these. The tags' keys must be allowed keys.
	Tags TagRules `json:"tags,omitempty"`
	// TagPrefix is where tags live, as writethrough's Options.TagPrefix:
	// tag T at TagPrefix+T, the tag clock at TagPrefix. Default "cache:tag:".
	TagPrefix string `json:"tagPrefix,omitempty"`
}

// TagRules are the tag templates of change messages, by entity, and of
// stream records, by table, which may read the item as key templates do.
type TagRules struct {
	Entities map[string][]string `json:"entities,omitempty"`
	Tables   map[string][]string `json:"tables,omitempty"`
}

// Rules turn a change into the cache keys it invalidates. Build them with
// NewRules, ParseRules or RulesFromEnv; the zero value is not usable.
type Rules struct {
	defaults    []template
	entities    map[string][]template
	tables      map[string][]template
	maxKeyBytes int
	allowed     allowed
	tagEntities map[string][]template
	tagTables   map[string][]template
	tagPrefix   string
	attributes  events.Attributes // what the table templates read of the images
}

// DefaultRules returns the rules used when none are configured: every change
// invalidates cache:{entity}:{id}.
func DefaultRules() *Rules {
	r, err := NewRules(RulesConfig{})
	if err != nil {
		panic(err) // the built-in default is valid
	}
	return r
}

// NewRules validates and compiles a configuration.
func NewRules(cfg RulesConfig) (*Rules, error) {
	r := &Rules{maxKeyBytes: cfg.MaxKeyBytes}
	if r.maxKeyBytes == 0 {
		r.maxKeyBytes = defaultMaxKeyBytes
	}
	if r.maxKeyBytes < 1 || r.maxKeyBytes > 512<<20 {
		return nil, fmt.Errorf("%w: maxKeyBytes %d is not between 1 and 512 MiB", errRules, cfg.MaxKeyBytes)
	}
	if cfg.Default == nil {
		cfg.Default = []string{defaultTemplate}
	}
	var err error
	if r.defaults, err = compile("default", cfg.Default, false); err != nil {
		return nil, err
	}
	if r.entities, err = compileAll("entities.", cfg.Entities, false); err != nil {
		return nil, err
	}
	if r.tables, err = compileAll("tables.", cfg.Tables, true); err != nil {
		return nil, err
	}
	if r.tagEntities, err = compileAll("tags.entities.", cfg.Tags.Entities, false); err != nil {
		return nil, err
	}
	if r.tagTables, err = compileAll("tags.tables.", cfg.Tags.Tables, true); err != nil {
		return nil, err
	}
	if err := r.checkDSQL(cfg.DSQLTables); err != nil {
		return nil, err
	}
	r.tagPrefix = cmp.Or(cfg.TagPrefix, tagset.DefaultPrefix)
	r.attributes = events.Attributes{}
	for _, set := range append(sorted(r.tables), sorted(r.tagTables)...) {
		for _, t := range set {
			t.read(r.attributes)
		}
	}
	if cfg.AllowedKeys == nil {
		var prefixes []prefix
		for _, set := range append([][]template{r.defaults}, append(sorted(r.tables), sorted(r.entities)...)...) {
			for _, t := range set {
				p := prefixOf("", t)
				if p == (prefix{wild: true}) {
					return nil, fmt.Errorf("%w: template %q begins with a placeholder, so that the allowedKeys derived from it would allow every key: give allowedKeys", errRules, t.raw)
				}
				prefixes = append(prefixes, p)
			}
		}
		r.allowed = derive(append(prefixes, r.tagPrefixes()...))
		return r, nil
	}
	if len(cfg.AllowedKeys) == 0 {
		return nil, fmt.Errorf("%w: allowedKeys is empty: no key could ever be deleted", errRules)
	}
	for _, p := range cfg.AllowedKeys {
		if err := checkPattern(p); err != nil {
			return nil, err
		}
	}
	r.allowed = allowed{patterns: cfg.AllowedKeys}
	if len(r.tagEntities)+len(r.tagTables) > 0 && !r.allowed.permits(r.TagClock()) {
		return nil, fmt.Errorf("%w: the tag clock %q is outside allowedKeys: no tag could be invalidated", errRules, r.TagClock())
	}
	return r, nil
}

// tagPrefixes are the prefixes of the keys of the tags the tag templates
// can plan, under the tag prefix, and the tag clock, when there are any.
func (r *Rules) tagPrefixes() []prefix {
	var prefixes []prefix
	for _, set := range append(sorted(r.tagEntities), sorted(r.tagTables)...) {
		for _, t := range set {
			prefixes = append(prefixes, prefixOf(r.tagPrefix, t))
		}
	}
	if len(prefixes) == 0 {
		return nil
	}
	return append(prefixes, prefix{text: r.TagClock()})
}

// sorted is the sets of templates of m in the order of their names.
func sorted(m map[string][]template) [][]template {
	var sets [][]template
	for _, name := range slices.Sorted(maps.Keys(m)) {
		sets = append(sets, m[name])
	}
	return sets
}

// compileAll compiles each named set of templates, under where.
func compileAll(where string, sets map[string][]string, allowImages bool) (map[string][]template, error) {
	out := make(map[string][]template, len(sets))
	for _, name := range slices.Sorted(maps.Keys(sets)) {
		var err error
		if out[name], err = compile(where+name, sets[name], allowImages); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkDSQL refuses a template of tables, keys' or tags', that reads
// {old.}, naming each: Aurora DSQL sends no such row, and every update's
// record would fail.
func (r *Rules) checkDSQL(tables []string) error {
	var bad []string
	for _, table := range tables {
		for _, kind := range []struct {
			where string
			sets  map[string][]template
		}{{"tables.", r.tables}, {"tags.tables.", r.tagTables}} {
			for _, t := range kind.sets[table] {
				if slices.ContainsFunc(t.segments, func(seg segment) bool { return seg.src == srcOld }) {
					bad = append(bad, kind.where+table+": "+strconv.Quote(t.raw))
				}
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: {old.} read by %s, of dsqlTables: %s", errRules, strings.Join(bad, ", "), imageHint(events.SourceDSQL))
	}
	return nil
}

// Attributes are the attributes of stream records' images, and the
// columns of a database's rows, that the rules read, for their decoders
// (events.Decode): the others need not be decoded.
func (r *Rules) Attributes() events.Attributes { return r.attributes }

// AllowedKeys returns the patterns of the keys the rules may delete, and
// whether they were derived from the templates rather than given.
func (r *Rules) AllowedKeys() (patterns []string, derived bool) {
	return r.allowed.patterns, r.allowed.derived
}

func compile(where string, raws []string, allowImages bool) ([]template, error) {
	if len(raws) == 0 {
		return nil, fmt.Errorf("%w: %s has no templates", errRules, where)
	}
	templates := make([]template, len(raws))
	for i, raw := range raws {
		t, err := parseTemplate(raw, allowImages)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", where, i, err)
		}
		templates[i] = t
	}
	return templates, nil
}

// ParseRules reads rules written in YAML or JSON. Unknown fields are errors,
// so a typo cannot silently fall back to the defaults.
func ParseRules(data []byte) (*Rules, error) {
	var cfg RulesConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("%w: %w", errRules, err)
	}
	return NewRules(cfg)
}

// RulesFromEnv reads INVALIDATION_RULES (the rules inline) or
// INVALIDATION_RULES_FILE (a path) through getenv; with neither it returns
// DefaultRules. Setting both is an error.
func RulesFromEnv(getenv func(string) string) (*Rules, error) {
	inline, file := env.String(getenv, "INVALIDATION_RULES"), env.String(getenv, "INVALIDATION_RULES_FILE")
	switch {
	case inline != "" && file != "":
		return nil, fmt.Errorf("%w: set INVALIDATION_RULES or INVALIDATION_RULES_FILE, not both", errRules)
	case inline != "":
		r, err := ParseRules([]byte(inline))
		if err != nil {
			return nil, fmt.Errorf("INVALIDATION_RULES: %w", err)
		}
		return r, nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%w: INVALIDATION_RULES_FILE: %w", errRules, err)
		}
		r, err := ParseRules(data)
		if err != nil {
			return nil, fmt.Errorf("INVALIDATION_RULES_FILE %s: %w", file, err)
		}
		return r, nil
	default:
		return DefaultRules(), nil
	}
}

// Keys appends to dst the keys a change invalidates: its explicit keys if it
// has any, else the keys of its table's or entity's rule, else the default
// ones — none for a change of tags alone. dst holds what the change's
// record planned before it: a record plans at most 50,000 keys over all its
// changes and templates, checked as they expand. A template that cannot be
// planned safely, a key over the maximum length, or a record past its keys
// gives an error; the keys planned are still appended — deleting them is
// right whatever else fails — and the change's record fails.
func (r *Rules) Keys(c *events.Change, dst []string) ([]string, error) {
	start := len(dst)
	room := r.room("key", "keys", 0)
	var first error
	switch {
	case len(c.Keys) > 0:
		dst, first = room.given(dst, c.Keys)
	case c.Entity == "" && len(c.Tags) > 0: // a change of tags alone
	default:
		templates := r.templatesFor(c)
		var reads imageReads
		for i := range templates {
			var err error
			if dst, err = templates[i].expand(c, dst, room, &reads); err != nil && first == nil {
				first = err
			}
		}
	}
	return r.keep(dst, start, func(k string) string { return k }, room, first)
}

// Tags appends to dst the tags a change invalidates: its explicit tags if
// it has any, else those of its table's or entity's tag rule, if any. As
// with Keys, dst holds the record's tags before it, of which there are at
// most 50,000, and a tag that cannot be planned safely, whose key is too
// long or not allowed, or past the record's tags gives an error, and the
// others are still appended.
func (r *Rules) Tags(c *events.Change, dst []string) ([]string, error) {
	start := len(dst)
	room := r.room("tag key", "tags", len(r.tagPrefix))
	var first error
	if len(c.Tags) > 0 {
		dst, first = room.given(dst, c.Tags)
	} else {
		templates := r.tagEntities[c.Entity]
		if c.Source.Rows() {
			templates = r.tagTables[c.Table]
		}
		var reads imageReads
		for i := range templates {
			var err error
			if dst, err = templates[i].expand(c, dst, room, &reads); err != nil && first == nil {
				first = err
			}
		}
	}
	if len(dst) > start && !r.allowed.permits(r.TagClock()) && first == nil {
		first = &planError{Reason: "the tag clock " + strconv.Quote(r.TagClock()) + " is outside the allowed keys " + strings.Join(r.allowed.patterns, " ")}
	}
	return r.keep(dst, start, r.TagKey, room, first)
}

// MaxKeyBytes is the longest key the rules plan or allow, in bytes.
func (r *Rules) MaxKeyBytes() int { return r.maxKeyBytes }

// TagKey is the key of tag.
func (r *Rules) TagKey(tag string) string { return tagset.Key(r.tagPrefix, tag) }

// TagOf is the tag whose key is key, if key is one's.
func (r *Rules) TagOf(key string) (string, bool) {
	tag, ok := strings.CutPrefix(key, r.tagPrefix)
	return tag, ok && tag != ""
}

// TagClock is the key of the tag clock.
func (r *Rules) TagClock() string { return tagset.Clock(r.tagPrefix) }

// keep keeps of dst[start:] the entries whose key (key of each) is short
// enough and allowed, and returns them with the first error, first if set.
func (r *Rules) keep(dst []string, start int, key func(string) string, room keyRoom, first error) ([]string, error) {
	kept := dst[:start]
	for _, v := range dst[start:] {
		if reason := room.over(len(v)); reason != "" {
			if first == nil {
				first = &planError{Reason: reason}
			}
			continue
		}
		switch k := key(v); {
		case !r.allowed.permits(k):
			if first == nil {
				first = &planError{Reason: room.what + " " + strconv.Quote(truncateKey(k)) + " is outside the allowed keys " + strings.Join(r.allowed.patterns, " ")}
			}
		default:
			kept = append(kept, v)
		}
	}
	return kept, first
}

// keyRoom is how long what a rule plans may be — keys, or tags, whose
// keys add the tag prefix before them —, named what in errors, and how
// many of them, many, a record may plan.
type keyRoom struct {
	what, many string
	added, max int
}

// maxPerRecord bounds the keys, and apart the tags, that one record plans
// over all its changes and templates (which multiply each other's), so
// that planning a record is bounded before it is done (bench/README.md,
// "Hostile input", measures the worst).
const maxPerRecord = 50_000

func (r *Rules) room(what, many string, added int) keyRoom {
	return keyRoom{what: what, many: many, added: added, max: r.maxKeyBytes}
}

// over says why a key or tag of n bytes is too long, "" when it is not.
func (k keyRoom) over(n int) string {
	if n+k.added <= k.max {
		return ""
	}
	return k.what + " of " + strconv.Itoa(n+k.added) + " bytes is longer than the maximum of " + strconv.Itoa(k.max)
}

// left is how many more a record that planned dst may plan.
func (k keyRoom) left(dst []string) int { return maxPerRecord - len(dst) }

// full is the error of a record that plans more than maxPerRecord.
func (k keyRoom) full() error {
	return &planError{Reason: "the record plans more than " + strconv.Itoa(maxPerRecord) + " " + k.many, whole: true}
}

// given appends what a change names itself, as far as the record's room
// goes.
func (k keyRoom) given(dst, given []string) ([]string, error) {
	if n := k.left(dst); len(given) > n {
		return append(dst, given[:max(n, 0)]...), k.full()
	}
	return append(dst, given...), nil
}

func (r *Rules) templatesFor(c *events.Change) []template {
	var ts []template
	var ok bool
	if c.Source.Rows() {
		ts, ok = r.tables[c.Table]
	} else {
		ts, ok = r.entities[c.Entity]
	}
	if !ok {
		return r.defaults
	}
	return ts
}

// truncateKey keeps an error message short: a key may be long.
func truncateKey(k string) string {
	if len(k) > 100 {
		return strings.ToValidUTF8(k[:100], "") + "…"
	}
	return k
}
