package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// Consumer consumes one topic with one listener.
type Consumer struct {
	rdb         redis.UniversalClient
	topic       topic.Topic
	listener    MessageListener
	cfg         config
	log         *slog.Logger
	keys        []slots.Keys
	wakeCmd     string
	backoffArgs []any

	// lifecycle
	startOnce sync.Once
	closeOnce sync.Once
	started   bool
	runCtx    context.Context // fetcher, waker, sweeper: cancelled first by Close
	stopRun   context.CancelFunc
	handleCtx context.Context // handlers and leases: cancelled when Close gives up
	stopAll   context.CancelFunc
	loops     sync.WaitGroup // fetcher, waker, sweeper
	handlers  sync.WaitGroup // one per delivery in flight
	leaseDone chan struct{}

	mu       sync.Mutex
	inflight map[*delivery]struct{} // until the ack or rollback is done
	busy     int                    // deliveries whose listener call has not returned
	perSlot  map[int]int            // inflight per slot
	released chan struct{}          // a handler finished: capacity is free
	running  chan struct{}          // a token per running listener call (WithPrefetch)

	waker *waker
	clock clock
	acks  *groupcommit.Group[*ackReq]
	// ackWait bounds how long a delivery waits for its ack round (see
	// ackWaitCtx).
	ackWait atomic.Pointer[ackWait]

	own *ownership // WithAssignedSlots (ZooKeeper mode); nil: every slot

	// merged: one script call may name several slots (a single node, no
	// fencing), so fetches and acks take all their slots in one call.
	merged bool
}

// delivery is one message being handled here.
type delivery struct {
	msg       *Message
	cancel    context.CancelCauseFunc
	timedOut  bool // guarded by Consumer.mu: no more lease extension
	abandoned bool // guarded by Consumer.mu: Close rolled it back
	revoked   bool // guarded by Consumer.mu: its slot's ownership was lost
	ending    bool // guarded by Consumer.mu: the listener returned; its ack or rollback is under way
}

