package rmqotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmq-go/rmq/consumer"
)

// bg is the context of measurements made from the consumer's observer
// calls, which carry none.
var bg = context.Background()

// openSpan is a delivery's process span between the listener's return and
// the delivery's outcome.
type openSpan struct {
	mu     sync.Mutex
	span   trace.Span // nil until the listener returned (or if it never ran)
	ended  time.Time  // when the listener returned: the span's end
	failed bool       // the listener failed: the status is set already
}

// expectSpan notes that Finished will be called for m: the middleware may
// leave m's span for it to end. Without the observer attached, nothing is
// expected and the middleware ends its spans itself.
func (t *Telemetry) expectSpan(m *consumer.Message) { t.open.Store(m, &openSpan{}) }

// parkSpan hands a span whose listener returned at end to Finished, and
// reports false if no Finished is expected for m.
func (t *Telemetry) parkSpan(m *consumer.Message, span trace.Span, end time.Time, failed bool) bool {
	v, ok := t.open.Load(m)
	if !ok {
		return false
	}
	o := v.(*openSpan)
	o.mu.Lock()
	o.span, o.ended, o.failed = span, end, failed
	o.mu.Unlock()
	return true
}

// endSpan records the outcome of m's delivery on its span and ends it at
// the time the listener returned, so the span's length is the listener's.
func (t *Telemetry) endSpan(m *consumer.Message, outcome consumer.Outcome) {
	v, ok := t.open.LoadAndDelete(m)
	if !ok {
		return
	}
	o := v.(*openSpan)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.span == nil {
		return // the listener never ran (Close abandoned the delivery)
	}
	o.span.SetAttributes(outcomeKey.String(outcome.String()))
	if outcome != consumer.Acked && !o.failed {
		// The listener succeeded but the ack did not land (refused,
		// failed, fenced ...): the message will be handled again.
		o.span.SetStatus(codes.Error, "rmq: delivery "+outcome.String())
	}
	o.span.End(trace.WithTimestamp(o.ended))
}
