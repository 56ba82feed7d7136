package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
)

// This file is the consumer's side of ZooKeeper mode (WithAssignedSlots): a
// coordinator decides which slots this consumer owns and drives it through
// Acquire, Release, Revoke and Pause; every script call of an owned slot
// names the slot's owner epoch, and Redis refuses the calls of a stale owner.

var (
	// ErrFenced is the cause of a handler context cancelled because Redis
	// refused a call of its slot's owner: another worker owns the slot now.
	ErrFenced = errors.New("rmq: slot owned by another worker (owner epoch moved on)")
	// ErrNotAssigned is returned by Acquire and Release on a consumer
	// without WithAssignedSlots, or one that is not running.
	ErrNotAssigned = errors.New("rmq: consumer does not take assigned slots")
)

var _ slots.SlotHandler = (*Consumer)(nil)

// FenceObserver is an optional extension of Observer: an observer that
// implements it is told about every call Redis refused because this
// consumer's owner epoch of the slot was no longer current (ZooKeeper mode).
// op is "fetch", "ack", "rollback", "extend" or "sweep".
type FenceObserver interface {
	Fenced(topic string, slot int, op string)
}

// WithAssignedSlots makes the consumer fetch only the slots coord gives it
// (rmq.WithZooKeeper sets it up): a slot is fetched from Acquire to Release
// or Revoke, one delivery at a time in score order, and every script call of
// the slot carries the owner epoch it was acquired with. No delivery starts
// while coord does not vouch for the ownership, and coord is told (from the
// consumer's goroutines) when Redis refused a call because a newer owner
// took a slot.
func WithAssignedSlots(coord slots.Coordinator) Option {
	return func(c *config) {
		c.assigned = true
		c.coord = coord
	}
}

// ownership is the per-slot state of a consumer with assigned slots. The
// slices are indexed by slot and guarded by Consumer.mu.
type ownership struct {
	epochKeys []string
	coord     slots.Coordinator

	epoch   []int64 // epoch of the current (or last) term; 0: never owned
	active  []bool  // between Acquire and Release/Revoke
	paused  bool    // the coordinator lost its connection: start nothing new
	idleFor map[int][]chan struct{}
}

func newOwnership(c *Consumer) *ownership {
	n := c.topic.SlotAmount()
	return &ownership{
		epochKeys: slots.EpochKeys(c.cfg.prefix, c.topic.Name(), n),
		coord:     c.cfg.coord,
		epoch:     make([]int64, n),
		active:    make([]bool, n),
		idleFor:   map[int][]chan struct{}{},
	}
}

// Acquire starts a term of ownership of slot with the owner epoch epoch: it
// waits until no delivery of an earlier term of the slot is in flight here,
// returns the previous owner's deliveries to store at their original scores
// without counting an attempt (raising the slot's epoch in the same script
// call), and starts fetching the slot. It fails, changing nothing, when the
// slot's epoch in Redis is already newer than epoch.
func (c *Consumer) Acquire(ctx context.Context, slot int, epoch int64) error {
	o := c.own
	if o == nil || slot < 0 || slot >= len(o.active) {
		return ErrNotAssigned
	}
	c.mu.Lock()
	running := c.started && c.runCtx.Err() == nil
	c.mu.Unlock()
	if !running {
		return ErrNotAssigned
	}
	if err := c.waitSlotIdle(ctx, slot); err != nil {
		return err
	}
	k := c.keys[slot]
	res, err := scripts.Takeover.Run(ctx, c.rdb, []string{k.Store, k.Prepare, k.Msg, o.epochKeys[slot]}, epoch).Int64Slice()
	if err != nil {
		if scripts.IsFenced(err) {
			return fmt.Errorf("%w: take over %s slot %d: %v", ErrFenced, c.topic.Name(), slot, err)
		}
		return fmt.Errorf("rmq: take over %s slot %d: %w", c.topic.Name(), slot, err)
	}
	c.mu.Lock()
	o.epoch[slot] = epoch
	o.active[slot] = true
	c.mu.Unlock()
	c.waker.reset(slot)
	c.log.DebugContext(ctx, "rmq: slot acquired", "slot", slot, "epoch", epoch, "restored", res[0], "superseded", res[1])
	return nil
}

// Release stops fetching slot and returns once none of its deliveries is in
// flight here any more (each was acked or rolled back), or ctx is done.
func (c *Consumer) Release(ctx context.Context, slot int) error {
	o := c.own
	if o == nil || slot < 0 || slot >= len(o.active) {
		return ErrNotAssigned
	}
	c.mu.Lock()
	o.active[slot] = false
	c.mu.Unlock()
	return c.waitSlotIdle(ctx, slot)
}

// Revoke stops fetching the slots at once and cancels the contexts of their
// handlers with cause: ownership can no longer be vouched for. A revoked
// delivery whose handler still returns nil is acked (Redis accepts the ack
// only while the epoch is current); one whose handler fails stays in prepare
// for the slot's next term, which returns it to store without counting an
// attempt.
func (c *Consumer) Revoke(slotList []int, cause error) {
	o := c.own
	if o == nil {
		return
	}
	set := map[int]bool{}
	c.mu.Lock()
	for _, s := range slotList {
		if s >= 0 && s < len(o.active) {
			o.active[s] = false
			set[s] = true
		}
	}
	c.revokeLocked(set, cause)
	c.mu.Unlock()
}