// New returns a consumer of t. It starts nothing until Start.
func New(rdb redis.UniversalClient, t topic.Topic, l MessageListener, opts ...Option) (*Consumer, error) {
	if t.IsZero() {
		return nil, fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	if l == nil {
		return nil, fmt.Errorf("%w: nil listener", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Consumer{
		rdb:       rdb,
		topic:     t,
		listener:  l,
		cfg:       cfg,
		log:       cfg.logger.With("topic", t.Name()),
		wakeCmd:   scripts.WakeCommand(rdb),
		inflight:  map[*delivery]struct{}{},
		perSlot:   map[int]int{},
		released:  make(chan struct{}, 1),
		running:   make(chan struct{}, cfg.concurrency),
		leaseDone: make(chan struct{}),
	}
	c.keys = keysOf(cfg.prefix, c)
	c.acks = newAcker(c)
	if cfg.assigned {
		c.own = newOwnership(c)
	}
	_, single := rdb.(*redis.Client)
	c.merged = single && c.own == nil
	// The backoff of attempt a is entry a; attempts past the table use its last.
	n := cfg.maxRetries + 1
	c.backoffArgs = append(c.backoffArgs, n)
	for a := 1; a <= n; a++ {
		c.backoffArgs = append(c.backoffArgs, max(cfg.backoff(a), 0).Milliseconds())
	}
	return c, nil
}

// Topic returns the consumed topic.
func (c *Consumer) Topic() topic.Topic { return c.topic }

// Start checks the topic definition, subscribes to wake-ups and starts
// fetching. ctx bounds only the start-up calls; Close stops the consumer.
func (c *Consumer) Start(ctx context.Context) error {
	err := ErrStarted
	c.startOnce.Do(func() { err = c.start(ctx) })
	return err
}

func (c *Consumer) start(ctx context.Context) error {
	c.mu.Lock()
	closed := c.runCtx != nil
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := topic.Define(ctx, c.rdb, slots.TopicsKey(c.cfg.prefix), c.topic); err != nil {
		return err
	}
	if err := scripts.Load(ctx, c.rdb); err != nil {
		return err
	}
	base := context.WithoutCancel(ctx)
	c.mu.Lock()
	c.runCtx, c.stopRun = context.WithCancel(base)
	c.handleCtx, c.stopAll = context.WithCancel(base)
	c.mu.Unlock()

	c.waker = newWaker(c)
	if err := c.waker.subscribe(ctx); err != nil {
		c.stopRun()
		c.stopAll()
		return err
	}
	f := newFetcher(c)
	c.loops.Add(3)
	go c.waker.run(&c.loops)
	go f.run(&c.loops)
	go newSweeper(c).run(&c.loops)
	go newLeaseKeeper(c).run(c.leaseDone)
	c.mu.Lock()
	c.started = true
	c.mu.Unlock()
	c.log.DebugContext(ctx, "rmq: consumer started", "slots", c.topic.SlotAmount(), "concurrency", c.cfg.concurrency)
	return nil
}

// Close stops fetching, waits for the handlers in flight until ctx is done,
// then cancels the rest and rolls them back so nothing stays in prepare.
// A delivery whose listener already returned keeps its own ack or rollback
// (bounded by the prepare timeout), so a reported success is not undone. It
// returns when every goroutine the consumer started has ended: handlers
// must return once their context is cancelled. The error is ctx's when the
// deadline cut handlers short.
func (c *Consumer) Close(ctx context.Context) error {
	var err error
	c.closeOnce.Do(func() { err = c.close(ctx) })
	return err
}

func (c *Consumer) close(ctx context.Context) error {
	c.mu.Lock()
	started := c.started
	if !started {
		// Mark closed so a later Start refuses.
		c.runCtx, c.stopRun = context.WithCancel(context.Background())
	}
	c.mu.Unlock()
	if !started {
		return nil
	}
	// Senders before receivers: stop fetching first so no new delivery
	// starts, then drain the handlers that run.
	c.stopRun()
	c.loops.Wait()

	drained := make(chan struct{})
	go func() { c.handlers.Wait(); close(drained) }()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = ctx.Err()
		c.abandonInflight()
		<-drained
	}
	if c.own != nil {
		// ZooKeeper mode: what is left in prepare (abandoned deliveries,
		// fetched ones never started) goes back to store at its original
		// position, attempt not counted, so per-key order survives.
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c.restoreOwned(rctx)
		cancel()
	}
	// Leases are kept until the last handler is done.
	c.stopAll()
	<-c.leaseDone
	if w := c.ackWait.Load(); w != nil {
		w.cancel()
	}
	return err
}

// abandonInflight rolls back every delivery still in flight and cancels its
// handler; their later acks would be refused anyway (their token is gone).
func (c *Consumer) abandonInflight() {
	c.mu.Lock()
	bySlot := map[int][]rollbackItem{}
	for d := range c.inflight {
		if d.abandoned || d.ending {
			// An ending delivery's own ack or rollback is under way,
			// bounded by the prepare timeout: a rollback here could undo a
			// success the listener already reported, and the message would
			// be handled twice.
			continue
		}
		d.abandoned = true
		// ZooKeeper mode: restoreOwned returns them to store once their
		// handlers ended, without counting an attempt.
		if c.own == nil {
			bySlot[d.msg.Slot] = append(bySlot[d.msg.Slot], rollbackItem{id: d.msg.ID, token: d.msg.Token, err: ErrShutdown.Error()})
		}
		d.cancel(ErrShutdown)
	}
	c.mu.Unlock()
	if len(bySlot) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for slot, items := range bySlot {
		if _, err := c.rollback(ctx, slot, items); err != nil {
			c.log.ErrorContext(ctx, "rmq: roll back on shutdown", "slot", slot, "err", err)
		}
	}
}

// betterScore reports whether score a is consumed before b: the earlier due
// time, or the higher priority.
func (c *Consumer) betterScore(a, b float64) bool {
	if c.topic.Type().TimeBased() {
		return a < b
	}
	return a > b
}

// freeCapacity reports how many more deliveries may be fetched. A delivery
// counts from its fetch until its listener call returns: its ack then runs
// in a round shared with others while a new delivery takes the handler, so
// a slow ack round does not idle the handlers, and acks that queue up ride
// one call. With a prefetch, fetching waits until at most half of it is
// still waiting to start, so each fetch moves at least half a prefetch:
// one large fetch costs Redis far less per message than many small ones,
// and the waiting half keeps the handlers busy meanwhile.
func (c *Consumer) freeCapacity() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.cfg.prefetch; p > 0 && c.busy-len(c.running) > p/2 {
		return 0
	}
	return c.cfg.concurrency + c.cfg.prefetch - c.busy
}

func (c *Consumer) slotFree(slot int) int {
	if c.own != nil {
		return c.ownedSlotFree(slot)
	}
	if c.cfg.slotLimit == 0 {
		return c.cfg.concurrency + c.cfg.prefetch
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.slotLimit - c.perSlot[slot]
}

// dispatch starts a handler goroutine for each fetched message.
func (c *Consumer) dispatch(msgs []*Message) {
	for _, m := range msgs {
		ctx, cancel := context.WithCancelCause(c.handleCtx)
		d := &delivery{msg: m, cancel: cancel}
		c.mu.Lock()
		if !c.mayDispatchLocked(m) {
			// The slot's term ended while the fetch ran: the message stays
			// in prepare until the slot's next term returns it to store.
			c.mu.Unlock()
			cancel(nil)
			continue
		}
		c.inflight[d] = struct{}{}
		c.busy++
		c.perSlot[m.Slot]++
		c.mu.Unlock()
		c.cfg.observer.Delivered(m)
		c.handlers.Add(1)
		go c.handle(ctx, d)
	}
}

func (c *Consumer) handle(ctx context.Context, d *delivery) {
	defer c.handlers.Done()
	defer d.cancel(nil)
	started := c.acquire(ctx)
	if started && c.cfg.prefetch > 0 {
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
	if c.cfg.handlerTimeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeoutCause(ctx, c.cfg.handlerTimeout, ErrHandlerTimeout)
		defer cancel()
		stop := context.AfterFunc(hctx, func() {
			if context.Cause(hctx) == ErrHandlerTimeout {
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
	} else if c.own != nil && !c.vouched() {
		// ZooKeeper mode: the ownership lapsed since the fetch (the process
		// was frozen, or lost ZooKeeper). The listener is not called; the
		// message stays in prepare for the slot's next term.
		c.mu.Lock()
		d.revoked = true
		c.mu.Unlock()
		err = slots.ErrOwnershipLost
	} else {
		err = c.call(hctx, d.msg)
	}
	took := time.Since(began)
	listenerReturned = true
	c.giveBack(started)

	c.mu.Lock()
	// The AfterFunc that marks a timeout runs on its own goroutine and may
	// not have run yet when the handler returns: ask the context directly.
	abandoned, revoked := d.abandoned, d.revoked
	timedOut := d.timedOut || context.Cause(hctx) == ErrHandlerTimeout
	d.ending = !abandoned
	c.mu.Unlock()
	if timedOut {
		err = fmt.Errorf("%w after %v: %v", ErrHandlerTimeout, c.cfg.handlerTimeout, err)
	}
	var outcome Outcome
	switch {
	case abandoned:
		outcome = Abandoned
	case context.Cause(ctx) == ErrLeaseLost:
		outcome = LeaseLost
		c.log.WarnContext(ctx, "rmq: lease lost while handling; the message is redelivered", "id", d.msg.ID, "slot", d.msg.Slot)
	case revoked && err != nil:
		// ZooKeeper mode: no rollback (it would count an attempt and could
		// reorder the key); the slot's next term returns the message.
		outcome = Revoked
	case err == nil:
		outcome = c.finish(d, "ack", func(ctx context.Context) (Outcome, error) {
			refused, err := c.ackOne(d)
			if err != nil {
				return Failed, err
			}
			if refused {
				c.log.WarnContext(ctx, "rmq: ack refused: the delivery was no longer current", "id", d.msg.ID, "slot", d.msg.Slot)
				return Refused, nil
			}
			return Acked, nil
		})
	default:
		outcome = c.finish(d, "rollback", func(ctx context.Context) (Outcome, error) {
			ctx, cancel := context.WithTimeout(ctx, c.cfg.prepareTimeout)
			defer cancel()
			res, rerr := c.rollback(ctx, d.msg.Slot, []rollbackItem{{id: d.msg.ID, token: d.msg.Token, err: err.Error(), epoch: d.msg.Epoch}})
			if rerr != nil {
				return Failed, rerr
			}
			return rollbackOutcome(res[0]), nil
		})
	}
	c.cfg.observer.Finished(d.msg, took, outcome)
	c.mu.Lock()
	delete(c.inflight, d)
	if c.perSlot[d.msg.Slot]--; c.perSlot[d.msg.Slot] <= 0 {
		delete(c.perSlot, d.msg.Slot)
		c.slotIdleLocked(d.msg.Slot)
	}
	c.mu.Unlock()
	c.wakeFetcher()
}

// acquire takes a listener token: at most concurrency listener calls run
// at once, and with a prefetch, fetched deliveries wait here for one, in
// fetch order. It reports false, holding no token, when ctx ended first
// (Close abandoned the delivery, or its lease was lost).
func (c *Consumer) acquire(ctx context.Context) bool {
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
func (c *Consumer) giveBack(started bool) {
	// Under mu first: abandonInflight cancels every delivery under mu, so
	// a token freed after it cannot go to a waiting delivery it has not
	// cancelled yet.
	c.mu.Lock()
	c.busy--
	c.mu.Unlock()
	if started {
		<-c.running
	}
	c.wakeFetcher()
}

func (c *Consumer) wakeFetcher() {
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
// timeout ends it otherwise; a delivery waits for its ack round at most
// about the prepare timeout either way. The lease then runs out and the
// sweeper rolls the message back. A call refused for a stale owner epoch (ZooKeeper
// mode) is Fenced.
func (c *Consumer) finish(d *delivery, what string, op func(ctx context.Context) (Outcome, error)) Outcome {
	ctx := context.Background()
	outcome, err := op(ctx)
	if scripts.IsFenced(err) {
		c.fenced(d.msg.Slot, d.msg.Epoch, what)
		return Fenced
	}
	if err != nil {
		c.log.ErrorContext(ctx, "rmq: could not end delivery; its lease will expire", "id", d.msg.ID, "slot", d.msg.Slot, "err", err)
	}
	return outcome
}

func rollbackOutcome(code int64) Outcome {
	switch code {
	case rollbackRetried:
		return Retried
	case rollbackDead:
		return Dead
	case rollbackSuperseded:
		return Superseded
	}
	return Refused
}

// call runs the listener and turns a panic into a *PanicError.
func (c *Consumer) call(ctx context.Context, m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
			c.log.ErrorContext(ctx, "rmq: handler panic", "id", m.ID, "panic", fmt.Sprint(r))
		}
	}()
	return c.listener.OnMessage(ctx, m)
}

// snapshotInflight groups the deliveries whose leases should be extended.
func (c *Consumer) snapshotInflight() map[int][]*delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int][]*delivery{}
	for d := range c.inflight {
		if !d.timedOut && !d.abandoned && !d.revoked {
			out[d.msg.Slot] = append(out[d.msg.Slot], d)
		}
	}
	return out
}

// leaseLost cancels handlers whose delivery is no longer current.
func (c *Consumer) leaseLost(ds []*delivery) {
	for _, d := range ds {
		c.log.Warn("rmq: lease lost", "id", d.msg.ID, "slot", d.msg.Slot, "attempt", d.msg.Attempt)
		d.cancel(ErrLeaseLost)
	}
}

func slotList(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// ownedSlots lists the slots this consumer fetches and sweeps: all of them
// without a coordinator, the ones it owns now with one.
func (c *Consumer) ownedSlots() []int {
	if c.own != nil {
		return c.activeSlots()
	}
	return slotList(c.topic.SlotAmount())
}
