package rmqprom_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
	rmqprom "github.com/rmq-go/rmq/x/prometheus"
)

// withMetrics registers the metrics on reg and watches the env's queues:
// what the README tells users to write.
func (e *env) withMetrics(reg prometheus.Registerer) *rmq.Client {
	e.T.Helper()
	m, err := rmqprom.New(reg, rmqprom.WithLogger(e.Logger))
	require.NoError(e.T, err)
	c := e.Client(rmq.WithObserver(m))
	m.WatchQueues(c.Inspector())
	return c
}

func ack(context.Context, *consumer.Message) error { return nil }

func noBackoff(int) time.Duration { return 0 }

// fetchDirect takes leases on up to n messages of slot k with the
// consumer's own fetch script, as a consumer that then died would.
func fetchDirect(t *testing.T, rdb redis.UniversalClient, k keyspace.Keys, timeBased bool, n int, leaseSec int64) scripts.FetchReply {
	t.Helper()
	keys, args := scripts.FetchCall{TimeBased: timeBased, N: n, LeaseSec: leaseSec, Window: n + 64,
		Groups: []scripts.FetchGroup{{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: n}}}.Args()
	vals, err := scripts.Fetch.Run(context.Background(), rdb, keys, args...).Slice()
	require.NoError(t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(t, err)
	return r
}

// metricsOf gathers reg and returns, for one metric family, the value of
// the series with the given topic label: a counter's or gauge's value, or
// a histogram's sample count (and sum). ok is false when no such series.
func metricsOf(t *testing.T, reg prometheus.Gatherer, name, topicName string) (value, sum float64, ok bool) {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "topic") != topicName {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), 0, true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), 0, true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), m.Histogram.GetSampleSum(), true
			}
		}
	}
	return 0, 0, false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// value is metricsOf's value, 0 for a missing series.
func value(t *testing.T, reg prometheus.Gatherer, name, topicName string) float64 {
	t.Helper()
	v, _, _ := metricsOf(t, reg, name, topicName)
	return v
}

func eventuallyMetric(t *testing.T, reg prometheus.Gatherer, name, topicName string, want float64) {
	t.Helper()
	redistest.Poll(t, func() error {
		if got := value(t, reg, name, topicName); got != want {
			return fmt.Errorf("%s{topic=%q} = %v, want %v", name, topicName, got, want)
		}
		return nil
	})
}

