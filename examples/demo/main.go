// Command demo is the main demo of RMQ for Go: it runs the three example
// scenarios end to end against one Redis, one after another, and exits 0
// when every one of them behaved as promised:
//
//   - order timeout (FixedTime): unpaid orders are cancelled 2 s after
//     creation; paying removes the timeout message;
//   - price-change merge (RangeMerge): bursts of changes per SKU collapse
//     into one delivery per SKU per window, carrying the latest price;
//   - priority jobs (Priority): one worker, highest priority first; a failed
//     job is retried after the fresh ones.
//
// Run it with
//
//	go run ./examples/demo                      # starts a throwaway redis-server
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/demo
//	scripts/demo.sh                             # installs redis-server first if missing
package main

import "github.com/rmq-go/rmq/examples/internal/scenario"

func main() {
	scenario.Main("demo", scenario.OrderTimeout, scenario.PriceMerge, scenario.PriorityJobs)
}
