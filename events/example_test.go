package events_test

import (
	"fmt"

	"github.com/invalidator-go/invalidator/events"
)

// An SQS body may be a change message, raw or in an SNS or EventBridge
// envelope, or an array of them.
func ExampleDecodeSQSBody() {
	changes, err := events.DecodeSQSBody("m1", `[{"entity":"product","id":"42","op":"update"},{"keys":["cache:{user:7}:feed"]}]`, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range changes {
		fmt.Printf("%s %s %s %q\n", c.Entity, c.ID, c.Op, c.Keys)
	}
	_, err = events.DecodeSQSBody("m2", `{"entity":"product","id":1.5}`, "")
	fmt.Println(err)
	// Output:
	// product 42 update []
	//    ["cache:{user:7}:feed"]
	// record "m2": a numeric id must be an integer, not 1.5
}
