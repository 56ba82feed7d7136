package rmqotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
	rmqotel "github.com/rmq-go/rmq/x/otel"
)

// tracer is an in-memory tracer provider and its exporter.
type tracer struct {
	t   *testing.T
	exp *tracetest.InMemoryExporter
	tp  *sdktrace.TracerProvider
}

func newTracer(t *testing.T) *tracer {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tracer{t: t, exp: exp, tp: tp}
}

// span waits for the ended span called name whose messaging.message.id is
// id.
func (tr *tracer) span(name, id string) tracetest.SpanStub {
	tr.t.Helper()
	var found tracetest.SpanStub
	redistest.Poll(tr.t, func() error {
		for _, s := range tr.exp.GetSpans() {
			if s.Name == name && attr(s, "messaging.message.id").AsString() == id {
				found = s
				return nil
			}
		}
		return fmt.Errorf("no span %q of message %q; have %d spans", name, id, len(tr.exp.GetSpans()))
	})
	return found
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// seen is what a listener saw of a delivery.
type seen struct {
	span    trace.SpanContext
	headers map[string]string
}

// fullyTraced is a client with the Telemetry attached all three ways, as
// the README shows, with a listener on tp that fails message "bad" and
// records what it saw of each delivery.
func fullyTraced(t *testing.T, e *env, tr *tracer, tp topic.Topic, opts ...rmqotel.Option) (*rmq.Client, func(id string) seen) {
	t.Helper()
	tel, err := rmqotel.New(append([]rmqotel.Option{rmqotel.WithTracerProvider(tr.tp), rmqotel.WithMeterProvider(newMeter(t).mp)}, opts...)...)
	require.NoError(t, err)
	c := e.Client(rmq.WithObserver(tel), rmq.WithSendHook(tel.SendHook), rmq.WithMiddleware(tel.Middleware))
	var (
		mu  sync.Mutex
		got = map[string]seen{}
	)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		mu.Lock()
		got[m.ID] = seen{span: trace.SpanContextFromContext(ctx), headers: m.Headers}
		mu.Unlock()
		if m.ID == "bad" {
			return errors.New("payment refused")
		}
		return nil
	}), consumer.WithMaxRetries(0)))
	e.Start(c)
	return c, func(id string) seen {
		mu.Lock()
		defer mu.Unlock()
		return got[id]
	}
}

// One trace runs from a request that sends, through the send span, across
// a real redis-server, to the process span around the handler, whose
// context the handler gets; the outcome is recorded: acked with status
// unset, and for a failing handler the error, error status and "dead".
func TestTraceFromSendToHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	tr := newTracer(t)
	tp := mustTopic(t, "orders", topic.FixedTime, 4)
	c, saw := fullyTraced(t, e, tr, tp)

	reqCtx, req := tr.tp.Tracer("test").Start(ctx, "request")
	for _, id := range []string{"good", "bad"} {
		_, err := c.Producer().SendFixedTime(reqCtx, tp, []byte(`{"order":1}`), time.Now(), producer.WithKey(id))
		require.NoError(t, err)
	}
	req.End()
	traceID := req.SpanContext().TraceID()

	for _, id := range []string{"good", "bad"} {
		send := tr.span("send orders", id)
		proc := tr.span("process orders", id)

		assert.Equal(t, trace.SpanKindProducer, send.SpanKind, id)
		assert.Equal(t, traceID, send.SpanContext.TraceID(), id)
		assert.Equal(t, req.SpanContext().SpanID(), send.Parent.SpanID(), "%s: send is the request's child", id)
		assert.Equal(t, "rmq", attr(send, "messaging.system").AsString())
		assert.Equal(t, "send", attr(send, "messaging.operation.type").AsString())
		assert.Equal(t, "orders", attr(send, "messaging.destination.name").AsString())
		assert.Equal(t, int64(11), attr(send, "messaging.message.body.size").AsInt64())
		assert.Equal(t, codes.Unset, send.Status.Code)

		assert.Equal(t, trace.SpanKindConsumer, proc.SpanKind, id)
		assert.Equal(t, traceID, proc.SpanContext.TraceID(), "%s: one trace from send to handler", id)
		assert.Equal(t, send.SpanContext.SpanID(), proc.Parent.SpanID(), "%s: process is the send's child", id)
		assert.True(t, proc.Parent.IsRemote(), "the parent came through Redis")
		require.Len(t, proc.Links, 1, id)
		assert.Equal(t, send.SpanContext.SpanID(), proc.Links[0].SpanContext.SpanID(), "%s: process links the creation context", id)
		assert.Equal(t, "process", attr(proc, "messaging.operation.type").AsString())
		assert.Equal(t, int64(1), attr(proc, "messaging.rmq.attempt").AsInt64())
		assert.Equal(t, "fixedtime", attr(proc, "messaging.rmq.topic.type").AsString())

		got := saw(id)
		assert.Equal(t, proc.SpanContext.SpanID(), got.span.SpanID(), "%s: the handler's context carries the process span", id)
		assert.Equal(t, fmt.Sprintf("00-%s-%s-01", traceID, send.SpanContext.SpanID()), got.headers["traceparent"],
			"%s: W3C trace context travelled in the headers", id)
	}

	good := tr.span("process orders", "good")
	assert.Equal(t, "acked", attr(good, "messaging.rmq.outcome").AsString())
	assert.Equal(t, codes.Unset, good.Status.Code)
	assert.Empty(t, attr(good, "error.type").AsString())

	bad := tr.span("process orders", "bad")
	assert.Equal(t, "dead", attr(bad, "messaging.rmq.outcome").AsString())
	assert.Equal(t, codes.Error, bad.Status.Code)
	assert.Equal(t, "payment refused", bad.Status.Description)
	assert.Equal(t, "*errors.errorString", attr(bad, "error.type").AsString())
	require.Len(t, bad.Events, 1)
	assert.Equal(t, "exception", bad.Events[0].Name)
}

