package engine

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/lease"
	"github.com/rmq-go/rmq/internal/engine/ownership"
	"github.com/rmq-go/rmq/internal/engine/redisops"
)

// The engine as the client's lease hub (lease.Hub) sees it: the sweeper
// and the lease keeper call into it through leaseEngine.

// leaseEngine is c as a lease.Engine. One pointer: the hub keys its
// records by it, and it goes into the interface without an allocation.
type leaseEngine struct{ c *Engine }

// lease returns c as the lease hub knows it.
func (c *Engine) lease() lease.Engine { return leaseEngine{c} }

// leaseParams are c's settings the lease hub schedules by.
func (c *Engine) leaseParams() lease.Params {
	return lease.Params{
		RDB:            c.rdb,
		Log:            c.log,
		Clock:          &c.clock,
		SweepInterval:  c.cfg.sweepInterval,
		PrepareTimeout: c.cfg.prepareTimeout,
		Pull:           c.pull,
		SlotAmount:     c.topic.SlotAmount(),
	}
}

func (e leaseEngine) Keep(hubCtx context.Context, interval time.Duration) bool {
	return keepLeases(hubCtx, e.c, interval)
}

func (e leaseEngine) SweepSlots(slots []int) (int, error) { return sweepSlots(e.c, slots) }

func (e leaseEngine) ActiveSlots() ([]int, bool) {
	return e.c.own.ActiveSlots(), ownership.IsAll(e.c.own)
}

func (e leaseEngine) PrepareKey(slot int) string { return e.c.keys[slot].Prepare }

// keepLeases extends the leases of c's deliveries in flight once, so a long
// handler keeps its message, and cancels handlers whose lease turned out
// lost. It reports whether anything was in flight. The client's one lease
// keeper (lease.Hub) calls it every interval while it does; the call
// ends with hubCtx (the hub closing) or c's handler context (Close, once
// the handlers drained), and after interval.
func keepLeases(hubCtx context.Context, c *Engine, interval time.Duration) bool {
	bySlot := c.snapshotInflight()
	if len(bySlot) == 0 {
		// Messages held for their instant (hold/holder.go) need no extension
		// yet (their lease counts the lookahead in), but they will be in
		// flight soon: keep the keeping on.
		c.mu.Lock()
		held := c.held > 0
		c.mu.Unlock()
		return held
	}
	ctx, cancel := context.WithTimeout(c.handleCtx, interval)
	defer cancel()
	stop := context.AfterFunc(hubCtx, cancel)
	defer stop()
	lost, err := redisops.Extend(ctx, c.ops, bySlot, func(d *delivery) *consumer.Message { return d.msg })
	if err != nil && c.handleCtx.Err() == nil && hubCtx.Err() == nil {
		c.log.WarnContext(ctx, "rmq: lease extension failed", "err", err)
	}
	c.leaseLost(lost)
	return true
}

// sweepSlots runs sweep.lua on slotList of c, reports what it did and
// returns how many leases it ended.
func sweepSlots(c *Engine, slotList []int) (int, error) {
	ctx, cancel := context.WithTimeout(c.loops.Context(), max(c.cfg.sweepInterval, time.Second))
	defer cancel()
	rolled, dead, exp, err := c.ops.Sweep(ctx, slotList)
	for _, d := range dead {
		c.checkFlowChildren(d.Slot, d.ID)
	}
	if err != nil && ctx.Err() == nil {
		c.log.WarnContext(ctx, "rmq: sweep failed", "err", err)
	}
	if exp > 0 {
		expired(c.cfg.observer, c.topic.Name(), exp)
		c.log.InfoContext(ctx, "rmq: dropped expired messages", "count", exp)
	}
	if rolled > 0 {
		c.cfg.observer.LeasesExpired(c.topic.Name(), rolled, len(dead))
		c.log.InfoContext(ctx, "rmq: rolled back expired leases", "count", rolled, "dead", len(dead))
	}
	// Each dead-lettered message at Warn, as a handler's dead-lettering is
	// (logOutcome): nobody handles it any more unless someone looks.
	for _, d := range dead {
		c.log.WarnContext(ctx, "rmq: message moved to the dead queue", "id", d.ID, "slot", d.Slot,
			"attempts", d.Attempts, "last_error", leaseExpiredError)
	}
	return rolled + exp, err
}

// leaseExpiredError is the last error sweep.lua records for a delivery
// whose lease ran out.
const leaseExpiredError = "rmq: lease expired"
