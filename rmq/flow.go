package rmq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/slots"
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
	for _, x := range o.list {
		if f, ok := x.(FlowObserver); ok {
			f.ConcurrencyLimit(topic, limit)
		}
	}
}

// SetLimits stores t's limits, replacing the stored ones (a zero Limits
// removes them), and tells its running consumers, which obey them from
// their next fetch. A consumer's limit options only store limits when none
// are stored.
func (i *Inspector) SetLimits(ctx context.Context, t topic.Topic, l Limits) error {
	if err := i.check(ctx, t); err != nil {
		return err
	}
	if err := options.Limits(l).Check(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidLimits, err)
	}
	key := slots.LimitsKey(i.prefix)
	var err error
	if l.IsZero() {
		err = i.rdb.HDel(ctx, key, t.Name()).Err()
	} else {
		err = i.rdb.HSet(ctx, key, t.Name(), l.String()).Err()
	}
	if err != nil {
		return fmt.Errorf("rmq: set the limits of %s: %w", t.Name(), err)
	}
	// As Pause: stored first, then every slot's consumers are told.
	return i.tellSlots(ctx, t, "L")
}

// Limits returns t's stored limits (zero when none are stored).
func (i *Inspector) Limits(ctx context.Context, t topic.Topic) (Limits, error) {
	if i.err != nil {
		return Limits{}, i.err
	}
	s, err := i.rdb.HGet(ctx, slots.LimitsKey(i.prefix), t.Name()).Result()
	if errors.Is(err, redis.Nil) {
		return Limits{}, nil
	}
	if err != nil {
		return Limits{}, fmt.Errorf("rmq: limits of %s: %w", t.Name(), err)
	}
	l, err := options.ParseLimits(s)
	return Limits(l), err
}

// AdaptiveLimit is one client's adaptive concurrency limit of a topic
// (consumer.WithAdaptiveConcurrency), as it last reported it: within 30 s.
type AdaptiveLimit struct {
	Client   string // the reporting client's id
	Limit    int    // handlers that may run at once now
	Min, Max int    // the bounds it moves within
}

// adaptiveLimits reads the clients' reports of t, live ones only, sorted
// by client.
func (i *Inspector) adaptiveLimits(ctx context.Context, t topic.Topic, now time.Time) ([]AdaptiveLimit, error) {
	m, err := i.rdb.HGetAll(ctx, slots.AdaptiveKey(i.prefix, t)).Result()
	if err != nil {
		return nil, fmt.Errorf("rmq: adaptive limits of %s: %w", t.Name(), err)
	}
	var out []AdaptiveLimit
	for client, v := range m {
		f := strings.Fields(v)
		if len(f) != 4 {
			continue
		}
		limit, _ := strconv.Atoi(f[0])
		lo, _ := strconv.Atoi(f[1])
		hi, _ := strconv.Atoi(f[2])
		exp, _ := strconv.ParseInt(f[3], 10, 64)
		if exp < now.UnixMilli() {
			continue // its client stopped reporting
		}
		out = append(out, AdaptiveLimit{Client: client, Limit: limit, Min: lo, Max: hi})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Client < out[b].Client })
	return out, nil
}
