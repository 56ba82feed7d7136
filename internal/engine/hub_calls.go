package engine

import "time"

// The client's fetches on a single node go through its fetchmux.Mux
// (hub.calls), which keeps the client's estimate of Redis's clock too.

// syncClock sets c's clock to the client's estimate (single node).
func (c *Engine) syncClock() {
	m := c.hub.calls
	if !m.SingleNode(c.rdb) {
		return
	}
	if off, _, ok := m.Clock.Estimate(); ok {
		now := time.Now()
		c.clock.Observe(now.UnixMicro()+off, now)
	}
}
