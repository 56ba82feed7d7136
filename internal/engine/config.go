package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/options"
)

// config is what an engine runs with: its topic's settings (the consumer
// options given to Register) and its client's (the hub's: prefix, logger,
// observer), which no topic option can change.
type config struct {
	prefix         string
	maxRetries     int
	prepareTimeout time.Duration
	concurrency    int
	prefetch       int
	lookahead      time.Duration
	backoff        func(attempt int) time.Duration
	handlerTimeout time.Duration
	sweepInterval  time.Duration
	deadMaxLen     int
	deadMaxAge     time.Duration
	limits         options.Limits // the options' limits (flow/state.go)
	life           life.Settings  // the options' life settings (redisops.Life)
	adaptiveMin    int            // WithAdaptiveConcurrency (flow/adaptive.go); 0: off
	adaptiveMax    int
	logger         *slog.Logger
	observer       Observer
}

// TopicSettings applies opts to the defaults and checks the result: the
// settings of one topic, or an error wrapping consumer.ErrInvalidOption.
func TopicSettings(opts []consumer.Option) (options.Topic, error) {
	t := options.Topic{
		MaxRetries:     consumer.DefaultMaxRetries,
		PrepareTimeout: consumer.DefaultPrepareTimeout,
		Concurrency:    consumer.DefaultConcurrency,
		Lookahead:      consumer.DefaultLookahead,
		Backoff:        consumer.DefaultBackoff,
		DeadMaxLen:     consumer.DefaultDeadMaxLen,
		DeadMaxAge:     consumer.DefaultDeadMaxAge,
	}
	for _, o := range opts {
		if o == nil {
			return t, fmt.Errorf("%w: nil consumer option", consumer.ErrInvalidOption)
		}
		options.ApplyTopic(&t, o)
	}
	switch {
	case t.MaxRetries < 0 || t.MaxRetries > consumer.MaxMaxRetries:
		return t, fmt.Errorf("%w: max retries %d (want 0..%d)", consumer.ErrInvalidOption, t.MaxRetries, consumer.MaxMaxRetries)
	case t.PrepareTimeout < time.Second:
		return t, fmt.Errorf("%w: prepare timeout %v (want at least 1s)", consumer.ErrInvalidOption, t.PrepareTimeout)
	case t.Concurrency < 1:
		return t, fmt.Errorf("%w: concurrency %d (want at least 1)", consumer.ErrInvalidOption, t.Concurrency)
	case t.Prefetch < 0:
		return t, fmt.Errorf("%w: prefetch %d (want at least 0)", consumer.ErrInvalidOption, t.Prefetch)
	case t.Lookahead < 0 || t.Lookahead > consumer.MaxLookahead:
		return t, fmt.Errorf("%w: lookahead %v (want 0..%v)", consumer.ErrInvalidOption, t.Lookahead, consumer.MaxLookahead)
	case t.HandlerTimeout < 0:
		return t, fmt.Errorf("%w: handler timeout %v", consumer.ErrInvalidOption, t.HandlerTimeout)
	case t.Backoff == nil:
		return t, fmt.Errorf("%w: nil retry backoff", consumer.ErrInvalidOption)
	case t.DeadMaxLen < 0 || t.DeadMaxAge < 0:
		return t, fmt.Errorf("%w: negative dead-queue retention", consumer.ErrInvalidOption)
	case t.SweepInterval < 0:
		return t, fmt.Errorf("%w: sweep interval %v", consumer.ErrInvalidOption, t.SweepInterval)
	case t.AdaptiveMin < 0 || t.AdaptiveMax < t.AdaptiveMin || (t.AdaptiveMax > 0 && t.AdaptiveMin < 1):
		return t, fmt.Errorf("%w: adaptive concurrency %d..%d (want 1 <= min <= max)", consumer.ErrInvalidOption, t.AdaptiveMin, t.AdaptiveMax)
	}
	if len(t.Bad) > 0 {
		return t, fmt.Errorf("%w: %s", consumer.ErrInvalidOption, t.Bad[0])
	}
	if err := t.Limits.Check(); err != nil {
		return t, fmt.Errorf("%w: %v", consumer.ErrInvalidOption, err)
	}
	if err := (life.Settings{Retention: t.Retention, Events: t.Events}).Validate(); err != nil {
		return t, fmt.Errorf("%w: %v", consumer.ErrInvalidOption, err)
	}
	if t.AdaptiveMax > 0 {
		// The listener tokens and the fetches are sized for the most the
		// limit may reach (flow/adaptive.go moves it).
		t.Concurrency = t.AdaptiveMax
	}
	if t.SweepInterval == 0 {
		t.SweepInterval = min(max(t.PrepareTimeout/2, 500*time.Millisecond), 10*time.Second)
	}
	return t, nil
}

// newConfig joins a topic's settings with its hub's.
func newConfig(t options.Topic, h HubConfig) config {
	return config{
		prefix:         h.Prefix,
		maxRetries:     t.MaxRetries,
		prepareTimeout: t.PrepareTimeout,
		concurrency:    t.Concurrency,
		prefetch:       t.Prefetch,
		lookahead:      t.Lookahead,
		backoff:        t.Backoff,
		handlerTimeout: t.HandlerTimeout,
		sweepInterval:  t.SweepInterval,
		deadMaxLen:     t.DeadMaxLen,
		deadMaxAge:     t.DeadMaxAge,
		limits:         t.Limits,
		life:           life.Settings{Retention: t.Retention, Events: t.Events},
		adaptiveMin:    t.AdaptiveMin,
		adaptiveMax:    t.AdaptiveMax,
		logger:         h.Logger,
		observer:       h.Observer,
	}
}

// leaseSeconds is the lease in whole seconds, rounded up: prepare scores
// keep deadlines in seconds.
func (c *config) leaseSeconds() int64 {
	return int64((c.prepareTimeout + time.Second - 1) / time.Second)
}

// chain wraps l in mws, the first outermost.
func chain(l consumer.MessageListener, mws []consumer.Middleware) consumer.MessageListener {
	for i := len(mws) - 1; i >= 0; i-- {
		l = mws[i](l)
	}
	return l
}