// An exact scenario, counted on a real registry: three range-merge sends of
// which one merges; one message acked, one failing twice and then dead
// (WithMaxRetries(1)); two fixed-time sends of which one is removed; a
// priority message delivered without lateness. Gauges read Redis.
func TestMetricsCountExactScenario(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	c := e.withMetrics(reg)
	rm := mustTopic(t, "rm", topic.RangeMerge, 2)
	ft := mustTopic(t, "ft", topic.FixedTime, 2)
	pr := mustTopic(t, "pr", topic.Priority, 2)
	require.NoError(t, c.Register(rm, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if m.ID == "b" {
			time.Sleep(10 * time.Millisecond) // the handler time the histogram must show: the wait times the behaviour under test
			return errors.New("b always fails")
		}
		return nil
	}), consumer.WithMaxRetries(1), consumer.WithRetryBackoff(noBackoff)))
	require.NoError(t, c.Register(pr, consumer.ListenerFunc(ack)))
	e.Start(c)

	p := c.Producer()
	_, err := p.SendRangeMerge(ctx, rm, []byte("a1"), 400*time.Millisecond, producer.WithKey("a"))
	require.NoError(t, err)
	_, err = p.SendRangeMerge(ctx, rm, []byte("a2"), 400*time.Millisecond, producer.WithKey("a"))
	require.NoError(t, err)
	_, err = p.SendRangeMerge(ctx, rm, []byte("b"), 0, producer.WithKey("b"))
	require.NoError(t, err)
	for _, k := range []string{"x", "y"} {
		_, err = p.SendFixedTime(ctx, ft, []byte(k), time.Now().Add(time.Hour), producer.WithKey(k))
		require.NoError(t, err)
	}
	removed, err := p.Remove(ctx, ft, "x")
	require.NoError(t, err)
	require.Equal(t, producer.RemovedWaiting, removed)
	removed, err = p.Remove(ctx, ft, "x")
	require.NoError(t, err)
	require.Equal(t, producer.NotFound, removed)
	_, err = p.SendPriority(ctx, pr, []byte("job"), 50)
	require.NoError(t, err)

	e.EventuallyQueues(rm, 0, 0, 1)
	eventuallyMetric(t, reg, "rmq_acked_total", "rm", 1)
	eventuallyMetric(t, reg, "rmq_dead_total", "rm", 1)
	eventuallyMetric(t, reg, "rmq_acked_total", "pr", 1)

	for _, c := range []struct {
		name, topic string
		want        float64
	}{
		{"rmq_sent_total", "rm", 3},
		{"rmq_merged_total", "rm", 1},
		{"rmq_delivered_total", "rm", 3},
		{"rmq_acked_total", "rm", 1},
		{"rmq_retried_total", "rm", 1},
		{"rmq_dead_total", "rm", 1},
		{"rmq_lease_expired_total", "rm", 0},
		{"rmq_removed_total", "rm", 0},
		{"rmq_handler_duration_seconds", "rm", 3},
		{"rmq_firing_lateness_seconds", "rm", 3},
		{"rmq_store_depth", "rm", 0},
		{"rmq_prepare_depth", "rm", 0},
		{"rmq_dead_depth", "rm", 1},

		{"rmq_sent_total", "ft", 2},
		{"rmq_merged_total", "ft", 0},
		{"rmq_removed_total", "ft", 1},
		{"rmq_store_depth", "ft", 1},
		{"rmq_dead_depth", "ft", 0},

		{"rmq_sent_total", "pr", 1},
		{"rmq_delivered_total", "pr", 1},
		{"rmq_acked_total", "pr", 1},
		{"rmq_handler_duration_seconds", "pr", 1},
		{"rmq_firing_lateness_seconds", "pr", 0},
		{"rmq_store_depth", "pr", 0},
	} {
		assert.Equal(t, c.want, value(t, reg, c.name, c.topic), "%s{topic=%q}", c.name, c.topic)
	}
	n, sum, ok := metricsOf(t, reg, "rmq_handler_duration_seconds", "rm")
	require.True(t, ok)
	assert.Equal(t, 3.0, n)
	assert.GreaterOrEqual(t, sum, 0.02, "b's two runs slept 10 ms each")
	_, late, _ := metricsOf(t, reg, "rmq_firing_lateness_seconds", "rm")
	assert.Less(t, late, 3*2.0, "lateness is seconds past due, small on an idle machine")
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			assert.Contains(t, []string{"rangemerge", "fixedtime", "priority", ""}, label(m, "type"), f.GetName())
			if tp := label(m, "topic"); tp == "rm" {
				assert.Equal(t, "rangemerge", label(m, "type"))
			}
		}
	}
}

