package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/hold"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/scripts"
)

// This file is a delivery's life in the engine: dispatched after a fetch,
// waiting for a listener token, handled, then acked or rolled back.

// delivery is one message being handled here.
type delivery struct {
	msg       *consumer.Message
	cancel    context.CancelCauseFunc
	timedOut  bool // guarded by engine.mu: no more lease extension
	abandoned bool // guarded by engine.mu: Close rolled it back
	revoked   bool // guarded by engine.mu: its slot's ownership was lost
	ending    bool // guarded by engine.mu: the listener returned; its ack or rollback is under way
	started   bool // guarded by engine.mu: its listener call began
	returned  bool // guarded by engine.mu: Close gave it back to store before it started (giveBackWaiting)
	cancelled bool // guarded by engine.mu: the message was cancelled while in flight (cancelDelivery)
}

// freeCapacity reports how many more deliveries may be fetched. A delivery
// counts from its fetch until its listener call returns: its ack then runs
// in a round shared with others while a new delivery takes the handler, so
// a slow ack round does not idle the handlers, and acks that queue up ride
// one call. With a prefetch, fetching waits until at most half of it is
// still waiting to start, so each fetch moves at least half a prefetch:
// one large fetch costs Redis far less per message than many small ones,
// and the waiting half keeps the handlers busy meanwhile.
func (c *Engine) freeCapacity() int {
	p := c.prefetch()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Held messages (hold/holder.go) are not a prefetch waiting for a handler:
	// they wait for their instant.
	if p > 0 && c.busy-c.held-c.runningNow() > p/2 {
		return 0
	}
	return c.concurrency() + p - c.busy
}

// prefetch is WithPrefetch's, or while a backlog lasts the one adaptBacklog
// chose.
func (c *Engine) prefetch() int {
	if c.cfg.prefetch > 0 {
		return c.cfg.prefetch
	}
	return int(c.backlog.Load())
}

// maxBacklogPrefetch bounds the prefetch a backlog brings (adaptBacklog).
const maxBacklogPrefetch = 2048

// adaptBacklog sets the prefetch of a time-based topic that has no
// WithPrefetch and consumes every slot, after each fetch of due messages
// (moved of asked, with idleAtStart handlers free when it began; more
// tells whether anything that was due when it began is still left, since,
// how long ago the last such fetch began):
//   - once nothing due before the fetch is left (the backlog is over: a
//     stream of messages coming due keeps none, as each would wait behind
//     it), or the fetch moved nothing, it drops to none;
//   - a full fetch that began with at least half the handlers idle (they
//     waited for it) quadruples it, from four times the concurrency up to
//     maxBacklogPrefetch;
//   - while it is on and the handlers, at the pace they kept since the
//     last fetch, would take half of it within backlogSpan (they keep up:
//     this is the prefetch a fast backlog needs), it stays, and quadruples
//     when one of them was left with nothing to take (the fetches lag);
//   - otherwise (handlers that stall or slow down) it drops to none, so
//     slow handlers never make a consumer hoard messages that other
//     consumers could take: it holds at most about backlogSpan of work.
//
// Each fetch then moves at least half a prefetch, and a large fetch costs
// Redis far less per message than many small ones (about 25 µs a message
// at 16 a call, 9 µs at 1,024). Before, every fetch but one that began
// with idle handlers dropped it, and so did a fetch the slots' order cut
// short in mid-backlog (a third of them): the prefetch rarely passed 128
// (bench consume case, 100,000 messages, 32 handlers: 57,000 msg/s against
// 75,000 with WithPrefetch(2048)). It changes no order a caller can see:
// what comes due during a backlog is due after it; priority topics, whose
// newcomers may rank first, and topics with one handler are left alone.
func (c *Engine) adaptBacklog(moved, asked, idleAtStart int, more bool, since time.Duration) {
	c.mu.Lock()
	done, starved := c.backlogDone, c.backlogStarved
	c.backlogDone, c.backlogStarved = 0, false
	c.mu.Unlock()
	p := c.backlog.Load()
	grow := min(max(4*p, 4*int64(c.cfg.concurrency)), maxBacklogPrefetch)
	switch {
	case asked <= 0 || moved == 0 || !more:
		p = 0
	case moved == asked && 2*idleAtStart >= c.concurrency():
		p = grow
	case p > 0 && float64(done)*backlogSpan.Seconds() >= float64(p/2)*since.Seconds():
		if starved {
			p = grow
		}
	default:
		p = 0
	}
	c.backlog.Store(p)
}

// backlogSpan bounds the work a backlog's prefetch holds: it is kept only
// while the handlers, at the pace they kept since the last fetch, take half
// of it within this long.
const backlogSpan = 100 * time.Millisecond

// idleHandlers is how many handlers no delivery has taken (running, or
// about to start).
func (c *Engine) idleHandlers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.concurrency()-c.busy, 0)
}

