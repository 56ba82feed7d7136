package consumer

import "time"

// Outcome is how a delivery ended.
type Outcome int

const (
	// Acked: the listener returned nil and Redis took the ack.
	Acked Outcome = iota + 1
	// Retried: rolled back into store for another attempt.
	Retried
	// Dead: rolled back past MaxRetries into the dead queue.
	Dead
	// Superseded: rolled back while a re-send of the same id waited; the
	// re-send goes next.
	Superseded
	// Refused: Redis refused the ack or rollback because the delivery was
	// no longer current (its lease ran out and was swept).
	Refused
	// LeaseLost: the lease was found lost while the handler ran.
	LeaseLost
	// Abandoned: Close's deadline passed; the delivery was rolled back.
	Abandoned
	// Failed: the ack or rollback could not reach Redis; the lease will run
	// out and the sweeper will roll it back.
	Failed
	// Fenced: Redis refused the ack or rollback because the slot's owner
	// epoch moved on: another worker owns the slot now (ZooKeeper mode).
	Fenced
	// Revoked: the slot's ownership was lost while the handler ran and the
	// handler failed; the message stays in prepare and the slot's next term
	// returns it to store without counting an attempt (ZooKeeper mode).
	Revoked
	// Expired: the handler failed after the message's expiry
	// (producer.WithTTL): dropped with its body instead of retried.
	Expired
	// Snoozed: the handler returned Snooze; the message waits again
	// without an attempt counted.
	Snoozed
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Retried:
		return "retried"
	case Dead:
		return "dead"
	case Superseded:
		return "superseded"
	case Refused:
		return "refused"
	case LeaseLost:
		return "lease_lost"
	case Abandoned:
		return "abandoned"
	case Failed:
		return "failed"
	case Fenced:
		return "fenced"
	case Revoked:
		return "revoked"
	case Expired:
		return "expired"
	case Snoozed:
		return "snoozed"
	}
	return "unknown"
}

// Observer is told what a consumer does, for metrics. Methods are called
// synchronously from the client's consumer goroutines (Finished of an
// acked pushed delivery from the goroutine that ran its ack round, which
// serves every topic of the client) and must not block: a
// slow observer delays other deliveries, and one that closes a topic or
// the client may deadlock.
type Observer interface {
	// Delivered is called when a fetched message is handed to a handler.
	Delivered(m *Message)
	// Finished is called once per delivery, with how long the handler ran.
	Finished(m *Message, took time.Duration, outcome Outcome)
	// LeasesExpired is called when the sweeper rolled back expired leases
	// of topic: rolledBack in all, of which dead moved to the dead queue.
	LeasesExpired(topic string, rolledBack, dead int)
}

// WithObserver adds an observer (default: none). Several observers (the
// client's metrics and the caller's own, say) are all told, in order.
func WithObserver(o Observer) Option {
	return func(c *config) {
		if o == nil {
			c.observer = nil // refused by New
			return
		}
		switch cur := c.observer.(type) {
		case nil, nopObserver:
			c.observer = o
		case multiObserver:
			c.observer = append(cur, o)
		default:
			c.observer = multiObserver{cur, o}
		}
	}
}

type multiObserver []Observer

func (m multiObserver) Delivered(msg *Message) {
	for _, o := range m {
		o.Delivered(msg)
	}
}

func (m multiObserver) Finished(msg *Message, took time.Duration, outcome Outcome) {
	for _, o := range m {
		o.Finished(msg, took, outcome)
	}
}

func (m multiObserver) LeasesExpired(topic string, rolledBack, dead int) {
	for _, o := range m {
		o.LeasesExpired(topic, rolledBack, dead)
	}
}

type nopObserver struct{}

func (nopObserver) Delivered(*Message)                        {}
func (nopObserver) Finished(*Message, time.Duration, Outcome) {}
func (nopObserver) LeasesExpired(string, int, int)            {}
