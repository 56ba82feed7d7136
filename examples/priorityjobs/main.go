// Command priorityjobs shows Priority messages: queued jobs with various
// priorities are handled highest first by one worker; a job that fails once
// is retried after all the fresh jobs.
//
//	go run ./examples/priorityjobs                        # throwaway redis-server
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/priorityjobs
//
// The code is in ../internal/scenario/priorityjobs.go, shared with
// examples/demo.
package main

import "github.com/rmq-go/rmq/examples/internal/scenario"

func main() { scenario.Main("priorityjobs", scenario.PriorityJobs) }
