package rmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// DefaultLease is the lease of a pulled message when WithLease is not given.
const DefaultLease = 30 * time.Second

// ErrInvalidPull is returned by Pull for no topics, n < 1, a lease or wait
// out of range, or a client in ZooKeeper mode (WithZooKeeper), and by
// AckByID for an empty id.
var ErrInvalidPull = errors.New("rmq: invalid pull")

// PullOption configures one Pull.
type PullOption func(*pullConfig)

type pullConfig struct {
	lease time.Duration
	wait  time.Duration
}

// WithLease sets the lease of each pulled message (default 30s, whole
// seconds, at least 1s). It is not extended automatically: Ack, Nack or
// Extend before it runs out, or the message is delivered again (an attempt
// counted).
func WithLease(d time.Duration) PullOption { return func(c *pullConfig) { c.lease = d } }

// WithWait makes Pull wait up to d for a message when none is due (a
// long-poll). It returns as soon as one is: it sleeps on the topics' wake-up
// channels and until the next due time, never polling. Default 0: return
// at once.
func WithWait(d time.Duration) PullOption { return func(c *pullConfig) { c.wait = d } }

// pullState holds the client's pull engines, one per pulled topic, made on
// the first Pull of the topic and closed by Close. Each subscribes to its
// topic's wake-ups and sweeps the leases pullers let run out, so topics
// that are only pulled are swept. byTopic and starting are guarded by the
// client's mu; an engine starts outside it (its start makes network calls).
//
// Waiting Pulls are woken per topic, and as few as the messages need:
//   - a wake-up of a topic (a send, a redelivery) wakes one Pull waiting on
//     it, not the Pulls of other topics nor all of its own;
//   - of the Pulls waiting on a topic, one (the owner) sleeps until the
//     topic's next due time; the others sleep until a wake-up or the end of
//     their wait;
//   - a woken Pull that takes messages and sees more due at once wakes all
//     the others; one that sees the next due later, or that leaves while it
//     owned the due time or held an unused wake-up, wakes one, which then
//     fetches and takes the due time over. A priority topic does not tell
//     whether more wait (they are not timed): a Pull that takes from one
//     wakes two, so a burst still spreads to every waiter in a few steps.
//
// So a message coming due costs about two fetches however many Pulls wait
// (a herd of every waiter fetching for one message before), and a burst
// still reaches every waiter.
type pullState struct {
	byTopic  map[string]*pullEntry
	starting sync.WaitGroup // engine starts under way; Close waits for them
	// woken counts the waits that a wake-up ended and fetches the engine
	// Pulls made; tests read them.
	woken, fetches atomic.Int64
}

// pullEntry is one topic's engine: ready is closed once its start ended,
// with p set, or err set and the entry removed (a later Pull tries again).
type pullEntry struct {
	topic topic.Topic
	ready chan struct{}
	p     *engine.Engine
	err   error

	wakes   atomic.Uint64 // wake-ups so far: a Pull compares it across its fetch
	mu      sync.Mutex
	waiters map[*pullWaiter]struct{} // Pulls waiting on this topic
	// owner sleeps until ownerDue, the earliest due time a waiter saw.
	owner    *pullWaiter
	ownerDue time.Time
}

// pullWaiter is one waiting Pull: a wake-up of any of its topics leaves a
// token in ch (capacity one; more wake-ups before it looks add nothing).
type pullWaiter struct{ ch chan struct{} }

// wake is the engine's OnWake: it records a wake-up of e's topic and wakes
// one waiting Pull.
func (e *pullEntry) wake() {
	e.wakes.Add(1)
	e.mu.Lock()
	e.signalLocked(1)
	e.mu.Unlock()
}

// wakeAll wakes every waiting Pull (Close).
func (e *pullEntry) wakeAll() {
	e.wakes.Add(1)
	e.mu.Lock()
	e.signalLocked(-1)
	e.mu.Unlock()
}

// signalLocked leaves a token with n waiters that had none (every waiter
// for n < 0); fewer if fewer are without one: those with one will fetch.
func (e *pullEntry) signalLocked(n int) {
	for w := range e.waiters {
		if n == 0 {
			return
		}
		select {
		case w.ch <- struct{}{}:
			n--
		default:
		}
	}
}

