// Package engine is the consumer engine of RMQ: the engine of one topic
// (its deliveries from dispatch to ack or rollback, pull and nack by id,
// Start and Close) and the hub a client's topics share. Package rmq is its
// one caller and reaches it through one typed seam: NewHub makes the part
// a client's topics share, Hub.New makes the engine of one topic from
// Params (its settings from TopicSettings, which applies the consumer
// options), and Engine has Start, Close, Pull and NackByID. The engine
// works on package consumer's public types (a listener gets a
// *consumer.Message, ends with a consumer outcome), never the other way
// round.
//
// Every other job is a room of its own, a package below this one that
// imports only lower ones and never the engine; each reaches the engine
// through a small interface the engine implements with a one-pointer
// adapter (fetchEngine, ownEngine, leaseEngine, holdEngine, the waker):
//
//	fetcher    the fetch loop, its plan across slots, the first look
//	redisops   a topic's script calls: fetch, rollback, extend, sweep
//	ack        the ack rounds of every topic, and an ack's keys
//	hold       lookahead's holder
//	lease      the one sweeper and lease keeper
//	wake       the wake-up subscriptions and the pauser
//	flow       an engine's limits, a cluster's permits, acks by id's
//	           flow keys (Registry), adaptive concurrency
//	ownership  which slots an engine consumes: ZooKeeper mode's
//	           assigned slots and owner-epoch fencing
//	fetchmux   a single node's shared fetch rounds
//	clock      estimates of Redis's clock, retry pacing
//	timerq     the lease schedules' heap
//
// Inside, imports go down only: fetcher → redisops, flow, fetchmux,
// clock; ownership → redisops → flow, lease, fetchmux, clock; ack, hold →
// fetchmux → clock; wake → lease → timerq, clock.
//
// The map of the system (every goroutine a client runs, its owner, the
// order in which Close stops them, and which part writes which Redis key)
// is in package rmq's documentation (rmq/doc.go), where users read it;
// keep it there when an actor or a key changes here. Each actor is a
// run(ctx) method started by its owner's lifecycle.Group
// (internal/lifecycle) under the name that table gives it.
package engine
