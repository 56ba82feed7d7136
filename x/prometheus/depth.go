package rmqprom

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rmq-go/rmq/rmq"
)

// depthScrapeTimeout bounds the Redis reads of one scrape.
const depthScrapeTimeout = 5 * time.Second

// depthCollector reads queue depths from Redis when Prometheus scrapes,
// through the public Inspector: the stored topics of every watched prefix,
// then each topic's Stats (one pipeline per topic). A series is reported
// once per topic name even when several prefixes define it (the first
// prefix watched wins), since one name with the same labels twice would
// fail the whole scrape.
type depthCollector struct {
	store, prepare, dead, delayed, paused, errs *prometheus.Desc
	retained, events                            *prometheus.Desc
	log                                         *slog.Logger
	failures                                    atomic.Uint64

	mu      sync.Mutex
	sources []*rmq.Inspector
}

func newDepthCollector(log *slog.Logger) *depthCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, topicLabels, nil)
	}
	return &depthCollector{
		store:    desc("store_depth", "Waiting messages (store), read from Redis at scrape time."),
		prepare:  desc("prepare_depth", "Deliveries in flight (prepare), read from Redis at scrape time."),
		dead:     desc("dead_depth", "Dead messages, read from Redis at scrape time."),
		delayed:  desc("delayed_depth", "Priority messages waiting for a not-before time or a retry's backoff, read from Redis at scrape time."),
		paused:   desc("paused", "1 while the topic is paused (Inspector.Pause), read from Redis at scrape time."),
		retained: desc("retained_depth", "Finished messages (completed or cancelled) the topic keeps readable (rmq.Lifecycle.Retention), read from Redis at scrape time."),
		events:   desc("event_log_length", "Entries of the topic's event logs (rmq.Lifecycle.Events), read from Redis at scrape time."),
		errs: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "depth_errors_total"),
			"Scrapes whose read of the queue depths from Redis failed.", nil, nil),
		log: log,
	}
}

func (d *depthCollector) add(i *rmq.Inspector) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sources {
		if s.Prefix() == i.Prefix() {
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
	ch <- d.delayed
	ch <- d.paused
	ch <- d.retained
	ch <- d.events
	ch <- d.errs
}

// Collect implements prometheus.Collector.
func (d *depthCollector) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	sources := append([]*rmq.Inspector(nil), d.sources...)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), depthScrapeTimeout)
	defer cancel()
	seen := map[string]bool{}
	for _, src := range sources {
		depths, err := src.AllStats(ctx)
		if err != nil {
			d.failures.Add(1)
			d.log.WarnContext(ctx, "rmq: metrics: could not read queue depths", "prefix", src.Prefix(), "err", err)
			continue
		}
		for _, st := range depths {
			name := st.Topic.Name()
			if seen[name] {
				continue
			}
			seen[name] = true
			lv := []string{name, st.Topic.Type().String()}
			ch <- prometheus.MustNewConstMetric(d.store, prometheus.GaugeValue, float64(st.Store), lv...)
			ch <- prometheus.MustNewConstMetric(d.prepare, prometheus.GaugeValue, float64(st.Prepare), lv...)
			ch <- prometheus.MustNewConstMetric(d.dead, prometheus.GaugeValue, float64(st.Dead), lv...)
			ch <- prometheus.MustNewConstMetric(d.delayed, prometheus.GaugeValue, float64(st.Delayed), lv...)
			paused := 0.0
			if st.Paused {
				paused = 1
			}
			ch <- prometheus.MustNewConstMetric(d.paused, prometheus.GaugeValue, paused, lv...)
			ch <- prometheus.MustNewConstMetric(d.retained, prometheus.GaugeValue, float64(st.Retained), lv...)
			ch <- prometheus.MustNewConstMetric(d.events, prometheus.GaugeValue, float64(st.Events), lv...)
		}
	}
	ch <- prometheus.MustNewConstMetric(d.errs, prometheus.CounterValue, float64(d.failures.Load()))
}
