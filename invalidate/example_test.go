package invalidate_test

import (
	"fmt"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// A table rule reads both images of a stream record: a product that moves
// from one category to another invalidates both category pages.
func ExampleRules_Keys() {
	rules, err := invalidate.ParseRules([]byte(`
tables:
  Products: ["cache:product:{key.id}", "cache:category:{item.category}"]
entities:
  product: ["cache:product:{id}", "cache:{product:{id}}:reviews"]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	update := events.Change{
		Entity: "Products", ID: "42", Op: events.OpUpdate, Source: events.SourceDynamoDB, Table: "Products",
		ItemKey:  events.Image{"id": {Type: events.TypeString, S: "42"}},
		OldImage: events.Image{"category": {Type: events.TypeString, S: "shoes"}},
		NewImage: events.Image{"category": {Type: events.TypeString, S: "boots"}},
	}
	keys, _ := rules.Keys(&update, nil)
	fmt.Println(keys)
	keys, _ = rules.Keys(&events.Change{Entity: "product", ID: "7"}, nil)
	fmt.Println(keys)
	_, err = rules.Keys(&events.Change{Entity: "product"}, nil)
	fmt.Println(err)
	// Output:
	// [cache:product:42 cache:category:shoes cache:category:boots]
	// [cache:product:7 cache:{product:7}:reviews]
	// template "cache:product:{id}": placeholder {id} is missing or empty
}
