package wake

import (
	"context"
	"log/slog"
)

// Target is one engine's waker as the wake hub sees it: it records what
// the engine's slots heard and wakes its fetcher. The hub keys its records
// by it, so one waker is the same (comparable, equal) value in every call.
type Target interface {
	// Channels returns the wake channel of every slot, by slot.
	Channels() []string
	// Message records a wake-up of slot; it reports whether the fetcher
	// should be signalled now.
	Message(payload string, slot int) bool
	// LookAt marks one slot "look now" (head unknown); MarkAll every slot.
	// Neither signals.
	LookAt(slot int)
	MarkAll()
	// Poke wakes the fetcher.
	Poke()
	// ApplyPaused records the pause state a read that started with seq
	// found, unless a later read was applied; it reports whether the state
	// changed (the hub then calls PauseChanged, holding no lock).
	ApplyPaused(seq uint64, paused bool) bool
	// Release ends the hold a pause or resume payload started, once the
	// read it waited for was applied.
	Release()
	PauseChanged(paused bool)
	// Prefix and TopicName name the topic's pause state (the paused hash
	// of its key prefix); Logger is its engine's.
	Prefix() string
	TopicName() string
	Logger() *slog.Logger
}

// Shards is the cluster's shard waker; nil on a single node.
func (wh *Hub) Shards() *ShardWaker { return wh.shards }

// RunPauser runs the pauser, which reads pause states for the hub, until
// ctx ends.
func (wh *Hub) RunPauser(ctx context.Context) { wh.pauses.run(ctx) }

// NextPauseSeq numbers a read of a pause state about to start: a starting
// engine's own read orders with the pauser's.
func (wh *Hub) NextPauseSeq() uint64 { return wh.pauses.nextSeq() }

// Recheck reads w's pause state again after a pause or resume payload and
// pokes it (pauser.recheck).
func (wh *Hub) Recheck(w Target, fallback bool) { wh.pauses.recheck(w, fallback) }
