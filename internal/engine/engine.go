package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/clock"
	"github.com/rmq-go/rmq/internal/engine/flow"
	"github.com/rmq-go/rmq/internal/engine/ownership"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// The engine of one topic: a user consumes through rmq.Client.Register,
// which makes it with Hub.New. Its one actor, the fetcher, runs in the
// engine's group (internal/lifecycle; every goroutine is in the table of
// doc.go). Its wake-ups (wake.Hub, where its waker registers), its
// sweeping and its lease keeping (lease/hub.go) are the client's hub's.
// Close stops fetching first (no new delivery starts), leaves the hub's
// wake-ups and sweeping, then lets the handlers drain; leases are kept
// until the last handler is done. ZooKeeper mode is one seam, the
// ownership interface (package ownership). Every goroutine the
// engine starts ends before Close returns.

// Engine consumes one topic: with a listener (pushed), or when asked
// (Pull).
type Engine struct {
	rdb      redis.UniversalClient
	topic    topic.Topic
	listener consumer.MessageListener
	cfg      config
	log      *slog.Logger
	keys     []keyspace.Keys
	wakeCmd  string

	// Lifecycle (internal/lifecycle; the table in doc.go). Stopped in this
	// order by Close: loops (the fetcher), then, once the handlers drained,
	// handleCtx ends the handlers Close gave up on; the hub keeps the
	// leases until then.
	phase lifecycle.Phase // guarded by mu
	live  bool            // guarded by mu: Start succeeded and Close has not begun
	loops *lifecycle.Group
	// tree reports flow children's outcomes (flows.go); fscan is the
	// state of the flow scans that go with the sweep.
	tree      *flowtree.Reporter
	fscan     flowScan
	handleCtx context.Context
	stopAll   context.CancelFunc
	handlers  sync.WaitGroup // one per delivery in flight

	mu       sync.Mutex
	inflight map[*delivery]struct{} // until the ack or rollback is done
	busy     int                    // deliveries whose listener call has not returned, and held messages
	held     int                    // messages the hub holds for their instant (hold/holder.go, heldRoom)
	perSlot  map[int]int            // inflight per slot
	released chan struct{}          // a handler finished: capacity is free
	// wantRelease: the fetcher is to be told of freed capacity (released);
	// false only while it sleeps with capacity free and nothing due.
	wantRelease atomic.Bool
	running     chan struct{} // a token per running listener call (WithPrefetch)
	// backlog is the prefetch of a time-based topic without WithPrefetch
	// while a backlog lasts (adaptBacklog).
	backlog atomic.Int64
	// adaptsBacklog: the topic may take that prefetch (fixed at start: no
	// WithPrefetch, two or more handlers, time-based, every slot its own).
	adaptsBacklog bool
	// Since the last fetch that adapted the backlog's prefetch, guarded by
	// mu: listener calls that returned, and whether one of them left its
	// handler with no delivery waiting (the handlers ran ahead of the
	// fetches).
	backlogDone    int
	backlogStarved bool

	waker *waker
	clock clock.Clock

	// own decides which slots are consumed and fences the script calls
	// (package ownership): every slot, or the assigned ones in ZooKeeper
	// mode.
	own ownership.Ownership
	// ops are the topic's calls to Redis (package redisops).
	ops *redisops.Ops

	// merged: one script call may name several slots (a single node, no
	// fencing), so fetches and acks take all their slots in one call.
	merged bool

	// paused: the topic is paused (Inspector.Pause): read from Redis at
	// start, on every resubscription and on every pause or resume payload
	// of the wake channels, by the hub's pauser (wake.Hub).
	paused atomic.Bool

	// pull: an engine without a listener that fetches only when asked
	// (pull.go); onWake is told of every wake-up.
	pull   bool
	onWake func()

	// hub is what the engines of one client share (hub.go).
	hub *Hub

	// flow is the topic's flow control (flow/state.go): its limits, whether its
	// messages carry groups, a cluster's permits.
	flow *flow.State
	// adaptive, when not nil, moves the concurrency between its min and
	// max (WithAdaptiveConcurrency, flow/adaptive.go).
	adaptive *flow.Adaptive
}

// Params is what the engine of one topic is made from (Hub.New).
type Params struct {
	Topic topic.Topic
	// Listener handles the messages; nil for a pull engine.
	Listener consumer.MessageListener
	// Settings are the topic's (TopicSettings).
	Settings options.Topic
	// Coordinator, when not nil, assigns the engine its slots (ZooKeeper
	// mode); nil: the engine consumes every slot (competing consumers).
	Coordinator Coordinator
	// Pull makes an engine without a listener that fetches only when asked
	// (Engine.Pull); it still subscribes to wake-ups and sweeps expired
	// leases. OnWake, if not nil, is called on every wake-up of its slots
	// (from the hub's goroutine; it must not block).
	Pull   bool
	OnWake func()
}

