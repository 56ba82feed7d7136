package rmq

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/internal/inspect"
	"github.com/rmq-go/rmq/topic"
)

// Pause stops every consumer of t, in every process, from fetching: the
// state is stored in Redis (so consumers that start later see it) and told
// to running consumers through each slot's wake channel, so they stop
// within the time a published message takes to arrive (no polling).
// Deliveries in flight finish; sends are still accepted. Pulls of t return
// nothing while it is paused.
func (i *Inspector) Pause(ctx context.Context, t topic.Topic) error {
	return i.in.Pause(ctx, t)
}

// Resume undoes Pause: consumers fetch again at once.
func (i *Inspector) Resume(ctx context.Context, t topic.Topic) error {
	return i.in.Resume(ctx, t)
}

// Paused reports whether t is paused.
func (i *Inspector) Paused(ctx context.Context, t topic.Topic) (bool, error) {
	return i.in.Paused(ctx, t)
}

// MessageState is where a message is.
type MessageState string

// Message states.
const (
	StateWaiting  MessageState = "waiting"   // in store, or in its group's queue: due (or ranked by priority)
	StateDelayed  MessageState = "delayed"   // waiting for its time (priority)
	StateInFlight MessageState = "in_flight" // being handled under a lease
	StateDead     MessageState = "dead"      // in the dead queue
)

// MessageInfo is one message as the Inspector sees it, in any state.
type MessageInfo struct {
	ID    string
	Topic topic.Topic
	Slot  int
	State MessageState
	Body  []byte
	// Headers, MaxRetries (-1: the consumer's), ExpiresAt and Timeout are
	// the per-message options it was sent with.
	Headers    map[string]string
	MaxRetries int
	ExpiresAt  time.Time
	Timeout    time.Duration
	Attempts   int // failed attempts so far
	Snoozes    int
	// Due is when it is (or was) due: its due time for time-based types,
	// the end of its wait in the delayed set; zero for a priority message
	// that competes by priority now.
	Due         time.Time
	Priority    int64 // priority type: as sent
	FirstSentAt time.Time
	LastError   string
	LeaseUntil  time.Time // in flight: the lease's end (whole seconds)
	DiedAt      time.Time // dead: the time of death
	Group       string    // its group (producer.WithGroup); "" for none
	// Result is what its handler set (StateCompleted); Progress the latest
	// progress its delivery in flight reported; FinishedAt when it
	// completed or was cancelled. A topic retains finished messages only
	// with Lifecycle.Retention.
	Result     []byte
	Progress   []byte
	FinishedAt time.Time
}

// Message returns one message of t in any state, or ErrMessageNotFound. A message
// sent while a delivery of its id runs is reported as waiting (its
// envelope is the new send's). A topic that retains (Lifecycle) answers
// for a finished message too, StateCompleted or StateCancelled, until its
// retention has passed.
func (i *Inspector) Message(ctx context.Context, t topic.Topic, id string) (MessageInfo, error) {
	m, err := i.in.Message(ctx, t, id)
	if err != nil {
		return MessageInfo{}, err
	}
	return messageInfo(m), nil
}

func messageInfo(m inspect.MessageInfo) MessageInfo {
	return MessageInfo{
		ID: m.ID, Topic: m.Topic, Slot: m.Slot, State: MessageState(m.State), Body: m.Body,
		Headers: m.Headers, MaxRetries: m.MaxRetries, ExpiresAt: m.ExpiresAt, Timeout: m.Timeout,
		Attempts: m.Attempts, Snoozes: m.Snoozes, Due: m.Due, Priority: m.Priority,
		FirstSentAt: m.FirstSentAt, LastError: m.LastError, LeaseUntil: m.LeaseUntil,
		DiedAt: m.DiedAt, Group: m.Group, Result: m.Result, Progress: m.Progress, FinishedAt: m.FinishedAt,
	}
}
