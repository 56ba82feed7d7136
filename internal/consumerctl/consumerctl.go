// Package consumerctl is the seam between package rmq and the consumer
// engine, which package consumer keeps unexported: a user consumes through
// rmq.Client.Register, and neither a per-topic consumer type nor the
// ZooKeeper ownership protocol (SlotHandler) is a promise of the public API.
//
// The shape is grpc-go's internal hooks: package consumer sets New in its
// init, and rmq, which imports consumer for its public types, calls it.
// Params carries the listener and options as package consumer's own types
// behind `any` (this package cannot name them without an import cycle);
// consumer's New checks them, and a wrong type is a programming error of
// rmq, reported as an error, not a panic. An interface call per lifecycle
// event is the whole cost: the engine's per-message paths never cross it.
package consumerctl

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/topic"
)

// Params are what an engine is built from.
type Params struct {
	Redis redis.UniversalClient
	Topic topic.Topic
	// Listener is a consumer.MessageListener.
	Listener any
	// Options are a []consumer.Option.
	Options any
	// Coordinator, when not nil, assigns the engine its slots (ZooKeeper
	// mode); nil: the engine consumes every slot (competing consumers).
	Coordinator Coordinator
	// Pull makes an engine without a listener that fetches only when asked
	// (Puller); it still subscribes to wake-ups and sweeps expired leases.
	// OnWake, if not nil, is called on every wake-up of its slots (from the
	// waker's goroutine; it must not block).
	Pull   bool
	OnWake func()
	// Shared, when not nil, is what the engines of one client share (made
	// by NewShared): one wake-up subscription, one sweeper and lease
	// keeper, and shared script calls. Nil: the engine makes its own.
	Shared Shared
}

// Shared is what the engines of one client share. The client closes it
// after closing every engine that uses it; Close returns once its
// goroutines ended.
type Shared interface {
	Close()
}

// NewShared makes a Shared for engines on rdb; package consumer sets it in
// its init.
var NewShared func(rdb redis.UniversalClient) Shared

// Puller is an engine made with Params.Pull.
type Puller interface {
	Engine
	// Pull moves up to n due messages to prepare, each under a lease of
	// lease, and returns them (a []*consumer.Delivery) with how long until
	// the next message comes due (negative: nothing known to come due).
	Pull(ctx context.Context, n int, lease time.Duration) (deliveries any, count int, next time.Duration, err error)
	// NackByID ends whatever delivery of id is current as failed, unfenced,
	// as a pulled delivery's Nack does; it reports whether one was ended.
	NackByID(ctx context.Context, id string, retryAfter time.Duration, cause error) (bool, error)
}

// Engine consumes one topic with one listener.
type Engine interface {
	// Topic returns the consumed topic.
	Topic() topic.Topic
	// Start checks the topic definition, subscribes to wake-ups and starts
	// fetching; ctx bounds the start-up only.
	Start(ctx context.Context) error
	// Close stops fetching, drains the handlers until ctx is done and
	// returns once every goroutine of the engine ended.
	Close(ctx context.Context) error
	// Slots is the handler a Coordinator drives, nil when Params had none.
	Slots() SlotHandler
}

// New builds an engine; package consumer sets it in its init.
var New func(p Params) (Engine, error)

// SlotHandler is what a coordinator drives for one topic: the engine of
// that topic in this process. Calls for one slot never overlap.
type SlotHandler interface {
	// Acquire starts a term of ownership of slot with owner epoch epoch
	// (larger than any earlier owner's): it waits until no delivery of an
	// earlier term is in flight, returns the previous owner's in-flight
	// messages to store (raising the slot's epoch in Redis in the same
	// script call) and starts fetching the slot, one message at a time.
	Acquire(ctx context.Context, slot int, epoch int64) error
	// Release stops fetching slot and returns once its in-flight
	// deliveries ended (acked or rolled back), or ctx is done.
	Release(ctx context.Context, slot int) error
	// Revoke stops fetching the slots at once and cancels their handlers'
	// contexts with cause: their ownership can no longer be vouched for.
	Revoke(slots []int, cause error)
	// Pause stops (true) or resumes (false) fetching on every slot; handlers
	// in flight keep running.
	Pause(paused bool)
}

// Coordinator is what an engine with assigned slots asks and tells the
// coordinator that drives it.
type Coordinator interface {
	// Vouched reports whether this process's ownership of its slots is
	// proven right now (its ZooKeeper session lease is valid). An engine
	// starts no delivery while it is not: a process that was frozen past
	// its session learns it on its first instruction after waking up.
	Vouched() bool
	// Fenced tells that Redis refused a call of the topic's slot because a
	// newer owner epoch is stored: the engine stopped the slot.
	Fenced(topicName string, slot int)
}
