package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/internal/scripts"
)

// Pull consumption (rmq.Client.Pull): an engine without a listener fetches
// when asked, with the caller's lease, and hands out Deliveries that the
// caller ends itself (rmq.Delivery wraps a Pulled). It reuses fetch, ack, rollback and extend; only the
// lease length and the long-poll wait (the caller's) differ from the push
// consumer. Its waker feeds the long-poll, and its sweeper rolls back the
// leases pullers let run out.

// Pulled is a pulled message. Its lease is not extended automatically:
// end it with Ack or Nack, or keep it with Extend, before the lease runs
// out; after that the sweeper rolls it back (an attempt counted) and it is
// delivered again.
//
// Observers are told of a pulled delivery as of a pushed one: Delivered
// when Pull hands it out, Finished when the first Ack or Nack ends it (the
// handler's time is the time since the fetch). A call that could not reach
// Redis ends it as Failed: the lease runs out and the sweeper rolls it back.
type Pulled struct {
	*consumer.Message
	e        *Engine
	finished atomic.Bool // Finished was reported
}

// Ack ends the delivery as done. ErrLeaseLost: its lease ran out (or it was
// removed) and it is no longer this delivery's to end.
//
// The ack rides the client's ack rounds (internal/engine/ack), with other topics'
// acks; ctx bounds the wait for it, and the round waits for Redis at most
// the prepare timeout (less when ctx ends sooner).
func (d *Pulled) Ack(ctx context.Context) error {
	bound := d.e.cfg.prepareTimeout
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, max(time.Until(dl), 0))
	}
	// A flow child's completion reaches its parent before its ack
	// (flows.go); not reported, not acked.
	if err := d.e.reportCompleted(d.Message); err != nil {
		return fmt.Errorf("rmq: ack %s on %s: %w", d.ID, d.Topic, err)
	}
	r := d.e.ackReqOf(d.Message, bound)
	if err := d.e.hub.acks.Do(ctx, r); err != nil {
		d.finish(consumer.Failed, nil)
		return fmt.Errorf("rmq: ack %s on %s: %w", d.ID, d.Topic, err)
	}
	// Its place of a cluster's topic concurrency goes back (acked, or no
	// longer this delivery's).
	d.e.flow.EndedPulled(ctx, d.Message)
	if r.Refused() {
		d.finish(consumer.Refused, nil)
		return consumer.ErrLeaseLost
	}
	d.e.forgetChild(d.Message)
	d.finish(consumer.Acked, nil)
	return nil
}

// finish tells the observers how the delivery ended, once: a second Ack or
// Nack (a retry after a failed call, say) is not a second delivery.
func (d *Pulled) finish(outcome consumer.Outcome, err error) {
	if d.finished.Swap(true) {
		return
	}
	finished(d.e.cfg.observer, d.Message, time.Since(d.FetchedAt), outcome, err)
}

// Nack ends the delivery as failed: it is retried after retryAfter (zero:
// the default backoff), an attempt counted, or moves to the dead queue past
// its retries. cause becomes its LastError (nil: "rmq: nacked").
// ErrLeaseLost as for Ack.
func (d *Pulled) Nack(ctx context.Context, retryAfter time.Duration, cause error) error {
	if cause == nil {
		cause = errors.New("rmq: nacked")
	}
	if retryAfter > 0 {
		cause = consumer.RetryAfter(retryAfter, cause)
	}
	res, err := d.e.ops.Rollback(ctx, d.Slot, []redisops.RollbackItem{{ID: d.ID, Token: d.Token, Err: cause.Error(), How: redisops.RollbackDirective(cause)}})
	if err != nil {
		d.finish(consumer.Failed, cause)
		return err
	}
	d.e.flow.EndedPulled(ctx, d.Message)
	if res[0] == redisops.RollbackExpired {
		expired(d.e.cfg.observer, d.e.topic.Name(), 1)
	}
	if res[0] == redisops.RollbackExpired || res[0] == redisops.RollbackDead {
		if _, ok := flowtree.RefOf(d.Headers); ok {
			d.e.checkFlowChildren(d.Slot, d.ID)
		}
	}
	// rollbackStale: Refused.
	d.finish(redisops.RollbackOutcome(res[0]), cause)
	if res[0] == redisops.RollbackStale {
		return consumer.ErrLeaseLost
	}
	return nil
}

// Extend renews the lease to dur from now (whole seconds, rounded up).
// ErrLeaseLost as for Ack.
func (d *Pulled) Extend(ctx context.Context, dur time.Duration) error {
	sec := leaseSeconds(dur)
	res, err := scripts.Extend.Run(ctx, d.e.rdb, []string{d.e.keys[d.Slot].Prepare}, sec, d.ID, d.Token).Int64Slice()
	if err != nil {
		return fmt.Errorf("rmq: extend %s on %s: %w", d.ID, d.Topic, err)
	}
	if len(res) != 1 || res[0] != 1 {
		return consumer.ErrLeaseLost
	}
	// Its place of a cluster's topic concurrency is held as long.
	if pm := d.e.flow.Permits(); pm != nil {
		pm.Extended(ctx, d.Message, time.Duration(sec)*time.Second)
	}
	return nil
}

func leaseSeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}

// Pull takes up to n due messages in consume order across the topic's
// slots, each leased for lease, and says how long until the next message
// comes due (negative: nothing known to come due). Nothing while the topic
// is paused. It refuses (ErrClosed) once Close began, and
// a fetch under way counts as a handler, so Close waits for it: no message
// moves to prepare after Close returned.
func (c *Engine) Pull(ctx context.Context, n int, lease time.Duration) ([]*Pulled, time.Duration, error) {
	done, err := c.beginPull()
	if err != nil {
		return nil, -1, err
	}
	defer done()
	if n <= 0 || c.paused.Load() {
		return nil, -1, nil
	}
	sec := leaseSeconds(lease)
	var results []redisops.FetchResult
	if c.merged {
		// One call takes the best messages across every slot.
		results = c.ops.FetchLease(ctx, c.pullReqs(n), n, sec)
	} else {
		results = c.pullBySlot(ctx, n, sec)
	}
	return c.pulled(results, sec)
}

// beginPull counts a Pull as a handler, so Close waits for it; it refuses
// before Start and once Close began.
func (c *Engine) beginPull() (done func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		if c.phase == lifecycle.Closed {
			return nil, ErrClosed
		}
		return nil, ErrNotStarted
	}
	c.handlers.Add(1)
	return c.handlers.Done, nil
}

// pullReqs asks every slot for up to n messages.
func (c *Engine) pullReqs(n int) []redisops.FetchReq {
	priority := !c.topic.Type().TimeBased()
	all := make([]redisops.FetchReq, c.topic.SlotAmount())
	for i := range all {
		all[i] = redisops.FetchReq{Slot: i, N: n, CheckDelayed: priority}
	}
	return all
}

// pullBySlot takes up to n messages with one hash slot per call (a
// cluster): it reads every head (pipelined), then takes from the due
// slots, best head first, until n.
func (c *Engine) pullBySlot(ctx context.Context, n int, sec int64) []redisops.FetchResult {
	priority := !c.topic.Type().TimeBased()
	all := c.pullReqs(0)
	results := c.ops.FetchLease(ctx, all, 0, sec)
	due := make([]redisops.FetchResult, 0, len(results))
	for _, r := range results {
		if r.Err == nil && r.Head >= 0 && (priority || r.Head <= float64(r.NowUs/1000)) {
			due = append(due, r)
		}
	}
	sort.Slice(due, func(i, j int) bool { return redisops.BetterScore(c.topic.Type().TimeBased(), due[i].Head, due[j].Head) })
	left := n
	for _, d := range due {
		if left == 0 {
			break
		}
		got := c.ops.FetchLease(ctx, []redisops.FetchReq{{Slot: d.Slot, N: left}}, left, sec)
		results = append(results, got...)
		left -= len(got[0].Msgs)
	}
	return results
}

// pulled turns a Pull's fetch results into deliveries (told to the
// observer, their leases to the hub) and the wait until the next due
// message; an error only when nothing was taken.
func (c *Engine) pulled(results []redisops.FetchResult, sec int64) ([]*Pulled, time.Duration, error) {
	priority := !c.topic.Type().TimeBased()
	var out []*Pulled
	next := math.Inf(1)
	var firstErr error
	for _, r := range results {
		if r.Err != nil && firstErr == nil {
			firstErr = r.Err
		}
		for _, m := range r.Msgs {
			out = append(out, &Pulled{Message: m, e: c})
		}
		if !priority && r.Head >= 0 {
			next = min(next, r.Head)
		}
		// Held back by a rate (flow control): when it allows a start.
		if r.TopicWait > 0 {
			next = min(next, float64(r.TopicWait))
		}
		if r.Head == -2 && r.GroupWait > 0 {
			next = min(next, float64(r.GroupWait))
		}
		if r.DelayedHead >= 0 {
			next = min(next, r.DelayedHead)
		}
	}
	if firstErr != nil {
		// A failed call may have moved messages whose reply was lost: the
		// sweeper looks at the topic.
		c.hub.leases.Heard(c.lease())
		if len(out) == 0 {
			return nil, -1, fmt.Errorf("rmq: pull %s: %w", c.topic.Name(), firstErr)
		}
	}
	if len(out) > 0 {
		c.hub.leases.Leased(c.lease(), time.Now().Add(time.Duration(sec)*time.Second))
	}
	for _, d := range out {
		c.cfg.observer.Delivered(d.Message)
	}
	wait := time.Duration(-1)
	if !math.IsInf(next, 1) {
		wait = max(c.clock.UntilMs(int64(math.Ceil(next))), 0)
	}
	return out, wait, nil
}
