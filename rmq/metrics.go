package rmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// Metrics (WithMetrics). Every series carries the labels topic and type
// (rangemerge, priority, fixedtime):
//
//	rmq_sent_total                 successful sends (merged ones included)
//	rmq_merged_total               sends merged into a waiting message with the
//	                               same id (range-merge: due time kept;
//	                               fixed-time/priority: score replaced)
//	rmq_removed_total              waiting messages removed by id
//	rmq_delivered_total            deliveries handed to a listener
//	rmq_acked_total                deliveries acked
//	rmq_retried_total              deliveries that failed and went back to store
//	rmq_dead_total                 messages moved to the dead queue (by a
//	                               failing handler or an expired lease)
//	rmq_lease_expired_total        deliveries rolled back by the sweeper
//	rmq_handler_duration_seconds   how long listeners ran (histogram)
//	rmq_firing_lateness_seconds    delivery time minus due time, time-based
//	                               topics only (histogram)
//	rmq_store_depth                waiting messages      } gauges read from Redis
//	rmq_prepare_depth              deliveries in flight  } at scrape time, for
//	rmq_dead_depth                 dead messages         } every stored topic
//
// rmq_depth_errors_total counts scrapes whose Redis read failed (the depth
// gauges are left out of such a scrape).
const metricsNamespace = "rmq"

var topicLabels = []string{"topic", "type"}

// LatenessBuckets are the buckets of rmq_firing_lateness_seconds: a due
// message is normally delivered within milliseconds.
var LatenessBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// HandlerBuckets are the buckets of rmq_handler_duration_seconds.
var HandlerBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// depthScrapeTimeout bounds the Redis reads of one scrape.
const depthScrapeTimeout = 5 * time.Second

// metrics implements producer.Observer; forTopic gives consumer observers.
// A nil *metrics is valid and observes nothing.
type metrics struct {
	sent, merged, removed                  *prometheus.CounterVec
	delivered, acked, retried, dead, swept *prometheus.CounterVec
	handler, lateness                      *prometheus.HistogramVec
}

// newMetrics registers the client's metrics on reg (nil: no metrics). A
// registry shared by several clients gets each metric once: a client finding
// its metrics registered already counts into those, and its prefix is added
// to the depth collector's.
func newMetrics(reg prometheus.Registerer, rdb redis.UniversalClient, prefix string, log *slog.Logger) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}, topicLabels)
	}
	m := &metrics{
		sent:      counter("sent_total", "Messages sent, merged ones included."),
		merged:    counter("merged_total", "Sends merged into a waiting message with the same id."),
		removed:   counter("removed_total", "Waiting messages removed by id."),
		delivered: counter("delivered_total", "Deliveries handed to a listener."),
		acked:     counter("acked_total", "Deliveries acked."),
		retried:   counter("retried_total", "Deliveries that failed and went back to store for a retry."),
		dead:      counter("dead_total", "Messages moved to the dead queue."),
		swept:     counter("lease_expired_total", "Deliveries rolled back because their lease expired."),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "handler_duration_seconds",
			Help: "How long listeners ran per delivery.", Buckets: HandlerBuckets,
		}, topicLabels),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "firing_lateness_seconds",
			Help: "Delivery time minus due time of time-based messages.", Buckets: LatenessBuckets,
		}, topicLabels),
	}
	var err error
	for _, c := range []**prometheus.CounterVec{&m.sent, &m.merged, &m.removed, &m.delivered, &m.acked, &m.retried, &m.dead, &m.swept} {
		if *c, err = register(reg, *c); err != nil {
			return nil, err
		}
	}
	for _, h := range []**prometheus.HistogramVec{&m.handler, &m.lateness} {
		if *h, err = register(reg, *h); err != nil {
			return nil, err
		}
	}
	d := newDepthCollector(log)
	if d, err = register(reg, d); err != nil {
		return nil, err
	}
	d.add(newInspector(rdb, prefix))
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
	return c, fmt.Errorf("rmq: register metrics: %w", err)
}

func labels(t topic.Topic) prometheus.Labels {
	return prometheus.Labels{"topic": t.Name(), "type": t.Type().String()}
}

// producerOptions wires the producer to the metrics.
func (m *metrics) producerOptions() []producer.Option {
	if m == nil {
		return nil
	}
	return []producer.Option{producer.WithObserver(m)}
}

// consumerOptions wires a consumer of t to the metrics.
func (m *metrics) consumerOptions(t topic.Topic) []consumer.Option {
	if m == nil {
		return nil
	}
	return []consumer.Option{consumer.WithObserver(m.forTopic(t))}
}

// Sent implements producer.Observer.
func (m *metrics) Sent(t topic.Topic, r producer.SendResult) {
	l := labels(t)
	m.sent.With(l).Inc()
	if r == producer.SendMerged || r == producer.SendReplaced {
		m.merged.With(l).Inc()
	}
}

// Removed implements producer.Observer.
func (m *metrics) Removed(t topic.Topic, removed bool) {
	if removed {
		m.removed.With(labels(t)).Inc()
	}
}

// topicMetrics is the consumer.Observer of one topic, its series resolved
// once.
type topicMetrics struct {
	timeBased                              bool
	delivered, acked, retried, dead, swept prometheus.Counter
	handler, lateness                      prometheus.Observer
}

func (m *metrics) forTopic(t topic.Topic) *topicMetrics {
	l := labels(t)
	// A registered topic shows every series, zeros included, from the start.
	m.sent.With(l)
	m.merged.With(l)
	m.removed.With(l)
	return &topicMetrics{
		timeBased: t.Type().TimeBased(),
		delivered: m.delivered.With(l),
		acked:     m.acked.With(l),
		retried:   m.retried.With(l),
		dead:      m.dead.With(l),
		swept:     m.swept.With(l),
		handler:   m.handler.With(l),
		lateness:  m.lateness.With(l),
	}
}

