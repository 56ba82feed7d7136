package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/scripts"
)

// Acks are group-committed (internal/groupcommit): a handler that finishes
// while a round slot is free sends its ack at once (no added latency, never
// before the handler returned); handlers finishing meanwhile queue up, and
// the next round acks them all: one ack.lua call on a single node, one per
// slot (pipelined) on a cluster. Two rounds may be in flight.
const ackRoundsInFlight = 2

type ackReq struct {
	d       *delivery
	refused bool // set by the round
	err     error
}

func newAcker(c *engine) *groupcommit.Group[*ackReq] {
	return groupcommit.New(ackRoundsInFlight, c.ackRound, nil)
}

// ackOne acks one delivery through the current or next round. It waits
// for the round at most about the prepare timeout (ackWaitCtx), even on a
// client that neither honours context deadlines nor has read timeouts.
func (c *engine) ackOne(d *delivery) (refused bool, err error) {
	r := &ackReq{d: d}
	if err := c.acks.Do(c.ackWaitCtx(), r); err != nil {
		return false, err
	}
	return r.refused, r.err
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

// ackRound acks a batch: one ack.lua call for all its slots where they can
// share one (c.merged), otherwise one per slot, pipelined.
func (c *engine) ackRound(ctx context.Context, batch []*ackReq) {
	// The round's deadline bounds every ack it carries (see finish).
	ctx, cancel := context.WithTimeout(ctx, c.cfg.prepareTimeout)
	defer cancel()
	bySlot := map[int][]*ackReq{}
	var order []int
	for _, r := range batch {
		s := r.d.msg.Slot
		if _, seen := bySlot[s]; !seen {
			order = append(order, s)
		}
		bySlot[s] = append(bySlot[s], r)
	}
	// calls[i] lists the slots of call i.
	var calls [][]int
	if c.merged {
		calls = [][]int{order}
	} else {
		for _, s := range order {
			calls = append(calls, []int{s})
		}
	}
	cmds := c.runPipelined(ctx, len(calls), func(i int) scripts.Call {
		ds := make([][]*delivery, len(calls[i]))
		for j, s := range calls[i] {
			for _, r := range bySlot[s] {
				ds[j] = append(ds[j], r.d)
			}
		}
		keys, args := c.ackCall(calls[i], ds)
		return scriptCall(scripts.Ack, keys, args)
	})
	for i, cmd := range cmds {
		res, err := cmd.Int64Slice()
		k := 0
		for _, s := range calls[i] {
			for _, r := range bySlot[s] {
				switch {
				case err != nil:
					r.err = fmt.Errorf("rmq: ack on %s slot %d: %w", c.topic.Name(), s, err)
				case k < len(res) && res[k] != ackDone && res[k] != ackGone:
					r.refused = true
				}
				k++
			}
		}
	}
}
