package consumer

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/topic"
)

// Message is one delivery of a message to a listener.
type Message struct {
	ID    string // the key given to WithKey, else derived from the body
	Topic string
	Slot  int
	Type  topic.Type
	Body  []byte
	// Attempt is 1 on the first delivery and grows with every failed one.
	Attempt int
	// DueAt is when a time-based message came due (the score it was fetched
	// at); zero for priority messages.
	DueAt time.Time
	// Priority is the priority a priority message was sent with.
	Priority int64
	// FirstSentAt is the Redis time of the first send of this message.
	// (A message the producer packed itself on a single node — a single
	// send without options, or one of a batch's group of 8 or more —
	// carries its estimate of Redis's clock, a lower bound within a round
	// trip of it.)
	FirstSentAt time.Time
	// FetchedAt is when this consumer received it.
	FetchedAt time.Time
	// LastError is the error the previous attempt failed with, if any.
	LastError string
	// Headers are the headers the message was sent with
	// (producer.WithHeaders); nil when none.
	Headers map[string]string
	// ExpiresAt is when the message expires (producer.WithTTL or
	// WithExpiresAt): not acked by then, it is dropped. Zero: never.
	ExpiresAt time.Time
	// MaxRetries is the message's own retry limit (producer.WithMaxRetries),
	// -1 when the consumer's applies.
	MaxRetries int
	// Token identifies this delivery. Ack and rollback are accepted only
	// while the slot's prepare entry carries it.
	Token int64
	// Epoch is the slot's owner epoch this delivery was fetched under
	// (ZooKeeper mode; 0 otherwise). It only grows when the slot changes
	// owner, so it is a fencing token for the systems a handler writes to:
	// store it with the write and refuse writes for the same key (or slot)
	// that carry a smaller epoch than one already seen. That stops a worker
	// frozen past its session (GC pause, SIGSTOP) from overwriting the work
	// of the slot's new owner when it wakes up.
	Epoch int64
	// Timeout is the message's own handler timeout (producer.WithTimeout);
	// zero when the consumer's (consumer.WithHandlerTimeout) applies.
	Timeout time.Duration
	// Group is the message's group (producer.WithGroup); empty when none.
	Group string

	// result is what SetResult set (life.go).
	result []byte
}

// MessageListener handles messages. Returning nil acks the delivery;
// returning an error or panicking rolls it back for a retry. The context is
// cancelled when the handler timeout passes, when the delivery's lease is
// lost (cause ErrLeaseLost), when the message is cancelled
// (rmq.Inspector.Cancel; cause rmq.ErrCancelled: the delivery then ends
// Cancelled, whatever the listener returns) and when Close gives up
// waiting.
type MessageListener interface {
	OnMessage(ctx context.Context, m *Message) error
}

// ListenerFunc adapts a function to MessageListener.
type ListenerFunc func(ctx context.Context, m *Message) error

// OnMessage calls f(ctx, m).
func (f ListenerFunc) OnMessage(ctx context.Context, m *Message) error { return f(ctx, m) }
