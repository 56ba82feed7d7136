package rmq

import (
	"context"
	"iter"
	"time"

	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/topic"
)

// A job's life after hand-off: what a topic keeps of its finished
// messages (Lifecycle), waiting for one to finish (Client.Wait),
// cancelling one (Inspector.Cancel) and following a topic's transitions
// (Client.Events). The Redis work is internal/inspect's and
// internal/life's.

// States of a finished message a topic retains (Lifecycle.Retention).
const (
	StateCompleted MessageState = "completed" // acked; Result is what its handler set
	StateCancelled MessageState = "cancelled" // cancelled (Inspector.Cancel)
)

var (
	// ErrDead is Client.Wait's error for a message that went to the dead
	// queue; its MessageInfo's LastError says why.
	ErrDead = life.ErrDead
	// ErrCancelled is Client.Wait's error for a cancelled message, and the
	// cause (context.Cause) of a cancelled handler's context.
	ErrCancelled = life.ErrCancelled
	// ErrInvalidLifecycle is returned by SetLifecycle for settings out of
	// bounds (retention below 0, above 30 days or not whole ms; events
	// below 0 or above 10,000,000); nothing is stored.
	ErrInvalidLifecycle = life.ErrInvalidSettings
	// ErrInvalidEventCursor is yielded by Client.Events for an after that
	// is neither "", "0" nor an Event's Cursor of the same topic. It is not
	// ErrInvalidCursor, which is about the Inspector's listings.
	ErrInvalidEventCursor = life.ErrInvalidCursor
)

// Lifecycle is what a topic keeps of its messages' life after hand-off,
// stored with the topic like its Limits: the stored settings win over
// what the consumers' options ask for (consumer.WithRetention), and a
// consumer's options are stored only when none are.
type Lifecycle struct {
	// Retention is how long a completed or cancelled message stays
	// readable (Inspector.Message, Client.Wait) with its result; 0: not
	// at all.
	Retention time.Duration
	// Events is about how many events each slot's log keeps
	// (Client.Events); 0: no log.
	Events int
}

// SetLifecycle stores t's lifecycle settings, replacing the stored ones,
// and tells its running consumers, which apply them from their next
// delivery. A zero Lifecycle is stored too: it turns retention and the
// event log off whatever the consumers' options ask for. Settings out of
// bounds are refused with ErrInvalidLifecycle and nothing is written.
func (i *Inspector) SetLifecycle(ctx context.Context, t topic.Topic, l Lifecycle) error {
	return i.in.SetLifecycle(ctx, t, life.Settings(l))
}

// Lifecycle returns t's stored lifecycle settings (zero when none are
// stored).
func (i *Inspector) Lifecycle(ctx context.Context, t topic.Topic) (Lifecycle, error) {
	s, err := i.in.Lifecycle(ctx, t)
	return Lifecycle(s), err
}

// Cancel cancels a message wherever it waits or runs: it is removed with
// its body (a waiting one never runs; an in-flight delivery's handler
// sees its context cancelled with cause ErrCancelled, and its ack,
// rollback and extend are refused), its waiters get ErrCancelled, the
// event log records "cancelled", and a retaining topic keeps it as
// StateCancelled. A flow's parent waiting for its children never runs:
// they run on, and its own parent sees it cancelled (docs/flows.md). It
// returns false, and writes nothing, for an id that neither waits nor
// runs (unknown, finished, or dead: see DeleteDead).
func (i *Inspector) Cancel(ctx context.Context, t topic.Topic, id string) (bool, error) {
	return i.in.Cancel(ctx, t, id)
}