func (e *pullEntry) watch(w *pullWaiter) {
	e.mu.Lock()
	if e.waiters == nil {
		e.waiters = map[*pullWaiter]struct{}{}
	}
	e.waiters[w] = struct{}{}
	e.mu.Unlock()
}

// claim makes w the owner of e's due time when there is none or w saw an
// earlier one; it reports whether w owns it. A negative wait (nothing
// known to come due) gives up what w owned.
func (e *pullEntry) claim(w *pullWaiter, now time.Time, wait time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if wait < 0 {
		if e.owner == w {
			e.owner = nil
		}
		return false
	}
	due := now.Add(wait)
	if e.owner == nil || e.owner == w || due.Before(e.ownerDue) {
		e.owner, e.ownerDue = w, due
		return true
	}
	return false
}

// handoff says whom a leaving waiter wakes on one of its topics.
type handoff int

const (
	handNone handoff = iota // none (one if it owned the due time)
	handNext                // one, unless another waiter owns an earlier due time
	handTwo                 // two: more may wait (a priority topic)
	handAll                 // every waiter: more messages are due now
)

// leave unregisters w; next is the due time its last fetch saw (for
// handNext).
func (e *pullEntry) leave(w *pullWaiter, h handoff, next time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.waiters, w)
	owned := e.owner == w
	if owned {
		e.owner = nil
	}
	switch {
	case h == handAll:
		e.signalLocked(-1)
	case h == handTwo:
		e.signalLocked(2)
	case owned, h == handNext && (e.owner == nil || e.ownerDue.After(next)):
		e.signalLocked(1)
	}
}

// closeLocked is Close's part, under the client's mu after the phase moved
// to Closed: it wakes every waiting Pull (which then sees the phase) and
// returns the started engines to close; an engine whose start is under way
// is closed by its starter, and Close waits for that through starting.
func (p *pullState) closeLocked() []*engine.Engine {
	out := make([]*engine.Engine, 0, len(p.byTopic))
	for _, e := range p.byTopic {
		e.wakeAll()
		if e.p != nil {
			out = append(out, e.p)
		}
	}
	return out
}

// Pull takes up to n due messages from topics, in list order (the first
// topic's due messages first), each leased to the caller (WithLease). With
// WithWait it waits for a message when none is due. The client must be
// started (Start with no listener registered is fine): ErrNotStarted
// before Start, ErrClosed once Close began (Close wakes a waiting Pull). A paused topic gives
// nothing. Every delivery must end with Ack or Nack; see consumer.Delivery.
//
// The error is nil whenever messages were taken: if one topic's fetch
// fails after earlier topics gave messages, Pull returns those (fewer than
// n) and no error, and the failing fetch's error comes with a later Pull.
func (c *Client) Pull(ctx context.Context, topics []topic.Topic, n int, opts ...PullOption) ([]*Delivery, error) {
	cfg := pullConfig{lease: DefaultLease}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case len(topics) == 0:
		return nil, fmt.Errorf("%w: no topics", ErrInvalidPull)
	case n < 1:
		return nil, fmt.Errorf("%w: n = %d", ErrInvalidPull, n)
	case cfg.lease < time.Second || cfg.lease > 24*time.Hour:
		return nil, fmt.Errorf("%w: lease %v (want 1s..24h)", ErrInvalidPull, cfg.lease)
	case cfg.wait < 0:
		return nil, fmt.Errorf("%w: wait %v", ErrInvalidPull, cfg.wait)
	case c.coord != nil:
		// A pull engine consumes every slot, unfenced: in ZooKeeper mode
		// it would take messages from slots other workers own.
		return nil, fmt.Errorf("%w: Pull is not available in ZooKeeper mode", ErrInvalidPull)
	}
	entries := make([]*pullEntry, len(topics))
	for i, t := range topics {
		e, err := c.pullEntry(ctx, t)
		if err != nil {
			return nil, err
		}
		entries[i] = e
	}
	deadline := time.Now().Add(cfg.wait)
	// The waiter is registered only once a fetch came back empty, so a
	// Pull that finds messages at once pays nothing for waiting. The wake
	// counts read before that fetch tell whether a wake-up came between
	// the fetch and the registration; Close's wake-up counts too.
	var w *pullWaiter
	waits := make([]time.Duration, len(entries)) // per topic, of the last fetch; -2: not fetched
	var got []*Delivery
	defer func() {
		if w != nil {
			c.leavePull(w, entries, waits, len(got) > 0)
		}
	}()
	var seenBuf [4]uint64
	for {
		seen := seenBuf[:0]
		if w == nil {
			for _, e := range entries {
				seen = append(seen, e.wakes.Load())
			}
		}
		if c.isClosed() {
			return nil, ErrClosed
		}
		var out []*Delivery
		next := time.Duration(-1)
		for i := range waits {
			waits[i] = -2
		}
		for i, e := range entries {
			c.pulls.fetches.Add(1)
			ds, wait, err := e.p.Pull(ctx, n-len(out), cfg.lease)
			err = clientErr(err)
			if err != nil {
				if len(out) > 0 {
					// Earlier topics' messages are leased already: hand
					// them out rather than leave them to expire (an
					// attempt counted) behind an error callers drop.
					got = out
					return out, nil
				}
				return nil, err
			}
			waits[i] = wait
			for _, d := range ds {
				out = append(out, &Delivery{Message: d.Message, d: d})
			}
			if wait >= 0 && (next < 0 || wait < next) {
				next = wait
			}
			if len(out) == n {
				break
			}
		}
		left := time.Until(deadline)
		if len(out) > 0 || left <= 0 {
			got = out
			return out, nil
		}
		if w == nil {
			w = &pullWaiter{ch: make(chan struct{}, 1)}
			woke := false
			for i, e := range entries {
				e.watch(w)
				woke = woke || e.wakes.Load() != seen[i]
			}
			if woke {
				continue
			}
		}
		// Sleep until the due times this waiter owns, or a wake-up.
		now := time.Now()
		for i, e := range entries {
			if e.claim(w, now, waits[i]) {
				left = min(left, waits[i])
			}
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-w.ch:
			c.pulls.woken.Add(1)
		case <-t.C:
		}
		t.Stop()
	}
}

