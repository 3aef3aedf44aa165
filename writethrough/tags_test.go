package writethrough

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// list is a tagged value: the products of a category.
type list struct {
	Category string
	IDs      []string
}

func listTags(l list) []string {
	tags := []string{"category:" + l.Category}
	for _, id := range l.IDs {
		tags = append(tags, "product:"+id)
	}
	return tags
}

// tagged is a Cache of lists under a prefix of its own, so that tests do
// not share tags.
func tagged(t *testing.T, client valkey.Client) (*Cache[list], string) {
	prefix := "wt:tagtest:" + rand.Text() + ":"
	return New[list](client, Options[list]{TagsOf: listTags, TagPrefix: prefix}), prefix
}

// invalidateTag does what the invalidator does to a tag, in the order it
// does it: the clock read, the tag marked invalidated, its entries
// deleted, their registrations removed.
func invalidateTag(t *testing.T, client valkey.Client, prefix, tag string) {
	t.Helper()
	ctx := t.Context()
	clock, err := tagset.Tick.Each(ctx, client, []string{tagset.Clock(prefix)}, tagset.NoArgs)[0].AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	key := tagset.Key(prefix, tag)
	if err := client.Do(ctx, client.B().Hset().Key(key).FieldValue().FieldValue(tagset.Epoch, strconv.FormatInt(clock, 10)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	members, err := client.Do(ctx, client.B().Hkeys().Key(key).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if !tagset.Own(m) {
			_ = client.Do(ctx, client.B().Unlink().Key(m).Build()).Error()
			_ = client.Do(ctx, client.B().Hdel().Key(key).Field(m).Build()).Error()
		}
	}
}

func exists(t *testing.T, client valkey.Client, key string) bool {
	t.Helper()
	n, err := client.Do(t.Context(), client.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestTaggedFillsRegisterInTheirTags(t *testing.T) {
	client := testenv.Cache(t)
	c, prefix := tagged(t, client)
	k := key(t)
	var loads int
	load := func(context.Context) (list, error) {
		loads++
		return list{Category: "shoes", IDs: []string{"1", "2"}}, nil
	}
	// The tags are new: nothing tells whether one was invalidated during
	// the load, so the first fill is not stored, and makes them.
	if _, err := c.Get(t.Context(), k, load); err != nil || exists(t, client, k) {
		t.Fatalf("first Get: %v, stored %v; want a value, not stored", err, exists(t, client, k))
	}
	if _, err := c.Get(t.Context(), k, load); err != nil || !exists(t, client, k) {
		t.Fatalf("second Get: %v; want the value stored", err)
	}
	if v, err := c.Get(t.Context(), k, load); err != nil || loads != 2 || len(v.IDs) != 2 {
		t.Fatalf("third Get = %+v, %v after %d loads; want a hit", v, err, loads)
	}
	raw, _ := client.Do(t.Context(), client.B().Get().Key(k).Build()).AsBytes()
	s, _ := Describe(raw)
	for _, tag := range listTags(list{Category: "shoes", IDs: []string{"1", "2"}}) {
		reg, err := client.Do(t.Context(), client.B().Hget().Key(tagset.Key(prefix, tag)).Field(k).Build()).ToString()
		if clock, _ := tagset.ClockOf(reg); err != nil || clock != s.TagClock {
			t.Errorf("tag %s holds %q, %v; want the registration of clock %d", tag, reg, err, s.TagClock)
		}
		ttl, _ := client.Do(t.Context(), client.B().Pttl().Key(tagset.Key(prefix, tag)).Build()).AsInt64()
		if ttl < (10 * time.Minute).Milliseconds() {
			t.Errorf("tag %s lives %d ms more, want at least its entries' 10 minutes", tag, ttl)
		}
	}
	if len(s.Tags) != 3 || s.TagClock == 0 {
		t.Errorf("Describe = %+v, want 3 tags and a clock", s)
	}

	invalidateTag(t, client, prefix, "product:2")
	if exists(t, client, k) {
		t.Fatal("an invalidation of a tag left its entry")
	}
	if _, err := c.Get(t.Context(), k, load); err != nil || loads != 3 || !exists(t, client, k) {
		t.Fatalf("after the invalidation: %v, %d loads; want it loaded and stored again", err, loads)
	}
}

// TestAnInvalidationDuringTheLoadCancelsTheFill: whether the fill's key is
// in the tag already (registered by an earlier fill) or not yet (a tag the
// load finds), a tag invalidated while the value loads keeps the value out,
// read by Get or by GetMany.
func TestAnInvalidationDuringTheLoadCancelsTheFill(t *testing.T) {
	for _, read := range []string{"Get", "GetMany"} {
		t.Run(read, func(t *testing.T) { invalidationDuringTheLoad(t, read == "GetMany") })
	}
}

// viaGetMany reads key as Get does, with GetMany.
func viaGetMany[V any](ctx context.Context, c *Cache[V], key string, load func(context.Context) (V, error)) (V, error) {
	vs, err := c.GetMany(ctx, []string{key}, func(ctx context.Context, keys []string) (map[string]V, error) {
		v, err := load(ctx)
		return map[string]V{key: v}, err
	})
	return vs[key], err
}

func invalidationDuringTheLoad(t *testing.T, getMany bool) {
	client := testenv.Cache(t)
	c, prefix := tagged(t, client)
	get := c.Get
	if getMany {
		get = func(ctx context.Context, key string, load func(context.Context) (list, error)) (list, error) {
			return viaGetMany(ctx, c, key, load)
		}
	}
	k := key(t)
	ids := []string{"1"}
	for range 2 { // the tags made, the value stored
		if _, err := get(t.Context(), k, func(context.Context) (list, error) { return list{Category: "a", IDs: ids}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		ids  []string
		tag  string
	}{
		{"a tag the key was registered in", []string{"1"}, "product:1"},
		// Product 2 joins the list: its tag exists (another list's), the key
		// is not in it, and product 2 changes while the list loads.
		{"a tag the load finds", []string{"1", "2"}, "product:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := key(t)
			for range 2 {
				if _, err := get(t.Context(), other, func(context.Context) (list, error) { return list{Category: "b", IDs: []string{"2"}}, nil }); err != nil {
					t.Fatal(err)
				}
			}
			_ = client.Do(t.Context(), client.B().Unlink().Key(k).Build()).Error()
			v, err := get(t.Context(), k, func(context.Context) (list, error) {
				invalidateTag(t, client, prefix, tc.tag) // the change lands as the list loads
				return list{Category: "a", IDs: tc.ids}, nil
			})
			if err != nil || len(v.IDs) != len(tc.ids) {
				t.Fatalf("Get = %+v, %v", v, err)
			}
			if exists(t, client, k) {
				t.Fatal("a value loaded across an invalidation of its tag was stored")
			}
		})
	}
}

func TestAHitIsServedOnlyWhileRegistered(t *testing.T) {
	client := testenv.Cache(t)
	c, prefix := tagged(t, client)
	for _, lose := range []func(k string) valkey.Completed{
		func(k string) valkey.Completed { // its registration gone, as a failover behind may lose it
			return client.B().Hdel().Key(tagset.Key(prefix, "product:1")).Field(k).Build()
		},
		func(string) valkey.Completed { // the tag gone, as with its node restarted empty
			return client.B().Unlink().Key(tagset.Key(prefix, "category:a")).Build()
		},
	} {
		k := key(t)
		var loads int
		load := func(context.Context) (list, error) { loads++; return list{Category: "a", IDs: []string{"1"}}, nil }
		for range 3 {
			if _, err := c.Get(t.Context(), k, load); err != nil {
				t.Fatal(err)
			}
		}
		before := loads
		if err := client.Do(t.Context(), lose(k)).Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(t.Context(), k, load); err != nil || loads != before+1 {
			t.Fatalf("Get after the registration was lost: %v, %d loads, want one more", err, loads-before)
		}
	}
}

func TestRegistrationsPastTheirTimeArePruned(t *testing.T) {
	client := testenv.Cache(t)
	c, prefix := tagged(t, client)
	tag := tagset.Key(prefix, "category:a")
	past := tagset.Registration(1, time.Now().Add(-time.Hour))
	for i := range 40 {
		if err := client.Do(t.Context(), client.B().Hset().Key(tag).FieldValue().FieldValue("wt:gone:"+strconv.Itoa(i), past).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	load := func(context.Context) (list, error) { return list{Category: "a"}, nil }
	for i := range 10 {
		if _, err := c.Get(t.Context(), key(t)+strconv.Itoa(i), load); err != nil {
			t.Fatal(err)
		}
	}
	n, err := client.Do(t.Context(), client.B().Hlen().Key(tag).Build()).AsInt64()
	if err != nil || n > 10+2 {
		t.Fatalf("the tag holds %d fields, %v: want the 10 live registrations and its own two", n, err)
	}
}

func TestTagsOfMisuse(t *testing.T) {
	client := testenv.Cache(t)
	c := New[list](client, Options[list]{TagsOf: func(list) []string { return []string{"ok", ""} }, TagPrefix: "wt:tagtest:" + rand.Text() + ":"})
	k := key(t)
	v, err := c.Get(t.Context(), k, func(context.Context) (list, error) { return list{Category: "x"}, nil })
	if !errors.Is(err, ErrTag) || v.Category != "x" || exists(t, client, k) {
		t.Fatalf("Get with an empty tag = %+v, %v, stored %v; want the value, ErrTag, nothing stored", v, err, exists(t, client, k))
	}
	through, _ := tagged(t, client)
	for range 2 {
		_, _ = through.Get(t.Context(), k, func(context.Context) (list, error) { return list{Category: "x"}, nil })
	}
	stored, err := through.WriteThrough(t.Context(), k, func(context.Context) (list, int64, error) { return list{Category: "y"}, 2, nil })
	if err != nil || stored || exists(t, client, k) {
		t.Fatalf("WriteThrough of a tagged value: stored %v, %v; want it invalidated", stored, err)
	}
}
