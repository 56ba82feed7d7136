package rmqotel

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Schedules (rmq.Schedule): the ticks fired and skipped, counted by the
// client that rolled them (rmq.ScheduleObserver), with the schedule's name
// in messaging.rmq.schedule; and the lateness of the ticks this process's
// consumers received, by topic.
//
//	rmq.schedule.fired    {messaging.rmq.schedule, messaging.destination.name}
//	rmq.schedule.skipped  {messaging.rmq.schedule, messaging.destination.name}
//	rmq.schedule.lateness {the topic's attributes}, seconds
const scheduleKey = attribute.Key("messaging.rmq.schedule")

type scheduleInstruments struct {
	fired, skipped metric.Int64Counter
	lateness       metric.Float64Histogram
}

var _ rmq.ScheduleObserver = (*Telemetry)(nil)

func (s *scheduleInstruments) init(m metric.Meter) error {
	var err error
	if s.fired, err = m.Int64Counter("rmq.schedule.fired", metric.WithUnit("{tick}"),
		metric.WithDescription("Ticks of a schedule fired (came due, caught up or triggered), counted once across the clients of a prefix.")); err != nil {
		return err
	}
	if s.skipped, err = m.Int64Counter("rmq.schedule.skipped", metric.WithUnit("{tick}"),
		metric.WithDescription("Ticks of a schedule missed while no client ran and older than its catch-up window.")); err != nil {
		return err
	}
	s.lateness, err = m.Float64Histogram("rmq.schedule.lateness", metric.WithUnit("s"),
		metric.WithDescription("Delivery time minus tick time of the schedule ticks this process received."),
		metric.WithExplicitBucketBoundaries(latenessBuckets...))
	return err
}

func scheduleAttrs(schedule string, t topic.Topic) metric.MeasurementOption {
	return metric.WithAttributes(semconv.MessagingSystemKey.String(systemName), semconv.MessagingDestinationName(t.Name()), scheduleKey.String(schedule))
}

// TicksFired implements rmq.ScheduleObserver.
func (t *Telemetry) TicksFired(schedule string, tp topic.Topic, n int) {
	t.inst.sched.fired.Add(bg, int64(n), scheduleAttrs(schedule, tp))
}

// TicksSkipped implements rmq.ScheduleObserver.
func (t *Telemetry) TicksSkipped(schedule string, tp topic.Topic, n int) {
	t.inst.sched.skipped.Add(bg, int64(n), scheduleAttrs(schedule, tp))
}

// recordTick records the lateness of m if it is a schedule's tick.
func (t *Telemetry) recordTick(m *consumer.Message, attrs metric.MeasurementOption) {
	_, tick, ok := rmq.ScheduleTick(m)
	if !ok {
		return
	}
	at := m.FetchedAt
	if at.IsZero() {
		at = time.Now()
	}
	t.inst.sched.lateness.Record(bg, max(at.Sub(tick), 0).Seconds(), attrs)
}
