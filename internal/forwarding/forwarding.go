// Package forwarding is what the three forwarders (x/forward/nats, amqp,
// kafka) share: the headers a forwarded message carries, the options every
// forwarder takes, and the window that bounds the publishes awaiting a
// broker's confirm. Each forwarder module imports it; users never do.
package forwarding

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/consumer"
)

// The headers every forwarded message carries besides the message's own.
// They win over a message header or an extra header of the same name, so
// a broker-side consumer can trust them.
const (
	HeaderID      = "rmq-id"      // the RMQ message id: the deduplication key
	HeaderTopic   = "rmq-topic"   // the RMQ topic the message was sent to
	HeaderDueAt   = "rmq-due-at"  // RFC 3339 UTC with milliseconds; absent for priority messages
	HeaderAttempt = "rmq-attempt" // 1 on the first delivery, +1 per failed one
)

// DueAtLayout is the layout of HeaderDueAt.
const DueAtLayout = "2006-01-02T15:04:05.000Z07:00"

// Defaults of the options every forwarder takes.
const (
	DefaultPublishTimeout = 5 * time.Second
	DefaultWindow         = 256
)

// Config holds the options every forwarder takes.
type Config struct {
	// Headers maps a message to extra broker headers; nil: none.
	Headers func(*consumer.Message) map[string]string
	// PublishTimeout bounds one publish, from the wait for a window slot to
	// the broker's confirm.
	PublishTimeout time.Duration
	// Window is how many publishes may await the broker's confirm at once,
	// counting those a timed-out OnMessage left behind.
	Window int
}

// DefaultConfig is the configuration without options.
func DefaultConfig() Config {
	return Config{PublishTimeout: DefaultPublishTimeout, Window: DefaultWindow}
}

// Validate checks the options; pkg prefixes the error ("rmqnats").
func (c Config) Validate(pkg string) error {
	switch {
	case c.PublishTimeout <= 0:
		return fmt.Errorf("%s: %w: publish timeout %v (want > 0)", pkg, consumer.ErrInvalidOption, c.PublishTimeout)
	case c.Window < 1:
		return fmt.Errorf("%s: %w: window %d (want at least 1)", pkg, consumer.ErrInvalidOption, c.Window)
	}
	return nil
}

// HeadersOf returns the headers a forwarded message carries: the message's
// own, the extra ones (which win over the message's), and the rmq-*
// headers (which win over both). The map is new: callers may keep it.
func (c Config) HeadersOf(m *consumer.Message) map[string]string {
	var extra map[string]string
	if c.Headers != nil {
		extra = c.Headers(m)
	}
	h := make(map[string]string, len(m.Headers)+len(extra)+4)
	for k, v := range m.Headers {
		h[k] = v
	}
	for k, v := range extra {
		h[k] = v
	}
	h[HeaderID] = m.ID
	h[HeaderTopic] = m.Topic
	if !m.DueAt.IsZero() {
		h[HeaderDueAt] = m.DueAt.UTC().Format(DueAtLayout)
	} else {
		delete(h, HeaderDueAt)
	}
	h[HeaderAttempt] = strconv.Itoa(m.Attempt)
	return h
}

// ErrClosed is returned by a forwarder's OnMessage after its Close.
var ErrClosed = errors.New("forwarder closed")

// Window bounds the publishes awaiting a broker's confirm. A publish takes
// a slot before it is sent and gives it back once the broker answered (or
// the broker client gave up on it), not when OnMessage stopped waiting: a
// broker that answers slowly slows consumption instead of letting abandoned
// publishes pile up in the broker client.
type Window struct {
	slots  chan struct{}
	closed chan struct{}
}

// NewWindow returns a window of n slots.
func NewWindow(n int) *Window {
	return &Window{slots: make(chan struct{}, n), closed: make(chan struct{})}
}

// Acquire takes a slot, waiting until one is free or ctx ends. After
// Close it returns ErrClosed.
func (w *Window) Acquire(ctx context.Context) error {
	select {
	case <-w.closed:
		return ErrClosed
	default:
	}
	select {
	case w.slots <- struct{}{}:
		return nil
	case <-w.closed:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("%d publishes await the broker: %w", cap(w.slots), context.Cause(ctx))
	}
}

// Release gives a slot back.
func (w *Window) Release() { <-w.slots }

// InFlight is how many slots are taken.
func (w *Window) InFlight() int { return len(w.slots) }

// Close refuses new publishes and waits until every slot is given back, or
// ctx ends (then it returns ctx's error). Only one Close may run; later
// calls return at once with nil.
func (w *Window) Close(ctx context.Context) error {
	select {
	case <-w.closed:
		return nil
	default:
		close(w.closed)
	}
	// Taking every slot waits for the holders to give theirs back. A
	// publisher that got past the closed check before it was closed may
	// still take a slot; it gives it back when its broker answers.
	for range cap(w.slots) {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("%d publishes still await the broker: %w", len(w.slots), ctx.Err())
		}
	}
	return nil
}

// Closed is closed by Close.
func (w *Window) Closed() <-chan struct{} { return w.closed }

// Marker is implemented by the listener of every forwarder: a client
// counts the acked deliveries of a topic whose listener is one as
// forwarded in its history.
type Marker interface {
	ForwardsToBroker()
}
