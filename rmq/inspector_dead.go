package rmq

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/internal/inspect"
	"github.com/rmq-go/rmq/topic"
)

// DeadMessage is a message of a topic's dead queue: it failed more often
// than its consumer's MaxRetries allowed, or its lease ran out that often.
type DeadMessage struct {
	ID    string
	Topic string
	Slot  int
	Body  []byte
	// Attempts is how many deliveries failed; the last moved it here.
	Attempts  int
	LastError string
	// FirstSentAt is the first send's Redis time, as consumer.Message's.
	FirstSentAt time.Time
	// DiedAt is when it moved to the dead queue (Redis's clock).
	DiedAt time.Time
	// DueAt is the due time a time-based message was sent with (zero for
	// priority topics).
	DueAt time.Time
	// Priority is the priority a priority message was sent with; Requeue
	// restores it (zero for time-based topics).
	Priority int64

	score float64 // the dead score: time of death in ms (the cursor keeps it exact)
}

// Cursor returns the cursor of a listing that continues after m: pass it
// to Dead with WithCursor to get the next page.
//
// A cursor names a position in the listing's order, not an offset: newest
// death first, then slot index, then id (descending). It holds the time of
// death, slot and id of m, so it stays valid while messages are added,
// requeued or deleted, and each page reads only about 2×limit entries
// whatever the size of the dead queue. A page then begins with the first
// message after that position that is still dead; messages that die while
// one pages through are newer than the cursor, so they do not show up
// (list again from the start to see them).
func (m DeadMessage) Cursor() string {
	return inspect.DeadMessage{DiedAt: m.DiedAt, Slot: m.Slot, ID: m.ID, Score: m.score}.Cursor()
}

func deadMessage(m inspect.DeadMessage) DeadMessage {
	return DeadMessage{
		ID: m.ID, Topic: m.Topic, Slot: m.Slot, Body: m.Body,
		Attempts: m.Attempts, LastError: m.LastError,
		FirstSentAt: m.FirstSentAt, DiedAt: m.DiedAt, DueAt: m.DueAt,
		Priority: m.Priority, score: m.Score,
	}
}

// Dead returns a page of t's dead queue, newest death first (ties by slot,
// then id descending). Without options it returns the newest 100; WithLimit
// sets the page size and WithCursor continues after the message a cursor
// came from (see DeadMessage.Cursor). A page shorter than its limit is the
// last one. Paging reads a few entries per slot and loads the bodies of the
// page only, so it works on dead queues of any size.
func (i *Inspector) Dead(ctx context.Context, t topic.Topic, opts ...ListOption) ([]DeadMessage, error) {
	page, err := i.in.Dead(ctx, t, listOptions(opts))
	return convertAll(page, err, deadMessage)
}

// DeadMessage returns the dead message with id, wherever its slot basis put
// it, or ErrMessageNotFound. Should dead messages with that id lie in
// several slots (sent with different slot bases), the newest is returned.
func (i *Inspector) DeadMessage(ctx context.Context, t topic.Topic, id string) (DeadMessage, error) {
	m, err := i.in.DeadMessage(ctx, t, id)
	if err != nil {
		return DeadMessage{}, err
	}
	return deadMessage(m), nil
}