// The sweeper's rollbacks are counted as expired leases, and as deaths when
// they kill the message. The leases are taken with the consumer's own fetch
// script, as by a consumer that then died.
func TestMetricsLeaseExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	retry := mustTopic(t, "swept", topic.FixedTime, 1)
	kill := mustTopic(t, "sweptdead", topic.FixedTime, 1)
	p := e.Client().Producer()
	for _, tp := range []topic.Topic{retry, kill} {
		_, err := p.SendFixedTime(ctx, tp, []byte("x"), time.Now().Add(-time.Second), producer.WithKey("x"))
		require.NoError(t, err)
		k := keyspace.KeysFor(e.Prefix, tp, 0)
		r := fetchDirect(t, e.RDB, k, true, 1, 1)
		require.Len(t, r.Msgs, 1)
	}
	c := e.withMetrics(reg)
	opts := []consumer.Option{consumer.WithPrepareTimeout(time.Second), consumer.WithSweepInterval(100 * time.Millisecond), consumer.WithRetryBackoff(noBackoff)}
	require.NoError(t, c.Register(retry, consumer.ListenerFunc(ack), opts...))
	require.NoError(t, c.Register(kill, consumer.ListenerFunc(ack), append(opts, consumer.WithMaxRetries(0))...))
	e.Start(c)

	eventuallyMetric(t, reg, "rmq_acked_total", "swept", 1)
	eventuallyMetric(t, reg, "rmq_dead_total", "sweptdead", 1)
	e.EventuallyQueues(retry, 0, 0, 0)
	e.EventuallyQueues(kill, 0, 0, 1)
	assert.Equal(t, 1.0, value(t, reg, "rmq_lease_expired_total", "swept"))
	assert.Equal(t, 1.0, value(t, reg, "rmq_delivered_total", "swept"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_dead_total", "swept"))
	assert.Equal(t, 1.0, value(t, reg, "rmq_lease_expired_total", "sweptdead"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_delivered_total", "sweptdead"))
	assert.Equal(t, 1.0, value(t, reg, "rmq_dead_depth", "sweptdead"))
}

// Clients may share a registry (each metric registered once, both count
// into it, the depth collector reads both prefixes); a registry holding
// another metric of the same name is refused by New.
func TestMetricsRegistry(t *testing.T) {
	t.Parallel()
	e1, e2 := newEnv(t), newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	c1 := e1.withMetrics(reg)
	c2 := e2.withMetrics(reg)
	c3 := e1.withMetrics(reg) // same prefix as c1: read once
	t1 := mustTopic(t, "one", topic.FixedTime, 1)
	t2 := mustTopic(t, "two", topic.Priority, 1)
	_, err := c1.Producer().SendFixedTime(ctx, t1, []byte("a"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	_, err = c3.Producer().SendFixedTime(ctx, t1, []byte("b"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	_, err = c2.Producer().SendPriority(ctx, t2, []byte("c"), 99)
	require.NoError(t, err)
	assert.Equal(t, 2.0, value(t, reg, "rmq_sent_total", "one"))
	assert.Equal(t, 1.0, value(t, reg, "rmq_sent_total", "two"))
	assert.Equal(t, 2.0, value(t, reg, "rmq_store_depth", "one"))
	assert.Equal(t, 1.0, value(t, reg, "rmq_store_depth", "two"))

	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "rmq_sent_total", Help: "not ours"}))
	_, err = rmqprom.New(clash)
	assert.ErrorContains(t, err, "rmqprom: register metrics")
}

// A scrape while Redis is away leaves the depth gauges out and counts the
// failure; the counters are still served.
func TestMetricsDepthWhileRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redisserver.Config{})
	e := newEnvOn(t, srv)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	m, err := rmqprom.New(reg, rmqprom.WithLogger(e.Logger))
	require.NoError(t, err)
	c, err := rmq.New(rdb, rmq.WithPrefix(e.Prefix), rmq.WithObserver(m), rmq.WithLogger(e.Logger))
	require.NoError(t, err)
	m.WatchQueues(c.Inspector())
	tp := mustTopic(t, "down", topic.FixedTime, 4)
	_, err = c.Producer().SendFixedTime(ctx, tp, []byte("a"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 1.0, value(t, reg, "rmq_store_depth", "down"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_depth_errors_total", ""))

	require.NoError(t, srv.Kill())
	assert.Equal(t, 1.0, value(t, reg, "rmq_depth_errors_total", ""), "one failed scrape")
	_, _, ok := metricsOf(t, reg, "rmq_store_depth", "down")
	assert.False(t, ok, "a depth read from a Redis that is away")
	assert.Equal(t, 3.0, value(t, reg, "rmq_depth_errors_total", ""), "three failed scrapes")
	assert.Equal(t, 1.0, value(t, reg, "rmq_sent_total", "down"))
	assert.Contains(t, e.Log.String(), "could not read queue depths")
}

// A nil registry or logger is refused with the core's sentinel.
func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	_, err := rmqprom.New(nil)
	assert.ErrorIs(t, err, rmq.ErrInvalidOption)
	_, err = rmqprom.New(prometheus.NewRegistry(), rmqprom.WithLogger(nil))
	assert.ErrorIs(t, err, rmq.ErrInvalidOption)
}

// A message whose TTL passed before it came due is dropped at fetch and
// counted as expired, never delivered.
func TestMetricsExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	c := e.withMetrics(reg)
	tp := mustTopic(t, "ttl", topic.FixedTime, 1)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(ack)))
	e.Start(c)
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now().Add(300*time.Millisecond), producer.WithKey("x"), producer.WithTTL(100*time.Millisecond))
	require.NoError(t, err)
	eventuallyMetric(t, reg, "rmq_expired_total", "ttl", 1)
	e.EventuallyQueues(tp, 0, 0, 0)
	assert.Equal(t, 0.0, value(t, reg, "rmq_delivered_total", "ttl"))
}

