package consumer

import (
	"context"
	"time"
)

// Middleware wraps a listener: it runs around every delivery (tracing,
// logging, metrics, recovering, ...). The first of a list is the
// outermost.
type Middleware func(MessageListener) MessageListener

// chain wraps l in mws, the first outermost.
func chain(l MessageListener, mws []Middleware) MessageListener {
	for i := len(mws) - 1; i >= 0; i-- {
		l = mws[i](l)
	}
	return l
}

type messageKey struct{}

// MessageFromContext returns the message a handler's context belongs to
// (every listener and middleware call gets one), so code deep in a handler
// can read its headers or attempt without passing it along.
func MessageFromContext(ctx context.Context) (*Message, bool) {
	m, ok := ctx.Value(messageKey{}).(*Message)
	return m, ok
}

// withMessage returns ctx carrying m.
func withMessage(ctx context.Context, m *Message) context.Context {
	return context.WithValue(ctx, messageKey{}, m)
}

// ExpiryObserver is an optional interface of an Observer: it is told when
// messages of topic expired (a per-message TTL or expiry passed before they
// were acked) and were dropped, n at a time.
type ExpiryObserver interface {
	Expired(topic string, n int)
}

// ErrorObserver is an optional interface of an Observer: Finished with the
// error the listener returned (nil when it acked), called in place of
// Observer.Finished for observers that have it.
type ErrorObserver interface {
	FinishedWithError(m *Message, took time.Duration, outcome Outcome, err error)
}

// PauseObserver is an optional interface of an Observer: it is told when
// this consumer learns that its topic was paused or resumed
// (Inspector.Pause), for a gauge.
type PauseObserver interface {
	Paused(topic string, paused bool)
}