func (c *Consumer) revokeLocked(set map[int]bool, cause error) {
	for d := range c.inflight {
		if set[d.msg.Slot] && !d.revoked && !d.abandoned {
			d.revoked = true
			d.cancel(cause)
		}
	}
}

// Pause stops (true) or resumes (false) fetching on every slot; handlers in
// flight keep running and their acks still go to Redis.
func (c *Consumer) Pause(paused bool) {
	o := c.own
	if o == nil {
		return
	}
	c.mu.Lock()
	changed := o.paused != paused
	o.paused = paused
	var w *waker
	if c.started {
		w = c.waker
	}
	c.mu.Unlock()
	if changed && !paused && w != nil {
		w.poke()
	}
}

// fenced handles Redis's refusal of a call of slot made with epoch: if that
// is the slot's current term, the slot stops here and the coordinator is told.
func (c *Consumer) fenced(slot int, epoch int64, op string) {
	if fo, ok := c.cfg.observer.(FenceObserver); ok {
		fo.Fenced(c.topic.Name(), slot, op)
	}
	o := c.own
	if o == nil {
		return
	}
	c.mu.Lock()
	current := o.epoch[slot] == epoch
	if current {
		o.active[slot] = false
		c.revokeLocked(map[int]bool{slot: true}, ErrFenced)
	}
	c.mu.Unlock()
	c.log.Warn("rmq: Redis refused a call of a stale slot owner; the slot stops here", "slot", slot, "epoch", epoch, "op", op, "current_term", current)
	if current && o.coord != nil {
		o.coord.Fenced(c.topic.Name(), slot)
	}
}

// ownedSlotFree is slotFree for a consumer with assigned slots.
func (c *Consumer) ownedSlotFree(slot int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.own.active[slot] || c.own.paused {
		return 0
	}
	return c.cfg.slotLimit - c.perSlot[slot]
}

// activeSlots lists the slots between Acquire and Release/Revoke.
func (c *Consumer) activeSlots() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for s, a := range c.own.active {
		if a {
			out = append(out, s)
		}
	}
	return out
}

// slotEpoch returns the epoch to fetch or sweep slot with, 0 if the slot is
// not active or the ownership is not vouched for now.
func (c *Consumer) slotEpoch(slot int) int64 {
	if !c.vouched() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.own.active[slot] {
		return 0
	}
	return c.own.epoch[slot]
}

// vouched reports whether the coordinator vouches for this process's
// ownership right now (always true without a coordinator).
func (c *Consumer) vouched() bool {
	return c.own == nil || c.own.coord == nil || c.own.coord.Vouched()
}

// mayDispatchLocked reports whether a message fetched with epoch from slot
// may start: the term it was fetched in is still the active one and the
// ownership is vouched for. A message that may not stays in prepare until
// the slot's next term returns it.
func (c *Consumer) mayDispatchLocked(m *Message) bool {
	return c.own == nil || (c.own.active[m.Slot] && c.own.epoch[m.Slot] == m.Epoch && c.vouched())
}

// waitSlotIdle returns once no delivery of slot is in flight here.
func (c *Consumer) waitSlotIdle(ctx context.Context, slot int) error {
	for {
		c.mu.Lock()
		if c.perSlot[slot] <= 0 {
			c.mu.Unlock()
			return nil
		}
		ch := make(chan struct{})
		c.own.idleFor[slot] = append(c.own.idleFor[slot], ch)
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// slotIdleLocked wakes the waiters of a slot whose last delivery ended.
func (c *Consumer) slotIdleLocked(slot int) {
	if c.own == nil {
		return
	}
	for _, ch := range c.own.idleFor[slot] {
		close(ch)
	}
	delete(c.own.idleFor, slot)
}

// restoreOwned runs at Close, after the last handler returned: every slot
// this consumer owned gets its deliveries left in prepare (abandoned ones,
// fetched ones never started) back into store at their original scores,
// without counting an attempt. A slot another worker took meanwhile refuses
// (its epoch is newer) and is left alone.
func (c *Consumer) restoreOwned(ctx context.Context) {
	c.mu.Lock()
	var list []int
	epochs := map[int]int64{}
	for s, e := range c.own.epoch {
		if e != 0 {
			list = append(list, s)
			epochs[s] = e
		}
		c.own.active[s] = false
	}
	c.mu.Unlock()
	if len(list) == 0 {
		return
	}
	cmds := c.runPipelined(ctx, len(list), func(i int) scripts.Call {
		s := list[i]
		k := c.keys[s]
		return scriptCall(scripts.Takeover, []string{k.Store, k.Prepare, k.Msg, c.own.epochKeys[s]}, []any{epochs[s]})
	})
	for i, cmd := range cmds {
		res, err := cmd.Int64Slice()
		switch {
		case scripts.IsFenced(err):
		case err != nil:
			c.log.ErrorContext(ctx, "rmq: return deliveries to store on shutdown", "slot", list[i], "err", err)
		case res[0] > 0:
			c.log.InfoContext(ctx, "rmq: returned unfinished deliveries to store", "slot", list[i], "count", res[0])
		}
	}
}
