// Command pricemerge shows RangeMerge messages: bursts of price changes per
// SKU collapse into one delivery per SKU per 500 ms window, carrying the
// latest price; it prints how many changes were sent and how many delivered.
//
//	go run ./examples/pricemerge                          # throwaway redis-server
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/pricemerge
//
// The code is in ../internal/scenario/pricemerge.go, shared with
// examples/demo.
package main

import "github.com/rmq-go/rmq/examples/internal/scenario"

func main() { scenario.Main("pricemerge", scenario.PriceMerge) }
