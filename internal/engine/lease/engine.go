package lease

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/engine/clock"
)

// Engine is one engine as the lease hub sees it: what it calls into. The
// hub keys its records by it, so the same engine must be the same
// (comparable, equal) value in every call.
type Engine interface {
	// Keep extends the leases of the engine's deliveries in flight once
	// and cancels handlers whose lease turned out lost; the call ends with
	// hubCtx, the engine's handlers, or after interval. It reports whether
	// anything was in flight (or held for its instant).
	Keep(hubCtx context.Context, interval time.Duration) bool
	// SweepSlots runs sweep.lua on slots of the engine, reports what it
	// did and returns how many leases it ended.
	SweepSlots(slots []int) (int, error)
	// ActiveSlots returns the slots the engine sweeps now; all: every slot
	// of its topic, which never changes.
	ActiveSlots() (slots []int, all bool)
	// PrepareKey is the prepare set of one slot of the engine.
	PrepareKey(slot int) string
}

// Params are an engine's settings the hub schedules by; they do not
// change while the engine is registered.
type Params struct {
	RDB            redis.UniversalClient
	Log            *slog.Logger
	Clock          *clock.Clock // the engine's estimate of Redis's clock
	SweepInterval  time.Duration
	PrepareTimeout time.Duration
	// Pull: a pull engine, whose leases the caller keeps (Extend).
	Pull       bool
	SlotAmount int
}

// SweepQueued reports whether c has a check queued (tests).
func (l *Hub) SweepQueued(c Engine) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.engines[c]
	return st != nil && st.sweep.Queued()
}

// QueuedSweeps counts the engines with a check queued (tests).
func (l *Hub) QueuedSweeps() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, st := range l.engines {
		if st.sweep.Queued() {
			n++
		}
	}
	return n
}
