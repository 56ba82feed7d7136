package fetcher

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/clock"
	"github.com/rmq-go/rmq/internal/engine/fetchmux"
	"github.com/rmq-go/rmq/internal/engine/flow"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// Engine is the engine as its fetcher sees it.
type Engine interface {
	// WantRelease sets whether the engine tells the fetcher of capacity
	// that came free (Params.Released).
	WantRelease(bool)
	// FreeCapacity is how many more deliveries may be fetched.
	FreeCapacity() int
	// HeldRoom is how many more messages may be held for their instant.
	HeldRoom() int
	// IdleHandlers is how many handlers no delivery has taken.
	IdleHandlers() int
	// AdaptBacklog sets a backlog's prefetch after a fetch of due messages.
	AdaptBacklog(moved, asked, idleAtStart int, more bool, since time.Duration)
	// Paused: the topic is paused (Inspector.Pause).
	Paused() bool
	// LookaheadMs is how long before their instant fetches take messages.
	LookaheadMs() int64
	// SyncClock sets the engine's clock to the client's estimate.
	SyncClock()
	// SlotFree is how many more deliveries slot may have in flight now.
	SlotFree(slot int) int
	// Fenced is told that Redis refused a fetch of slot made with epoch.
	Fenced(slot int, epoch int64, op string)
	// Leased tells the lease hub that a fetch leased messages; Heard that
	// a fetch found a head gone or failed (the sweeper looks).
	Leased()
	Heard()
	// Dispatch and DispatchOne start deliveries; HoldAll holds messages
	// fetched ahead of their instant.
	Dispatch(msgs []*consumer.Message)
	DispatchOne(m *consumer.Message)
	HoldAll(msgs []*consumer.Message)
	// TakeWakes returns and clears the wake-ups heard (all: every slot
	// is unknown); TakeDelayed the delayed due times heard.
	TakeWakes() (all bool, pending map[int]float64)
	TakeDelayed() map[int]float64
}

// Params are what a fetcher works with, fixed for its life.
type Params struct {
	Topic topic.Topic
	RDB   redis.UniversalClient
	Keys  []keyspace.Keys // by slot
	// Merged: one script call may name several slots.
	Merged bool
	// HubRDB: Merged, and RDB is the client's own (its looks may answer
	// for it).
	HubRDB bool
	// AdaptsBacklog: a backlog may bring a prefetch (the engine's
	// adaptBacklog).
	AdaptsBacklog bool
	// AllSlots: every slot is consumed, with no per-slot limit.
	AllSlots bool
	Ops      *redisops.Ops
	Flow     *flow.State
	Clock    *clock.Clock // the engine's estimate of Redis's clock
	Calls    *fetchmux.Mux
	Looks    *Looks
	Log      *slog.Logger
	// Signal is the waker's (a wake-up); Released the engine's (a
	// delivery freed capacity).
	Signal, Released <-chan struct{}
}