// New returns the engine of p.Topic on the hub; it starts nothing until
// Start.
func (h *Hub) New(p Params) (*Engine, error) {
	t := p.Topic
	if t.IsZero() {
		return nil, fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	l := p.Listener
	switch {
	case p.Pull:
		l = consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
			return errors.New("rmq: a pull engine has no listener")
		})
	case l == nil:
		return nil, fmt.Errorf("%w: nil listener", consumer.ErrInvalidOption)
	default:
		l = chain(l, h.cfg.Middleware)
	}
	cfg := newConfig(p.Settings, h.cfg)
	c := &Engine{
		rdb:      h.rdb,
		topic:    t,
		listener: l,
		cfg:      cfg,
		log:      cfg.logger.With("topic", t.Name()),
		wakeCmd:  scripts.WakeCommand(h.rdb),
		inflight: map[*delivery]struct{}{},
		perSlot:  map[int]int{},
		released: make(chan struct{}, 1),
		running:  make(chan struct{}, cfg.concurrency),
		pull:     p.Pull,
		onWake:   p.OnWake,
		hub:      h,
	}
	c.keys = redisops.KeysOf(cfg.prefix, t)
	c.flow = flow.NewState(flow.StateEnv{RDB: c.rdb, Prefix: cfg.prefix, Topic: t, Keys: c.keys, Log: c.log, WakeCmd: c.wakeCmd, PrepareTimeout: cfg.prepareTimeout}, cfg.limits)
	if cfg.adaptiveMax > 0 && !p.Pull {
		c.adaptive = flow.NewAdaptive(flow.AdaptiveEnv{
			Changed: c.adaptiveChanged,
			RDB:     c.rdb,
			Key:     keyspace.AdaptiveKey(cfg.prefix, c.topic),
			Field:   h.id,
			Log:     c.log,
		}, cfg.adaptiveMin, cfg.adaptiveMax)
	}
	if p.Coordinator != nil && !p.Pull {
		c.own = ownership.NewAssigned(ownEngine{c}, ownership.Env{RDB: c.rdb, Prefix: cfg.prefix, Topic: t, Keys: c.keys, Log: c.log}, p.Coordinator)
	} else {
		c.own = ownership.NewAll(t.SlotAmount(), cfg.concurrency+cfg.prefetch)
	}
	_, single := h.rdb.(*redis.Client)
	c.merged = single && c.own.Merges()
	allSlotsOwn := ownership.IsAll(c.own)
	// With one handler, deliveries start in fetch order only without a
	// prefetch (waiting ones race for the handler).
	c.adaptsBacklog = cfg.prefetch == 0 && cfg.concurrency >= 2 && c.topic.Type().TimeBased() && allSlotsOwn
	// The backoff of attempt a is entry a; attempts past the table use its last.
	n := cfg.maxRetries + 1
	backoffArgs := []any{n}
	for a := 1; a <= n; a++ {
		backoffArgs = append(backoffArgs, max(cfg.backoff(a), 0).Milliseconds())
	}
	c.ops = &redisops.Ops{
		RDB: c.rdb, Topic: t, Keys: c.keys, WakeCmd: c.wakeCmd, Merged: c.merged, Pull: c.pull,
		Lookahead: cfg.lookahead, LeaseSec: cfg.leaseSeconds(),
		MaxRetries: cfg.maxRetries, DeadMaxLen: cfg.deadMaxLen, DeadMaxAge: cfg.deadMaxAge, BackoffArgs: backoffArgs,
		Calls: h.calls, Owner: c.own, Flow: c.flow, Clock: &c.clock, Log: c.log,
		Life:    redisops.NewLife(c.rdb, cfg.prefix, t, cfg.life, c.log),
		Expired: func(n int) { expired(cfg.observer, t.Name(), n) },
		Fenced:  c.fenced,
	}
	c.tree = c.newReporter()
	h.wake.Expect(t.SlotAmount())
	return c, nil
}

// Topic returns the consumed topic.
func (c *Engine) Topic() topic.Topic { return c.topic }

// ConcurrencyLimit returns how many handlers may run at once: the adaptive
// limit's current value (WithAdaptiveConcurrency), else the concurrency.
func (c *Engine) ConcurrencyLimit() int { return c.concurrency() }

// concurrency is the handlers' limit now.
func (c *Engine) concurrency() int {
	if c.adaptive != nil {
		return c.adaptive.Current()
	}
	return c.cfg.concurrency
}

// runningNow is how many listener calls hold a token.
func (c *Engine) runningNow() int {
	if c.adaptive != nil {
		return c.adaptive.RunningNow()
	}
	return len(c.running)
}

