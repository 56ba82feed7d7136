package engine

import (
	"context"
	"sync"
	"time"
)

// runKeeps is the one lease keeper: it sleeps until the earliest engine's
// extension is due and starts the extensions due, one goroutine each, and
// returns once they ended.
func (l *leaseHub) runKeeps(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		l.mu.Lock()
		next := now.Add(time.Hour)
		if top := l.keeps.peek(); top != nil {
			next = top.at
		}
		l.mu.Unlock()
		if wait := next.Sub(now); wait > 0 {
			resetTimer(t, wait)
			select {
			case <-ctx.Done():
				return
			case <-l.keepKick:
				continue
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		now = time.Now()
		l.mu.Lock()
		for top := l.keeps.peek(); top != nil && !top.at.After(now); top = l.keeps.peek() {
			l.keeps.pop()
			st := top.st
			st.leasedAgain = false
			st.keepUse.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.keepOne(ctx, st, now)
			}()
		}
		l.mu.Unlock()
	}
}

// keepOne extends st's leases once and schedules the next extension if
// anything is in flight (or was leased since the snapshot).
func (l *leaseHub) keepOne(ctx context.Context, st *leaseState, started time.Time) {
	busy := keepLeases(ctx, st.c, st.interval)
	l.mu.Lock()
	if !st.keepClosed {
		if busy || st.leasedAgain {
			st.leasedAgain = false
			l.keeps.set(&st.keep, started.Add(st.interval))
			poke(l.keepKick)
		} else {
			st.keeping = false
		}
	}
	l.mu.Unlock()
	st.keepUse.Done()
}

// keepLeases extends the leases of c's deliveries in flight once, so a long
// handler keeps its message, and cancels handlers whose lease turned out
// lost. It reports whether anything was in flight. The client's one lease
// keeper (hub_leases.go) calls it every interval while it does; the call
// ends with hubCtx (the hub closing) or c's handler context (Close, once
// the handlers drained), and after interval.
func keepLeases(hubCtx context.Context, c *Engine, interval time.Duration) bool {
	bySlot := c.snapshotInflight()
	if len(bySlot) == 0 {
		// Messages held for their instant (hub_hold.go) need no extension
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
	lost, err := c.extend(ctx, bySlot)
	if err != nil && c.handleCtx.Err() == nil && hubCtx.Err() == nil {
		c.log.WarnContext(ctx, "rmq: lease extension failed", "err", err)
	}
	c.leaseLost(lost)
	return true
}
