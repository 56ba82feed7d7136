package rmqprom

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

const namespace = "rmq"

var topicLabels = []string{"topic", "type"}

// LatenessBuckets are the buckets of rmq_firing_lateness_seconds: a due
// message is normally delivered within milliseconds.
var LatenessBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// HandlerBuckets are the buckets of rmq_handler_duration_seconds.
var HandlerBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Metrics counts what the clients it is attached to do, and reads queue
// depths from Redis when scraped. It implements rmq.Observer: attach it with
// rmq.WithObserver, and give it the queues to measure with WatchQueues.
type Metrics struct {
	sent, merged, removed                  *prometheus.CounterVec
	delivered, acked, retried, dead, swept *prometheus.CounterVec
	expired, cancelled                     *prometheus.CounterVec
	handler, lateness                      *prometheus.HistogramVec
	concurrency                            *prometheus.GaugeVec
	depth                                  *depthCollector
	topics                                 sync.Map        // topic name -> *topicMetrics
	sched                                  scheduleMetrics // schedules.go
	flows                                  flowMetrics     // flows.go
}

var (
	_ rmq.Observer       = (*Metrics)(nil)
	_ rmq.TopicObserver  = (*Metrics)(nil)
	_ rmq.ExpiryObserver = (*Metrics)(nil)
	_ rmq.FlowObserver   = (*Metrics)(nil)
)

// Option configures New.
type Option func(*config)

type config struct {
	logger *slog.Logger
}

// WithLogger sets where failed depth reads are logged (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// New registers RMQ's metrics on reg and returns them, to be attached to
// clients with rmq.WithObserver. Several clients may share one Metrics, and
// several Metrics one registry: a metric registered already by another New
// on reg is counted into rather than registered twice. A registry holding
// another collector under one of the names is refused; a nil reg or logger
// is refused with rmq.ErrInvalidOption.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: rmqprom: nil Registerer", rmq.ErrInvalidOption)
	}
	cfg := config{logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		return nil, fmt.Errorf("%w: rmqprom: nil logger", rmq.ErrInvalidOption)
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, topicLabels)
	}
	m := &Metrics{
		sent:      counter("sent_total", "Messages sent, merged ones included."),
		merged:    counter("merged_total", "Sends merged into a waiting message with the same id."),
		removed:   counter("removed_total", "Waiting messages removed by id."),
		delivered: counter("delivered_total", "Deliveries handed to a listener."),
		acked:     counter("acked_total", "Deliveries acked: messages completed (with retention, kept as completed)."),
		retried:   counter("retried_total", "Deliveries that failed and went back to store for a retry."),
		dead:      counter("dead_total", "Messages moved to the dead queue."),
		swept:     counter("lease_expired_total", "Deliveries rolled back because their lease expired."),
		expired:   counter("expired_total", "Messages dropped because their TTL or expiry passed before they were acked."),
		cancelled: counter("cancelled_total", "Deliveries cancelled while their handler ran (Inspector.Cancel; outcome Cancelled): not retried."),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "handler_duration_seconds",
			Help: "How long listeners ran per delivery.", Buckets: HandlerBuckets,
		}, topicLabels),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "firing_lateness_seconds",
			Help: "Delivery time minus due time of time-based messages.", Buckets: LatenessBuckets,
		}, topicLabels),
		concurrency: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "concurrency_limit",
			Help: "The adaptive concurrency limit of a consumed topic (consumer.WithAdaptiveConcurrency): handlers that may run at once in this process.",
		}, topicLabels),
		depth: newDepthCollector(cfg.logger),
	}
	var err error
	for _, c := range []**prometheus.CounterVec{&m.sent, &m.merged, &m.removed, &m.delivered, &m.acked, &m.retried, &m.dead, &m.swept, &m.expired, &m.cancelled} {
		if *c, err = register(reg, *c); err != nil {
			return nil, err
		}
	}
	for _, h := range []**prometheus.HistogramVec{&m.handler, &m.lateness} {
		if *h, err = register(reg, *h); err != nil {
			return nil, err
		}
	}
	if m.concurrency, err = register(reg, m.concurrency); err != nil {
		return nil, err
	}
	if m.depth, err = register(reg, m.depth); err != nil {
		return nil, err
	}
	if err := m.sched.register(reg); err != nil {
		return nil, err
	}
	if err := m.flows.register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the equal collector registered before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("rmqprom: register metrics: %w", err)
}