// Slots returns the handler a coordinator drives, nil without one.
func (c *Engine) Slots() SlotHandler {
	return ownership.Handler(c.own)
}

// Start checks the topic definition, subscribes to wake-ups and starts
// fetching. ctx bounds only the start-up calls; Close stops the engine.
func (c *Engine) Start(ctx context.Context) error {
	c.mu.Lock()
	was := c.phase.Start()
	c.mu.Unlock()
	switch was {
	case lifecycle.Started:
		return errStarted
	case lifecycle.Closed:
		return ErrClosed
	}
	// The hub loads the scripts, once for all its engines.
	if err := c.hub.use(ctx); err != nil {
		return err
	}
	base := context.WithoutCancel(ctx)
	c.loops = lifecycle.NewGroup(base)
	// The handlers' contexts carry the progress writer
	// (consumer.Message.SetProgress), put here once for all of them.
	c.handleCtx, c.stopAll = context.WithCancel(options.WithChildren(options.WithProgress(base, c.writeProgress), c.readChildren))

	// The hub's subscription: once this returns, Redis confirmed the
	// topic's wake channels.
	c.waker = newWaker(c)
	if err := c.waker.register(ctx); err != nil {
		c.loops.Stop()
		c.stopAll()
		return err
	}
	// After the subscription, in one round trip: the definition stored or
	// checked, and the pause state, limits and life settings read (a
	// pause or settings change published from now on is heard).
	if err := c.defineAndReadPaused(ctx); err != nil {
		c.waker.unregister()
		c.loops.Stop()
		c.stopAll()
		return err
	}
	c.hub.lives.add(c.cfg.prefix, c.topic.Name(), c.ops.Life)
	c.hub.flows.Add(c.flow)
	// A pull engine fetches when asked and extends no lease by itself; it
	// still sweeps, so topics that are only pulled are swept too. Sweeping
	// and lease keeping are the client's (lease/hub.go), told of the
	// engine before its first fetch can lease anything.
	c.hub.leases.Add(c.lease(), c.leaseParams())
	if !c.pull {
		c.loops.Go("fetcher", c.newFetcher().Run)
	}
	if c.adaptive != nil {
		c.loops.Go("adaptive reporter", c.adaptive.RunReporter)
	}
	c.loops.Go("flow scans", c.runFlowScans)
	c.mu.Lock()
	c.live = true
	c.mu.Unlock()
	c.log.DebugContext(ctx, "rmq: consumer started", "slots", c.topic.SlotAmount(), "concurrency", c.cfg.concurrency)
	return nil
}

// Close stops fetching, waits for the handlers in flight until ctx is done,
// then cancels the rest and rolls them back so nothing stays in prepare.
// A delivery whose listener already returned keeps its own ack or rollback
// (a round's call waits for Redis at most about the prepare timeout, where
// the client honours context deadlines or has read timeouts), so a
// reported success is not undone. It
// returns when every goroutine the engine started has ended: handlers
// must return once their context is cancelled. The error is ctx's when the
// deadline cut handlers short. Only the first Close does anything.
func (c *Engine) Close(ctx context.Context) error {
	c.mu.Lock()
	was := c.phase.Close()
	started := c.live
	c.live = false
	c.mu.Unlock()
	if was != lifecycle.Started || !started {
		return nil
	}
	// Senders before receivers: stop fetching first so no new delivery
	// starts, then drain the handlers that run.
	c.loops.Stop()
	// Messages taken ahead of their instant and not handed over yet go
	// back to store, no attempt counted, for any consumer to deliver on
	// time (hold/holder.go).
	rctx, rcancel := context.WithTimeout(context.Background(), releaseTimeout)
	c.hub.hold.Drop(rctx, holdEngine{c})
	// So do prefetched ones that wait for a handler: Close lets run only
	// what had started.
	c.giveBackWaiting(rctx)
	rcancel()
	// The hub no longer calls this engine about wake-ups.
	c.waker.unregister()
	c.hub.flows.Drop(c.flow)
	c.hub.lives.drop(c.cfg.prefix, c.topic.Name(), c.ops.Life)
	c.hub.leases.StopSweeping(c.lease())

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
	// ZooKeeper mode: what is left in prepare (abandoned deliveries,
	// fetched ones never started) goes back to store at its original
	// position, attempt not counted, so per-key order survives.
	c.own.Shutdown()
	// Places of a cluster's topic concurrency go back (flow/permits.go).
	if pm := c.flow.Permits(); pm != nil && pm.Limited() {
		fctx, fcancel := context.WithTimeout(context.Background(), releaseTimeout)
		pm.Flush(fctx)
		fcancel()
	}
	// Leases are kept until the last handler is done.
	c.stopAll()
	c.hub.leases.StopKeeping(c.lease())
	return err
}

// Limits returns the limits the engine has in force (the stored ones).
func (c *Engine) Limits() options.Limits { return c.flow.Current() }

