package invalidate_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/writethrough"
)

// The torture's source: products, each in a category, and lists of them —
// the products of each category, whose members change as products move,
// and featured sets of fixed products — cached by readers with tags.
const (
	tortureProducts   = 24
	tortureCategories = 4
	tortureLists      = 16 // the first tortureCategories by category, the rest featured
)

type listed struct {
	ID       int
	Price    int
	Category int
}

// shelf is a cached list: the products it holds, as the source had them.
type shelf struct{ Items []listed }

func shelfTags(s shelf, list int) []string {
	var tags []string
	if list < tortureCategories {
		tags = append(tags, "category:"+strconv.Itoa(list)) // joins and leaves
	}
	for _, it := range s.Items {
		tags = append(tags, "product:"+strconv.Itoa(it.ID))
	}
	return tags
}

// featured are the products of a featured list.
func featured(list int) []int {
	return []int{list % tortureProducts, (list + 5) % tortureProducts, (list + 11) % tortureProducts, (list + 17) % tortureProducts}
}

// catalogue is the source of truth the writers change and the loaders
// read, and the price of each product at its latest change invalidated.
type catalogue struct {
	mu        sync.Mutex
	products  [tortureProducts]listed
	delivered [tortureProducts]int
}

// invalidated notes that a change of product to price is invalidated.
func (c *catalogue) invalidated(product, price int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delivered[product] = max(c.delivered[product], price)
}

// stale tells whether s holds a product at a price older than one whose
// change was invalidated by then (delivered, read before s was asked for).
func (c *catalogue) stale(s shelf, delivered [tortureProducts]int) bool {
	for _, it := range s.Items {
		if it.Price < delivered[it.ID] {
			return true
		}
	}
	return false
}

func (c *catalogue) invalidatedPrices() [tortureProducts]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delivered
}

func (c *catalogue) list(list int) shelf {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s shelf
	for _, p := range c.products {
		if list < tortureCategories && p.Category == list || list >= tortureCategories && slices.Contains(featured(list), p.ID) {
			s.Items = append(s.Items, p)
		}
	}
	return s
}

// change changes a product's price, and now and then its category, and
// returns it as changed and the tags the change invalidates: the
// product's, and its old and new categories'.
func (c *catalogue) change() (listed, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.products[mrand.IntN(tortureProducts)]
	tags := []string{"product:" + strconv.Itoa(p.ID), "category:" + strconv.Itoa(p.Category)}
	p.Price++
	if mrand.IntN(3) == 0 {
		p.Category = mrand.IntN(tortureCategories)
		tags = append(tags, "category:"+strconv.Itoa(p.Category))
	}
	return *p, tags
}

// TestTagTorture runs readers caching lists with tags against writers that
// change products in the source and invalidate their tags after random
// delays, as the event-driven invalidator does, with the invalidator's own
// tag invalidation, reading four members a page so that most tags take
// several pages, loads now and then slower than the invalidations, and one
// tag in two evicted right after its invalidation, as the cache may any
// key with a TTL. No
// read may be served a product older than a change invalidated before the
// read began, and once every invalidation is delivered no list may be
// served other than the source has it. The same with fills that register
// their tags after they store, and no lease (Laravel's order), shows what
// the ordering with the lease prevents.
func TestTagTorture(t *testing.T) {
	reads, ours := tagTorture(t, true)
	readsAfter, after := tagTorture(t, false)
	t.Logf("reads served stale: writethrough with tags %d, registered after the fill %d; lists stale after quiescence: %d and %d (of %d)",
		reads, readsAfter, ours, after, tortureLists)
	if reads != 0 || ours != 0 {
		t.Fatalf("through writethrough %d reads served stale, %d lists stale at the end; want 0", reads, ours)
	}
	if readsAfter+after == 0 {
		t.Fatal("the recipe without the ordering was never stale: the interleavings did not happen, and the run proves nothing")
	}
}