// dispatch starts a handler goroutine for each fetched message.
func (c *Engine) dispatch(msgs []*consumer.Message) {
	for _, m := range msgs {
		c.dispatchOne(m)
	}
}

// dispatchOne starts a handler goroutine for m.
func (c *Engine) dispatchOne(m *consumer.Message) {
	if d, ctx := c.begin(m, false); d != nil {
		c.handlers.Add(1)
		go c.handle(ctx, d)
	}
}

// begin counts m as a delivery in flight and returns it with its context,
// or nil when it may not start. held: m was held since a lookahead fetch
// and counts as busy already (hold/holder.go).
func (c *Engine) begin(m *consumer.Message, held bool) (*delivery, context.Context) {
	ctx, cancel := context.WithCancelCause(c.handleCtx)
	d := &delivery{msg: m, cancel: cancel}
	c.mu.Lock()
	if held {
		c.held--
	}
	if !c.own.MayDispatchLocked(m) {
		// The slot's term ended while the fetch ran: the message stays
		// in prepare until the slot's next term returns it to store.
		if held {
			c.busy--
		}
		c.mu.Unlock()
		cancel(nil)
		return nil, nil
	}
	c.inflight[d] = struct{}{}
	if !held {
		c.busy++
	}
	c.perSlot[m.Slot]++
	c.mu.Unlock()
	if held {
		// The held budget has room again.
		c.wakeFetcher()
	}
	return d, ctx
}

// heldRoom is how many more messages the engine may hold for their
// instant. Held messages count as busy (a message due later never starts
// before one held for an earlier instant), and they may take all the
// capacity but one: a message due before them that arrives later then has
// a handler free at its instant. A topic with one handler takes nothing
// ahead.
func (c *Engine) heldRoom() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.concurrency() + c.cfg.prefetch - 1 - c.held
}

// holdAll counts msgs, fetched ahead of their instant, as busy and held
// (heldRoom) and hands them to the hub's holder. Each gets its handler
// goroutine now, waiting for the holder's word: so the work of starting a
// wave's handlers is done before its instant, which costs only the word.
func (c *Engine) holdAll(msgs []*consumer.Message) {
	c.mu.Lock()
	c.busy += len(msgs)
	c.held += len(msgs)
	c.mu.Unlock()
	xs := make([]*hold.Msg, len(msgs))
	for i, m := range msgs {
		x := hold.NewMsg(holdEngine{c}, m, m.DueAt.UnixMilli())
		xs[i] = x
		c.handlers.Add(1)
		go c.awaitHandOver(x)
	}
	c.hub.hold.Add(xs)
}

// awaitHandOver runs x's delivery once the holder hands it over, or ends
// when the holder drops or gives it back (the holder frees its capacity).
func (c *Engine) awaitHandOver(x *hold.Msg) {
	<-x.Ready()
	if !x.Deliver() {
		c.handlers.Done()
		return
	}
	d, ctx := c.begin(x.Message(), true)
	if d == nil {
		c.handlers.Done()
		return
	}
	c.handle(ctx, d)
}

