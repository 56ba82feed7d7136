package rmqotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
	rmqotel "github.com/rmq-go/rmq/x/otel"
)

func ack(context.Context, *consumer.Message) error { return nil }

func noBackoff(int) time.Duration { return 0 }

// meter is an in-memory meter provider and the reader that collects it.
type meter struct {
	t      *testing.T
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newMeter(t *testing.T) *meter {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &meter{t: t, reader: r, mp: mp}
}

// point is one data point: a sum's or gauge's value, or a histogram's count
// and sum.
type point struct {
	value, sum float64
	bounds     []float64
}

// find collects and returns the point of the named instrument whose
// messaging.destination.name is topicName ("" for none); ok is false when
// there is none.
func (m *meter) find(name, topicName string) (point, bool) {
	m.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(m.t, m.reader.Collect(context.Background(), &rm))
	match := func(s attribute.Set) bool {
		v, _ := s.Value("messaging.destination.name")
		return v.AsString() == topicName
	}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if md.Name != name {
				continue
			}
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return point{value: float64(p.Value)}, true
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return point{value: float64(p.Value)}, true
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return point{value: float64(p.Count), sum: p.Sum, bounds: p.Bounds}, true
					}
				}
			default:
				m.t.Fatalf("%s: unexpected data %T", name, md.Data)
			}
		}
	}
	return point{}, false
}

func (m *meter) value(name, topicName string) float64 {
	m.t.Helper()
	p, _ := m.find(name, topicName)
	return p.value
}

func (m *meter) eventually(name, topicName string, want float64) {
	m.t.Helper()
	redistest.Poll(m.t, func() error {
		if got := m.value(name, topicName); got != want {
			return fmt.Errorf("%s{topic=%q} = %v, want %v", name, topicName, got, want)
		}
		return nil
	})
}

// withTelemetry attaches a Telemetry on the meter to a client of e, and
// watches its queues.
func (e *env) withTelemetry(m *meter, opts ...rmqotel.Option) (*rmq.Client, *rmqotel.Telemetry) {
	e.T.Helper()
	tel, err := rmqotel.New(append([]rmqotel.Option{rmqotel.WithMeterProvider(m.mp), rmqotel.WithLogger(e.Logger)}, opts...)...)
	require.NoError(e.T, err)
	c := e.Client(rmq.WithObserver(tel))
	tel.WatchQueues(c.Inspector())
	return c, tel
}

// The OpenTelemetry counterpart of the Prometheus module's exact scenario:
// three range-merge sends of which one merges; one message acked, one
// failing twice and then dead; two fixed-time sends of which one is
// removed; a priority message delivered without lateness. Gauges read
// Redis at collection time.
func TestMetricsCountExactScenario(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	m := newMeter(t)
	c, _ := e.withTelemetry(m)
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
	m.eventually("rmq.acked", "rm", 1)
	m.eventually("rmq.dead", "rm", 1)
	m.eventually("rmq.acked", "pr", 1)

	for _, c := range []struct {
		name, topic string
		want        float64
	}{
		{"messaging.client.sent.messages", "rm", 3},
		{"rmq.merged", "rm", 1},
		{"messaging.client.consumed.messages", "rm", 3},
		{"rmq.acked", "rm", 1},
		{"rmq.retried", "rm", 1},
		{"rmq.dead", "rm", 1},
		{"rmq.lease_expired", "rm", 0},
		{"messaging.process.duration", "rm", 3},
		{"rmq.firing.lateness", "rm", 3},
		{"rmq.store.depth", "rm", 0},
		{"rmq.prepare.depth", "rm", 0},
		{"rmq.dead.depth", "rm", 1},

		{"messaging.client.sent.messages", "ft", 2},
		{"rmq.removed", "ft", 1},
		{"rmq.store.depth", "ft", 1},
		{"rmq.dead.depth", "ft", 0},

		{"messaging.client.sent.messages", "pr", 1},
		{"messaging.client.consumed.messages", "pr", 1},
		{"rmq.acked", "pr", 1},
		{"messaging.process.duration", "pr", 1},
		{"rmq.store.depth", "pr", 0},

		{"rmq.depth.errors", "", 0},
	} {
		assert.Equal(t, c.want, m.value(c.name, c.topic), "%s{topic=%q}", c.name, c.topic)
	}
	_, ok := m.find("rmq.firing.lateness", "pr")
	assert.False(t, ok, "priority messages have no due time")
	h, ok := m.find("messaging.process.duration", "rm")
	require.True(t, ok)
	assert.GreaterOrEqual(t, h.sum, 0.02, "b's two runs slept 10 ms each")
	assert.Equal(t, []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, h.bounds)
}

