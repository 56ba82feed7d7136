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
	sources := make([]pullwait.Source[*Delivery], len(entries))
	for i, e := range entries {
		sources[i] = pullSource{e}
	}
	p := &pullwait.Call[*Delivery]{Sources: sources, N: n, Lease: cfg.lease, Deadline: time.Now().Add(cfg.wait),
		Closed: c.isClosed, ClosedErr: ErrClosed, Count: &c.pulls.count}
	got, err := p.Run(ctx)
	p.Leave(len(got) > 0)
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

// pullSource is a pulled topic's entry as a source of a Pull
// (pullwait.Call): its engine's fetch, as the client's deliveries.
type pullSource struct{ e *pullEntry }

func (s pullSource) Waits() *pullwait.Topic { return &s.e.Topic }
func (s pullSource) TimeBased() bool        { return s.e.topic.Type().TimeBased() }
func (s pullSource) Pull(ctx context.Context, n int, lease time.Duration) ([]*Delivery, time.Duration, error) {
	ds, wait, err := s.e.p.Pull(ctx, n, lease)
	if err = clientErr(err); err != nil {
		return nil, 0, err
	}
	out := make([]*Delivery, len(ds))
	for i, d := range ds {
		out[i] = &Delivery{Message: d.Message, d: d}
	}
	return out, wait, nil
}
