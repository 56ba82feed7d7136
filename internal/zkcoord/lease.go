package zkcoord

import (
	"context"
	"sync/atomic"
	"time"
)

// lease is the ownership lease: how long this process may trust that its
// ZooKeeper session, and with it its owner nodes, is alive. It only ever
// grows within a registration and drops to nothing when the session is
// lost.
type lease struct {
	born time.Time
	// vouchedUntil is until as a monotonic offset from born, readable
	// without the lock (Vouched is asked per delivery).
	vouchedUntil atomic.Int64
	until        time.Time // guarded by Coordinator.mu
}

func (l *lease) vouched() bool {
	return int64(time.Since(l.born)) < l.vouchedUntil.Load()
}

// setLocked moves the lease; the caller holds Coordinator.mu.
func (l *lease) setLocked(until time.Time) {
	l.until = until
	l.vouchedUntil.Store(int64(until.Sub(l.born)))
}

// dropLocked ends the lease (the session is gone).
func (l *lease) dropLocked() { l.setLocked(l.born) }

// length is how long a confirmed round trip vouches for the session.
func (z *Coordinator) leaseLength() time.Duration { return z.SessionTimeout() * 3 / 4 }

// heartbeat keeps the ownership lease: every fifth of the session timeout
// it makes a round trip in the registered session; one that started at t
// and came back in the same session proves the session alive at the server
// after t, so it cannot expire before t + session timeout.
type heartbeat struct {
	z      *Coordinator
	warned bool // the member node was found deleted from outside
}

func newHeartbeat(z *Coordinator) *heartbeat { return &heartbeat{z: z} }

func (h *heartbeat) run(ctx context.Context) {
	z := h.z
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(z.SessionTimeout() / 5)
		h.beat()
	}
}

func (h *heartbeat) beat() {
	z := h.z
	z.mu.Lock()
	sid, member := z.reg.session, z.reg.member
	z.mu.Unlock()
	if sid == 0 || z.sess.conn.SessionID() != sid {
		return
	}
	start := time.Now()
	exists, _, err := z.sess.conn.Exists(z.paths.member(member))
	if err != nil || z.sess.conn.SessionID() != sid {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.reg.session != sid {
		return
	}
	if until := start.Add(z.leaseLength()); until.After(z.lease.until) {
		renewed := !time.Now().Before(z.lease.until)
		z.lease.setLocked(until)
		if renewed {
			z.poke()
		}
	}
	if !exists && !h.warned && !z.leaving {
		h.warned = true
		z.log.Error("rmq: this worker's member node was deleted from outside; it takes no new slots until restarted", "member", member)
	}
}
