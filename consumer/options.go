package consumer

import (
	"time"

	"github.com/rmq-go/rmq/internal/options"
)

// Defaults.
const (
	DefaultMaxRetries     = 16
	DefaultPrepareTimeout = 30 * time.Second
	DefaultConcurrency    = 32
	DefaultDeadMaxLen     = 100_000
	DefaultDeadMaxAge     = 30 * 24 * time.Hour
	// DefaultLookahead is how long before its instant a time-based message
	// may be taken (WithLookahead).
	DefaultLookahead = 100 * time.Millisecond
	// MaxLookahead is the largest WithLookahead.
	MaxLookahead = 5 * time.Second
	// MaxMaxRetries is the largest WithMaxRetries: the attempt number lives
	// in three decimal digits of the prepare score.
	MaxMaxRetries = 998
)

// DefaultBackoff waits 1s before the first retry and doubles up to 10 minutes.
func DefaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 10 {
		return 10 * time.Minute
	}
	return min(time.Second<<(attempt-1), 10*time.Minute)
}

// Option configures the consumer of one topic (rmq.Client.Register). What
// a client sets for all its topics (key prefix, logger, observer,
// middleware) is an rmq.Option instead, so a topic cannot contradict it.
//
// Options are made by the With functions of this package only: the
// interface is sealed (its one method is unexported), so a program passes
// them on and combines them in slices but cannot implement its own. A nil
// Option makes Register fail with ErrInvalidOption.
type Option interface{ topicOption }

// topicOption seals Option: only the internal options type implements it,
// and the engine applies it through the compiler-checked
// options.ApplyTopic, so no public signature names the internal type.
type topicOption = options.TopicOption

// WithMaxRetries sets how many retries follow the first attempt before a
// message moves to the dead queue (default 16, at most 998): n+1 attempts.
func WithMaxRetries(n int) Option {
	return options.TopicFunc(func(c *options.Topic) { c.MaxRetries = n })
}

// WithPrepareTimeout sets the lease of a delivery (default 30s, whole
// seconds, at least 1s). The lease is extended while the handler runs; a
// delivery whose consumer died is rolled back once it runs out.
func WithPrepareTimeout(d time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) { c.PrepareTimeout = d })
}

// WithConcurrency sets how many handlers run at once (default 32). Fetches
// never take more messages than there are free handlers, plus the
// prefetch (WithPrefetch).
func WithConcurrency(n int) Option {
	return options.TopicFunc(func(c *options.Topic) { c.Concurrency = n })
}

// WithPrefetch lets fetches take up to n messages beyond the free handlers.
// By default a fixed-time or range-merge topic takes such a prefetch only
// while a backlog lasts (more is due than there are free handlers) and its
// handlers keep pace with it, growing it up to 2,048 while they wait for
// fetches and dropping it once the backlog is gone or they slow down (it
// holds about 100 ms of their work at most); a priority topic takes none.
// They wait here, leased (the lease is extended as for running handlers),
// and start in the order they were fetched as handlers free up.
// A new fetch waits until at most n/2 of them are still waiting, so each
// fetch moves at least n/2 when there is a backlog. Larger fetches cost
// Redis far less per message (about 25 µs a message at 16 a call, 9 µs at
// 1,024, across 16 slots), which raises throughput when Redis is the
// bottleneck: with 2,048, a 16-slot topic drains a backlog about 1.3 times
// as fast as without. The price: a message that comes due, or is sent
// with a higher priority, after the prefetch was taken waits behind it, and
// one consumer holds more messages than it is running. A Close that gives
// up (its context ends) rolls the waiting ones back with the running ones.
func WithPrefetch(n int) Option { return options.TopicFunc(func(c *options.Topic) { c.Prefetch = n }) }

// WithLookahead sets how long before its instant a fixed-time or
// range-merge message may be taken from store (default DefaultLookahead;
// 0 turns it off). The client holds such a message, counted against the
// concurrency (held ones leave one handler free for a message due before
// them that arrives later, so with WithConcurrency(1) nothing is taken
// ahead), and at its instant one call for all the messages of its
// topics due then checks that each is still the client's and due by
// Redis's clock before its listener runs. So the work of taking a wave of
// messages due at one instant is done before it: on a single node 1,000
// topics each with one message due fire about as soon as one message.
// The hold is invisible to callers: until its instant a held message
// counts as waiting in store. A send of its id merges into it or replaces
// it (producer.SendMerged, SendReplaced), a remove finds it waiting
// (producer.RemovedWaiting), a paused topic or a Close gives it back to
// store at its due time, and a holder that dies before the instant costs
// it no attempt; its Message.FetchedAt is the hand-over. Only Inspector
// stats count it in flight while it is held. A single node without
// ZooKeeper only: on a cluster and with serial slots messages are taken at
// their instant.
func WithLookahead(d time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) { c.Lookahead = d })
}

// WithRetryBackoff sets how long a failed message waits before its next
// attempt (attempt is the attempt that failed, from 1). A zero backoff
// retries at once. Priority messages wait it out in their slot's delayed
// set and then rank below every fresh message (RMQ's rule); the handler
// can ask for another delay with RetryAfter.
func WithRetryBackoff(f func(attempt int) time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) { c.Backoff = f })
}

// WithHandlerTimeout bounds one handler call (default: none). Past it the
// handler's context is cancelled, its lease is no longer extended, and the
// delivery is rolled back with ErrHandlerTimeout.
func WithHandlerTimeout(d time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) { c.HandlerTimeout = d })
}

// WithSweepInterval sets how often expired leases are looked for (default
// half the prepare timeout, between 0.5s and 10s).
func WithSweepInterval(d time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) { c.SweepInterval = d })
}

// WithDeadRetention bounds each slot's dead queue by count and age; the
// oldest go first, bodies with them. Zero means unbounded. Defaults: 100,000
// messages per topic (divided evenly among its slots) and 30 days.
func WithDeadRetention(maxLen int, maxAge time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) { c.DeadMaxLen, c.DeadMaxAge = maxLen, maxAge })
}
