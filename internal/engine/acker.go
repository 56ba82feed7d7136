package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// The engine's acks: a pushed delivery's (ackAsync), a pulled one's
// (Pulled.Ack) and one by id (Hub.AckByID) are each an ack.Req
// (ackReqOf, ack.SlotKeys) run by the client's rounds (package ack).
//
// A pushed delivery's ack goes through the client's ack rounds
// (internal/engine/ack), which group-commit the acks of every topic: a handler
// that finishes while a round slot is free sends its ack at once (no added
// latency, never before the handler returned); handlers finishing meanwhile
// queue up, and the next round acks them all, together with other topics'
// acks and pulled ones.

// ackAsync acks d, whose listener returned nil after took, in the current
// or next round, and ends the delivery when that round ran (on the
// goroutine that ran it). The round's call carries a deadline of the
// prepare timeout (finish).
func (c *Engine) ackAsync(ctx context.Context, d *delivery, took time.Duration) {
	r := c.ackReqOf(d.msg, c.cfg.prepareTimeout)
	// The delivery is in flight (inflight, handlers) until its round ran:
	// Close waits for it, and the lease keeper extends it meanwhile.
	c.handlers.Add(1)
	c.hub.acks.GoDo(r, func() {
		defer c.handlers.Done()
		outcome := c.finish(d, "ack", func(context.Context) (consumer.Outcome, error) {
			if r.Err != nil {
				return consumer.Failed, fmt.Errorf("rmq: ack on %s slot %d: %w", c.topic.Name(), d.msg.Slot, r.Err)
			}
			if r.Refused() {
				c.log.WarnContext(ctx, "rmq: ack refused: the delivery was no longer current", "id", d.msg.ID, "slot", d.msg.Slot)
				return consumer.Refused, nil
			}
			c.forgetChild(d.msg)
			return consumer.Acked, nil
		})
		c.ended(ctx, d, took, outcome, nil)
	})
}

// ackReqOf is the ack of m, a delivery of this engine, in the engine's
// owner epoch fencing (ZooKeeper mode); bound is how long its round may
// wait for Redis.
func (c *Engine) ackReqOf(m *consumer.Message, bound time.Duration) *ack.Req {
	r := &ack.Req{
		Keys:  ack.SlotKeys(c.keys[m.Slot], c.topic.Type().TimeBased()),
		ID:    m.ID,
		Token: m.Token,
		Merge: c.merged,
		Bound: bound,
	}
	if ek := c.own.EpochKey(m.Slot); ek != "" {
		r.EpochKey, r.Epoch = ek, m.Epoch
	}
	r.Flow, r.HasFlow = c.flow.EndFlowKeys(m.Slot)
	withLife(r, c.ops.Life, m.Slot, m.Result())
	return r
}

// AckByID implements rmq.Client.AckByID: it acks whatever delivery of id
// is current in slot of t (keys under prefix), unfenced, in the client's
// ack rounds, and reports whether one was acked. An id that is nowhere
// (unknown, or acked already) and one whose delivery was dead-lettered are
// both false.
func (h *Hub) AckByID(ctx context.Context, prefix string, t topic.Topic, slot int, id string) (bool, error) {
	// A round waits for Redis at most the longest bound of its acks: a
	// caller's long ctx must not stretch the round of pushed acks sharing
	// it past a prepare timeout (their leases are kept meanwhile).
	bound := consumer.DefaultPrepareTimeout
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, max(time.Until(dl), 0))
	}
	// A flow child's completion reaches its parent before its ack
	// (flows.go): the caller kept only the id, so its watch entry says
	// whether it is one, and its prepare entry whether it is in flight (no
	// result: the caller set none).
	rep := flowtree.NewReporter(h.rdb, prefix)
	ref, child, err := rep.Watched(ctx, t.Name(), slot, id)
	if err != nil {
		return false, err
	}
	if child {
		if h.rdb.ZScore(ctx, keyspace.KeysFor(prefix, t, slot).Prepare, id).Err() == nil {
			if err := rep.Report(ctx, ref, 'c', "", nil); err != nil {
				return false, err
			}
		}
	}
	r := &ack.Req{Keys: ack.SlotKeys(keyspace.KeysFor(prefix, t, slot), t.Type().TimeBased()), ID: id, Token: -1, Merge: true, Bound: bound}
	if f := h.flows.First(prefix, t.Name()); f != nil {
		r.Flow, r.HasFlow = f.EndFlowKeys(slot)
	}
	// A life group, so the id's waiters hear of it; under the settings of
	// an engine of the topic here, else recording nothing.
	if l := h.lives.first(prefix, t.Name()); l != nil {
		withLife(r, l, slot, nil)
	} else {
		r.Life, r.HasLife = keyspace.LifeKeysFor(prefix, t.Name(), slot).Slice(), true
	}
	if err := h.acks.Do(ctx, r); err != nil {
		return false, err
	}
	if r.Code == ack.Done {
		h.flows.EndedByID(ctx, h.rdb, h.id, h.cfg.Logger, prefix, t, slot, id)
		if child {
			_ = rep.Forget(ctx, t.Name(), slot, id) // else a scan clears it
		}
	}
	return r.Code == ack.Done, nil
}
