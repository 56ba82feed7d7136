package engine

import "context"

// ZooKeeper mode is one seam: a coordinator (internal/zkcoord) assigns an
// engine its slots through the engine's SlotHandler (Engine.Slots), and
// the engine asks and tells the coordinator through Coordinator.

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
