// Package ownership decides which slots of a topic an engine consumes and
// fences its script calls: every slot, competing with other consumers
// (NewAll), or in ZooKeeper mode the slots a coordinator (internal/zkcoord)
// assigns (NewAssigned), each consumed one delivery at a time and every
// script call of it naming the slot's owner epoch, so Redis refuses the
// calls of a stale owner. The coordinator drives an engine through its
// SlotHandler and is asked and told through Coordinator; the ownership
// reaches its engine through Engine.
package ownership

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// Engine is the engine as an assigned ownership sees it. Its lock guards
// the engine's deliveries in flight and the ownership's slot state alike.
type Engine interface {
	Lock()
	Unlock()
	// RunningLocked: started, and Close has not begun.
	RunningLocked() bool
	// LiveLocked: started, and Close has not begun to stop fetching.
	LiveLocked() bool
	// InFlightLocked is how many deliveries of slot are in flight.
	InFlightLocked(slot int) int
	// RevokeLocked cancels the handlers of the deliveries of the slots in
	// set with cause (not ones revoked or abandoned already).
	RevokeLocked(set map[int]bool, cause error)
	// Reset makes the fetcher look at slot again from scratch and wakes it.
	Reset(slot int)
	// Poke wakes the fetcher.
	Poke()
}

// Env is what an assigned ownership's calls are made with.
type Env struct {
	RDB    redis.UniversalClient
	Prefix string
	Topic  topic.Topic
	Keys   []keyspace.Keys // by slot
	Log    *slog.Logger
}

// Ownership is the engine's one seam for ZooKeeper mode: which slots it
// consumes, how many deliveries each may have in flight, and the owner
// epoch that fences its script calls. allSlots (NewAll) is the default:
// competing consumers on every slot, nothing fenced. assignedSlots
// (NewAssigned, assigned.go) consumes the slots a coordinator assigns, one delivery
// at a time, every script call naming the slot's owner epoch. The engine
// asks the seam and never which mode it is in.
type Ownership interface {
	// SlotFree is how many more deliveries slot may have in flight now.
	SlotFree(slot int) int
	// ActiveSlots lists the slots to sweep.
	ActiveSlots() []int
	// Fetchable, Sweepable, EpochKey and Fence: the slots fetched and
	// swept, and the fencing of their calls.
	redisops.Owner
	// Vouched reports whether a delivery may start now.
	Vouched() bool
	// MayDispatchLocked reports whether a fetched message may start: the
	// term it was fetched in is still current. The caller holds the
	// engine's lock.
	MayDispatchLocked(m *consumer.Message) bool
	// SlotIdleLocked is told that the last delivery of slot ended. The
	// caller holds the engine's lock.
	SlotIdleLocked(slot int)
	// Fenced is told that Redis refused a call of slot made with epoch.
	Fenced(slot int, epoch int64, op string)
	// RollsBackAbandoned reports whether deliveries that Close abandons are
	// rolled back (an attempt counted) rather than left for shutdown.
	RollsBackAbandoned() bool
	// Shutdown runs at Close after the last handler returned.
	Shutdown()
	// Merges reports whether one script call may name several slots.
	Merges() bool
}

// allSlots is the ownership of competing consumers: every slot, always.
type allSlots struct {
	slots    []int
	capacity int // concurrency + prefetch: no per-slot limit
}

// NewAll returns the ownership of competing consumers of a topic of
// slotAmount slots whose engine may have capacity deliveries (its
// concurrency and prefetch) in flight.
func NewAll(slotAmount, capacity int) Ownership {
	return &allSlots{slots: slotList(slotAmount), capacity: capacity}
}

// IsAll reports whether o is the ownership of competing consumers (NewAll).
func IsAll(o Ownership) bool {
	_, ok := o.(*allSlots)
	return ok
}

// Handler returns o as the handler a coordinator drives, nil when o is
// not NewAssigned's.
func Handler(o Ownership) SlotHandler {
	if a, ok := o.(*assignedSlots); ok {
		return a
	}
	return nil
}

func (a *allSlots) SlotFree(int) int { return a.capacity }

// ActiveSlots returns a copy: callers may keep or reorder it.
func (a *allSlots) ActiveSlots() []int { return append([]int(nil), a.slots...) }

func (a *allSlots) Fetchable(reqs []redisops.FetchReq) ([]redisops.FetchReq, []redisops.FetchResult) {
	return reqs, nil
}

func (a *allSlots) Sweepable(slotList []int) ([]int, []int64) {
	return slotList, make([]int64, len(slotList))
}

func (a *allSlots) EpochKey(int) string { return "" }

func (a *allSlots) Fence(_ int, _ int64, keys []string, args []any) ([]string, []any) {
	return keys, args
}

func (a *allSlots) Vouched() bool                            { return true }
func (a *allSlots) MayDispatchLocked(*consumer.Message) bool { return true }
func (a *allSlots) SlotIdleLocked(int)                       {}
func (a *allSlots) Fenced(int, int64, string)                {}
func (a *allSlots) RollsBackAbandoned() bool                 { return true }
func (a *allSlots) Shutdown()                                {}
func (a *allSlots) Merges() bool                             { return true }

func slotList(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

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