// Wait returns when the message id of t finishes: completed (a nil
// error; Result is what its handler set), dead (ErrDead; LastError says
// why) or cancelled (ErrCancelled). A message that finished before the
// call is seen while its topic retains it (Lifecycle.Retention) or while
// it is dead; an id never sent, one no longer retained, or one that
// expired is ErrMessageNotFound. ctx ends the wait.
//
// The client is told, not polling: its waits share one subscription per
// topic slot, and Redis spends nothing on them while nothing they wait
// for finishes. Wait works on a client that was never started (a service
// that only waits) and until Close (then ErrClosed).
func (c *Client) Wait(ctx context.Context, t topic.Topic, id string) (MessageInfo, error) {
	w, closing, err := c.waiter()
	if err != nil {
		return MessageInfo{}, err
	}
	// Close ends the waits under way with ErrClosed.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(closing, func() { cancel(ErrClosed) })
	defer stop()
	m, err := c.Inspector().in.Wait(ctx, w, t, id)
	if err != nil && context.Cause(ctx) == ErrClosed {
		return MessageInfo{}, ErrClosed
	}
	if m.ID == "" {
		return MessageInfo{}, err
	}
	return messageInfo(m), err
}

// waitState is the client's Waiter, made on first Wait, and the context
// Close cancels to end the waits under way.
type waitState struct {
	w    *life.Waiter
	ctx  context.Context
	stop context.CancelFunc
}

// waiter returns the client's Waiter and its context, made on first use.
func (c *Client) waiter() (*life.Waiter, context.Context, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase == lifecycle.Closed {
		return nil, nil, ErrClosed
	}
	if c.waits.w == nil {
		c.waits.w = life.NewWaiter(c.rdb)
		c.waits.ctx, c.waits.stop = context.WithCancel(context.Background())
	}
	return c.waits.w, c.waits.ctx, nil
}

// closeWaiter ends the waits under way (ErrClosed) and their
// subscriptions, and waits for the Waiter's goroutines (Close, after the
// phase moved to Closed: no Wait makes another).
func (c *Client) closeWaiter() {
	c.mu.Lock()
	ws := c.waits
	c.mu.Unlock()
	if ws.w != nil {
		ws.stop()
		ws.w.Close()
	}
}

// EventType is what happened to a message (Event.Type).
type EventType string

// Event types.
const (
	EventSent      EventType = "sent"      // sent (accepted into the topic)
	EventDelivered EventType = "delivered" // handed to a handler (an attempt began)
	EventProgress  EventType = "progress"  // its handler reported progress (Data)
	EventCompleted EventType = "completed" // acked (Data: the result)
	EventRetried   EventType = "retried"   // an attempt failed; it waits for another (Data: the error)
	EventDead      EventType = "dead"      // moved to the dead queue (Data: the error)
	EventRemoved   EventType = "removed"   // removed (Producer.Remove, Inspector.Remove)
	EventExpired   EventType = "expired"   // its expiry passed; dropped
	EventCancelled EventType = "cancelled" // cancelled (Inspector.Cancel)
)

// Event is one recorded transition of a message of a topic with an event
// log (Lifecycle.Events).
type Event struct {
	Cursor    string // opaque; pass as after to resume right after this event
	Type      EventType
	MessageID string
	Attempt   int
	Time      time.Time // Redis's clock
	Data      []byte    // the result (completed), progress (progress), error text (retried, dead)
}

// Events yields t's events after the position after names: "" only
// events recorded from now on, "0" from the oldest each slot's log keeps,
// else an Event's Cursor (resuming right after it). It blocks for new
// events (no polling), goes on across Redis restarts and failovers, and
// ends when ctx ends (yielding ctx's error) or the caller stops ranging.
// The events of one message come in order; those of different slots
// interleave. A bad after yields one error wrapping ErrInvalidEventCursor.
func (c *Client) Events(ctx context.Context, t topic.Topic, after string) iter.Seq2[Event, error] {
	seq := c.Inspector().in.Events(ctx, t, after)
	return func(yield func(Event, error) bool) {
		for e, err := range seq {
			if !yield(Event{Cursor: e.Cursor, Type: EventType(e.Type), MessageID: e.MessageID,
				Attempt: e.Attempt, Time: e.Time, Data: e.Data}, err) {
				return
			}
		}
	}
}
