package engine

import (
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/fetcher"
	"github.com/rmq-go/rmq/internal/engine/ownership"
)

// The engine's one actor is its fetcher (package fetcher), which reaches
// the engine through fetchEngine.

// newFetcher returns c's fetcher; c's waker is registered.
func (c *Engine) newFetcher() *fetcher.Fetcher {
	return fetcher.New(fetchEngine{c}, fetcher.Params{
		Topic: c.topic, RDB: c.rdb, Keys: c.keys, Merged: c.merged, HubRDB: c.merged && c.rdb == c.hub.rdb,
		AdaptsBacklog: c.adaptsBacklog, AllSlots: ownership.IsAll(c.own),
		Ops: c.ops, Flow: c.flow, Clock: &c.clock, Calls: c.hub.calls, Looks: c.hub.looks, Log: c.log,
		Signal: c.waker.signal, Released: c.released,
	})
}

// fetchEngine is c as its fetcher (fetcher.Engine) sees it.
type fetchEngine struct{ c *Engine }

func (e fetchEngine) WantRelease(b bool)                      { e.c.wantRelease.Store(b) }
func (e fetchEngine) FreeCapacity() int                       { return e.c.freeCapacity() }
func (e fetchEngine) HeldRoom() int                           { return e.c.heldRoom() }
func (e fetchEngine) IdleHandlers() int                       { return e.c.idleHandlers() }
func (e fetchEngine) Paused() bool                            { return e.c.paused.Load() }
func (e fetchEngine) LookaheadMs() int64                      { return e.c.lookaheadMs() }
func (e fetchEngine) SyncClock()                              { e.c.syncClock() }
func (e fetchEngine) SlotFree(slot int) int                   { return e.c.own.SlotFree(slot) }
func (e fetchEngine) Fenced(slot int, epoch int64, op string) { e.c.fenced(slot, epoch, op) }
func (e fetchEngine) Heard()                                  { e.c.hub.leases.Heard(e.c.lease()) }
func (e fetchEngine) Dispatch(msgs []*consumer.Message)       { e.c.dispatch(msgs) }
func (e fetchEngine) DispatchOne(m *consumer.Message)         { e.c.dispatchOne(m) }
func (e fetchEngine) HoldAll(msgs []*consumer.Message)        { e.c.holdAll(msgs) }
func (e fetchEngine) TakeWakes() (bool, map[int]float64)      { return e.c.waker.take() }
func (e fetchEngine) TakeDelayed() map[int]float64            { return e.c.waker.takeDelayed() }

func (e fetchEngine) Leased() {
	e.c.hub.leases.Leased(e.c.lease(), time.Now().Add(e.c.cfg.prepareTimeout))
}

func (e fetchEngine) AdaptBacklog(moved, asked, idleAtStart int, more bool, since time.Duration) {
	e.c.adaptBacklog(moved, asked, idleAtStart, more, since)
}
