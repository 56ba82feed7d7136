package dashboard

// This file maps the Inspector's topic statistics, pause and resume, and
// Inspector.Message onto what the pages show.

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// pauseAvailable says whether the pause and resume actions are offered.
const pauseAvailable = true

// topicStats is rmq.Stats with the dashboard's notion of delayed.
type topicStats struct {
	rmq.Stats
	// Delayed counts waiting messages that are not due yet: in store with a
	// later due time (time-based topics), or in the delayed set (priority
	// topics sent with a delay, or retries in their backoff). Messages that
	// wait in their groups (Stats.Grouped) are counted there, not here.
	Delayed int64
}

func (h *handler) stats(ctx context.Context, t topic.Topic) (topicStats, error) {
	st, err := h.insp.Stats(ctx, t)
	if err != nil {
		return topicStats{}, err
	}
	ts := topicStats{Stats: st, Delayed: st.Delayed}
	if t.Type().TimeBased() {
		ts.Delayed += st.Store - st.Grouped - st.Due
	}
	return ts, nil
}

func (h *handler) pause(ctx context.Context, t topic.Topic) error  { return h.insp.Pause(ctx, t) }
func (h *handler) resume(ctx context.Context, t topic.Topic) error { return h.insp.Resume(ctx, t) }

// Message states shown on the message page.
const (
	stateWaiting  = "waiting"
	stateDelayed  = "delayed"
	stateInFlight = "in flight"
	stateDead     = "dead"
	// A retaining topic's finished messages (rmq.Lifecycle.Retention).
	stateCompleted = "completed"
	stateCancelled = "cancelled"
)

var stateNames = map[rmq.MessageState]string{
	rmq.StateWaiting:   stateWaiting,
	rmq.StateDelayed:   stateDelayed,
	rmq.StateInFlight:  stateInFlight,
	rmq.StateDead:      stateDead,
	rmq.StateCompleted: stateCompleted,
	rmq.StateCancelled: stateCancelled,
}

// messageInfo is one message in any state, as the message page shows it.
type messageInfo struct {
	ID, Topic string
	Slot      int
	States    []string
	Body      []byte
	Headers   map[string]string
	Attempts  int
	LastError string
	FirstSent time.Time
	// Due is when a time-based message is due, or a delayed one enters the
	// competition by priority; Priority the priority of a priority message.
	Due      time.Time
	Priority int64
	// Lease is the lease deadline of an in-flight delivery, Attempt its
	// attempt number.
	Lease   time.Time
	Attempt int
	Died    time.Time
	// The per-message options it was sent with (zero: the consumer's).
	MaxRetries int // -1: the consumer's
	Expires    time.Time
	Timeout    time.Duration
	// Result is what its handler set (completed), Progress the latest
	// progress of its delivery in flight, Finished when it completed or
	// was cancelled.
	Result, Progress []byte
	Finished         time.Time
}

// errMessageNotFound is what message answers for an id in no state.
var errMessageNotFound = rmq.ErrMessageNotFound

func (h *handler) message(ctx context.Context, t topic.Topic, id string) (messageInfo, error) {
	mi, err := h.insp.Message(ctx, t, id)
	if err != nil {
		return messageInfo{}, err
	}
	m := messageInfo{
		ID: mi.ID, Topic: t.Name(), Slot: mi.Slot, States: []string{stateNames[mi.State]},
		Body: mi.Body, Headers: mi.Headers, Attempts: mi.Attempts, LastError: mi.LastError,
		FirstSent: mi.FirstSentAt, Due: mi.Due, Priority: mi.Priority,
		Lease: mi.LeaseUntil, Died: mi.DiedAt,
		MaxRetries: mi.MaxRetries, Expires: mi.ExpiresAt, Timeout: mi.Timeout,
		Result: mi.Result, Progress: mi.Progress, Finished: mi.FinishedAt,
	}
	if mi.State == rmq.StateInFlight {
		m.Attempt = mi.Attempts + 1
	}
	return m, nil
}

// removeWaiting removes a waiting (or delayed) message.
func (h *handler) removeWaiting(ctx context.Context, t topic.Topic, id string) (bool, error) {
	return h.insp.Remove(ctx, t, id)
}