// Delivered implements consumer.Observer.
func (o *topicMetrics) Delivered(msg *consumer.Message) {
	o.delivered.Inc()
	if o.timeBased && !msg.DueAt.IsZero() {
		at := msg.FetchedAt
		if at.IsZero() {
			at = time.Now()
		}
		o.lateness.Observe(max(at.Sub(msg.DueAt), 0).Seconds())
	}
}

// Finished implements consumer.Observer.
func (o *topicMetrics) Finished(_ *consumer.Message, took time.Duration, outcome consumer.Outcome) {
	o.handler.Observe(took.Seconds())
	switch outcome {
	case consumer.Acked:
		o.acked.Inc()
	case consumer.Retried:
		o.retried.Inc()
	case consumer.Dead:
		o.dead.Inc()
	}
}

// LeasesExpired implements consumer.Observer.
func (o *topicMetrics) LeasesExpired(_ string, rolledBack, dead int) {
	o.swept.Add(float64(rolledBack))
	o.dead.Add(float64(dead))
}

// depthCollector reads queue depths from Redis when Prometheus scrapes:
// three ZCARDs per slot of every topic stored under each prefix, in
// pipelines. A series is reported once per topic name even when several
// prefixes define it (the first prefix added wins).
type depthCollector struct {
	store, prepare, dead, errs *prometheus.Desc
	log                        *slog.Logger
	failures                   atomic.Uint64

	mu      sync.Mutex
	sources []*Inspector
}

func newDepthCollector(log *slog.Logger) *depthCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "", name), help, topicLabels, nil)
	}
	return &depthCollector{
		store:   desc("store_depth", "Waiting messages (store), read from Redis at scrape time."),
		prepare: desc("prepare_depth", "Deliveries in flight (prepare), read from Redis at scrape time."),
		dead:    desc("dead_depth", "Dead messages, read from Redis at scrape time."),
		errs: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "", "depth_errors_total"),
			"Scrapes whose read of the queue depths from Redis failed.", nil, nil),
		log: log,
	}
}

func (d *depthCollector) add(i *Inspector) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sources {
		if s.prefix == i.prefix {
			return
		}
	}
	d.sources = append(d.sources, i)
}

// Describe implements prometheus.Collector.
func (d *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.store
	ch <- d.prepare
	ch <- d.dead
	ch <- d.errs
}

// Collect implements prometheus.Collector.
func (d *depthCollector) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	sources := append([]*Inspector(nil), d.sources...)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), depthScrapeTimeout)
	defer cancel()
	seen := map[string]bool{}
	for _, src := range sources {
		depths, err := src.depths(ctx)
		if err != nil {
			d.failures.Add(1)
			if d.log != nil {
				d.log.WarnContext(ctx, "rmq: metrics: could not read queue depths", "prefix", src.prefix, "err", err)
			}
			continue
		}
		for _, q := range depths {
			if seen[q.topic.Name()] {
				continue
			}
			seen[q.topic.Name()] = true
			lv := []string{q.topic.Name(), q.topic.Type().String()}
			ch <- prometheus.MustNewConstMetric(d.store, prometheus.GaugeValue, float64(q.store), lv...)
			ch <- prometheus.MustNewConstMetric(d.prepare, prometheus.GaugeValue, float64(q.prepare), lv...)
			ch <- prometheus.MustNewConstMetric(d.dead, prometheus.GaugeValue, float64(q.dead), lv...)
		}
	}
	ch <- prometheus.MustNewConstMetric(d.errs, prometheus.CounterValue, float64(d.failures.Load()))
}

type depth struct {
	topic                topic.Topic
	store, prepare, dead int64
}

// depths counts store, prepare and dead of every stored topic.
func (i *Inspector) depths(ctx context.Context) ([]depth, error) {
	if i.err != nil {
		return nil, i.err
	}
	topics, err := topicstore.List(ctx, i.rdb, slots.TopicsKey(i.prefix))
	if err != nil {
		return nil, err
	}
	type ref struct{ topic, slot int }
	var refs []ref
	for ti, t := range topics {
		for s := range t.SlotAmount() {
			refs = append(refs, ref{ti, s})
		}
	}
	cmds := make([][3]*redis.IntCmd, len(refs))
	err = i.pipelined(ctx, len(refs), func(pipe redis.Pipeliner, j int) {
		k := i.keys(topics[refs[j].topic], refs[j].slot)
		cmds[j] = [3]*redis.IntCmd{pipe.ZCard(ctx, k.Store), pipe.ZCard(ctx, k.Prepare), pipe.ZCard(ctx, k.Dead)}
	})
	if err != nil {
		return nil, err
	}
	out := make([]depth, len(topics))
	for ti, t := range topics {
		out[ti].topic = t
	}
	for j, r := range refs {
		out[r.topic].store += cmds[j][0].Val()
		out[r.topic].prepare += cmds[j][1].Val()
		out[r.topic].dead += cmds[j][2].Val()
	}
	return out, nil
}

// WithMetrics registers the client's Prometheus metrics on reg (default:
// none): counters of sends, merges, removals, deliveries, acks, retries,
// deaths and expired leases; histograms of handler duration and firing
// lateness; and queue-depth gauges read from Redis at scrape time. Several
// clients may share one registry. A consumer.WithObserver given to Register
// is told too, after the metrics.
func WithMetrics(reg prometheus.Registerer) Option { return func(c *config) { c.metrics = reg } }
