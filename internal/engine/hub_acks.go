package engine

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// AckByID implements rmq.Client.AckByID: it acks whatever delivery of id
// is current in slot of t (keys under prefix), unfenced, in the client's
// ack rounds, and reports whether one was acked. An id that is nowhere
// (unknown, or acked already) and one whose delivery was dead-lettered are
// both false.
func (h *Hub) AckByID(ctx context.Context, prefix string, t topic.Topic, slot int, id string) (bool, error) {
	k := slots.KeysFor(prefix, t, slot)
	delayed := k.Delayed
	if t.Type().TimeBased() {
		delayed = k.Store
	}
	// A round waits for Redis at most the longest bound of its acks: a
	// caller's long ctx must not stretch the round of pushed acks sharing
	// it past a prepare timeout (their leases are kept meanwhile).
	bound := consumer.DefaultPrepareTimeout
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, max(time.Until(dl), 0))
	}
	r := &ack.Req{Keys: [6]string{k.Store, k.Prepare, k.Msg, k.Wake, delayed, k.Dead}, ID: id, Token: -1, Merge: true, Bound: bound}
	if f := h.flows.First(prefix, t.Name()); f != nil {
		r.Flow, r.HasFlow = f.EndFlowKeys(slot)
	}
	if err := h.acks.Do(ctx, r); err != nil {
		return false, err
	}
	if r.Code == ack.Done {
		h.flows.EndedByID(ctx, h.rdb, h.id, h.cfg.Logger, prefix, t, slot, id)
	}
	return r.Code == ack.Done, nil
}
