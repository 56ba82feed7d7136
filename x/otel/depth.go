package rmqotel

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/rmq-go/rmq/rmq"
)

// depthReadTimeout bounds the Redis reads of one collection.
const depthReadTimeout = 5 * time.Second

// depthReader reports queue depths read from Redis when the meter provider
// collects, through the public Inspector: the stored topics of every
// watched prefix, then each topic's Stats. A topic name is reported once
// even when several prefixes define it (the first prefix watched wins).
type depthReader struct {
	store, prepare, dead, delayed, paused metric.Int64ObservableGauge
	retained, events                      metric.Int64ObservableGauge
	errs                                  metric.Int64ObservableCounter
	failures                              atomic.Int64
	log                                   *slog.Logger

	mu      sync.Mutex
	sources []*rmq.Inspector
}

func newDepthReader(m metric.Meter, log *slog.Logger) (*depthReader, error) {
	d := &depthReader{log: log}
	var err error
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		if err != nil {
			return nil
		}
		var g metric.Int64ObservableGauge
		g, err = m.Int64ObservableGauge(name, metric.WithUnit("{message}"), metric.WithDescription(desc))
		return g
	}
	d.store = gauge("rmq.store.depth", "Waiting messages (store), read from Redis at collection time.")
	d.prepare = gauge("rmq.prepare.depth", "Deliveries in flight (prepare), read from Redis at collection time.")
	d.dead = gauge("rmq.dead.depth", "Dead messages, read from Redis at collection time.")
	d.delayed = gauge("rmq.delayed.depth", "Priority messages waiting for a not-before time or a retry's backoff, read from Redis at collection time.")
	d.paused = gauge("rmq.paused", "1 while the topic is paused (Inspector.Pause), read from Redis at collection time.")
	d.retained = gauge("rmq.retained.depth", "Finished messages (completed or cancelled) the topic keeps readable (rmq.Lifecycle.Retention), read from Redis at collection time.")
	if err == nil {
		d.events, err = m.Int64ObservableGauge("rmq.event_log.length", metric.WithUnit("{event}"),
			metric.WithDescription("Entries of the topic's event logs (rmq.Lifecycle.Events), read from Redis at collection time."))
	}
	if err != nil {
		return nil, err
	}
	if d.errs, err = m.Int64ObservableCounter("rmq.depth.errors", metric.WithUnit("{read}"),
		metric.WithDescription("Collections whose read of the queue depths from Redis failed.")); err != nil {
		return nil, err
	}
	if _, err = m.RegisterCallback(d.observe, d.store, d.prepare, d.dead, d.delayed, d.paused, d.retained, d.events, d.errs); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *depthReader) add(i *rmq.Inspector) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sources {
		if s.Prefix() == i.Prefix() {
			return
		}
	}
	d.sources = append(d.sources, i)
}

// observe is the collection callback. A prefix whose read fails is left
// out of this collection and counted.
func (d *depthReader) observe(ctx context.Context, o metric.Observer) error {
	d.mu.Lock()
	sources := append([]*rmq.Inspector(nil), d.sources...)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, depthReadTimeout)
	defer cancel()
	seen := map[string]bool{}
	for _, src := range sources {
		stats, err := src.AllStats(ctx)
		if err != nil {
			d.failures.Add(1)
			d.log.WarnContext(ctx, "rmq: metrics: could not read queue depths", "prefix", src.Prefix(), "err", err)
			continue
		}
		for _, st := range stats {
			name := st.Topic.Name()
			if seen[name] {
				continue
			}
			seen[name] = true
			a := metric.WithAttributeSet(attribute.NewSet(
				semconv.MessagingSystemKey.String(systemName),
				semconv.MessagingDestinationName(name),
				topicTypeKey.String(st.Topic.Type().String()),
			))
			o.ObserveInt64(d.store, st.Store, a)
			o.ObserveInt64(d.prepare, st.Prepare, a)
			o.ObserveInt64(d.dead, st.Dead, a)
			o.ObserveInt64(d.delayed, st.Delayed, a)
			var paused int64
			if st.Paused {
				paused = 1
			}
			o.ObserveInt64(d.paused, paused, a)
			o.ObserveInt64(d.retained, st.Retained, a)
			o.ObserveInt64(d.events, st.Events, a)
		}
	}
	o.ObserveInt64(d.errs, d.failures.Load())
	return nil
}
