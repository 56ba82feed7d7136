package rmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/consumerctl"
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
// topic's wake-ups (which wake waiting Pulls through gen) and sweeps the
// leases pullers let run out, so topics that are only pulled are swept.
// byTopic and starting are guarded by the client's mu; an engine starts
// outside it (its start makes network calls).
type pullState struct {
	byTopic  map[string]*pullEntry
	starting sync.WaitGroup // engine starts under way; Close waits for them
	genMu    sync.Mutex
	gen      chan struct{} // closed and replaced on every wake-up
}

// pullEntry is one topic's engine: ready is closed once its start ended,
// with p set, or err set and the entry removed (a later Pull tries again).
type pullEntry struct {
	topic topic.Topic
	ready chan struct{}
	p     consumerctl.Puller
	err   error
}

// closeLocked is Close's part, under the client's mu after the phase moved
// to Closed: it wakes every waiting Pull (which then sees the phase) and
// returns the started engines to close; an engine whose start is under way
// is closed by its starter, and Close waits for that through starting.
func (p *pullState) closeLocked() []consumerctl.Engine {
	p.wake()
	out := make([]consumerctl.Engine, 0, len(p.byTopic))
	for _, e := range p.byTopic {
		if e.p != nil {
			out = append(out, e.p)
		}
	}
	return out
}

// changed returns a channel closed at the next wake-up of any pulled topic.
func (p *pullState) changed() <-chan struct{} {
	p.genMu.Lock()
	defer p.genMu.Unlock()
	if p.gen == nil {
		p.gen = make(chan struct{})
	}
	return p.gen
}

func (p *pullState) wake() {
	p.genMu.Lock()
	if p.gen != nil {
		close(p.gen)
		p.gen = nil
	}
	p.genMu.Unlock()
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
func (c *Client) Pull(ctx context.Context, topics []topic.Topic, n int, opts ...PullOption) ([]*consumer.Delivery, error) {
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
	engines := make([]consumerctl.Puller, len(topics))
	for i, t := range topics {
		e, err := c.puller(ctx, t)
		if err != nil {
			return nil, err
		}
		engines[i] = e
	}
	deadline := time.Now().Add(cfg.wait)
	for {
		// Taken before the fetch and the phase check, so neither a wake-up
		// during the fetch nor Close's wake-up is missed.
		changed := c.pulls.changed()
		if c.isClosed() {
			return nil, ErrClosed
		}
		var out []*consumer.Delivery
		next := time.Duration(-1)
		for _, e := range engines {
			got, count, wait, err := e.Pull(ctx, n-len(out), cfg.lease)
			if err != nil {
				if len(out) > 0 {
					// Earlier topics' messages are leased already: hand
					// them out rather than leave them to expire (an
					// attempt counted) behind an error callers drop.
					return out, nil
				}
				return nil, err
			}
			if count > 0 {
				out = append(out, got.([]*consumer.Delivery)...)
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
			return out, nil
		}
		if next >= 0 {
			left = min(left, next)
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
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
// Concurrent first Pulls of a topic share one start.
func (c *Client) puller(ctx context.Context, t topic.Topic) (consumerctl.Puller, error) {
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
			return e.p, e.err
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
			return e.p, nil
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
	p, err := c.newPuller(ctx, e.topic)
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

func (c *Client) newPuller(ctx context.Context, t topic.Topic) (consumerctl.Puller, error) {
	opts := []consumer.Option{consumer.WithPrefix(c.cfg.prefix), consumer.WithLogger(c.log)}
	opts = append(opts, consumerObserverOptions(c.cfg.observers, t)...)
	eng, err := consumerctl.New(consumerctl.Params{Redis: c.rdb, Topic: t, Options: opts, Pull: true, OnWake: c.pulls.wake, Shared: c.shared})
	if err != nil {
		return nil, err
	}
	p, ok := eng.(consumerctl.Puller)
	if !ok {
		return nil, fmt.Errorf("rmq: the consumer engine of %s cannot pull", t.Name())
	}
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
	a, ok := c.shared.(consumerctl.IDAcker)
	if !ok {
		return false, fmt.Errorf("rmq: ack %s on %s: the consumer's shared part cannot ack by id", id, t.Name())
	}
	acked, err := a.AckByID(ctx, c.cfg.prefix, t, slot, id)
	if err != nil {
		return false, fmt.Errorf("rmq: ack %s on %s: %w", id, t.Name(), err)
	}
	return acked, nil
}
