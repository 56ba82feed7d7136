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
	expired                                metric.Int64Counter
	handler, lateness                      metric.Float64Histogram
	sched                                  scheduleInstruments // schedules.go
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
	in.acked = counter("rmq.acked", "{message}", "Deliveries acked.")
	in.retried = counter("rmq.retried", "{message}", "Deliveries that failed and went back to store for a retry.")
	in.dead = counter("rmq.dead", "{message}", "Messages moved to the dead queue.")
	in.swept = counter("rmq.lease_expired", "{message}", "Deliveries rolled back because their lease expired.")
	in.expired = counter("rmq.expired", "{message}", "Messages dropped because their TTL or expiry passed before they were acked.")
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
	return in.sched.init(m)
}

// topicAttrs is the attribute set of t's measurements, built once per topic.
func (t *Telemetry) topicAttrs(tp topic.Topic) metric.MeasurementOption {
	if a, ok := t.attrs.Load(tp.Name()); ok {
		return a.(metric.MeasurementOption)
	}
	a, _ := t.attrs.LoadOrStore(tp.Name(), metric.WithAttributeSet(attribute.NewSet(
		semconv.MessagingSystemKey.String(systemName),
		semconv.MessagingDestinationName(tp.Name()),
		topicTypeKey.String(tp.Type().String()),
	)))
	return a.(metric.MeasurementOption)
}

// Sent implements producer.Observer.
func (t *Telemetry) Sent(tp topic.Topic, r producer.SendResult) {
	a := t.topicAttrs(tp)
	t.inst.sent.Add(bg, 1, a)
	if r == producer.SendMerged || r == producer.SendReplaced {
		t.inst.merged.Add(bg, 1, a)
	}
}

// Removed implements producer.Observer.
func (t *Telemetry) Removed(tp topic.Topic, removed bool) {
	if removed {
		t.inst.removed.Add(bg, 1, t.topicAttrs(tp))
	}
}

// ConsumerObserver implements rmq.Observer.
func (t *Telemetry) ConsumerObserver(tp topic.Topic) consumer.Observer {
	return &topicObserver{tel: t, attrs: t.topicAttrs(tp), timeBased: tp.Type().TimeBased()}
}

// topicObserver is the consumer.Observer (and consumer.ExpiryObserver) of
// one topic: it counts, and ends
// the process spans the middleware opened with their outcome.
type topicObserver struct {
	tel       *Telemetry
	attrs     metric.MeasurementOption
	timeBased bool
}

// Delivered implements consumer.Observer.
func (o *topicObserver) Delivered(m *consumer.Message) {
	o.tel.expectSpan(m)
	o.tel.inst.delivered.Add(bg, 1, o.attrs)
	o.recordTick(m)
	if o.timeBased && !m.DueAt.IsZero() {
		at := m.FetchedAt
		if at.IsZero() {
			at = time.Now()
		}
		o.tel.inst.lateness.Record(bg, max(at.Sub(m.DueAt), 0).Seconds(), o.attrs)
	}
}

// Finished implements consumer.Observer.
func (o *topicObserver) Finished(m *consumer.Message, took time.Duration, outcome consumer.Outcome) {
	o.tel.endSpan(m, outcome)
	o.tel.inst.handler.Record(bg, took.Seconds(), o.attrs)
	switch outcome {
	case consumer.Acked:
		o.tel.inst.acked.Add(bg, 1, o.attrs)
	case consumer.Retried:
		o.tel.inst.retried.Add(bg, 1, o.attrs)
	case consumer.Dead:
		o.tel.inst.dead.Add(bg, 1, o.attrs)
	}
}

// LeasesExpired implements consumer.Observer.
func (o *topicObserver) LeasesExpired(_ string, rolledBack, dead int) {
	o.tel.inst.swept.Add(bg, int64(rolledBack), o.attrs)
	o.tel.inst.dead.Add(bg, int64(dead), o.attrs)
}

// Expired implements consumer.ExpiryObserver.
func (o *topicObserver) Expired(_ string, n int) { o.tel.inst.expired.Add(bg, int64(n), o.attrs) }