// The sweeper's rollbacks are counted as expired leases, and as deaths when
// they kill the message. The leases are taken with the consumer's own fetch
// script, as by a consumer that then died.
func TestMetricsLeaseExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	m := newMeter(t)
	retry := mustTopic(t, "swept", topic.FixedTime, 1)
	kill := mustTopic(t, "sweptdead", topic.FixedTime, 1)
	p := e.Client().Producer()
	for _, tp := range []topic.Topic{retry, kill} {
		_, err := p.SendFixedTime(ctx, tp, []byte("x"), time.Now().Add(-time.Second), producer.WithKey("x"))
		require.NoError(t, err)
		require.Len(t, leaseDirect(t, e, tp), 1)
	}
	c, _ := e.withTelemetry(m)
	opts := []consumer.Option{consumer.WithPrepareTimeout(time.Second), consumer.WithSweepInterval(100 * time.Millisecond), consumer.WithRetryBackoff(noBackoff)}
	require.NoError(t, c.Register(retry, consumer.ListenerFunc(ack), opts...))
	require.NoError(t, c.Register(kill, consumer.ListenerFunc(ack), append(opts, consumer.WithMaxRetries(0))...))
	e.Start(c)

	m.eventually("rmq.acked", "swept", 1)
	m.eventually("rmq.dead", "sweptdead", 1)
	e.EventuallyQueues(retry, 0, 0, 0)
	e.EventuallyQueues(kill, 0, 0, 1)
	assert.Equal(t, 1.0, m.value("rmq.lease_expired", "swept"))
	assert.Equal(t, 1.0, m.value("messaging.client.consumed.messages", "swept"))
	assert.Equal(t, 0.0, m.value("rmq.dead", "swept"))
	assert.Equal(t, 1.0, m.value("rmq.lease_expired", "sweptdead"))
	assert.Equal(t, 0.0, m.value("messaging.client.consumed.messages", "sweptdead"))
	assert.Equal(t, 1.0, m.value("rmq.dead.depth", "sweptdead"))
}

// A collection while Redis is away leaves the depth gauges out and counts
// the failure; the counters are still served.
func TestMetricsDepthWhileRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redisserver.Config{})
	e := newEnvOn(t, srv)
	ctx := ctxT(t)
	m := newMeter(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	tel, err := rmqotel.New(rmqotel.WithMeterProvider(m.mp), rmqotel.WithLogger(e.Logger))
	require.NoError(t, err)
	c, err := rmq.New(rdb, rmq.WithPrefix(e.Prefix), rmq.WithObserver(tel), rmq.WithLogger(e.Logger))
	require.NoError(t, err)
	tel.WatchQueues(c.Inspector())
	tp := mustTopic(t, "down", topic.FixedTime, 4)
	_, err = c.Producer().SendFixedTime(ctx, tp, []byte("a"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 1.0, m.value("rmq.store.depth", "down"))
	assert.Equal(t, 0.0, m.value("rmq.depth.errors", ""))

	require.NoError(t, srv.Kill())
	_, ok := m.find("rmq.store.depth", "down")
	assert.False(t, ok, "a depth read from a Redis that is away")
	assert.Equal(t, 2.0, m.value("rmq.depth.errors", ""), "two failed collections")
	assert.Equal(t, 1.0, m.value("messaging.client.sent.messages", "down"))
	assert.Contains(t, e.Log.String(), "could not read queue depths")
}

// A nil propagator or logger is refused with the core's sentinel.
func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	_, err := rmqotel.New(rmqotel.WithPropagator(nil))
	assert.ErrorIs(t, err, rmq.ErrInvalidOption)
	_, err = rmqotel.New(rmqotel.WithLogger(nil))
	assert.ErrorIs(t, err, rmq.ErrInvalidOption)
}

// A message whose TTL passed before it came due is dropped at fetch and
// counted as expired, never delivered.
func TestMetricsExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	m := newMeter(t)
	c, _ := e.withTelemetry(m)
	tp := mustTopic(t, "ttl", topic.FixedTime, 1)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(ack)))
	e.Start(c)
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now().Add(300*time.Millisecond), producer.WithKey("x"), producer.WithTTL(100*time.Millisecond))
	require.NoError(t, err)
	m.eventually("rmq.expired", "ttl", 1)
	e.EventuallyQueues(tp, 0, 0, 0)
	assert.Equal(t, 0.0, m.value("messaging.client.consumed.messages", "ttl"))
}

// A paused topic and a priority message waiting for its not-before time
// show in the paused and delayed gauges.
func TestMetricsPausedAndDelayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	m := newMeter(t)
	c, _ := e.withTelemetry(m)
	tp := mustTopic(t, "jobs", topic.Priority, 2)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(ack)))
	e.Start(c)
	_, err := c.Producer().SendPriority(ctx, tp, []byte("later"), 50, producer.WithKey("later"), producer.WithDelay(time.Hour))
	require.NoError(t, err)
	require.NoError(t, c.Inspector().Pause(ctx, tp))
	assert.Equal(t, 1.0, m.value("rmq.paused", "jobs"))
	assert.Equal(t, 1.0, m.value("rmq.delayed.depth", "jobs"))
	require.NoError(t, c.Inspector().Resume(ctx, tp))
	assert.Equal(t, 0.0, m.value("rmq.paused", "jobs"))
}

// A topic consumed with an adaptive limit records it in
// rmq.concurrency.limit as it grows above its min.
func TestMetricsConcurrencyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	m := newMeter(t)
	c, _ := e.withTelemetry(m)
	tp := mustTopic(t, "adaptive", topic.FixedTime, 1)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		// A steady handler latency, which the limit grows under (with
		// none, the handlers would never fill it): the wait times the
		// behaviour under test.
		time.Sleep(time.Millisecond)
		return nil
	}), consumer.WithAdaptiveConcurrency(2, 16)))
	msgs := make([]producer.BatchMessage, 3000)
	for i := range msgs {
		msgs[i] = producer.BatchMessage{Body: []byte(fmt.Sprintf("m%d", i)), At: time.Now()}
	}
	_, err := c.Producer().SendBatch(ctx, tp, msgs)
	require.NoError(t, err)
	e.Start(c)
	require.Eventually(t, func() bool { return m.value("rmq.concurrency.limit", "adaptive") >= 3 },
		redistest.WaitLong, 20*time.Millisecond, "rmq.concurrency.limit did not grow above its min")
	assert.LessOrEqual(t, m.value("rmq.concurrency.limit", "adaptive"), 16.0)
}