func (c *Engine) handle(ctx context.Context, d *delivery) {
	defer c.handlers.Done()
	defer d.cancel(nil)
	started := c.acquire(ctx)
	c.mu.Lock()
	returned := d.returned
	d.started = started && !returned
	c.mu.Unlock()
	if returned {
		// Close gave it back to store before it started: it was never
		// delivered here.
		c.giveBack(started)
		c.forget(d)
		return
	}
	if started {
		// Delivered when its listener call is about to begin (a prefetched
		// delivery waited for a handler until now).
		c.cfg.observer.Delivered(d.msg)
	}
	if started && c.prefetch() > 0 {
		// One fewer waits to start: the prefetch may be down to its refill
		// mark. Otherwise the next wake-up is the end of a delivery, which
		// waits for its ack round.
		c.wakeFetcher()
	}
	// The handler's token and capacity go back as soon as the listener
	// returns; the deferred call covers a listener that never returns
	// (runtime.Goexit, as t.FailNow does).
	listenerReturned := false
	defer func() {
		if !listenerReturned {
			c.giveBack(started)
		}
	}()
	hctx := ctx
	// The message's own timeout (producer.WithTimeout) wins.
	timeout := c.cfg.handlerTimeout
	if d.msg.Timeout > 0 {
		timeout = d.msg.Timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeoutCause(ctx, timeout, consumer.ErrHandlerTimeout)
		defer cancel()
		stop := context.AfterFunc(hctx, func() {
			if context.Cause(hctx) == consumer.ErrHandlerTimeout {
				c.mu.Lock()
				d.timedOut = true
				c.mu.Unlock()
			}
		})
		defer stop()
	}
	began := time.Now()
	var err error
	if !started {
		err = context.Cause(ctx)
	} else if !c.own.Vouched() {
		// ZooKeeper mode: the ownership lapsed since the fetch (the process
		// was frozen, or lost ZooKeeper). The listener is not called; the
		// message stays in prepare for the slot's next term.
		c.mu.Lock()
		d.revoked = true
		c.mu.Unlock()
		err = consumer.ErrOwnershipLost
	} else {
		err = c.call(hctx, d.msg)
	}
	took := time.Since(began)
	listenerReturned = true
	if c.adaptive != nil && started {
		c.adaptive.Sample(took, err != nil)
	}
	c.giveBack(started)

	c.mu.Lock()
	// The AfterFunc that marks a timeout runs on its own goroutine and may
	// not have run yet when the handler returns: ask the context directly.
	abandoned, revoked, cancelled := d.abandoned, d.revoked, d.cancelled
	timedOut := d.timedOut || context.Cause(hctx) == consumer.ErrHandlerTimeout
	d.ending = !abandoned
	c.mu.Unlock()
	if timedOut {
		err = fmt.Errorf("%w after %v: %v", consumer.ErrHandlerTimeout, timeout, err)
	}
	var outcome consumer.Outcome
	switch {
	case abandoned:
		outcome = consumer.Abandoned
	case cancelled:
		// Cancelled while in flight (cancel.lua): its tombstone refuses
		// an ack or rollback, so none is sent, whatever the handler
		// returned; the message is neither completed nor retried.
		outcome = consumer.Cancelled
	case context.Cause(ctx) == consumer.ErrLeaseLost:
		outcome = consumer.LeaseLost
		c.log.WarnContext(ctx, "rmq: lease lost while handling; the message is redelivered", "id", d.msg.ID, "slot", d.msg.Slot)
	case revoked && err != nil:
		// ZooKeeper mode: no rollback (it would count an attempt and could
		// reorder the key); the slot's next term returns the message.
		outcome = consumer.Revoked
	case err == nil && c.reportCompleted(d.msg) != nil:
		// A flow child whose completion could not reach its parent's
		// record is not acked: its lease runs out and it runs again, and
		// its report then (which counts once) goes first.
		outcome = consumer.Failed
		err = errFlowReport
		c.log.ErrorContext(ctx, "rmq: could not report a flow child's completion; it runs again", "id", d.msg.ID, "slot", d.msg.Slot)
	case err == nil:
		// The ack rides the client's next ack round without this goroutine
		// waiting for it: the goroutine ends here, shallow (no stack grown
		// for the round's Redis call, unless it runs the round itself), and
		// the delivery ends when its round did (ackAsync).
		c.ackAsync(ctx, d, took)
		return
	default:
		outcome = c.finish(d, "rollback", func(ctx context.Context) (consumer.Outcome, error) {
			ctx, cancel := context.WithTimeout(ctx, c.cfg.prepareTimeout)
			defer cancel()
			res, rerr := c.ops.Rollback(ctx, d.msg.Slot, []redisops.RollbackItem{{ID: d.msg.ID, Token: d.msg.Token, Err: err.Error(), Epoch: d.msg.Epoch, How: redisops.RollbackDirective(err)}})
			if rerr != nil {
				return consumer.Failed, rerr
			}
			if res[0] == redisops.RollbackExpired {
				expired(c.cfg.observer, c.topic.Name(), 1)
			}
			if res[0] == redisops.RollbackExpired || res[0] == redisops.RollbackDead {
				// The message's end: a flow child reports it to its parent.
				if _, ok := flowtree.RefOf(d.msg.Headers); ok {
					c.checkFlowChildren(d.msg.Slot, d.msg.ID)
				}
			}
			return redisops.RollbackOutcome(res[0]), nil
		})
	}
	c.ended(ctx, d, took, outcome, err)
}

// ended tells the observer and the log how d ended and frees its slot.
func (c *Engine) ended(ctx context.Context, d *delivery, took time.Duration, outcome consumer.Outcome, err error) {
	finished(c.cfg.observer, d.msg, took, outcome, err)
	logOutcome(ctx, c.log, d.msg, outcome, err)
	c.forget(d)
}

// forget frees d's place in flight and its slot.
func (c *Engine) forget(d *delivery) {
	c.mu.Lock()
	delete(c.inflight, d)
	if c.perSlot[d.msg.Slot]--; c.perSlot[d.msg.Slot] <= 0 {
		delete(c.perSlot, d.msg.Slot)
		c.own.SlotIdleLocked(d.msg.Slot)
	}
	c.mu.Unlock()
	c.flow.Ended(d.msg)
	c.wakeFetcher()
}

