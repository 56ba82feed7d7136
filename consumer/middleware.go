package consumer

import "context"

// Middleware wraps a listener: it runs around every delivery (tracing,
// logging, metrics, recovering, ...). A client's middleware
// (rmq.WithMiddleware) wraps the listener of every topic it registers, the
// first of the list outermost; to wrap one topic's listener only, wrap it
// before Register: mw(listener).
type Middleware func(MessageListener) MessageListener

type messageKey struct{}

// MessageFromContext returns the message a handler's context belongs to
// (every listener and middleware call gets one), so code deep in a handler
// can read its headers or attempt without passing it along.
func MessageFromContext(ctx context.Context) (*Message, bool) {
	m, ok := ctx.Value(messageKey{}).(*Message)
	return m, ok
}

// ContextWithMessage returns a copy of ctx carrying m, as the consumer
// gives every handler call: MessageFromContext(ctx) returns m. It is what
// a test of a listener or middleware that reads the message from its
// context builds that context with.
func ContextWithMessage(ctx context.Context, m *Message) context.Context {
	return context.WithValue(ctx, messageKey{}, m)
}
