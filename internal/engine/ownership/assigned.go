package ownership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
)

// This file is the engine's side of ZooKeeper mode: a coordinator decides
// which slots this engine owns and drives it through Acquire, Release,
// Revoke and Pause (SlotHandler); every script call of an owned
// slot names the slot's owner epoch, and Redis refuses the calls of a stale
// owner.

var (
	// errNotAssigned is returned by Acquire and Release on an engine that
	// is not running.
	errNotAssigned = errors.New("rmq: consumer does not take assigned slots")
)

// assignedSlots is the ownership of an engine whose slots a coordinator
// assigns: a slot is fetched from Acquire to Release or Revoke, one
// delivery at a time in score order, and every script call of the slot
// carries the owner epoch it was acquired with. No delivery starts while
// the coordinator does not vouch for the ownership. The slices are indexed
// by slot and guarded by the engine's lock (Engine.Lock).
type assignedSlots struct {
	c         Engine
	env       Env
	epochKeys []string
	coord     Coordinator

	epoch   []int64 // epoch of the current (or last) term; 0: never owned
	active  []bool  // between Acquire and Release/Revoke
	paused  bool    // the coordinator lost its connection: start nothing new
	idleFor map[int][]chan struct{}
}

var (
	_ Ownership   = (*assignedSlots)(nil)
	_ SlotHandler = (*assignedSlots)(nil)
)

// serialLimit is how many deliveries of an owned slot may be in flight: an
// owned slot is consumed serially.
const serialLimit = 1

