package consumer

import (
	"fmt"
	"time"

	"github.com/rmq-go/rmq/internal/options"
)

// Flow control (docs/flow-control.md). The first four options are limits
// of the whole fleet: the scripts that move messages out of store enforce
// them with their state in Redis, so no process can exceed them by racing,
// and a message they hold back stays waiting: not leased, no attempt
// counted, not in flight. A limited topic waits on timers and wake-ups,
// never by polling.
//
// The limits are stored with the topic. The first consumer to start with
// limit options stores them; a consumer whose options differ from the
// stored ones obeys the stored ones and logs a warning, and one without
// limit options obeys them too. Change them with rmq.Inspector.SetLimits
// (rmqctl limits, rmqd's admin API): running consumers follow at once.

// WithRateLimit lets at most n deliveries of the topic start per `per`
// across the fleet (n >= 1, per 1ms..24h). After a pause a burst of a
// tenth of n (at least 1) may start at once: in any window of length per
// at most n plus that burst start, and a backlog drains at n per per.
func WithRateLimit(n int, per time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) {
		c.Limits.Rate, c.Limits.RatePer = n, per
		if n < 1 || per <= 0 {
			c.Bad = append(c.Bad, fmt.Sprintf("rate limit %d per %v", n, per))
		}
	})
}

// WithGlobalConcurrency allows at most n deliveries of the topic in flight
// at once across the fleet (n >= 1): leased and not yet acked or rolled
// back (a prefetched or pulled one counts). A consumer killed while it
// holds some frees them when their leases run out.
func WithGlobalConcurrency(n int) Option {
	return options.TopicFunc(func(c *options.Topic) {
		c.Limits.Concurrency = n
		if n < 1 {
			c.Bad = append(c.Bad, fmt.Sprintf("global concurrency %d (want at least 1)", n))
		}
	})
}

// WithGroupConcurrency allows at most n messages of one group
// (producer.WithGroup) in flight at once across the fleet (n >= 1). A
// message holds its group's place from its first delivery until it is
// acked, dead, expired or removed: a retry waiting for its backoff keeps
// it. So WithGroupConcurrency(1) delivers a group's messages one at a
// time, in the topic's order (due time, or priority), and a failed one
// holds the next until it is retried and acked, or dead. Messages without
// a group are not limited by it.
func WithGroupConcurrency(n int) Option {
	return options.TopicFunc(func(c *options.Topic) {
		c.Limits.GroupConcurrency = n
		if n < 1 {
			c.Bad = append(c.Bad, fmt.Sprintf("group concurrency %d (want at least 1)", n))
		}
	})
}

// WithGroupRateLimit lets at most n deliveries of one group start per
// `per` across the fleet (as WithRateLimit, per group); other groups go
// on at full speed. A retry that kept its group's place is not held by it.
func WithGroupRateLimit(n int, per time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) {
		c.Limits.GroupRate, c.Limits.GroupRatePer = n, per
		if n < 1 || per <= 0 {
			c.Bad = append(c.Bad, fmt.Sprintf("group rate limit %d per %v", n, per))
		}
	})
}

// WithAdaptiveConcurrency lets this process's concurrency of the topic
// move between min and max (1 <= min <= max) in place of WithConcurrency's
// fixed number: it starts at min, grows while the handlers' latency holds,
// and shrinks when latency rises above its long-run level or handlers fail
// (a gradient limiter), so a topic whose downstream slows or fails takes
// fewer handlers and recovers when it does. The current limit is reported
// to rmq.Inspector.Stats (every client's), to an rmq.FlowObserver, and by
// rmqctl, the dashboard and the metrics modules. A per-process setting: it
// is not stored with the topic.
func WithAdaptiveConcurrency(min, max int) Option {
	return options.TopicFunc(func(c *options.Topic) {
		c.AdaptiveMin, c.AdaptiveMax = min, max
		if min < 1 || max < min {
			c.Bad = append(c.Bad, fmt.Sprintf("adaptive concurrency %d..%d (want 1 <= min <= max)", min, max))
		}
	})
}