// acquire takes a listener token: at most concurrency listener calls run
// at once, and with a prefetch, fetched deliveries wait here for one, in
// fetch order. It reports false, holding no token, when ctx ended first
// (Close abandoned the delivery, or its lease was lost).
func (c *Engine) acquire(ctx context.Context) bool {
	if c.adaptive != nil {
		// A semaphore whose size the limiter moves (flow/adaptive.go).
		if !c.adaptive.Acquire(ctx) {
			return false
		}
		if ctx.Err() != nil {
			c.adaptive.Release()
			return false
		}
		return true
	}
	select {
	case c.running <- struct{}{}:
		// A free token: no need for ctx.Done, whose channel is made on
		// first use (an allocation per delivery).
	default:
		select {
		case c.running <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	}
	if ctx.Err() != nil {
		<-c.running
		return false
	}
	return true
}

// giveBack frees the handler token (if the listener started) and the
// capacity of a delivery whose listener call returned or never started; its
// slot stays taken until the delivery ends.
func (c *Engine) giveBack(started bool) {
	// Under mu first: abandonInflight cancels every delivery under mu, so
	// a token freed after it cannot go to a waiting delivery it has not
	// cancelled yet.
	c.mu.Lock()
	c.busy--
	if c.adaptsBacklog {
		c.backlogDone++
		if c.busy-c.held < c.concurrency() {
			c.backlogStarved = true
		}
	}
	c.mu.Unlock()
	if started {
		if c.adaptive != nil {
			c.adaptive.Release()
		} else {
			<-c.running
		}
	}
	c.wakeFetcher()
}

// adaptiveChanged tells the observer of the adaptive limit's new value
// and wakes the fetcher, which may take more (or less) now.
func (c *Engine) adaptiveChanged() {
	if o, ok := c.cfg.observer.(flowObserver); ok {
		o.ConcurrencyLimit(c.topic.Name(), c.adaptive.Current())
	}
	c.wakeFetcher()
}

func (c *Engine) wakeFetcher() {
	// A fetcher that sleeps with free capacity and nothing due has no use
	// for more (fetcher.run): a wave's thousand deliveries across as many
	// topics must not wake a thousand fetchers for nothing.
	if !c.wantRelease.Load() {
		return
	}
	select {
	case c.released <- struct{}{}:
	default:
	}
}

// finish runs an ack or rollback (what). It outlives a cancelled handler
// context (the outcome must still reach Redis) but not a Redis that stays
// away: each call carries a deadline of the prepare timeout (an ack round
// sets one for all its acks, so no delivery makes a timer of its own),
// which ends it where the client honours context deadlines, and its read
// timeout ends it otherwise; a queued ack also waits for the rounds ahead
// of it (at most two at once). The lease then runs out and the
// sweeper rolls the message back. A call refused for a stale owner epoch (ZooKeeper
// mode) is Fenced.
func (c *Engine) finish(d *delivery, what string, op func(ctx context.Context) (consumer.Outcome, error)) consumer.Outcome {
	ctx := context.Background()
	outcome, err := op(ctx)
	if scripts.IsFenced(err) {
		c.fenced(d.msg.Slot, d.msg.Epoch, what)
		return consumer.Fenced
	}
	if err != nil {
		c.log.ErrorContext(ctx, "rmq: could not end delivery; its lease will expire", "id", d.msg.ID, "slot", d.msg.Slot, "err", err)
	}
	return outcome
}

// call runs the listener (inside the middleware) with a context that
// carries m (MessageFromContext) and turns a panic into a *PanicError,
// logged with its stack when the delivery ends (logOutcome).
func (c *Engine) call(ctx context.Context, m *consumer.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &consumer.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return c.listener.OnMessage(consumer.ContextWithMessage(ctx, m), m)
}

// snapshotInflight groups the deliveries whose leases should be extended.
func (c *Engine) snapshotInflight() map[int][]*delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int][]*delivery{}
	for d := range c.inflight {
		// A cancelled delivery's extension would be refused (its
		// tombstone): it is not a lost lease.
		if !d.timedOut && !d.abandoned && !d.revoked && !d.cancelled {
			out[d.msg.Slot] = append(out[d.msg.Slot], d)
		}
	}
	return out
}

// leaseLost cancels handlers whose delivery is no longer current.
func (c *Engine) leaseLost(ds []*delivery) {
	for _, d := range ds {
		// An ending delivery's ack or rollback may have committed between
		// the keeper's snapshot and its extension: the extension is then
		// refused, but nothing was lost ("lease lost" warnings
		// for listeners that fail at once).
		c.mu.Lock()
		ending := d.ending
		c.mu.Unlock()
		if ending {
			c.log.Debug("rmq: lease extension refused after the delivery ended", "id", d.msg.ID, "slot", d.msg.Slot)
			continue
		}
		c.log.Warn("rmq: lease lost", "id", d.msg.ID, "slot", d.msg.Slot, "attempt", d.msg.Attempt)
		d.cancel(consumer.ErrLeaseLost)
	}
}
