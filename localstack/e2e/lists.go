package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/invalidator-go/invalidator/writethrough"
)

// The list readers cache what no key template names: the products of a
// category, sets of featured products, the users of a group — lists of
// entities at their versions, filled through writethrough with tags, the
// category's and each item's (product:ID, user:ID), which the rules plan
// from each change. Only the tags invalidate them.

// list is a cached list: its items at the versions the source had.
type list struct {
	Entity   string // each item's tag is Entity:ID
	Category string `json:",omitempty"` // and category:Category
	Items    []item
}

func listTags(l list) []string {
	var tags []string
	if l.Category != "" {
		tags = append(tags, "category:"+l.Category)
	}
	for _, it := range l.Items {
		tags = append(tags, l.Entity+":"+it.ID)
	}
	return tags
}

// listDef is a list the readers cache: its key and what it holds.
type listDef struct {
	key      string
	entity   string
	category string
	ids      []string
}

// categoryOf is the category putProduct gives a product.
func categoryOf(id string) string { return "cat-" + strconv.Itoa(len(id)%5) }

// listDefs are the load's lists: the products of each of its categories,
// eight featured sets of four products, and the users of four groups.
func (l *load) listDefs() []listDef {
	var defs []listDef
	byCategory := map[string][]string{}
	for i := range entities {
		id := l.id("product", i)
		byCategory[categoryOf(id)] = append(byCategory[categoryOf(id)], id)
	}
	for _, c := range slices.Sorted(maps.Keys(byCategory)) {
		defs = append(defs, listDef{key: "cache:list:" + l.prefix + "category:" + c, entity: "product", category: c, ids: byCategory[c]})
	}
	for j := range 8 {
		def := listDef{key: "cache:list:" + l.prefix + "featured:" + strconv.Itoa(j), entity: "product"}
		for _, n := range []int{j, j + 9, j + 19, j + 29} {
			def.ids = append(def.ids, l.id("product", n%entities))
		}
		defs = append(defs, def)
	}
	for g := range 4 {
		def := listDef{key: "cache:list:" + l.prefix + "users:" + strconv.Itoa(g), entity: "user"}
		for n := g; n < entities; n += 4 {
			def.ids = append(def.ids, l.id("user", n))
		}
		defs = append(defs, def)
	}
	return defs
}

// readLists reads random lists through writethrough, as readEach does.
func (l *load) readLists(ctx context.Context) {
	l.readEach(ctx, func(ctx context.Context) error {
		def := l.lists[rand.N(len(l.lists))]
		return readThrough(ctx, &l.wt, kindList, l.listCache, def.key, func(ctx context.Context) (list, error) {
			s, err := l.sourceList(ctx, def)
			slowly(ctx)
			return s, err
		})
	})
}

// sourceList reads a list's items from the source: the products from the
// table, strongly, in one request; the users from the writers' record.
func (l *load) sourceList(ctx context.Context, def listDef) (list, error) {
	s := list{Entity: def.entity, Category: def.category}
	if def.entity == "user" {
		for _, id := range def.ids {
			s.Items = append(s.Items, l.sourceRecorded("user", id))
		}
		return s, nil
	}
	keys := make([]map[string]ddbtypes.AttributeValue, len(def.ids))
	for i, id := range def.ids {
		keys[i] = map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: id}}
	}
	out, err := l.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{
		l.env.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}})
	if err != nil {
		return s, err
	}
	if len(out.UnprocessedKeys) > 0 {
		return s, errors.New("the table left keys of the list unread")
	}
	for _, it := range out.Responses[l.env.table] {
		id, _ := it["id"].(*ddbtypes.AttributeValueMemberS)
		n, ok := it["version"].(*ddbtypes.AttributeValueMemberN)
		if id == nil || !ok {
			return s, fmt.Errorf("a product of list %s has no id or version", def.key)
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return s, err
		}
		s.Items = append(s.Items, item{ID: id.Value, Version: v})
	}
	slices.SortFunc(s.Items, func(a, b item) int { return cmp.Compare(a.ID, b.ID) })
	return s, nil
}

// staleLists counts the lists a reader would be served — cached, and
// registered in all their tags — with an item older than the source's.
func (l *load) staleLists(ctx context.Context, r *staleCounts) error {
	errAbsent := errors.New("absent")
	// Never refreshed early: the check only looks.
	look := writethrough.New[list](l.cache, writethrough.Options[list]{TTL: time.Hour, Beta: -1, TagsOf: listTags})
	for _, def := range l.lists {
		cached, err := look.Get(ctx, def.key, func(context.Context) (list, error) { return list{}, errAbsent })
		if errors.Is(err, errAbsent) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", def.key, err)
		}
		source, err := l.sourceList(ctx, def)
		if err != nil {
			return err
		}
		for _, it := range cached.Items {
			if i := slices.IndexFunc(source.Items, func(s item) bool { return s.ID == it.ID }); i >= 0 && it.Version < source.Items[i].Version {
				r.list++
				r.notes = append(r.notes, fmt.Sprintf("stale %s: %s at version %d, the source has %d", def.key, it.ID, it.Version, source.Items[i].Version))
				break
			}
		}
	}
	return nil
}
