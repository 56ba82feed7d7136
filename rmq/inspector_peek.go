package rmq

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/internal/inspect"
	"github.com/rmq-go/rmq/topic"
)

// WaitingMessage is a message in a topic's store: not yet delivered, or
// back for a retry.
type WaitingMessage struct {
	ID    string
	Topic string
	Slot  int
	Body  []byte
	// Attempts is how many deliveries of it failed so far (0: fresh).
	Attempts  int
	LastError string
	// FirstSentAt is the first send's Redis time, as consumer.Message's.
	FirstSentAt time.Time
	// Score is the store score that orders it: the due time in ms for
	// time-based topics, else the priority (0..16 for a retry, which ranks
	// below every fresh message).
	Score float64
	// DueAt is when a time-based message is due (zero for priority topics).
	DueAt time.Time
	// Priority is the priority a priority message was sent with (zero for
	// time-based topics).
	Priority int64
	// InFlight is true when a delivery of the same id is being handled; this
	// message waits until that delivery ends.
	InFlight bool
}

// Peek returns up to limit waiting messages of t in the order consumers
// take them: earliest due first for time-based topics (those not yet due
// included), highest priority first for priority topics; equal scores go
// by slot. limit 0 means DefaultListLimit. It reads only a few entries per
// slot and the bodies of the messages it returns; it changes nothing.
func (i *Inspector) Peek(ctx context.Context, t topic.Topic, limit int) ([]WaitingMessage, error) {
	page, err := i.in.Peek(ctx, t, limit)
	return convertAll(page, err, func(m inspect.WaitingMessage) WaitingMessage { return WaitingMessage(m) })
}
