package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/internal/options"
)

// A message's life after hand-off: its result, stored with the ack of the
// delivery that completed it, and its progress, stored on the in-flight
// message while a handler works on it. A topic that retains finished
// messages (WithRetention) keeps them readable with their result; one with
// an event log (WithEvents) records every transition. The settings stored
// with the topic win over these options, as its limits do.

// Sizes a result and a progress may have.
const (
	MaxResultSize   = 1 << 20
	MaxProgressSize = 64 << 10
)

var (
	// ErrResultTooLarge is returned by SetResult for a result over
	// MaxResultSize.
	ErrResultTooLarge = errors.New("rmq: result too large")
	// ErrProgressTooLarge is returned by SetProgress for a progress over
	// MaxProgressSize.
	ErrProgressTooLarge = errors.New("rmq: progress too large")
	// ErrNotCurrent is returned by SetProgress when the delivery is no
	// longer the current one (it was cancelled, swept or fenced), or when
	// the context is not a handler's.
	ErrNotCurrent = errors.New("rmq: the delivery is no longer current")
)

// WithRetention keeps finished messages (completed, cancelled) readable,
// with their result, for d after they finished; 0 (the default): none.
// Whole milliseconds up to 30 days.
func WithRetention(d time.Duration) Option {
	return options.TopicFunc(func(c *options.Topic) { c.Retention = d })
}

// WithEvents makes the topic record every transition of its messages in
// its event log, keeping about the last maxLen of each slot; 0 (the
// default): no log.
func WithEvents(maxLen int) Option {
	return options.TopicFunc(func(c *options.Topic) { c.Events = maxLen })
}

// SetResult sets the result stored with this delivery's ack: a topic that
// retains finished messages keeps it with the message's record, and a
// waiter of the message receives it. b is copied. A delivery that is not
// acked (an error, a cancel) stores no result.
func (m *Message) SetResult(b []byte) error {
	if len(b) > MaxResultSize {
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrResultTooLarge, len(b), MaxResultSize)
	}
	m.result = append([]byte{}, b...)
	return nil
}

// Result returns the result SetResult set, nil when none.
func (m *Message) Result() []byte { return m.result }

// SetProgress stores progress as the latest progress of this delivery,
// readable while the message is in flight (and recorded in the event log
// of a topic that keeps one). ctx must be the handler's context (or one
// derived from it). It returns an error wrapping ErrNotCurrent when the
// delivery is no longer current (cancelled, swept, fenced) or ctx is not
// a handler's, and ErrProgressTooLarge for more than MaxProgressSize.
func (m *Message) SetProgress(ctx context.Context, progress []byte) error {
	f := options.ProgressFrom(ctx)
	if f == nil {
		return fmt.Errorf("%w: not a handler's context", ErrNotCurrent)
	}
	if len(progress) > MaxProgressSize {
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrProgressTooLarge, len(progress), MaxProgressSize)
	}
	return f(ctx, m.Slot, m.ID, m.Token, progress)
}
