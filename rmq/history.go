package rmq

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/topic"
)

// WithHistory sets how long the per-minute history of the client's topics
// stays in Redis (default 72 h); 0 turns the history and the client's
// worker record off (negative: ErrInvalidOption). The client counts in
// memory and writes at most every 10 s, in one round trip with its worker
// record; see Inspector.History.
func WithHistory(retention time.Duration) Option {
	return clientOption(func(c *config) { c.history = retention })
}

// MetricPoint is one minute of a topic's history, as every client of the
// topic counted it: messages sent, deliveries completed (acked), retried,
// dead (failed past their retries, or swept past them), messages expired
// and cancelled, and deliveries forwarded to a broker (a forwarder's acked
// deliveries, completed too). The percentiles are estimated from
// histograms with buckets ending at 1, 5, 10, 50, 100, 500 ms, 1, 5 and
// 30 s (a quantile past 30 s says 30 s); 0 when the minute had none.
type MetricPoint struct {
	Minute                                                        time.Time
	Sent, Completed, Retried, Dead, Expired, Cancelled, Forwarded int64
	HandlerP50, HandlerP99, LatenessP50, LatenessP99              time.Duration // from the histograms
}

// History returns t's per-minute history from the minute holding since
// (zero: an hour ago) to the current one, oldest first, a point for every
// minute (zero counts when no client wrote one). A client's counts of its
// last 10 s may not be written yet.
func (i *Inspector) History(ctx context.Context, t topic.Topic, since time.Time) ([]MetricPoint, error) {
	if i.err != nil {
		return nil, i.err
	}
	if t.IsZero() {
		return nil, topic.ErrInvalidName
	}
	ps, err := history.Read(ctx, i.rdb, i.prefix, t.Name(), since, time.Now())
	out := make([]MetricPoint, len(ps))
	for j, p := range ps {
		out[j] = MetricPoint{p.Start, p.Counts[0], p.Counts[1], p.Counts[2], p.Counts[3], p.Counts[4], p.Counts[5], p.Counts[6],
			p.HandlerP(0.5), p.HandlerP(0.99), p.LatenessP(0.5), p.LatenessP(0.99)}
	}
	return out, err
}

// WorkerInfo is the record a started client keeps: id (host:pid:random),
// host, pid, start, last refresh, topics (registered and pulled), their
// concurrency summed, deliveries in flight and the rmq module's version.
// Refreshed every 10 s, it expires 30 s after; Close deletes it.
type WorkerInfo struct {
	ID, Host              string
	PID                   int
	Started, Seen         time.Time
	Topics                []string
	Concurrency, InFlight int
	Version               string
}

// Workers lists the started clients under the inspector's prefix, by id,
// from a sorted set indexing their records (no key scan).
func (i *Inspector) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if i.err != nil {
		return nil, i.err
	}
	ws, err := history.Workers(ctx, i.rdb, i.prefix)
	out := make([]WorkerInfo, len(ws))
	for j, w := range ws {
		out[j] = WorkerInfo(w)
	}
	return out, err
}

// startWorker starts the client's worker record (Start).
func (c *Client) startWorker() {
	if c.obs.hist != nil {
		c.obs.hist.R.StartWorker(history.NewWorker(c.workerState))
	}
}

// workerState is what the worker record says of the client's topics.
func (c *Client) workerState() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Pull refuses a registered topic: no name is in both.
	names := slices.AppendSeq(slices.Collect(maps.Keys(c.topics)), maps.Keys(c.pulls.byTopic))
	return names, c.obs.hist.Concurrency()
}