func tagTorture(t *testing.T, ordered bool) (staleReads, stale int) {
	client := testenv.Cache(t)
	prefix := "wt:tagtorture:" + rand.Text() + ":"
	rules, err := invalidate.NewRules(invalidate.RulesConfig{TagPrefix: prefix, AllowedKeys: []string{"wt:*"}})
	if err != nil {
		t.Fatal(err)
	}
	inv := invalidate.New(invalidate.Valkey(client), invalidate.Options{Rules: rules, TagPage: 4})
	keyOf := func(list int) string { return prefix + "list:" + strconv.Itoa(list) }
	var src catalogue
	for i := range src.products {
		src.products[i] = listed{ID: i, Category: i % tortureCategories}
	}
	caches := make([]*writethrough.Cache[shelf], tortureLists)
	for l := range caches {
		caches[l] = writethrough.New[shelf](client, writethrough.Options[shelf]{TTL: time.Hour, Beta: -1, TagPrefix: prefix,
			TagsOf: func(s shelf) []string { return shelfTags(s, l) }})
	}
	load := func(l int) shelf {
		s := src.list(l)
		pause := time.Duration(mrand.IntN(5000)) * time.Microsecond // the load's way back
		if mrand.IntN(8) == 0 {
			pause = 20*time.Millisecond + time.Duration(mrand.IntN(20))*time.Millisecond
		}
		time.Sleep(pause)
		return s
	}

	ctx, stop := context.WithTimeout(t.Context(), 2*time.Second)
	defer stop()
	var readers, writers, delivered sync.WaitGroup
	var mu sync.Mutex
	for range 16 {
		readers.Go(func() {
			for ctx.Err() == nil {
				l := mrand.IntN(tortureLists)
				before := src.invalidatedPrices()
				var s shelf
				var err error
				if ordered {
					s, err = caches[l].Get(context.Background(), keyOf(l), func(context.Context) (shelf, error) { return load(l), nil })
				} else {
					s, err = registeredAfter(client, prefix, keyOf(l), shelfTags, l, load)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if src.stale(s, before) {
					mu.Lock()
					staleReads++
					mu.Unlock()
				}
			}
		})
	}
	for range 4 {
		writers.Go(func() {
			for ctx.Err() == nil {
				p, tags := src.change()
				delivered.Go(func() { // the change event, delivered later
					time.Sleep(time.Duration(mrand.Int64N(int64(2 * time.Millisecond))))
					rep := inv.Invalidate(context.Background(), invalidate.Decoded([]invalidate.Record{{ID: "w", Changes: []events.Change{{Tags: tags}}}}))
					if err := rep.Results[0].Err; err != nil {
						t.Error(err)
						return
					}
					src.invalidated(p.ID, p.Price)
					if mrand.IntN(2) == 0 { // evicted, as the cache may any key with a TTL: right after, at worst
						tag := tagset.Key(prefix, tags[mrand.IntN(len(tags))])
						if err := client.Do(context.Background(), client.B().Unlink().Key(tag).Build()).Error(); err != nil {
							t.Error(err)
						}
					}
				})
				time.Sleep(time.Duration(mrand.IntN(2000)) * time.Microsecond)
			}
		})
	}
	writers.Wait()
	delivered.Wait()
	readers.Wait()

	errAbsent := errors.New("absent")
	for l := range tortureLists {
		var got shelf
		if ordered { // as a reader would be served: registered in every tag
			if got, err = caches[l].Get(context.Background(), keyOf(l), func(context.Context) (shelf, error) { return shelf{}, errAbsent }); errors.Is(err, errAbsent) {
				continue
			}
		} else {
			raw, err := client.Do(context.Background(), client.B().Get().Key(keyOf(l)).Build()).AsBytes()
			if valkey.IsValkeyNil(err) {
				continue
			}
			if err == nil {
				err = json.Unmarshal(raw, &got)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Items, src.list(l).Items) {
			stale++
		}
	}
	return staleReads, stale
}

// registeredAfter is cache-aside with tags in the order that loses
// invalidations: GET; on a miss load, SET, then register the key in its
// tags. An invalidation between the load and the registration finds
// nothing to delete, and the stale value stays.
func registeredAfter(client valkey.Client, prefix, key string, tagsOf func(shelf, int) []string, list int, load func(int) shelf) (s shelf, err error) {
	ctx := context.Background()
	raw, err := client.Do(ctx, client.B().Get().Key(key).Build()).AsBytes()
	if err == nil {
		return s, json.Unmarshal(raw, &s)
	}
	if !valkey.IsValkeyNil(err) {
		return s, err
	}
	s = load(list)
	raw, _ = json.Marshal(s)
	if err := client.Do(ctx, client.B().Set().Key(key).Value(string(raw)).Px(time.Hour).Build()).Error(); err != nil {
		return s, err
	}
	reg := tagset.Registration(1, time.Now().Add(time.Hour))
	for _, tag := range tagsOf(s, list) {
		if err := client.Do(ctx, client.B().Hset().Key(tagset.Key(prefix, tag)).FieldValue().FieldValue(key, reg).Build()).Error(); err != nil {
			return s, err
		}
	}
	return s, nil
}
