package topic_test

import (
	"errors"
	"fmt"

	"github.com/rmq-go/rmq/topic"
)

// Topics are usually package-level values: MustNew panics on a definition
// that can never be valid, at program start.
var orderTimeouts = topic.MustNew("order-timeouts", topic.FixedTime, 8)

func ExampleMustNew() {
	fmt.Println(orderTimeouts)
	fmt.Println(orderTimeouts.Name(), orderTimeouts.Type(), orderTimeouts.SlotAmount())
	// Output:
	// order-timeouts(fixedtime/8)
	// order-timeouts fixedtime 8
}

// New refuses what a topic cannot be; the errors are sentinels to test
// with errors.Is.
func ExampleNew() {
	jobs, err := topic.New("jobs", topic.Priority, 4)
	fmt.Println(jobs, err)

	_, err = topic.New("orders:eu", topic.FixedTime, 8) // ':' would break the keys' hash tag
	fmt.Println(errors.Is(err, topic.ErrInvalidName))
	_, err = topic.New("orders", topic.FixedTime, 12) // slot amounts are powers of two
	fmt.Println(errors.Is(err, topic.ErrInvalidSlotAmount))
	_, err = topic.New("orders", topic.Type(0), 8)
	fmt.Println(errors.Is(err, topic.ErrInvalidType))
	// Output:
	// jobs(priority/4) <nil>
	// true
	// true
	// true
}

// A topic's definition is what Redis stores for it; every client of the
// topic must agree on it.
func ExampleTopic_Definition() {
	prices := topic.MustNew("price-changes", topic.RangeMerge, 16)
	def := prices.Definition()
	fmt.Println(def)

	again, err := topic.ParseDefinition("price-changes", def)
	fmt.Println(again == prices, err)
	// Output:
	// rangemerge:16
	// true <nil>
}

// ParseType reads the names that Type.String writes, as command-line tools
// take them.
func ExampleParseType() {
	for _, s := range []string{"rangemerge", "priority", "fixedtime", "lifo"} {
		t, err := topic.ParseType(s)
		if err != nil {
			fmt.Println(s, "->", errors.Is(err, topic.ErrInvalidType))
			continue
		}
		fmt.Println(s, "->", t, "time-based:", t.TimeBased())
	}
	// Output:
	// rangemerge -> rangemerge time-based: true
	// priority -> priority time-based: false
	// fixedtime -> fixedtime time-based: true
	// lifo -> true
}
