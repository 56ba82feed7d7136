package rmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/pullwait"
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

// Pull takes up to n due messages from topics, in list order (the first
// topic's due messages first), each leased to the caller (WithLease). With
// WithWait it waits for a message when none is due. The client must be
// started (Start with no listener registered is fine): ErrNotStarted
// before Start, ErrClosed once Close began (Close wakes a waiting Pull). A paused topic gives
// nothing. Every delivery must end with Ack or Nack; see Delivery.
//
// The error is nil whenever messages were taken: if one topic's fetch
// fails after earlier topics gave messages, Pull returns those (fewer than
// n) and no error, and the failing fetch's error comes with a later Pull.
func (c *Client) Pull(ctx context.Context, topics []topic.Topic, n int, opts ...PullOption) ([]*Delivery, error) {
	arrived := time.Now()
	cfg, err := c.pullConfig(topics, n, opts)
	if err != nil {
		return nil, err
	}
	entries := make([]*pullEntry, 0, len(topics))
	var leasedUntil time.Time // set once deliveries are handed out
	defer func() { c.letGo(entries, leasedUntil) }()
	for _, t := range topics {
		e, err := c.pullEntry(ctx, t)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	p := &pullCall{c: c, entries: entries, n: n, lease: cfg.lease, deadline: time.Now().Add(cfg.wait), waits: make([]time.Duration, len(entries))}
	got, err := p.run(ctx)
	p.leave(len(got) > 0)
	if len(got) > 0 {
		leasedUntil = time.Now().Add(cfg.lease)
		c.obs.hist.Pulled(arrived, len(got), func(i int) *consumer.Message { return got[i].Message })
	}
	return got, err
}

// pullConfig applies and checks the options of a Pull of n from topics.
func (c *Client) pullConfig(topics []topic.Topic, n int, opts []PullOption) (pullConfig, error) {
	cfg := pullConfig{lease: DefaultLease}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case len(topics) == 0:
		return cfg, fmt.Errorf("%w: no topics", ErrInvalidPull)
	case n < 1:
		return cfg, fmt.Errorf("%w: n = %d", ErrInvalidPull, n)
	case cfg.lease < time.Second || cfg.lease > 24*time.Hour:
		return cfg, fmt.Errorf("%w: lease %v (want 1s..24h)", ErrInvalidPull, cfg.lease)
	case cfg.wait < 0:
		return cfg, fmt.Errorf("%w: wait %v", ErrInvalidPull, cfg.wait)
	case c.coord != nil:
		// A pull engine consumes every slot, unfenced: in ZooKeeper mode
		// it would take messages from slots other workers own.
		return cfg, fmt.Errorf("%w: Pull is not available in ZooKeeper mode", ErrInvalidPull)
	}
	return cfg, nil
}

// pullCall is one Pull: it fetches from its topics in order until it has
// messages or its wait ran out, sleeping in between on the topics' wake-ups
// and due times (internal/pullwait).
type pullCall struct {
	c        *Client
	entries  []*pullEntry
	n        int
	lease    time.Duration
	deadline time.Time
	// w is registered with the entries only once a fetch came back empty,
	// so a Pull that finds messages at once pays nothing for waiting.
	w *pullwait.Waiter
	// waits are, per topic, how long until its next due time by the last
	// fetch (-1: none known, -2: not fetched in the last round).
	waits []time.Duration
}

func (p *pullCall) run(ctx context.Context) ([]*Delivery, error) {
	var seenBuf [4]uint64
	for {
		// The wake counts read before a fetch tell whether a wake-up came
		// between the fetch and the registration; Close's counts too.
		var seen []uint64
		if p.w == nil {
			seen = seenBuf[:0]
			for _, e := range p.entries {
				seen = append(seen, e.Wakes())
			}
		}
		if p.c.isClosed() {
			return nil, ErrClosed
		}
		out, err := p.fetch(ctx)
		if err != nil || len(out) > 0 || !time.Now().Before(p.deadline) {
			return out, err
		}
		if p.w == nil && p.register(seen) {
			continue
		}
		if err := p.sleep(ctx); err != nil {
			return nil, err
		}
	}
}

// fetch takes up to n messages, topic by topic. When a topic's fetch fails
// after earlier topics gave messages, those are returned without the
// error: they are leased already, and callers drop messages that come with
// an error.
func (p *pullCall) fetch(ctx context.Context) ([]*Delivery, error) {
	var out []*Delivery
	for i := range p.waits {
		p.waits[i] = -2
	}
	for i, e := range p.entries {
		p.c.pulls.fetches.Add(1)
		ds, wait, err := e.p.Pull(ctx, p.n-len(out), p.lease)
		if err = clientErr(err); err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		p.waits[i] = wait
		for _, d := range ds {
			out = append(out, &Delivery{Message: d.Message, d: d})
		}
		if len(out) == p.n {
			break
		}
	}
	return out, nil
}

// register makes the call a waiter of its topics; it reports whether a
// wake-up came since seen was read (then the call fetches again at once).
func (p *pullCall) register(seen []uint64) (woke bool) {
	p.w = pullwait.NewWaiter()
	for i, e := range p.entries {
		e.Watch(p.w)
		woke = woke || e.Wakes() != seen[i]
	}
	return woke
}

// sleep waits until the due times this call owns, a wake-up, or the end of
// its wait.
func (p *pullCall) sleep(ctx context.Context) error {
	left := time.Until(p.deadline)
	now := time.Now()
	for i, e := range p.entries {
		if e.Claim(p.w, now, p.waits[i]) {
			left = min(left, p.waits[i])
		}
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-p.w.C:
		p.c.pulls.woken.Add(1)
	case <-t.C:
	}
	return nil
}

// leave unregisters a call that waited and is done, waking whom the others
// need (internal/pullwait): took says it returns messages.
func (p *pullCall) leave(took bool) {
	w, entries, waits := p.w, p.entries, p.waits
	if w == nil {
		return
	}
	now := time.Now()
	for i, e := range entries {
		h := pullwait.HandNone
		if took {
			switch {
			case waits[i] == 0:
				h = pullwait.HandAll
			case waits[i] != -2 && !e.topic.Type().TimeBased():
				h = pullwait.HandTwo
			case waits[i] > 0:
				h = pullwait.HandNext
			}
		}
		e.Leave(w, h, now.Add(max(waits[i], 0)))
		if waits[i] == -2 {
			// Not fetched in the last round (the earlier topics filled n,
			// or one failed): the wake-up that woke this Pull may have
			// been this topic's, so another waiter looks at it.
			e.Signal(1)
		}
	}
	// A wake-up it received and did not act on goes on to another waiter.
	select {
	case <-w.C:
		for _, e := range entries {
			e.Signal(1)
		}
	default:
	}
}
