package consumer

import (
	"context"
	"fmt"
	"time"
)

// A pushed delivery's ack goes through the client's ack rounds
// (hub_acks.go), which group-commit the acks of every topic: a handler
// that finishes while a round slot is free sends its ack at once (no added
// latency, never before the handler returned); handlers finishing meanwhile
// queue up, and the next round acks them all, together with other topics'
// acks and pulled ones.

// ackOne acks one delivery through the current or next round. It waits
// for the round at most about the prepare timeout (ackWaitCtx), even on a
// client that neither honours context deadlines nor has read timeouts.
func (c *engine) ackOne(d *delivery) (refused bool, err error) {
	r := c.ackReqOf(d.msg, c.cfg.prepareTimeout)
	if err := c.hub.acks.do(c.ackWaitCtx(), r); err != nil {
		return false, fmt.Errorf("rmq: ack on %s slot %d: %w", c.topic.Name(), d.msg.Slot, err)
	}
	return r.refused(), nil
}

// ackReqOf is the ack of m, a delivery of this engine, in the engine's
// owner epoch fencing (ZooKeeper mode); bound is how long its round may
// wait for Redis.
func (c *engine) ackReqOf(m *Message, bound time.Duration) *ackReq {
	k := c.keys[m.Slot]
	r := &ackReq{
		keys:  [6]string{k.Store, k.Prepare, k.Msg, k.Wake, c.ackDelayedKey(k), k.Dead},
		id:    m.ID,
		token: m.Token,
		merge: c.merged,
		bound: bound,
	}
	if ek := c.own.epochKey(m.Slot); ek != "" {
		r.epochKey, r.epoch = ek, m.Epoch
	}
	return r
}

// ackWait is a deadline that deliveries share for a while.
type ackWait struct {
	ctx    context.Context
	cancel context.CancelFunc
	until  time.Time // handed out until then
}

// ackWaitCtx returns a context whose deadline is between one and 1.1
// prepare timeouts from now. Deliveries share it for a tenth of a prepare
// timeout, so acks cost one timer per interval, not one per delivery.
func (c *engine) ackWaitCtx() context.Context {
	now := time.Now()
	if w := c.ackWait.Load(); w != nil && now.Before(w.until) {
		return w.ctx
	}
	// Two callers may both make one; either serves. The one replaced ends
	// at its deadline, when its timer fires, so deliveries still waiting on
	// it keep their bound.
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.prepareTimeout+c.cfg.prepareTimeout/10)
	c.ackWait.Store(&ackWait{ctx: ctx, cancel: cancel, until: now.Add(c.cfg.prepareTimeout / 10)})
	return ctx
}
