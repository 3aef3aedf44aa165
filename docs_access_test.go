package invalidator

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/recipes/lock"
	"github.com/invalidator-go/invalidator/writethrough"
	"github.com/invalidator-go/invalidator/writethrough/near"
)

// accessCode is an access string in the docs: inline code that begins
// with "on ~".
var accessCode = regexp.MustCompile("`(on ~[^`]*)`")

// documented is an access string of the docs, and the list item or
// paragraph that says what it is for.
type documented struct {
	page, item string
	access     access
}

// access is an ACL access string, its rules in order.
type access struct{ rules []string }

func parseAccess(s string) access { return access{rules: strings.Fields(s)} }

func (a access) String() string { return strings.Join(a.rules, " ") }

// with are the rules that begin with prefix ("~", "&", "+"), prefix cut.
func (a access) with(prefix string) []string {
	var out []string
	for _, r := range a.rules {
		if p, ok := strings.CutPrefix(r, prefix); ok {
			out = append(out, p)
		}
	}
	return out
}

func (a access) has(rule string) bool { return slices.Contains(a.rules, rule) }

// without is a less a rule.
func (a access) without(rule string) access {
	return access{rules: slices.DeleteFunc(slices.Clone(a.rules), func(r string) bool { return r == rule })}
}

// connection is what a cluster client sends beside its work: to log in,
// name itself, find the slots, follow one being moved, and keep its
// connections alive. The worker's and the inspector's users have it, and
// every service's needs it.
var connection = []string{"asking", "ping", "hello", "auth", "client|setname", "client|setinfo", "cluster|shards", "cluster|slots"}

// writethroughRuns is what writethrough runs without tags or a near cache:
// GET, the lease's SET, UNLINK, and the scripts and what they call.
var writethroughRuns = []string{"get", "set", "unlink", "del", "pttl", "pexpire", "evalsha", "eval"}

func documentedAccess(t *testing.T) []documented {
	var found []documented
	for _, page := range docs(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, m := range accessCode.FindAllStringSubmatchIndex(text, -1) {
			start := max(strings.LastIndex(text[:m[0]], "\n- "), strings.LastIndex(text[:m[0]], "\n\n"), 0)
			found = append(found, documented{page: page, item: text[start:m[1]], access: parseAccess(text[m[2]:m[3]])})
		}
	}
	return found
}

// stackUsers are the worker's and the inspector's users as the template
// gives them, their key patterns the default CacheKeyPatterns, and the
// worker's rules the tests run it with (WORKER_ACL, WORKER_KEYS).
type stackUsers struct {
	worker, inspector, workerLocal access
	keys                           []string
}

func loadStackUsers(t *testing.T) stackUsers {
	tpl := loadTemplate(t)
	patterns := strings.Split(tpl.get("Parameters", "CacheKeyPatterns", "Default").value(), ",")
	user := func(name string) access {
		sub := tpl.get("Resources", name, "Properties", "AccessString").items()
		if len(sub) != 2 {
			t.Fatalf("%s's AccessString is not a !Sub of the key patterns", name)
		}
		return parseAccess(strings.ReplaceAll(sub[0].Value, "${Patterns}", strings.Join(patterns, " ~")))
	}
	env, err := os.ReadFile("localstack/env.sh")
	if err != nil {
		t.Fatal(err)
	}
	acl := regexp.MustCompile(`export WORKER_ACL="([^"]*)"`).FindStringSubmatch(string(env))
	keys := regexp.MustCompile(`export WORKER_KEYS="\$\{WORKER_KEYS:-([^}]*)\}"`).FindStringSubmatch(string(env))
	if acl == nil || keys == nil {
		t.Fatal("no WORKER_ACL or WORKER_KEYS in env.sh")
	}
	workerLocal := parseAccess("on ~" + strings.Join(strings.Fields(keys[1]), " ~") + " " + acl[1])
	return stackUsers{worker: user("CacheUser"), inspector: user("InspectorUser"), workerLocal: workerLocal, keys: patterns}
}

