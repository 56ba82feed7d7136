package rmqotel

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// systemName is messaging.system: RMQ is not one of the systems the
// conventions list, so it names itself.
const systemName = "rmq"

// Attribute keys of RMQ's own, in the messaging.{system} namespace the
// conventions reserve for a system.
const (
	topicTypeKey = attribute.Key("messaging.rmq.topic.type")
	attemptKey   = attribute.Key("messaging.rmq.attempt")
	outcomeKey   = attribute.Key("messaging.rmq.outcome")
)

// The bucket boundaries advised for the two histograms: those of the
// Prometheus module.
var (
	handlerBuckets  = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	latenessBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
)

type instruments struct {
	sent, merged, removed                  metric.Int64Counter
	delivered, acked, retried, dead, swept metric.Int64Counter
	expired, cancelled                     metric.Int64Counter
	handler, lateness                      metric.Float64Histogram
	sched                                  scheduleInstruments // schedules.go
	flows                                  flowInstruments     // flows.go
	concurrency                            metric.Int64Gauge
}

func (in *instruments) init(m metric.Meter) error {
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	in.sent = counter("messaging.client.sent.messages", "{message}", "Messages sent, merged ones included.")
	in.merged = counter("rmq.merged", "{message}", "Sends merged into a waiting message with the same id.")
	in.removed = counter("rmq.removed", "{message}", "Waiting messages removed by id.")
	in.delivered = counter("messaging.client.consumed.messages", "{message}", "Deliveries handed to a listener.")
	in.acked = counter("rmq.acked", "{message}", "Deliveries acked: messages completed (with retention, kept as completed).")
	in.retried = counter("rmq.retried", "{message}", "Deliveries that failed and went back to store for a retry.")
	in.dead = counter("rmq.dead", "{message}", "Messages moved to the dead queue.")
	in.swept = counter("rmq.lease_expired", "{message}", "Deliveries rolled back because their lease expired.")
	in.expired = counter("rmq.expired", "{message}", "Messages dropped because their TTL or expiry passed before they were acked.")
	in.cancelled = counter("rmq.cancelled", "{message}", "Deliveries cancelled while their handler ran (Inspector.Cancel; outcome Cancelled): not retried.")
	if err != nil {
		return err
	}
	if in.handler, err = m.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
		metric.WithDescription("How long listeners ran per delivery."),
		metric.WithExplicitBucketBoundaries(handlerBuckets...)); err != nil {
		return err
	}
	if in.lateness, err = m.Float64Histogram("rmq.firing.lateness", metric.WithUnit("s"),
		metric.WithDescription("Delivery time minus due time of time-based messages."),
		metric.WithExplicitBucketBoundaries(latenessBuckets...)); err != nil {
		return err
	}
	if in.concurrency, err = m.Int64Gauge("rmq.concurrency.limit", metric.WithUnit("{handler}"),
		metric.WithDescription("The adaptive concurrency limit of a consumed topic (consumer.WithAdaptiveConcurrency): handlers that may run at once in this process.")); err != nil {
		return err
	}
	if err := in.sched.init(m); err != nil {
		return err
	}
	return in.flows.init(m)
}

// ConcurrencyLimit implements rmq.FlowObserver.
func (t *Telemetry) ConcurrencyLimit(topic string, limit int) {
	t.inst.concurrency.Record(bg, int64(limit), t.attrsOf(topic, 0))
}

// topicAttrs is the attribute set of t's measurements, built once per topic.
func (t *Telemetry) topicAttrs(tp topic.Topic) metric.MeasurementOption {
	return t.attrsOf(tp.Name(), tp.Type())
}

// attrsOf returns the attributes of topic name, made once; typ is its type
// when the caller knows it (0: the one seen first, else "unknown").
func (t *Telemetry) attrsOf(name string, typ topic.Type) metric.MeasurementOption {
	if a, ok := t.attrs.Load(name); ok {
		return a.(metric.MeasurementOption)
	}
	ts := typ.String()
	if typ == 0 {
		ts = "unknown"
	}
	a, _ := t.attrs.LoadOrStore(name, metric.WithAttributeSet(attribute.NewSet(
		semconv.MessagingSystemKey.String(systemName),
		semconv.MessagingDestinationName(name),
		topicTypeKey.String(ts),
	)))
	return a.(metric.MeasurementOption)
}

// Sent implements rmq.Observer.
func (t *Telemetry) Sent(tp topic.Topic, r producer.SendResult) {
	a := t.topicAttrs(tp)
	t.inst.sent.Add(bg, 1, a)
	if r == producer.SendMerged || r == producer.SendReplaced {
		t.inst.merged.Add(bg, 1, a)
	}
}

// Removed implements rmq.Observer.
func (t *Telemetry) Removed(tp topic.Topic, removed bool) {
	if removed {
		t.inst.removed.Add(bg, 1, t.topicAttrs(tp))
	}
}

// Consumes implements rmq.TopicObserver: a consumed topic's attributes are
// made once, with its type, before its first delivery.
func (t *Telemetry) Consumes(tp topic.Topic) { t.topicAttrs(tp) }

// Delivered implements rmq.Observer.
func (t *Telemetry) Delivered(m *consumer.Message) {
	t.expectSpan(m)
	attrs := t.attrsOf(m.Topic, m.Type)
	t.inst.delivered.Add(bg, 1, attrs)
	t.recordTick(m, attrs)
	if m.Type.TimeBased() && !m.DueAt.IsZero() {
		at := m.FetchedAt
		if at.IsZero() {
			at = time.Now()
		}
		t.inst.lateness.Record(bg, max(at.Sub(m.DueAt), 0).Seconds(), attrs)
	}
}

// Finished implements rmq.Observer: it counts the outcome and ends the
// process span the middleware opened with it.
func (t *Telemetry) Finished(m *consumer.Message, took time.Duration, outcome consumer.Outcome, _ error) {
	t.endSpan(m, outcome)
	attrs := t.attrsOf(m.Topic, m.Type)
	t.inst.handler.Record(bg, took.Seconds(), attrs)
	switch outcome {
	case consumer.Acked:
		t.inst.acked.Add(bg, 1, attrs)
	case consumer.Retried:
		t.inst.retried.Add(bg, 1, attrs)
	case consumer.Dead:
		t.inst.dead.Add(bg, 1, attrs)
	case consumer.Cancelled:
		t.inst.cancelled.Add(bg, 1, attrs)
	}
}

// LeasesExpired implements rmq.Observer.
func (t *Telemetry) LeasesExpired(topic string, rolledBack, dead int) {
	attrs := t.attrsOf(topic, 0)
	t.inst.swept.Add(bg, int64(rolledBack), attrs)
	t.inst.dead.Add(bg, int64(dead), attrs)
}

// Expired implements rmq.ExpiryObserver.
func (t *Telemetry) Expired(topic string, n int) {
	t.inst.expired.Add(bg, int64(n), t.attrsOf(topic, 0))
}
