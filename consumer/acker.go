package consumer

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/luascripts"
)

// Acks are group-committed: a handler that finishes while no ack round is in
// flight sends its ack at once (no added latency, never before the handler
// returned); handlers finishing meanwhile queue up, and the next round acks
// them all, one script call per slot, pipelined across slots. The role of
// making the next round passes to a queued handler.
type acker struct {
	mu   sync.Mutex
	busy bool
	q    []*ackReq
}

type ackReq struct {
	d       *delivery
	ready   chan struct{} // closed when done, or when promoted to make the next round
	done    bool          // guarded by acker.mu
	refused bool
	err     error
}

// ackOne acks one delivery through the current or next round.
func (c *Consumer) ackOne(ctx context.Context, d *delivery) (refused bool, err error) {
	a := &c.acks
	r := &ackReq{d: d, ready: make(chan struct{})}
	a.mu.Lock()
	a.q = append(a.q, r)
	if a.busy {
		a.mu.Unlock()
		select {
		case <-r.ready:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		a.mu.Lock()
		if r.done {
			a.mu.Unlock()
			return r.refused, r.err
		}
	}
	a.busy = true
	for !r.done {
		batch := a.q
		a.q = nil
		a.mu.Unlock()
		c.ackRound(context.WithoutCancel(ctx), batch)
		a.mu.Lock()
		for _, b := range batch {
			b.done = true
			if b != r {
				close(b.ready)
			}
		}
	}
	if len(a.q) > 0 {
		close(a.q[0].ready)
	} else {
		a.busy = false
	}
	a.mu.Unlock()
	return r.refused, r.err
}

// ackRound acks a batch: one ack.lua call for all its slots where they can
// share one (c.merged), otherwise one per slot, pipelined.
func (c *Consumer) ackRound(ctx context.Context, batch []*ackReq) {
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
	cmds := c.runPipelined(ctx, len(calls), func(pipe redis.Pipeliner, i int, _ bool) *redis.Cmd {
		ds := make([][]*delivery, len(calls[i]))
		for j, s := range calls[i] {
			for _, r := range bySlot[s] {
				ds[j] = append(ds[j], r.d)
			}
		}
		keys, args := c.ackCall(calls[i], ds)
		return runScript(ctx, c.rdb, pipe, luascripts.Ack, keys, args)
	})
	for i, cmd := range cmds {
		res, err := cmd.Int64Slice()
		k := 0
		for _, s := range calls[i] {
			for _, r := range bySlot[s] {
				switch {
				case err != nil:
					r.err = fmt.Errorf("rmq: ack on %s slot %d: %w", c.topic.Name(), s, err)
				case k < len(res) && res[k] != 1:
					r.refused = true
				}
				k++
			}
		}
	}
}