// releaseTimeout bounds Close's call that gives held messages back: one a
// Redis that does not answer leaves to the sweeper.
const releaseTimeout = 5 * time.Second

// lookaheadMs is how long before their instant (ms) the engine's fetches
// take messages (WithLookahead): only a push engine of a time-based topic
// whose fetches share the hub's rounds (a single node, no fencing), since
// the hub's confirm call names slots of any of its topics.
func (c *Engine) lookaheadMs() int64 {
	// Under flow control messages are taken at their instant: the
	// lookahead's confirm and release know nothing of groups and limits.
	if c.pull || !c.topic.Type().TimeBased() || !c.hub.calls.Serves(c.merged, c.rdb) || c.flow.Active() {
		return 0
	}
	return c.cfg.lookahead.Milliseconds()
}

// abandonInflight rolls back every delivery still in flight and cancels its
// handler; their later acks would be refused anyway (their token is gone).
func (c *Engine) abandonInflight() {
	c.mu.Lock()
	bySlot := map[int][]redisops.RollbackItem{}
	for d := range c.inflight {
		if d.abandoned || d.ending {
			// An ending delivery's own ack or rollback is under way,
			// bounded by the prepare timeout: a rollback here could undo a
			// success the listener already reported, and the message would
			// be handled twice.
			continue
		}
		d.abandoned = true
		// ZooKeeper mode: the ownership's shutdown returns them to store
		// once their handlers ended, without counting an attempt.
		if c.own.RollsBackAbandoned() {
			bySlot[d.msg.Slot] = append(bySlot[d.msg.Slot], redisops.RollbackItem{ID: d.msg.ID, Token: d.msg.Token, Err: consumer.ErrShutdown.Error()})
		}
		d.cancel(consumer.ErrShutdown)
	}
	c.mu.Unlock()
	if len(bySlot) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for slot, items := range bySlot {
		if _, err := c.ops.Rollback(ctx, slot, items); err != nil {
			c.log.ErrorContext(ctx, "rmq: roll back on shutdown", "slot", slot, "err", err)
		}
	}
}

// fenced handles Redis's refusal of a call of slot made with epoch (it
// names a stale owner epoch: ZooKeeper mode).
func (c *Engine) fenced(slot int, epoch int64, op string) {
	if fo, ok := c.cfg.observer.(fenceObserver); ok {
		fo.Fenced(c.topic.Name(), slot, op)
	}
	c.own.Fenced(slot, epoch, op)
}

// errGivenBack is the cause of a prefetched delivery's context cancelled
// because Close gave it back to store before it started.
var errGivenBack = errors.New("rmq: given back to store on close")

// giveBackWaiting gives the deliveries of a time-based topic that wait for
// a handler (a prefetch: WithPrefetch, or a backlog's) back to store at
// their due time with no attempt counted (release.lua), as held messages
// are: they never started here, and another consumer delivers them. The
// deliveries are then stopped (handle sees them returned). A call that
// fails leaves them in prepare until their lease runs out, as a crash
// would; a priority topic's wait is run by Close as before.
func (c *Engine) giveBackWaiting(ctx context.Context) {
	if !ownership.IsAll(c.own) || !c.topic.Type().TimeBased() {
		return
	}
	c.mu.Lock()
	bySlot := map[int][]scripts.HeldItem{}
	var waiting []*delivery
	for d := range c.inflight {
		if !d.started && !d.ending && !d.abandoned {
			d.returned = true
			waiting = append(waiting, d)
			bySlot[d.msg.Slot] = append(bySlot[d.msg.Slot], scripts.HeldItem{ID: d.msg.ID, Token: d.msg.Token, Score: d.msg.DueAt.UnixMilli()})
		}
	}
	c.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	var calls []scripts.Call
	var groups []scripts.HeldGroup
	for slot, items := range bySlot {
		k := c.keys[slot]
		g := scripts.HeldGroup{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Wake: k.Wake, Items: items}
		if c.merged {
			groups = append(groups, g)
			continue
		}
		keys, args := scripts.ReleaseArgs(c.wakeCmd, []scripts.HeldGroup{g})
		calls = append(calls, scripts.Call{Script: scripts.Release, Keys: keys, Args: args})
	}
	if len(groups) > 0 {
		keys, args := scripts.ReleaseArgs(c.wakeCmd, groups)
		calls = append(calls, scripts.Call{Script: scripts.Release, Keys: keys, Args: args})
	}
	for _, cmd := range scripts.RunAll(ctx, c.rdb, calls) {
		if err := cmd.Err(); err != nil {
			c.log.ErrorContext(ctx, "rmq: give prefetched messages back to store", "err", err)
		}
	}
	for _, d := range waiting {
		d.cancel(errGivenBack)
	}
}
