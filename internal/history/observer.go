package history

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/forwarding"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Observer is a client's own observer when history is on: it feeds the
// recorder from what the engines and the producer tell the client.
type Observer struct {
	R *Recorder
	// pushed are the registered topics (firing lateness from their
	// deliveries; a pulled delivery's comes from Pull), forwards those
	// whose listener is a forwarder (an ack is a forward); both written
	// by Register only.
	pushed, forwards sync.Map
	conc             atomic.Int64 // the registered topics' concurrency, summed
}

// Registered is told of a topic the client registered l for (a nil h:
// no history).
func (h *Observer) Registered(t topic.Topic, l consumer.MessageListener, concurrency int) {
	if h == nil {
		return
	}
	h.pushed.Store(t.Name(), true)
	if _, ok := l.(forwarding.Marker); ok {
		h.forwards.Store(t.Name(), true)
	}
	h.conc.Add(int64(concurrency))
}

// Sent counts a send (a repeated script run is not one).
func (h *Observer) Sent(t topic.Topic, result producer.SendResult) {
	if result != producer.SendDuplicate {
		h.R.Add(t.Name(), Sent, 1)
	}
}

// Delivered counts a delivery in flight and, for a pushed time-based
// one, its firing lateness.
func (h *Observer) Delivered(m *consumer.Message) {
	h.R.inFlight.Add(1)
	if _, ok := h.pushed.Load(m.Topic); ok && !m.DueAt.IsZero() {
		h.R.Late(m.Topic, m.FetchedAt.Sub(m.DueAt))
	}
}

// Finished counts how a delivery ended and its handler time.
func (h *Observer) Finished(m *consumer.Message, took time.Duration, outcome consumer.Outcome, _ error) {
	h.end(m.Topic, max(took, 0), outcome)
}

// EndedByID counts how a delivery ended that an AckByID or NackByID ended
// (rmqd's acks and nacks), as Finished does without the handler time; a
// nil h (no history) counts nothing.
func (h *Observer) EndedByID(topic string, outcome consumer.Outcome) {
	if h != nil {
		h.end(topic, -1, outcome)
	}
}

// end counts a delivery's end in one step of the recorder. Expired
// deliveries are counted by Expired (the engine tells both); cancelled
// messages by Inspector.Cancel, which sees every one.
func (h *Observer) end(topic string, took time.Duration, outcome consumer.Outcome) {
	h.R.inFlight.Add(-1)
	c1, c2 := Counter(-1), Counter(-1)
	switch outcome {
	case consumer.Acked:
		c1 = Completed
		if _, ok := h.forwards.Load(topic); ok {
			c2 = Forwarded
		}
	case consumer.Retried:
		c1 = Retried
	case consumer.Dead:
		c1 = Dead
	}
	h.R.End(topic, took, c1, c2)
}

// LeasesExpired counts the sweeper's rollbacks: retried, or dead.
func (h *Observer) LeasesExpired(topic string, rolledBack, dead int) {
	h.R.Add(topic, Retried, int64(rolledBack-dead))
	h.R.Add(topic, Dead, int64(dead))
}

// Expired counts expired messages.
func (h *Observer) Expired(topic string, n int) { h.R.Add(topic, Expired, int64(n)) }

// Pulled records the firing lateness of pulled deliveries: only those that
// came due while the Pull waited (one due before the call waited for a
// caller, not for its time), as late as they were handed out. An
// undelayed message is due when it was sent.
func (h *Observer) Pulled(arrived time.Time, n int, msg func(int) *consumer.Message) {
	if h == nil {
		return
	}
	now := time.Now()
	for i := range n {
		d := msg(i)
		due := d.DueAt
		if due.IsZero() {
			continue
		}
		if d.FirstSentAt.After(due) {
			due = d.FirstSentAt
		}
		if due.After(arrived) {
			h.R.Late(d.Topic, now.Sub(due))
		}
	}
}

// Close closes the recorder (a nil h: none).
func (h *Observer) Close(ctx context.Context) {
	if h != nil {
		h.R.Close(ctx)
	}
}

// Removed is not counted.
func (h *Observer) Removed(topic.Topic, bool) {}

// Concurrency returns the registered topics' concurrency, summed.
func (h *Observer) Concurrency() int { return int(h.conc.Load()) }