// WithNewTraces starts each process span as the root of its own trace,
// linked to the send span; a creation context the sender put in the headers
// itself is kept and linked by the send span.
func TestTraceNewTracesAndGivenContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	tr := newTracer(t)
	tp := mustTopic(t, "jobs", topic.Priority, 2)
	c, saw := fullyTraced(t, e, tr, tp, rmqotel.WithNewTraces())

	_, err := c.Producer().SendPriority(ctx, tp, []byte("x"), 100, producer.WithKey("good"))
	require.NoError(t, err)
	send := tr.span("send jobs", "good")
	proc := tr.span("process jobs", "good")
	assert.NotEqual(t, send.SpanContext.TraceID(), proc.SpanContext.TraceID())
	assert.False(t, proc.Parent.IsValid(), "a root span")
	require.Len(t, proc.Links, 1)
	assert.Equal(t, send.SpanContext, proc.Links[0].SpanContext.WithRemote(false))
	assert.Equal(t, "acked", attr(proc, "messaging.rmq.outcome").AsString())

	const given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	_, err = c.Producer().SendPriority(ctx, tp, []byte("y"), 100, producer.WithKey("given"),
		producer.WithHeaders(map[string]string{"traceparent": given}))
	require.NoError(t, err)
	send = tr.span("send jobs", "given")
	require.Len(t, send.Links, 1)
	assert.Equal(t, "b7ad6b7169203331", send.Links[0].SpanContext.SpanID().String())
	tr.span("process jobs", "given")
	assert.Equal(t, given, saw("given").headers["traceparent"], "the sender's creation context is left alone")

	// A headers map the sender reuses is not written to: each send gets a
	// context of its own.
	shared := map[string]string{"tenant": "a"}
	for _, id := range []string{"s1", "s2"} {
		_, err = c.Producer().SendPriority(ctx, tp, []byte(id), 100, producer.WithKey(id), producer.WithHeaders(shared))
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]string{"tenant": "a"}, shared)
	s1, s2 := tr.span("send jobs", "s1"), tr.span("send jobs", "s2")
	assert.Empty(t, s1.Links)
	assert.Empty(t, s2.Links)
	tr.span("process jobs", "s2")
	assert.Equal(t, "a", saw("s2").headers["tenant"])
	assert.Contains(t, saw("s2").headers["traceparent"], s2.SpanContext.SpanID().String())
}