// tagCommands are the worker's commands for tags: its own, less the
// connection's, its deletes, its announcements and its health checks.
func (u stackUsers) tagCommands() []string {
	return slices.DeleteFunc(u.worker.with("+"), func(c string) bool {
		return slices.Contains(connection, c) || slices.Contains([]string{"unlink", "publish", "evalsha", "eval", "cluster|info"}, c)
	})
}

// inside tells whether keys matching pattern all match one of patterns, as
// far as a prefix followed by * tells.
func inside(pattern string, patterns []string) bool {
	for _, p := range patterns {
		prefix, wild := strings.CutSuffix(p, "*")
		if p == pattern || wild && !strings.ContainsAny(prefix, `*?[\`) && strings.HasPrefix(pattern, prefix) {
			return true
		}
	}
	return false
}

// problems says how a service's access string d is wider than the
// worker's and the inspector's let it be, or lacks what writethrough
// runs.
func (u stackUsers) problems(d documented) []string {
	a, tags := d.access, u.tagCommands()
	allowed := slices.Concat(connection, writethroughRuns, tags, []string{"subscribe", "publish"})
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if len(a.rules) == 0 || a.rules[0] != "on" {
		bad("does not begin with on")
	}
	seen := map[string]bool{}
	for _, r := range a.rules {
		switch {
		case r == "on" || r == "-@all" || r == "resetchannels":
		case strings.HasPrefix(r, "~"):
			if !inside(r[1:], u.keys) {
				bad("key pattern %s is not inside the worker's %v: the invalidator cannot delete those keys", r, u.keys)
			}
		case strings.HasPrefix(r, "&"):
			if !seen["resetchannels"] {
				bad("%s without resetchannels before it", r)
			}
			if !u.worker.has(r) || !u.inspector.has(r) {
				bad("channel %s is not the worker's and the inspector's", r)
			}
		case strings.HasPrefix(r, "+"):
			if !seen["-@all"] {
				bad("%s without -@all before it", r)
			}
			if !slices.Contains(allowed, r[1:]) {
				bad("%s: writethrough does not run it", r)
			}
		default:
			bad("rule %s: not a key pattern, a channel or a command writethrough runs", r)
		}
		seen[r] = true
	}
	for _, need := range []string{"-@all", "resetchannels"} {
		if !seen[need] {
			bad("no %s: the user gets what its defaults give", need)
		}
	}
	if len(a.with("~")) == 0 {
		bad("no key pattern")
	}
	for _, group := range [][]string{connection, writethroughRuns} {
		for _, c := range group {
			if !a.has("+" + c) {
				bad("lacks +%s", c)
			}
		}
	}
	if slices.ContainsFunc(tags, func(c string) bool { return a.has("+" + c) }) {
		for _, c := range tags {
			if !a.has("+" + c) {
				bad("has tag commands but lacks +%s, which the tags' scripts run", c)
			}
		}
	}
	if near := len(a.with("&")) > 0; near != a.has("+subscribe") {
		bad("a channel and +subscribe go together, as the inspector's (%v)", u.inspector)
	}
	if a.has("+publish") && (len(a.with("&")) == 0 || !strings.Contains(d.item, "announc")) {
		bad("+publish where it does not say it announces")
	}
	return out
}

// TestDocsAccessStrings: every access string in the docs is a service's
// least privilege — its keys inside the worker's, the channel the worker
// and the inspector have and nothing else, the connection's commands as
// theirs, and only those writethrough runs, all of the tags' when it has
// tags, +publish only where it says it announces. Strings as wide as the
// old example, or short of a command, are found.
func TestDocsAccessStrings(t *testing.T) {
	u := loadStackUsers(t)
	for _, who := range []access{u.worker, u.inspector} {
		for _, c := range connection {
			if !who.has("+" + c) {
				t.Errorf("%v lacks +%s: connection is not what a client sends", who, c)
			}
		}
	}
	for _, rule := range u.workerLocal.rules {
		if !u.worker.has(rule) {
			t.Errorf("the worker's local user has %s, its ElastiCache user not", rule)
		}
	}
	if tags := u.tagCommands(); len(tags) < 5 {
		t.Errorf("the worker's tag commands: %v", tags)
	}
	found := documentedAccess(t)
	for _, d := range found {
		for _, p := range u.problems(d) {
			t.Errorf("%s: %v: %s", d.page, d.access, p)
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(found), func(d documented) bool { return d.page != "docs/deploy.md" })); n < 4 {
		t.Errorf("%d access strings in docs/deploy.md, want the service's four", n)
	}

	base := "on ~cache:* resetchannels -@all +get +set +unlink +del +pttl +pexpire +evalsha +eval +asking +ping +hello +auth +client|setname +client|setinfo +cluster|shards +cluster|slots"
	if p := u.problems(documented{access: parseAccess(base)}); len(p) > 0 {
		t.Fatalf("the reference string has problems: %v", p)
	}
	for _, wrong := range []struct{ item, access string }{
		{"the old example", "on ~* +@read +@write +@scripting -@dangerous"},
		{"every key", strings.Replace(base, "~cache:*", "~*", 1)},
		{"keys the worker does not delete", strings.Replace(base, "~cache:*", "~session:*", 1)},
		{"every channel", strings.Replace(base, " resetchannels", "", 1)},
		{"a channel of its own", strings.Replace(base, "resetchannels", "resetchannels &other", 1) + " +subscribe"},
		{"a command it does not run", base + " +flushall"},
		{"short of a connection command", strings.Replace(base, " +hello", "", 1)},
		{"short of a script command", strings.Replace(base, " +pttl", "", 1)},
		{"tags short of one", strings.Replace(base, " +eval ", " +eval +time +incr +incrby +exists +hget +hset +hscan ", 1)},
		{"listening", strings.Replace(base, "resetchannels", "resetchannels &invalidator:near", 1) + " +subscribe +publish"},
	} {
		p := u.problems(documented{item: wrong.item, access: parseAccess(wrong.access)})
		if len(p) == 0 {
			t.Errorf("%s (%s): no problem found", wrong.item, wrong.access)
		}
		t.Logf("%s: %s", wrong.item, strings.Join(p, "; "))
	}
}

// TestDocsAccessStringsOnTheStack creates a user with each access string of
// the docs, on a cluster of its own, and runs through it the path of
// writethrough the string is for: reads, writes, a lock; with tags, tagged
// fills and hits; with a near cache, its subscription and, when it
// announces, its writes' announcements. The user may not UNLINK a key
// outside its pattern. And without any one of its commands or its channel
// (those a narrower string of the docs does not have already) the path
// fails: the string is the least that works.
func TestDocsAccessStringsOnTheStack(t *testing.T) {
	cluster := testenv.StartCluster(t, "docs-access", 7531)
	opt, err := cluster.Config.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := valkey.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	info, err := admin.Do(t.Context(), admin.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	valkeyServer := strings.Contains(info, "valkey_version:")

	var strs []access
	for _, d := range documentedAccess(t) {
		if !slices.ContainsFunc(strs, func(a access) bool { return a.String() == d.access.String() }) {
			strs = append(strs, d.access)
		}
	}
	for _, a := range strs {
		if !valkeyServer {
			a = a.without("+client|setinfo") // redis-server 7.0 does not know it
		}
		f := featuresOf(a)
		t.Run(f.String(), func(t *testing.T) {
			t.Log(a)
			if err := runWritethrough(t, cluster.Config, admin, a, f); err != nil {
				t.Fatalf("the documented string: %v", err)
			}
			for _, rule := range a.rules {
				if !strings.HasPrefix(rule, "+") && !strings.HasPrefix(rule, "&") || slices.Contains(connection, rule[1:]) ||
					slices.ContainsFunc(strs, func(narrower access) bool { return narrower.has(rule) && len(narrower.rules) < len(a.rules) }) {
					continue
				}
				err := runWritethrough(t, cluster.Config, admin, a.without(rule), f)
				if err == nil {
					t.Errorf("without %s the path still runs: writethrough does not need it, or the path does not try what does", rule)
				}
				t.Logf("without %s: %v", rule, err)
			}
		})
	}
}

// features are what an access string is for.
type features struct{ tags, near, announce bool }

func featuresOf(a access) features {
	return features{tags: a.has("+hset"), near: len(a.with("&")) > 0, announce: a.has("+publish")}
}

func (f features) String() string {
	name := "reads and writes"
	if f.tags {
		name += ", tags"
	}
	if f.near {
		name += ", near cache"
	}
	if f.announce {
		name += ", announcing"
	}
	return name
}

type item struct {
	ID      string
	Version int64
}

// runWritethrough creates a user with access a, and runs the path f of
// writethrough through it; admin plants what the path must get past and
// reads what it left. It returns the first step that went wrong.
func runWritethrough(t *testing.T, cfg elasticache.Config, admin valkey.Client, a access, f features) error {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	name, password := "docs-"+strings.ToLower(rand.Text()[:10]), rand.Text()
	for addr, node := range admin.Nodes() {
		// The scripts flushed: a user without EVAL gets NOSCRIPT and no fallback.
		if err := node.Do(ctx, node.B().ScriptFlush().Build()).Error(); err != nil {
			t.Fatalf("SCRIPT FLUSH on %s: %v", addr, err)
		}
		args := append([]string{name, ">" + password}, a.rules...)
		if err := node.Do(ctx, node.B().Arbitrary("ACL", "SETUSER").Args(args...).Build()).Error(); err != nil {
			t.Fatalf("ACL SETUSER %v on %s: %v", a, addr, err)
		}
		defer node.Do(context.Background(), node.B().AclDeluser().Username(name).Build())
	}
	cfg.Username, cfg.Password = name, password
	client, err := elasticache.New(cfg)
	if err != nil {
		return err
	}
	defer client.Close()

	ns := "cache:docs-access:" + strings.ToLower(rand.Text()[:10]) + ":"
	quiet := slog.New(slog.DiscardHandler)
	opts := writethrough.Options[item]{LeaseTTL: 300 * time.Millisecond, CacheTimeout: 2 * time.Second, BreakerThreshold: -1, Logger: quiet,
		VersionOf: func(i item) int64 { return i.Version }}
	var loads atomic.Int32
	get := func(c *writethrough.Cache[item], key string, wantLoad bool) error {
		before := loads.Load()
		v, err := c.Get(ctx, key, func(context.Context) (item, error) { loads.Add(1); return item{ID: "source", Version: 1}, nil })
		if err != nil || v.ID != "source" {
			return fmt.Errorf("Get %s = %+v, %v", key, v, err)
		}
		if loaded := loads.Load() != before; loaded != wantLoad {
			return fmt.Errorf("Get %s: loaded %v, want %v", key, loaded, wantLoad)
		}
		return nil
	}
	filled := func(key string) error {
		raw, err := admin.Do(ctx, admin.B().Get().Key(key).Build()).AsBytes()
		if s, ok := writethrough.Describe(raw); err != nil || !ok || s.Lease {
			return fmt.Errorf("%s holds %q (%v), not a value", key, raw, err)
		}
		return nil
	}
	admin.Do(ctx, admin.B().Set().Key(ns+"lease").Value("wt1|l|nobody|").Build())
	admin.Do(ctx, admin.B().Set().Key(ns+"foreign").Value("not an entry").Build())
	admin.Do(ctx, admin.B().Hset().Key(ns+"hash").FieldValue().FieldValue("f", "v").Build())

	c := writethrough.New[item](client, opts)
	steps := []func() error{
		func() error { return get(c, ns+"a", true) },
		func() error { return filled(ns + "a") },
		func() error { return get(c, ns+"a", false) },
		func() error { return get(c, ns+"lease", true) }, // a stale lease, dropped
		func() error { return filled(ns + "lease") },
		func() error { return get(c, ns+"foreign", true) },
		func() error { return filled(ns + "foreign") },
		func() error { return get(c, ns+"hash", true) },
		func() error { return filled(ns + "hash") },
		func() error {
			stored, err := c.WriteThrough(ctx, ns+"a", func(context.Context) (item, int64, error) { return item{ID: "source", Version: 2}, 2, nil })
			if err != nil || !stored {
				return fmt.Errorf("WriteThrough over version 1: stored %v, %v", stored, err)
			}
			return nil
		},
		func() error { return c.Write(ctx, ns+"a", func(context.Context) error { return nil }) },
		func() error {
			l, err := lock.TryLock(ctx, client, ns+"lock", time.Second)
			if err != nil {
				return err
			}
			if err := l.Extend(ctx, 2*time.Second); err != nil {
				return fmt.Errorf("Extend: %w", err)
			}
			return l.Release(ctx)
		},
		func() error {
			outside := "session:docs-access:" + rand.Text()
			admin.Do(ctx, admin.B().Set().Key(outside).Value("x").Build())
			defer admin.Do(context.Background(), admin.B().Del().Key(outside).Build())
			err := c.Invalidate(ctx, outside)
			var reply *valkey.ValkeyError
			if !errors.As(err, &reply) || !strings.HasPrefix(reply.Error(), "NOPERM") {
				return fmt.Errorf("UNLINK %s outside its keys: %v, want NOPERM", outside, err)
			}
			return nil
		},
	}
	if f.tags {
		tag := "docs-access-" + rand.Text()
		tagKey := tagset.Key(tagset.DefaultPrefix, tag)
		defer admin.Do(context.Background(), admin.B().Del().Key(tagKey).Build())
		tagged := writethrough.New[item](client, writethrough.Options[item]{CacheTimeout: opts.CacheTimeout, BreakerThreshold: -1, Logger: quiet,
			TagsOf: func(item) []string { return []string{tag} }})
		old := ns + "pruned"
		steps = append(steps,
			func() error { return get(tagged, ns+"tagged", true) }, // the tag is new: not stored
			func() error {
				// A registration past its time, for the next one to prune.
				return admin.Do(ctx, admin.B().Hset().Key(tagKey).FieldValue().FieldValue(old, tagset.Registration(1, time.UnixMilli(1))).Build()).Error()
			},
			func() error { return get(tagged, ns+"tagged", true) },
			func() error { return filled(ns + "tagged") },
			func() error { return get(tagged, ns+"tagged", false) },
			func() error {
				if n, err := admin.Do(ctx, admin.B().Hexists().Key(tagKey).Field(old).Build()).AsInt64(); err != nil || n != 0 {
					return fmt.Errorf("the registration past its time is still in the tag (%d, %v)", n, err)
				}
				return nil
			})
	}
	if f.near {
		ch := near.Open(client, near.ChannelOptions{ReadOnly: !f.announce, Logger: quiet})
		defer ch.Close()
		tier := near.New[item](ch, near.Options{})
		defer tier.Close()
		near := writethrough.New[item](client, writethrough.Options[item]{CacheTimeout: opts.CacheTimeout, BreakerThreshold: -1, Logger: quiet, Local: tier})
		steps = append(steps,
			func() error {
				for deadline := time.Now().Add(3 * time.Second); !ch.Subscribed(); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						return errors.New("the near cache did not subscribe")
					}
				}
				return nil
			},
			func() error { return get(near, ns+"near", true) },
			func() error { return get(near, ns+"near", false) }, // from the shared cache, kept
			func() error { return get(near, ns+"near", false) }, // from memory
			func() error {
				if s := tier.Stats(); s.Hits < 1 {
					return fmt.Errorf("the tier served nothing: %+v", s)
				}
				return nil
			},
			func() error { return near.Write(ctx, ns+"near", func(context.Context) error { return nil }) })
		if f.announce {
			steps = append(steps, func() error {
				if s := ch.Stats(); s.Announced < 1 || s.AnnounceErrors > 0 {
					return fmt.Errorf("announcements: %+v", s)
				}
				return nil
			})
		}
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}
