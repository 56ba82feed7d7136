package rmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/topic"
)

// Limits are a topic's fleet-wide flow limits (docs/flow-control.md), as
// the consumer options WithRateLimit, WithGlobalConcurrency,
// WithGroupConcurrency and WithGroupRateLimit ask for them. They are
// stored with the topic and every consumer obeys the stored ones. A zero
// field is no limit.
type Limits struct {
	Rate             int           // deliveries that may start per RatePer, topic-wide
	RatePer          time.Duration //
	Concurrency      int           // deliveries in flight at once, topic-wide
	GroupConcurrency int           // deliveries of one group in flight at once
	GroupRate        int           // deliveries of one group that may start per GroupRatePer
	GroupRatePer     time.Duration //
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// String is the stored form, "rate=50/1s conc=5" ("" for none).
func (l Limits) String() string { return options.Limits(l).String() }

// ParseLimits reads the form String writes (rmqctl limits set takes it).
func ParseLimits(s string) (Limits, error) {
	l, err := options.ParseLimits(s)
	if err != nil {
		return Limits{}, fmt.Errorf("%w: %v", ErrInvalidLimits, err)
	}
	if err := l.Check(); err != nil {
		return Limits{}, fmt.Errorf("%w: %v", ErrInvalidLimits, err)
	}
	return Limits(l), nil
}

// ErrInvalidLimits is returned by SetLimits and ParseLimits for a count
// below 0 or a period outside 1ms..24h; nothing is stored.
var ErrInvalidLimits = errors.New("rmq: invalid limits")

// FlowObserver is an optional extension of Observer: it is told when the
// adaptive concurrency limit of a topic this client consumes changed
// (consumer.WithAdaptiveConcurrency), for a gauge. It is called from a
// handler's goroutine and must not block.
type FlowObserver interface {
	ConcurrencyLimit(topic string, limit int)
}

// ConcurrencyLimit tells the observers that implement FlowObserver.
func (o *observers) ConcurrencyLimit(topic string, limit int) {
	each(o.list, func(x FlowObserver) { x.ConcurrencyLimit(topic, limit) })
}

// SetLimits stores t's limits, replacing the stored ones (a zero Limits
// removes them), and tells its running consumers, which obey them from
// their next fetch. A consumer's limit options only store limits when none
// are stored.
func (i *Inspector) SetLimits(ctx context.Context, t topic.Topic, l Limits) error {
	return i.in.SetLimits(ctx, t, options.Limits(l), ErrInvalidLimits)
}

// Limits returns t's stored limits (zero when none are stored).
func (i *Inspector) Limits(ctx context.Context, t topic.Topic) (Limits, error) {
	l, err := i.in.Limits(ctx, t)
	return Limits(l), err
}

// AdaptiveLimit is one client's adaptive concurrency limit of a topic
// (consumer.WithAdaptiveConcurrency), as it last reported it: within 30 s.
type AdaptiveLimit struct {
	Client   string // the reporting client's id
	Limit    int    // handlers that may run at once now
	Min, Max int    // the bounds it moves within
}
