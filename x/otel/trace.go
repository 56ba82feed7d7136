package rmqotel

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
)

// Both are assignable to what rmq.WithSendHook and rmq.WithMiddleware take.
var (
	_ rmq.SendHook        = (*Telemetry)(nil).SendHook
	_ consumer.Middleware = (*Telemetry)(nil).Middleware
)

// SendHook starts a PRODUCER span "send <topic>" for one message, as a
// child of ctx's span, and injects its context into the message's headers
// as the message's creation context. A creation context the sender put in
// the headers already is kept and linked instead, as the messaging
// conventions ask. The span ends when the write ended, with the message's
// id or the error.
func (t *Telemetry) SendHook(ctx context.Context, m *rmq.Outgoing) func(id string, err error) {
	name := m.Topic.Name()
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(systemName),
		semconv.MessagingOperationName("send"),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(name),
		semconv.MessagingMessageBodySize(len(m.Body)),
		topicTypeKey.String(m.Topic.Type().String()),
	}
	if m.Key != "" {
		attrs = append(attrs, semconv.MessagingMessageID(m.Key))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...)}
	given := trace.SpanContextFromContext(t.propagator.Extract(context.Background(), propagation.MapCarrier(m.Headers)))
	if given.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: given}))
	}
	ctx, span := t.tracer.Start(ctx, "send "+name, opts...)
	if !given.IsValid() {
		// A copy: the map may be the sender's own, given to WithHeaders
		// for many sends; written to, its next send would carry this
		// span's context as if the sender had put it there.
		h := maps.Clone(m.Headers)
		if h == nil {
			h = map[string]string{}
		}
		t.propagator.Inject(ctx, propagation.MapCarrier(h))
		m.Headers = h
	}
	return func(id string, err error) {
		if id != "" && m.Key == "" {
			span.SetAttributes(semconv.MessagingMessageID(id))
		}
		if err != nil {
			fail(span, err)
		}
		span.End()
	}
}

// Middleware wraps a listener in a CONSUMER span "process <topic>" per
// delivery. Per the OpenTelemetry semantic conventions for messaging spans
// (messaging-spans.md, "Consumer spans": "For each message it accounts for,
// the 'Process' or 'Receive' span SHOULD link to the message's creation
// context"), the span links to the creation context read from the
// message's headers; it is also that context's child unless WithNewTraces
// was given, so the trace continues from the send into the handler. The
// listener's context carries the span. A failing or panicking listener sets
// the status to Error; the outcome is added by the observer (Finished).
func (t *Telemetry) Middleware(next consumer.MessageListener) consumer.MessageListener {
	return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) (err error) {
		created := trace.SpanContextFromContext(t.propagator.Extract(context.Background(), propagation.MapCarrier(m.Headers)))
		opts := []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				semconv.MessagingSystemKey.String(systemName),
				semconv.MessagingOperationName("process"),
				semconv.MessagingOperationTypeProcess,
				semconv.MessagingDestinationName(m.Topic),
				semconv.MessagingMessageID(m.ID),
				semconv.MessagingDestinationPartitionID(strconv.Itoa(m.Slot)),
				semconv.MessagingMessageBodySize(len(m.Body)),
				topicTypeKey.String(m.Type.String()),
				attemptKey.Int(m.Attempt),
			),
		}
		parent := ctx
		if created.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: created}))
			if !t.newTraces {
				parent = trace.ContextWithRemoteSpanContext(ctx, created)
			}
		}
		if t.newTraces {
			opts = append(opts, trace.WithNewRoot())
		}
		ctx, span := t.tracer.Start(parent, "process "+m.Topic, opts...)
		defer func() {
			end := time.Now()
			if r := recover(); r != nil {
				fail(span, fmt.Errorf("panic: %v", r))
				t.finishSpan(m, span, end, true)
				panic(r)
			}
			if err != nil {
				fail(span, err)
			}
			t.finishSpan(m, span, end, err != nil)
		}()
		return next.OnMessage(ctx, m)
	})
}

// finishSpan leaves span to the observer's Finished, which adds the
// outcome, or ends it now if the observer is not attached.
func (t *Telemetry) finishSpan(m *consumer.Message, span trace.Span, end time.Time, failed bool) {
	if !t.parkSpan(m, span, end, failed) {
		span.End(trace.WithTimestamp(end))
	}
}

// fail records err on span: status Error with its text, error.type its Go
// type (low cardinality, as the conventions ask).
func fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", err)))
}
