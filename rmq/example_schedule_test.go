package rmq_test

import (
	"fmt"
	"time"

	"github.com/rmq-go/rmq/rmq"
)

// The ticks of "every night at 02:30 Berlin time" across the night clocks
// go forward: 02:30 does not exist on 30 March 2025, and fires once at the
// end of the gap.
func ExampleNextTicks() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	from := time.Date(2025, 3, 29, 12, 0, 0, 0, berlin)
	ticks, err := rmq.NextTicks("30 2 * * *", berlin, from, 3)
	if err != nil {
		panic(err)
	}
	for _, t := range ticks {
		fmt.Println(t.In(berlin).Format(time.RFC3339))
	}
	// Output:
	// 2025-03-30T03:00:00+02:00
	// 2025-03-31T02:30:00+02:00
	// 2025-04-01T02:30:00+02:00
}
