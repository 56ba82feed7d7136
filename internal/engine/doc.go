// Package engine is the consumer engine of RMQ: fetching, deliveries,
// leases, sweeping, wake-ups, the shared hub, pull, and ZooKeeper
// ownership. Package rmq is its one caller and reaches it through one
// typed seam: NewHub makes the part a client's topics share, Hub.New makes
// the engine of one topic from Params (its settings from TopicSettings,
// which applies the consumer options), and Engine has Start, Close, Pull
// and NackByID. The engine works on package consumer's public types (a
// listener gets a *consumer.Message, ends with a consumer outcome), never
// the other way round.
//
// # Goroutines
//
// Every background goroutine is an actor of the one shape written down in
// internal/lifecycle: a run(ctx) method started by its owner's
// lifecycle.Group, whose name below is also the goroutine's pprof label
// "rmq" (so a goroutine dump says which actor a goroutine is). A client
// runs these:
//
//	actor                 owner (group)         starts                          stops
//	--------------------  --------------------  ------------------------------  -------------------------------
//	pauser                Hub                   the hub's first engine Start    Hub.Close
//	wake receiver         Hub (single node)     the hub's first engine Start    Hub.Close
//	shard waker           Hub (cluster)         the hub's first engine Start    Hub.Close
//	shard receiver        shard waker           a subscription connection made  its connection closed, or the
//	                                            (one per master)                shard waker's end
//	sweeper               Hub                   the hub's first engine Start    Hub.Close
//	lease keeper          Hub                   the hub's first engine Start    Hub.Close (it waits for the
//	                                                                            extensions it started)
//	ack rounds            Hub                   the hub's first engine Start    Hub.Close (after the acks
//	                                                                            still queued ran)
//	holder                Hub                   the hub's first engine Start    Hub.Close
//	fetcher               Engine (pushed)       Engine.Start                    Engine.Close, first
//	adaptive reporter     Engine (pushed, with  Engine.Start                    Engine.Close, first (it removes
//	                      WithAdaptive-                                         its report from Redis)
//	                      Concurrency)
//	zk loop, zk heartbeat zkcoord.Coordinator   Coordinator.Start               Coordinator.Close
//	zk register, listing, zkcoord.Coordinator   the loop, as needed             their call's end, or Close
//	slot, leave
//
// Flow control (flow.go, permits.go, adaptive.go) adds one actor, the
// adaptive reporter; a cluster's permits are given back and renewed by the
// fetcher, and, after the handlers drained, by Close.
//
// Besides the actors, an engine starts one goroutine per delivery (its
// handler, from the fetch until its ack or rollback is sent; held messages
// get theirs when they are taken ahead of their instant), counted by the
// engine's handlers WaitGroup, and some calls fan out to goroutines that
// end before the call returns (the holder's confirm calls, the lease
// keeper's extensions).
//
// # Order of Close
//
// rmq.Client.Close ends them in this order, each step written where it
// happens: in ZooKeeper mode the worker leaves the fleet (no new slots);
// every engine closes, in parallel: its fetcher stops (no new delivery),
// messages held ahead of their instant go back to store, its wake-up
// channels and sweeps end, its handlers drain until Close's context ends
// (the rest are rolled back), and its lease keeping ends last; then the
// ZooKeeper session ends (the slots go to the other workers); then the hub
// closes, stopping its actors. Close returns once every goroutine above
// ended.
package engine
