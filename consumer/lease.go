package consumer

import (
	"context"
	"time"
)

// keepLeases extends the leases of c's deliveries in flight once, so a long
// handler keeps its message, and cancels handlers whose lease turned out
// lost. It reports whether anything was in flight. The client's one lease
// keeper (hub_leases.go) calls it every interval while it does; the call
// ends with hubCtx (the hub closing) or c's handler context (Close, once
// the handlers drained), and after interval.
func keepLeases(hubCtx context.Context, c *engine, interval time.Duration) bool {
	bySlot := c.snapshotInflight()
	if len(bySlot) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(c.handleCtx, interval)
	defer cancel()
	stop := context.AfterFunc(hubCtx, cancel)
	defer stop()
	lost, err := c.extend(ctx, bySlot)
	if err != nil && c.handleCtx.Err() == nil && hubCtx.Err() == nil {
		c.log.WarnContext(ctx, "rmq: lease extension failed", "err", err)
	}
	c.leaseLost(lost)
	return true
}