// leavePull unregisters a waiter that is done, waking whom the others need
// (see pullState): took says it returns messages; waits are its last
// fetch's, per topic.
func (c *Client) leavePull(w *pullWaiter, entries []*pullEntry, waits []time.Duration, took bool) {
	now := time.Now()
	for i, e := range entries {
		h := handNone
		if took {
			switch {
			case waits[i] == 0:
				h = handAll
			case waits[i] != -2 && !e.topic.Type().TimeBased():
				h = handTwo
			case waits[i] > 0:
				h = handNext
			}
		}
		e.leave(w, h, now.Add(max(waits[i], 0)))
		if waits[i] == -2 {
			// Not fetched in the last round (the earlier topics filled n,
			// or one failed): the wake-up that woke this Pull may have
			// been this topic's, so another waiter looks at it.
			e.mu.Lock()
			e.signalLocked(1)
			e.mu.Unlock()
		}
	}
	// A wake-up it received and did not act on goes on to another waiter.
	select {
	case <-w.ch:
		for _, e := range entries {
			e.mu.Lock()
			e.signalLocked(1)
			e.mu.Unlock()
		}
	default:
	}
}

// isClosed reports whether Close began: a waiting Pull then returns
// ErrClosed (Close wakes it) rather than fetching on closed engines.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase == lifecycle.Closed
}

// puller returns the pull engine of t, making and starting it on first use.
func (c *Client) puller(ctx context.Context, t topic.Topic) (*engine.Engine, error) {
	e, err := c.pullEntry(ctx, t)
	if err != nil {
		return nil, err
	}
	return e.p, nil
}

