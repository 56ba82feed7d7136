// Command ordertimeout shows FixedTime messages: every order schedules a
// timeout message due 2 s after its creation; paying the order removes that
// message with Producer().Remove, and a timeout that fires cancels the order.
//
//	go run ./examples/ordertimeout                        # throwaway redis-server
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/ordertimeout
//
// The code is in ../internal/scenario/ordertimeout.go, shared with
// examples/demo.
package main

import "github.com/rmq-go/rmq/examples/internal/scenario"

func main() { scenario.Main("ordertimeout", scenario.OrderTimeout) }