// NewAssigned returns the ownership of the engine c of env's topic, whose
// slots coord assigns.
func NewAssigned(c Engine, env Env, coord Coordinator) Ownership {
	n := env.Topic.SlotAmount()
	return &assignedSlots{
		c:         c,
		env:       env,
		epochKeys: keyspace.EpochKeys(env.Prefix, env.Topic.Name(), n),
		coord:     coord,
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
func (o *assignedSlots) Acquire(ctx context.Context, slot int, epoch int64) error {
	c := o.c
	if slot < 0 || slot >= len(o.active) {
		return errNotAssigned
	}
	c.Lock()
	running := c.RunningLocked()
	c.Unlock()
	if !running {
		return errNotAssigned
	}
	if err := o.waitSlotIdle(ctx, slot); err != nil {
		return err
	}
	k := o.env.Keys[slot]
	res, err := scripts.Takeover.Run(ctx, o.env.RDB, []string{k.Store, k.Prepare, k.Msg, o.epochKeys[slot], k.Delayed}, epoch).Int64Slice()
	if err != nil {
		if scripts.IsFenced(err) {
			return fmt.Errorf("%w: take over %s slot %d: %v", consumer.ErrFenced, o.env.Topic.Name(), slot, err)
		}
		return fmt.Errorf("rmq: take over %s slot %d: %w", o.env.Topic.Name(), slot, err)
	}
	c.Lock()
	o.epoch[slot] = epoch
	o.active[slot] = true
	c.Unlock()
	c.Reset(slot)
	o.env.Log.DebugContext(ctx, "rmq: slot acquired", "slot", slot, "epoch", epoch, "restored", res[0], "superseded", res[1])
	return nil
}

// Release stops fetching slot and returns once none of its deliveries is in
// flight here any more (each was acked or rolled back), or ctx is done.
func (o *assignedSlots) Release(ctx context.Context, slot int) error {
	if slot < 0 || slot >= len(o.active) {
		return errNotAssigned
	}
	o.c.Lock()
	o.active[slot] = false
	o.c.Unlock()
	return o.waitSlotIdle(ctx, slot)
}

// Revoke stops fetching the slots at once and cancels the contexts of their
// handlers with cause: ownership can no longer be vouched for. A revoked
// delivery whose handler still returns nil is acked (Redis accepts the ack
// only while the epoch is current); one whose handler fails stays in prepare
// for the slot's next term, which returns it to store without counting an
// attempt.
func (o *assignedSlots) Revoke(slotList []int, cause error) {
	set := map[int]bool{}
	o.c.Lock()
	for _, s := range slotList {
		if s >= 0 && s < len(o.active) {
			o.active[s] = false
			set[s] = true
		}
	}
	o.c.RevokeLocked(set, cause)
	o.c.Unlock()
}

// Pause stops (true) or resumes (false) fetching on every slot; handlers in
// flight keep running and their acks still go to Redis.
func (o *assignedSlots) Pause(paused bool) {
	c := o.c
	c.Lock()
	changed := o.paused != paused
	o.paused = paused
	live := c.LiveLocked()
	c.Unlock()
	if changed && !paused && live {
		c.Poke()
	}
}

// Fenced handles Redis's refusal of a call of slot made with epoch: if that
// is the slot's current term, the slot stops here and the coordinator is told.
func (o *assignedSlots) Fenced(slot int, epoch int64, op string) {
	c := o.c
	c.Lock()
	current := o.epoch[slot] == epoch
	if current {
		o.active[slot] = false
		o.c.RevokeLocked(map[int]bool{slot: true}, consumer.ErrFenced)
	}
	c.Unlock()
	o.env.Log.Warn("rmq: Redis refused a call of a stale slot owner; the slot stops here", "slot", slot, "epoch", epoch, "op", op, "current_term", current)
	if current && o.coord != nil {
		o.coord.Fenced(o.env.Topic.Name(), slot)
	}
}

func (o *assignedSlots) SlotFree(slot int) int {
	c := o.c
	c.Lock()
	defer c.Unlock()
	if !o.active[slot] || o.paused {
		return 0
	}
	return serialLimit - c.InFlightLocked(slot)
}

// ActiveSlots lists the slots between Acquire and Release/Revoke.
func (o *assignedSlots) ActiveSlots() []int {
	o.c.Lock()
	defer o.c.Unlock()
	var out []int
	for s, a := range o.active {
		if a {
			out = append(out, s)
		}
	}
	return out
}

// Fetchable keeps the owned slots, naming the term's epoch.
func (o *assignedSlots) Fetchable(reqs []redisops.FetchReq) (run []redisops.FetchReq, skipped []redisops.FetchResult) {
	run = reqs[:0:0]
	for _, r := range reqs {
		if r.Epoch = o.slotEpoch(r.Slot); r.Epoch == 0 {
			skipped = append(skipped, redisops.FetchResult{Slot: r.Slot, Head: -1, Skipped: true})
			continue
		}
		run = append(run, r)
	}
	return run, skipped
}

// Sweepable keeps the owned slots: only the owner sweeps a slot, naming
// its epoch.
func (o *assignedSlots) Sweepable(slotList []int) (owned []int, epochs []int64) {
	owned = slotList[:0:0]
	for _, s := range slotList {
		if e := o.slotEpoch(s); e != 0 {
			owned = append(owned, s)
			epochs = append(epochs, e)
		}
	}
	return owned, epochs
}

func (o *assignedSlots) EpochKey(slot int) string { return o.epochKeys[slot] }

func (o *assignedSlots) Fence(slot int, epoch int64, keys []string, args []any) ([]string, []any) {
	return append(keys, o.epochKeys[slot]), append(args[:len(args):len(args)], epoch)
}

// slotEpoch returns the epoch to fetch or sweep slot with, 0 if the slot is
// not active or the ownership is not vouched for now.
func (o *assignedSlots) slotEpoch(slot int) int64 {
	if !o.Vouched() {
		return 0
	}
	o.c.Lock()
	defer o.c.Unlock()
	if !o.active[slot] {
		return 0
	}
	return o.epoch[slot]
}

// Vouched reports whether the coordinator vouches for this process's
// ownership right now.
func (o *assignedSlots) Vouched() bool {
	return o.coord == nil || o.coord.Vouched()
}

// MayDispatchLocked: the term the message was fetched in is still the
// active one and the ownership is vouched for. A message that may not
// stays in prepare until the slot's next term returns it.
func (o *assignedSlots) MayDispatchLocked(m *consumer.Message) bool {
	return o.active[m.Slot] && o.epoch[m.Slot] == m.Epoch && o.Vouched()
}

// waitSlotIdle returns once no delivery of slot is in flight here.
func (o *assignedSlots) waitSlotIdle(ctx context.Context, slot int) error {
	c := o.c
	for {
		c.Lock()
		if c.InFlightLocked(slot) <= 0 {
			c.Unlock()
			return nil
		}
		ch := make(chan struct{})
		o.idleFor[slot] = append(o.idleFor[slot], ch)
		c.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// SlotIdleLocked wakes the waiters of a slot whose last delivery ended.
func (o *assignedSlots) SlotIdleLocked(slot int) {
	for _, ch := range o.idleFor[slot] {
		close(ch)
	}
	delete(o.idleFor, slot)
}

// RollsBackAbandoned: no. Deliveries that Close abandons stay in prepare
// and shutdown returns them to store without counting an attempt, so
// per-key order survives.
func (o *assignedSlots) RollsBackAbandoned() bool { return false }

// Merges: no. Every call names one slot's owner epoch.
func (o *assignedSlots) Merges() bool { return false }

// Shutdown runs at Close, after the last handler returned: every slot this
// engine owned gets its deliveries left in prepare (abandoned ones, fetched
// ones never started) back into store at their original scores, without
// counting an attempt. A slot another worker took meanwhile refuses (its
// epoch is newer) and is left alone.
func (o *assignedSlots) Shutdown() {
	c := o.c
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Lock()
	var list []int
	epochs := map[int]int64{}
	for s, e := range o.epoch {
		if e != 0 {
			list = append(list, s)
			epochs[s] = e
		}
		o.active[s] = false
	}
	c.Unlock()
	if len(list) == 0 {
		return
	}
	cmds := redisops.RunPipelined(ctx, o.env.RDB, len(list), func(i int) scripts.Call {
		s := list[i]
		k := o.env.Keys[s]
		return redisops.Call(scripts.Takeover, []string{k.Store, k.Prepare, k.Msg, o.epochKeys[s], k.Delayed}, []any{epochs[s]})
	})
	for i, cmd := range cmds {
		res, err := cmd.Int64Slice()
		switch {
		case scripts.IsFenced(err):
		case err != nil:
			o.env.Log.ErrorContext(ctx, "rmq: return deliveries to store on shutdown", "slot", list[i], "err", err)
		case res[0] > 0:
			o.env.Log.InfoContext(ctx, "rmq: returned unfinished deliveries to store", "slot", list[i], "count", res[0])
		}
	}
}
