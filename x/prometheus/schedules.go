package rmqprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Schedules (rmq.Schedule): the ticks fired and skipped by schedule, counted
// by the client that rolled them (rmq.ScheduleObserver), and the lateness of
// the ticks this process's consumers received, by topic.
//
//	rmq_schedule_ticks_fired_total{schedule,topic}
//	rmq_schedule_ticks_skipped_total{schedule,topic}
//	rmq_schedule_tick_lateness_seconds{topic,type}
type scheduleMetrics struct {
	fired, skipped *prometheus.CounterVec
	lateness       *prometheus.HistogramVec
}

var _ rmq.ScheduleObserver = (*Metrics)(nil)

func (s *scheduleMetrics) register(reg prometheus.Registerer) error {
	labels := []string{"schedule", "topic"}
	s.fired = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "schedule_ticks_fired_total",
		Help: "Ticks of a schedule fired (came due, caught up or triggered), counted once across the clients of a prefix."}, labels)
	s.skipped = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "schedule_ticks_skipped_total",
		Help: "Ticks of a schedule missed while no client ran and older than its catch-up window."}, labels)
	s.lateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "schedule_tick_lateness_seconds",
		Help: "Delivery time minus tick time of the schedule ticks this process received.", Buckets: LatenessBuckets}, topicLabels)
	var err error
	for _, c := range []**prometheus.CounterVec{&s.fired, &s.skipped} {
		if *c, err = register(reg, *c); err != nil {
			return err
		}
	}
	s.lateness, err = register(reg, s.lateness)
	return err
}

// TicksFired implements rmq.ScheduleObserver.
func (m *Metrics) TicksFired(schedule string, t topic.Topic, n int) {
	m.sched.fired.WithLabelValues(schedule, t.Name()).Add(float64(n))
}

// TicksSkipped implements rmq.ScheduleObserver.
func (m *Metrics) TicksSkipped(schedule string, t topic.Topic, n int) {
	m.sched.skipped.WithLabelValues(schedule, t.Name()).Add(float64(n))
}

// observeTick records the lateness of msg if it is a schedule's tick.
func (m *Metrics) observeTick(o *topicMetrics, msg *consumer.Message) {
	_, tick, ok := rmq.ScheduleTick(msg)
	if !ok {
		return
	}
	o.tickOnce.Do(func() { o.tickLate = m.sched.lateness.With(o.labels) })
	at := msg.FetchedAt
	if at.IsZero() {
		at = time.Now()
	}
	o.tickLate.Observe(max(at.Sub(tick), 0).Seconds())
}