// A paused topic and a priority message waiting for its not-before time
// show in the paused and delayed gauges, and go back to 0 when resumed and
// sent on.
func TestMetricsPausedAndDelayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	c := e.withMetrics(reg)
	tp := mustTopic(t, "jobs", topic.Priority, 2)
	other := mustTopic(t, "other", topic.Priority, 2)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(ack)))
	require.NoError(t, c.Register(other, consumer.ListenerFunc(ack)))
	e.Start(c)
	_, err := c.Producer().SendPriority(ctx, tp, []byte("later"), 50, producer.WithKey("later"), producer.WithDelay(time.Hour))
	require.NoError(t, err)
	require.NoError(t, c.Inspector().Pause(ctx, tp))
	assert.Equal(t, 1.0, value(t, reg, "rmq_paused", "jobs"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_paused", "other"))
	assert.Equal(t, 1.0, value(t, reg, "rmq_delayed_depth", "jobs"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_store_depth", "jobs"))
	require.NoError(t, c.Inspector().Resume(ctx, tp))
	where, err := c.Producer().Remove(ctx, tp, "later")
	require.NoError(t, err)
	require.Equal(t, producer.RemovedDelayed, where)
	assert.Equal(t, 0.0, value(t, reg, "rmq_paused", "jobs"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_delayed_depth", "jobs"))
}

// A topic consumed with an adaptive limit shows it in
// rmq_concurrency_limit (it starts at its min and grows with a backlog of
// quick handlers); a topic without one has no series.
func TestMetricsConcurrencyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	c := e.withMetrics(reg)
	tp := mustTopic(t, "adaptive", topic.FixedTime, 1)
	plain := mustTopic(t, "plain", topic.FixedTime, 1)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		// A steady handler latency, which the limit grows under (with
		// none, the handlers would never fill it): the wait times the
		// behaviour under test.
		time.Sleep(time.Millisecond)
		return nil
	}), consumer.WithAdaptiveConcurrency(2, 16)))
	require.NoError(t, c.Register(plain, consumer.ListenerFunc(ack)))
	msgs := make([]producer.BatchMessage, 3000)
	for i := range msgs {
		msgs[i] = producer.BatchMessage{Body: []byte(fmt.Sprintf("m%d", i)), At: time.Now()}
	}
	_, err := c.Producer().SendBatch(ctx, tp, msgs)
	require.NoError(t, err)
	e.Start(c)
	require.Eventually(t, func() bool { return value(t, reg, "rmq_concurrency_limit", "adaptive") >= 3 },
		redistest.WaitLong, 20*time.Millisecond, "rmq_concurrency_limit did not grow above its min")
	assert.LessOrEqual(t, value(t, reg, "rmq_concurrency_limit", "adaptive"), 16.0)
	_, _, ok := metricsOf(t, reg, "rmq_concurrency_limit", "plain")
	assert.False(t, ok)
}
