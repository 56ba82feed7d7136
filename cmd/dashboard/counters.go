package dashboard

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Counters counts, per topic, what one process's rmq.Client does: messages
// sent, deliveries acked, retried and dead, and how late time-based
// messages were delivered. Redis holds queue depths but no such counters,
// so the rate charts of sent, acked and retried per second and the
// firing-lateness histogram need one: attach it to the client with
// rmq.WithObserver and give it to the dashboard with WithCounters.
//
// It sees only the client it is attached to. A fleet of processes shows
// the rates of the process serving the dashboard; use the Prometheus or
// OpenTelemetry integration (x/prometheus, x/otel) for fleet-wide rates.
type Counters struct {
	mu     sync.Mutex
	topics map[string]*topicCounters
	// firedOnly: lateness comes from Fired only, not from deliveries.
	firedOnly bool
}

// CountersOption configures NewCounters.
type CountersOption func(*Counters)

// LatenessFromFired makes Counters take the firing lateness only from
// Fired, not from the client's deliveries. A client that only pulls (an
// HTTP service such as rmqd) fetches a message when a caller asks, which
// says when the caller came, not how late the message fired: such a
// service calls Fired for the messages that came due while a caller
// waited for them.
func LatenessFromFired() CountersOption { return func(c *Counters) { c.firedOnly = true } }

// latenessEdges are the upper edges of the firing-lateness buckets; a last
// bucket holds the rest.
var latenessEdges = []time.Duration{
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second,
}

var latenessLabels = []string{"≤ 1 ms", "1 – 5 ms", "5 – 10 ms", "10 – 50 ms", "50 – 100 ms",
	"100 – 500 ms", "0.5 – 1 s", "1 – 5 s", "5 – 30 s", "> 30 s"}

type topicCounters struct {
	sent, acked, retried, dead atomic.Int64
	late                       [10]atomic.Int64 // one per latenessLabels
}

var _ rmq.Observer = (*Counters)(nil)

// NewCounters returns counters at zero.
func NewCounters(opts ...CountersOption) *Counters {
	c := &Counters{topics: map[string]*topicCounters{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Fired counts one firing of a message of topicName, late after its due
// time (0 or less: on time), in the firing-lateness histogram.
func (c *Counters) Fired(topicName string, late time.Duration) {
	c.of(topicName).fired(late)
}

func (tc *topicCounters) fired(late time.Duration) {
	b := len(latenessEdges)
	for j, edge := range latenessEdges {
		if late <= edge {
			b = j
			break
		}
	}
	tc.late[b].Add(1)
}

func (c *Counters) of(name string) *topicCounters {
	c.mu.Lock()
	defer c.mu.Unlock()
	tc, ok := c.topics[name]
	if !ok {
		tc = &topicCounters{}
		c.topics[name] = tc
	}
	return tc
}

// Sent counts a send (rmq.Observer); a repeated script run is not a send.
func (c *Counters) Sent(t topic.Topic, r producer.SendResult) {
	if r != producer.SendDuplicate {
		c.of(t.Name()).sent.Add(1)
	}
}

// Removed implements rmq.Observer; removals are not charted.
func (c *Counters) Removed(topic.Topic, bool) {}

// Delivered records how late a time-based delivery was (rmq.Observer),
// unless LatenessFromFired.
func (c *Counters) Delivered(m *consumer.Message) {
	if m.DueAt.IsZero() || c.firedOnly {
		return
	}
	c.of(m.Topic).fired(m.FetchedAt.Sub(m.DueAt))
}

// Finished counts acked, retried and dead deliveries (rmq.Observer).
func (c *Counters) Finished(m *consumer.Message, _ time.Duration, outcome consumer.Outcome, _ error) {
	c.EndedByID(m.Topic, outcome)
}

// EndedByID counts a delivery an ack or nack by id ended, as Finished
// counts a pushed one (rmq.ByIDObserver): rmqd's HTTP acks end theirs so,
// and its charts count them.
func (c *Counters) EndedByID(topic string, outcome consumer.Outcome) {
	switch outcome {
	case consumer.Acked:
		c.of(topic).acked.Add(1)
	case consumer.Retried:
		c.of(topic).retried.Add(1)
	case consumer.Dead:
		c.of(topic).dead.Add(1)
	}
}

// LeasesExpired counts the sweeper's rollbacks as retried or dead
// (rmq.Observer).
func (c *Counters) LeasesExpired(topic string, rolledBack, dead int) {
	tc := c.of(topic)
	tc.retried.Add(int64(rolledBack - dead))
	tc.dead.Add(int64(dead))
}

// counts is a copy of one topic's counters.
type counts struct {
	Sent, Acked, Retried, Dead int64
	Late                       [10]int64
}

func (c *Counters) snapshot(name string) counts {
	c.mu.Lock()
	tc, ok := c.topics[name]
	c.mu.Unlock()
	if !ok {
		return counts{}
	}
	out := counts{Sent: tc.sent.Load(), Acked: tc.acked.Load(), Retried: tc.retried.Load(), Dead: tc.dead.Load()}
	for j := range tc.late {
		out.Late[j] = tc.late[j].Load()
	}
	return out
}