// WatchQueues adds the queues under the inspector's key prefix to the depth
// gauges (rmq_store_depth, rmq_prepare_depth, rmq_dead_depth), read from
// Redis at scrape time. Pass a client's Inspector, or one from
// rmq.NewInspector to measure queues this process does not consume. A
// prefix watched already is read once; a topic name defined under several
// prefixes is reported for the first one watched.
func (m *Metrics) WatchQueues(i *rmq.Inspector) { m.depth.add(i) }

// topicOf returns the series of topic name, resolved once; typ is its
// type when the caller knows it (0: look it up).
func (m *Metrics) topicOf(name string, typ topic.Type) *topicMetrics {
	if o, ok := m.topics.Load(name); ok {
		return o.(*topicMetrics)
	}
	l := prometheus.Labels{"topic": name, "type": typ.String()}
	if typ == 0 {
		l["type"] = "unknown"
	}
	// A topic shows every series, zeros included, from its first event.
	m.sent.With(l)
	m.merged.With(l)
	m.removed.With(l)
	o := &topicMetrics{
		timeBased: typ.TimeBased(),
		sent:      m.sent.With(l),
		merged:    m.merged.With(l),
		removed:   m.removed.With(l),
		delivered: m.delivered.With(l),
		acked:     m.acked.With(l),
		retried:   m.retried.With(l),
		dead:      m.dead.With(l),
		swept:     m.swept.With(l),
		expired:   m.expired.With(l),
		cancelled: m.cancelled.With(l),
		handler:   m.handler.With(l),
		labels:    l,
	}
	got, _ := m.topics.LoadOrStore(name, o)
	return got.(*topicMetrics)
}

// Consumes implements rmq.TopicObserver: a consumed topic's series exist,
// at zero, from its registration.
func (m *Metrics) Consumes(t topic.Topic) { m.topicOf(t.Name(), t.Type()) }

// Sent implements rmq.Observer.
func (m *Metrics) Sent(t topic.Topic, r producer.SendResult) {
	o := m.topicOf(t.Name(), t.Type())
	o.sent.Inc()
	if r == producer.SendMerged || r == producer.SendReplaced {
		o.merged.Inc()
	}
}

// Removed implements rmq.Observer.
func (m *Metrics) Removed(t topic.Topic, removed bool) {
	if removed {
		m.topicOf(t.Name(), t.Type()).removed.Inc()
	}
}

// Delivered implements rmq.Observer.
func (m *Metrics) Delivered(msg *consumer.Message) {
	o := m.topicOf(msg.Topic, msg.Type)
	o.delivered.Inc()
	m.observeTick(o, msg)
	if o.timeBased && !msg.DueAt.IsZero() {
		at := msg.FetchedAt
		if at.IsZero() {
			at = time.Now()
		}
		o.lateOnce.Do(func() { o.late = m.lateness.With(o.labels) })
		o.late.Observe(max(at.Sub(msg.DueAt), 0).Seconds())
	}
}

// Finished implements rmq.Observer.
func (m *Metrics) Finished(msg *consumer.Message, took time.Duration, outcome consumer.Outcome, _ error) {
	o := m.topicOf(msg.Topic, msg.Type)
	o.handler.Observe(took.Seconds())
	switch outcome {
	case consumer.Acked:
		o.acked.Inc()
	case consumer.Retried:
		o.retried.Inc()
	case consumer.Dead:
		o.dead.Inc()
	case consumer.Cancelled:
		o.cancelled.Inc()
	}
}

// LeasesExpired implements rmq.Observer.
func (m *Metrics) LeasesExpired(topic string, rolledBack, dead int) {
	o := m.topicOf(topic, 0)
	o.swept.Add(float64(rolledBack))
	o.dead.Add(float64(dead))
}

// Expired implements rmq.ExpiryObserver.
func (m *Metrics) Expired(topic string, n int) { m.topicOf(topic, 0).expired.Add(float64(n)) }

// ConcurrencyLimit implements rmq.FlowObserver: rmq_concurrency_limit, a
// series only for topics consumed with an adaptive limit.
func (m *Metrics) ConcurrencyLimit(topic string, limit int) {
	m.concurrency.With(m.topicOf(topic, 0).labels).Set(float64(limit))
}

// topicMetrics are the series of one topic.
type topicMetrics struct {
	timeBased                                       bool
	sent, merged, removed                           prometheus.Counter
	delivered, acked, retried, dead, swept, expired prometheus.Counter
	cancelled                                       prometheus.Counter
	handler                                         prometheus.Observer
	// The lateness histograms are made on the first delivery that has
	// one: a priority topic has no due time, and most topics get no tick.
	labels             prometheus.Labels
	lateOnce, tickOnce sync.Once
	late, tickLate     prometheus.Observer
}
