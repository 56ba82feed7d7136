package dashboard

import (
	"context"
	"time"
)

// Forward is one forward the host runs: a topic whose messages a listener
// sends on to a message broker when they come due (rmqd's --forward, or
// a program's x/forward listener), with the host's counts.
type Forward struct {
	Topic string
	// Target names the broker and where on it (a URL); shown as text, so
	// it must not hold a password.
	Target    string
	Forwarded uint64 // confirmed by the broker
	Failed    uint64 // failed attempts (each retried or dead, as any failure)
	// LastError is the text of the last failure ("" for none), at
	// LastErrorAt.
	LastError   string
	LastErrorAt time.Time
}

// WithForwards adds a read-only panel of the host's forwards to the
// overview, and the topic's forward to a forwarded topic's page. f is
// called once per page view, must be quick (the host's counters, not a
// broker round trip) and safe for concurrent use. The panel has no
// action: it changes nothing, so it needs no CSRF token.
func WithForwards(f func(context.Context) []Forward) Option {
	return func(c *config) { c.forwards = f }
}

// forwardsOf returns the host's forwards, nil without WithForwards.
func (h *handler) forwardsOf(ctx context.Context) []Forward {
	if h.cfg.forwards == nil {
		return nil
	}
	return h.cfg.forwards(ctx)
}

// forwardOf returns the forward of topic, nil when it has none.
func (h *handler) forwardOf(ctx context.Context, topic string) *Forward {
	for _, f := range h.forwardsOf(ctx) {
		if f.Topic == topic {
			return &f
		}
	}
	return nil
}
