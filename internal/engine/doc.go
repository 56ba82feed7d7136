// Package engine is the consumer engine of RMQ: fetching, deliveries,
// leases, sweeping, wake-ups, the shared hub, pull, flow control and
// ZooKeeper ownership. Package rmq is its one caller and reaches it through
// one typed seam: NewHub makes the part a client's topics share, Hub.New
// makes the engine of one topic from Params (its settings from
// TopicSettings, which applies the consumer options), and Engine has Start,
// Close, Pull and NackByID. The engine works on package consumer's public
// types (a listener gets a *consumer.Message, ends with a consumer
// outcome), never the other way round.
//
// The map of the system (every goroutine a client runs, its owner, the
// order in which Close stops them, and which part writes which Redis key)
// is in package rmq's documentation (rmq/doc.go), where users read it;
// keep it there when an actor or a key changes here. Each actor is a
// run(ctx) method started by its owner's lifecycle.Group
// (internal/lifecycle) under the name that table gives it.
package engine
