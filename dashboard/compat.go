package dashboard

// This file holds every call to the API of the "Jobs" issue (pause and
// resume, delayed counts, headers, Inspector.Message), which is not in main
// yet: until it is, the functions below are stand-ins built on what the
// library has, so the package compiles and the rest is tested. Wiring the
// real calls changes this file only.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// errNotAvailable is what pause and resume answer until the library has
// them.
var errNotAvailable = errors.New("dashboard: not available in this version of the library")

// pauseAvailable says whether the pause and resume actions are offered.
const pauseAvailable = false

// topicStats is rmq.Stats with what the Jobs issue adds to it.
type topicStats struct {
	rmq.Stats
	Paused bool
	// Delayed counts waiting messages not due yet (time-based topics) or
	// held back by a delay or backoff (priority topics).
	Delayed int64
}

func (h *handler) stats(ctx context.Context, t topic.Topic) (topicStats, error) {
	st, err := h.insp.Stats(ctx, t)
	if err != nil {
		return topicStats{}, err
	}
	ts := topicStats{Stats: st}
	if t.Type().TimeBased() {
		ts.Delayed = st.Store - st.Due
	}
	return ts, nil
}

func (h *handler) pause(ctx context.Context, t topic.Topic) error  { return errNotAvailable }
func (h *handler) resume(ctx context.Context, t topic.Topic) error { return errNotAvailable }

// Message states shown on the message page.
const (
	stateWaiting  = "waiting"
	stateDelayed  = "delayed"
	stateInFlight = "in flight"
	stateDead     = "dead"
)

// messageInfo is one message in any state.
type messageInfo struct {
	ID, Topic string
	Slot      int
	States    []string
	Body      []byte
	Headers   map[string]string
	Attempts  int
	LastError string
	FirstSent time.Time
	// Due is the due time of a waiting time-based message (zero otherwise);
	// Priority the priority of a priority message.
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
	// BodyHidden is true when the library gives no way to read the body
	// (a live message, until Inspector.Message).
	BodyHidden bool
}

// errMessageNotFound is what message answers for an id in no state.
var errMessageNotFound = rmq.ErrMessageNotFound

// message finds id in every state. Stand-in for Inspector.Message: the
// dead queue through Inspector.DeadMessage, the live sets read directly.
func (h *handler) message(ctx context.Context, t topic.Topic, id string) (messageInfo, error) {
	if _, err := h.insp.Topic(ctx, t.Name()); err != nil {
		return messageInfo{}, err
	}
	m := messageInfo{ID: id, Topic: t.Name(), MaxRetries: -1}
	n := t.SlotAmount()
	store := make([]*redis.FloatCmd, n)
	prep := make([]*redis.FloatCmd, n)
	body := make([]*redis.BoolCmd, n)
	pipe := h.rdb.Pipeline()
	for s := range n {
		k := slots.KeysFor(h.cfg.keyPrefix, t, s)
		store[s] = pipe.ZScore(ctx, k.Store, id)
		prep[s] = pipe.ZScore(ctx, k.Prepare, id)
		body[s] = pipe.HExists(ctx, k.Msg, id)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return messageInfo{}, err
	}
	// Without Inspector.Message the envelope of a live message (body,
	// attempts, first send, last error) cannot be read here: only what its
	// sorted-set scores say is shown.
	live := false
	for s := range n {
		if !body[s].Val() {
			continue
		}
		live = true
		m.Slot, m.BodyHidden = s, true
		if sc, err := store[s].Result(); err == nil {
			m.States = append(m.States, stateWaiting)
			if t.Type().TimeBased() {
				m.Due = time.UnixMilli(int64(sc))
			} else {
				m.Priority = int64(sc)
			}
		}
		if sc, err := prep[s].Result(); err == nil {
			m.States = append(m.States, stateInFlight)
			m.Lease, m.Attempt = splitPrepareScore(sc)
		}
		break
	}
	d, err := h.insp.DeadMessage(ctx, t, id)
	switch {
	case err == nil:
		m.States = append(m.States, stateDead)
		m.Died = d.DiedAt
		if !live {
			m.Slot, m.Body, m.Attempts, m.LastError = d.Slot, d.Body, d.Attempts, d.LastError
			m.BodyHidden = false
			m.FirstSent, m.Due, m.Priority = d.FirstSentAt, d.DueAt, d.Priority
		}
	case !errors.Is(err, rmq.ErrMessageNotFound):
		return messageInfo{}, err
	case !live:
		return messageInfo{}, fmt.Errorf("%w: no message %q in %s", errMessageNotFound, id, t.Name())
	}
	return m, nil
}

// removeWaiting removes a waiting message.
func (h *handler) removeWaiting(ctx context.Context, t topic.Topic, id string) (bool, error) {
	return h.insp.Remove(ctx, t, id)
}

// Removed implements rmq.Observer; removals are not charted. (The Jobs API
// changes its second parameter to producer.Removed.)
func (c *Counters) Removed(topic.Topic, bool) {}