// pullEntry returns the started entry of t, making and starting its engine
// on first use. Concurrent first Pulls of a topic share one start.
func (c *Client) pullEntry(ctx context.Context, t topic.Topic) (*pullEntry, error) {
	if t.IsZero() {
		return nil, fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	for {
		c.mu.Lock()
		switch c.phase {
		case lifecycle.Closed:
			c.mu.Unlock()
			return nil, ErrClosed
		case lifecycle.Started:
		default:
			c.mu.Unlock()
			return nil, ErrNotStarted
		}
		e, ok := c.pulls.byTopic[t.Name()]
		if !ok {
			e = &pullEntry{topic: t, ready: make(chan struct{})}
			if c.pulls.byTopic == nil {
				c.pulls.byTopic = map[string]*pullEntry{}
			}
			c.pulls.byTopic[t.Name()] = e
			c.pulls.starting.Add(1)
			c.mu.Unlock()
			c.startPuller(ctx, e)
			if e.err != nil {
				return nil, e.err
			}
			return e, nil
		}
		c.mu.Unlock()
		if e.topic.Definition() != t.Definition() {
			return nil, fmt.Errorf("%w: %s is %s, given as %s", topic.ErrConflict, t.Name(), e.topic.Definition(), t.Definition())
		}
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e, nil
		}
		// Its start failed (maybe only its caller's ctx ended): try again,
		// this caller starting it.
	}
}

// startPuller makes and starts e's engine outside the client's mu, then
// stores it, or, if Close began meanwhile, closes it again.
func (c *Client) startPuller(ctx context.Context, e *pullEntry) {
	defer c.pulls.starting.Done()
	defer close(e.ready)
	p, err := c.newPuller(ctx, e)
	c.mu.Lock()
	if err == nil && c.phase == lifecycle.Closed {
		err = ErrClosed
	}
	if err != nil {
		delete(c.pulls.byTopic, e.topic.Name())
		e.err = err
	} else {
		e.p = p
	}
	c.mu.Unlock()
	if p != nil && err != nil {
		// Started after Close collected the engines: nobody else closes it.
		_ = p.Close(context.WithoutCancel(ctx))
	}
}

func (c *Client) newPuller(ctx context.Context, e *pullEntry) (*engine.Engine, error) {
	t := e.topic
	settings, err := engine.TopicSettings(nil)
	if err != nil {
		return nil, err
	}
	p, err := c.hub.New(engine.Params{Topic: t, Settings: settings, Pull: true, OnWake: e.wake})
	if err != nil {
		return nil, err
	}
	c.obs.Consumes(t)
	if err := p.Start(ctx); err != nil {
		return nil, wrapOp(err, "start pulling "+t.Name())
	}
	return p, nil
}

// AckByID acks whatever delivery of id is current in t, without naming its
// token: for stateless callers (an HTTP service) that kept only the id. It
// is unfenced: if the lease ran out and the message was delivered again,
// this acks the new delivery. It reports whether a delivery was acked.
func (c *Client) AckByID(ctx context.Context, t topic.Topic, id string) (bool, error) {
	if t.IsZero() {
		return false, fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	if id == "" {
		return false, fmt.Errorf("%w: empty id", ErrInvalidPull)
	}
	first := slots.IndexString(id, t.SlotAmount())
	ok, err := c.ackByIDAt(ctx, t, first, id)
	if ok || err != nil {
		return ok, err
	}
	// A body-derived id lives in its body's slot: look for its delivery.
	cmds := make([]*redis.FloatCmd, t.SlotAmount())
	pipe := c.rdb.Pipeline()
	for s := range cmds {
		if s != first {
			cmds[s] = pipe.ZScore(ctx, slots.KeysFor(c.cfg.prefix, t, s).Prepare, id)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("rmq: ack %s on %s: %w", id, t.Name(), err)
	}
	for s, cmd := range cmds {
		if cmd != nil && cmd.Err() == nil {
			return c.ackByIDAt(ctx, t, s, id)
		}
	}
	return false, nil
}

// ackByIDAt acks the current delivery of id in slot through the client's
// shared ack rounds (token -1: whatever delivery is current), with the acks
// of its engines and of other AckByID calls.
func (c *Client) ackByIDAt(ctx context.Context, t topic.Topic, slot int, id string) (bool, error) {
	acked, err := c.hub.AckByID(ctx, c.cfg.prefix, t, slot, id)
	if err != nil {
		return false, fmt.Errorf("rmq: ack %s on %s: %w", id, t.Name(), err)
	}
	return acked, nil
}

// clientErr reports an engine's lifecycle errors as the client's.
func clientErr(err error) error {
	switch {
	case errors.Is(err, engine.ErrClosed):
		return ErrClosed
	case errors.Is(err, engine.ErrNotStarted):
		return ErrNotStarted
	}
	return err
}
